"""The drill's memory: every checked attempt appended to a local log, and the review queue it feeds.

**The log.** One JSON line per attempt (exercise, when, seconds taken, hints opened, passed, the
mistake codes the checker named), appended to ``drill_history.jsonl``::

    {"exercise": "rope", "at": "2026-03-02T12:00:00+00:00", "seconds": 412.0, "hints": 1,
     "passed": false, "codes": ["rope.pairs_mixed"]}

The file stays on the learner's machine: nothing here opens a connection, and the collection's
.gitignore keeps it out of git. It lives in ``$NORMLIB_DRILL_HISTORY`` when that is set, and
otherwise in the drill's folder (the kernel's working directory: ``workspace/`` after ``make
exercises``, ``practice/`` in a class's repository). The Chinese copies sit in a ``zh/`` folder
beside the English ones, so a ``zh/`` folder writes to its parent's log, and both editions share one
history. Lines are only ever appended; a line that cannot be read (a write cut short, a hand edit)
is skipped with a warning naming it, and every other line is still read.

**The review queue.** An exercise enters the queue when an attempt fails, keyed on the mistake
codes it made, and comes back 1 day later; each later success on or after the day it is due sends
it further away, 3 days, then 7, and the next one takes it out of the queue; a new failure starts
it again at 1 day. These are expanding intervals, as in Leitner's box of flash cards (a card
answered right moves to a box reviewed less often, a wrong one back to the first box): practice
spread over days is remembered longer than the same practice massed in one sitting (the spacing
effect; Cepeda et al. 2006, "Distributed practice in verbal recall tasks", Psychological Bulletin
132(3)), so each success earns a longer gap, and a mistake brings the exercise back the next day.
A success before the day it is due changes nothing: it shows that the answer can be written
right after seeing it again, which a review is not. Three steps (1, 3, 7 days: eleven days from
the first mistake to the last review) fit the weeks before an interview; change ``INTERVALS`` to
stretch them.

The clock is injected (``Clock``): ``time`` gives the dates of attempts and reviews,
``monotonic`` the durations, so a test can make days pass without sleeping.
"""

from __future__ import annotations

import json
import os
import time as _time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

__all__ = ["Attempt", "Clock", "History", "Review", "HISTORY_ENV", "INTERVALS", "default_path",
           "schedule", "due"]

HISTORY_ENV = "NORMLIB_DRILL_HISTORY"
FILE_NAME = "drill_history.jsonl"
INTERVALS = (1, 3, 7)                      # days until the next review, after each step


@dataclass(frozen=True)
class Clock:
    """Where the drill reads the time: ``time()`` (seconds since the epoch, for dates) and
    ``monotonic()`` (for durations). The default is the system's; tests pass a fake one."""

    time: Callable[[], float] = _time.time
    monotonic: Callable[[], float] = _time.monotonic

    def now(self) -> datetime:
        """The local time now, with its offset from UTC."""
        return datetime.fromtimestamp(self.time()).astimezone()

    def today(self) -> date:
        return self.now().date()


SYSTEM_CLOCK = Clock()


def check_clock(where: str, clock) -> Clock:
    """``clock`` if it is a ``Clock``, else a TypeError naming ``where``."""
    if not isinstance(clock, Clock):
        raise TypeError(f"{where}: clock={clock!r}, expected a normlib.exercises.history.Clock "
                        "(Clock(time=..., monotonic=...))")
    return clock


# ------------------------------------------------------------------------------------- the log
@dataclass(frozen=True)
class Attempt:
    """One checked answer."""

    exercise: str                    # the exercise's key, "rope"
    at: datetime                     # when it was checked (local time, with its UTC offset)
    seconds: float                   # from start() to done()
    hints: int                       # hints opened (hint 0, the full task, counts as one)
    passed: bool
    codes: tuple[str, ...] = ()      # the mistake codes the checker named; () when passed

    @property
    def day(self) -> date:
        return self.at.date()

    def to_json(self) -> str:
        return json.dumps({"exercise": self.exercise, "at": self.at.isoformat(timespec="seconds"),
                           "seconds": round(self.seconds, 1), "hints": self.hints,
                           "passed": self.passed, "codes": list(self.codes)}, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> Attempt:
        """The attempt a log line holds; ValueError saying what is wrong otherwise."""
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"not JSON ({error.msg})") from None
        kinds = {"exercise": str, "at": str, "seconds": (int, float), "hints": int,
                 "passed": bool, "codes": list}
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        for name, kind in kinds.items():
            if not isinstance(data.get(name), kind):
                raise ValueError(f"field {name!r} = {data.get(name)!r}")
        if not all(isinstance(code, str) for code in data["codes"]):
            raise ValueError(f"field 'codes' = {data['codes']!r}")
        try:
            at = datetime.fromisoformat(data["at"])
        except ValueError:
            raise ValueError(f"field 'at' = {data['at']!r}, not an ISO date") from None
        if at.tzinfo is None:
            raise ValueError(f"field 'at' = {data['at']!r} has no UTC offset")
        return cls(data["exercise"], at, float(data["seconds"]), data["hints"], data["passed"],
                   tuple(data["codes"]))


def default_path(cwd: Path | str | None = None, environ: dict | None = None) -> Path:
    """Where the log lives: ``$NORMLIB_DRILL_HISTORY`` if set, else drill_history.jsonl in
    ``cwd`` (default: the working directory), or in its parent when ``cwd`` is a zh/ folder (the
    Chinese copies, workspace/zh/ or a class's practice/zh/)."""
    environ = os.environ if environ is None else environ
    if environ.get(HISTORY_ENV):
        return Path(environ[HISTORY_ENV]).expanduser()
    cwd = Path.cwd() if cwd is None else Path(cwd)
    if cwd.name == "zh":
        cwd = cwd.parent
    return cwd / FILE_NAME


class History:
    """The attempts log at ``path`` (default: ``default_path()``); the file is created by the
    first ``append``. Reading never writes, and appending never rewrites a line."""

    def __init__(self, path: Path | str | None = None):
        source = "argument path"
        if path is None:
            path, source = default_path(), ("$" + HISTORY_ENV if os.environ.get(HISTORY_ENV)
                                            else "the default path")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"History: path={path!r}, expected a file path (str or Path)")
        self.path = Path(path).expanduser()
        if self.path.is_dir():
            raise ValueError(f"History: path={str(self.path)!r} ({source}) is a folder; expected "
                             f"a file, e.g. {str(self.path / FILE_NAME)!r}")
        if not self.path.parent.is_dir():
            raise ValueError(f"History: path={str(self.path)!r} ({source}): its folder "
                             f"{str(self.path.parent)!r} does not exist")

    def __repr__(self) -> str:
        return f"History({str(self.path)!r})"

    @classmethod
    def of(cls, where: str, history) -> History:
        """``history`` as a History: None (the default path), a file path, or a History."""
        if history is None or isinstance(history, (str, os.PathLike)):
            return cls(history)
        if isinstance(history, History):
            return history
        raise TypeError(f"{where}: history={history!r}, expected None, a file path or a History")

    def append(self, attempt: Attempt) -> None:
        """Add one line. When the file's last line was cut short (no newline), the new line starts
        on a line of its own, so the cut line stays one bad line and this one is read."""
        if not isinstance(attempt, Attempt):
            raise TypeError(f"History.append: attempt={attempt!r}, expected an Attempt")
        start = ""
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                start = "" if f.read(1) == b"\n" else "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(start + attempt.to_json() + "\n")

    def attempts(self) -> list[Attempt]:
        """Every attempt in the log, oldest first ([] when there is no file yet); a line that
        cannot be read is skipped with a warning that names it."""
        if not self.path.exists():
            return []
        attempts, skipped = [], []
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    attempts.append(Attempt.from_json(line))
                except ValueError as why:
                    skipped.append(f"line {number} ({why})")
        if skipped:
            warnings.warn(f"{self.path}: skipped {len(skipped)} line(s) that are not attempts "
                          f"(a write cut short or an edit?): {'; '.join(skipped)}. The other "
                          f"{len(attempts)} attempt(s) are read. · 跳过了无法读取的记录，其余照常读取。",
                          stacklevel=2)
        return sorted(attempts, key=lambda a: a.at)


# ----------------------------------------------------------------------------- the review queue
@dataclass(frozen=True)
class Review:
    """An exercise in the review queue: when it is due, how far along the intervals it is, and
    the mistakes that put it there (each code with the last day it was made)."""

    exercise: str
    due: date
    step: int                                             # index into INTERVALS
    mistakes: tuple[tuple[str, date], ...] = field(default=())

    def is_due(self, today: date) -> bool:
        return self.due <= today


def schedule(attempts: Iterable[Attempt]) -> dict[str, Review]:
    """Every exercise still in the review queue, with the day it is due (see the module's
    docstring for the intervals); exercises that never failed, or have graduated, are absent."""
    queue: dict[str, Review] = {}
    for a in sorted(attempts, key=lambda a: a.at):
        item = queue.get(a.exercise)
        if not a.passed:
            made = dict(item.mistakes) if item else {}
            for code in a.codes:
                made.pop(code, None)
                made[code] = a.day                         # latest last, each code once
            queue[a.exercise] = Review(a.exercise, a.day + timedelta(days=INTERVALS[0]), 0,
                                       tuple(made.items()))
        elif item is not None and item.is_due(a.day):
            step = item.step + 1
            if step == len(INTERVALS):
                del queue[a.exercise]
            else:
                queue[a.exercise] = Review(a.exercise, a.day + timedelta(days=INTERVALS[step]),
                                           step, item.mistakes)
    return queue


def due(attempts: Iterable[Attempt], today: date) -> list[Review]:
    """The reviews due on ``today`` or before, the longest overdue first."""
    return sorted((r for r in schedule(attempts).values() if r.is_due(today)),
                  key=lambda r: (r.due, r.exercise))
