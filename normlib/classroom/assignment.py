"""An assignment: which exercises count, for how many points, who is in the class, and when it is due.

    grade SUBMISSIONS --out OUT --exercises 01_layer_norm,03_rms_norm --points 01_layer_norm=20 \\
        --roster roster.csv --deadline 2026-03-06T23:59+01:00

Every argument is checked here, and a bad one is a ``ValueError`` that names the argument, the
value and what was expected. The status of a graded row (passed, failed, not attempted, missing)
and its points are computed here too, so the report, the exports and the feedback agree.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from normlib.exercises import EXERCISES

__all__ = ["Assignment", "UNASSIGNED", "Roster", "parse_exercises", "parse_points", "parse_deadline",
           "read_roster", "versioned", "status", "points", "STATUSES", "DEFAULT_POINTS"]

STEMS = {Path(e.notebook).stem: e for e in EXERCISES.values()}      # "01_layer_norm": Exercise
DEFAULT_POINTS = 10.0
# A changed exercise is released as a new file (docs/classroom.md): 01_layer_norm_v2.ipynb.
VERSIONED = re.compile(r"(?P<stem>.+?)(?:_v(?P<version>[1-9][0-9]{0,3}))?\.ipynb")
STATUSES = ("passed", "failed", "not attempted", "missing")


def versioned(name: str) -> tuple[str, int] | None:
    """(the exercise's stem, the version) of a practice notebook's file name, or None:
    ``01_layer_norm.ipynb`` is version 1, ``01_layer_norm_v2.ipynb`` version 2."""
    m = VERSIONED.fullmatch(name)
    if m is None or m["stem"] not in STEMS:
        return None
    return m["stem"], int(m["version"] or 1)


def _stem(name: str, argument: str) -> str:
    """An exercise named by its notebook's stem (01_layer_norm) or its key (layer_norm)."""
    name = name.strip()
    if name.endswith(".ipynb"):
        name = name[:-len(".ipynb")]
    if name in STEMS:
        return name
    by_key = {e.key: s for s, e in STEMS.items()}
    if name in by_key:
        return by_key[name]
    raise ValueError(f"{argument}: no exercise {name!r}; expected one of {', '.join(STEMS)} (or "
                     f"their keys: layer_norm, ...)")


def parse_exercises(text: str) -> tuple[str, ...]:
    """``--exercises 01_layer_norm,03_rms_norm`` as notebook stems, in the order given."""
    names = [n for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"--exercises: expected exercises separated by commas "
                         f"(01_layer_norm,03_rms_norm), got {text!r}")
    stems = tuple(_stem(n, "--exercises") for n in names)
    if len(set(stems)) != len(stems):
        raise ValueError(f"--exercises: an exercise is named twice in {text!r}")
    return stems


def parse_points(text: str) -> dict[str, float]:
    """``--points 01_layer_norm=20,03_rms_norm=5``: the points of those exercises (the others
    keep DEFAULT_POINTS)."""
    out = {}
    for part in filter(str.strip, text.split(",")):
        name, sep, value = part.partition("=")
        try:
            number = float(value) if sep else None
        except ValueError:
            number = None
        if number is None or not 0 < number < 1e6:
            raise ValueError(f"--points: expected EXERCISE=POINTS with POINTS a number above 0 "
                             f"(01_layer_norm=20), got {part.strip()!r}")
        out[_stem(name, "--points")] = number
    if not out:
        raise ValueError(f"--points: expected EXERCISE=POINTS,... (01_layer_norm=20), got "
                         f"{text!r}")
    return out


def parse_deadline(text: str) -> datetime:
    """An ISO-8601 date and time (``2026-03-06T23:59+01:00``), as an aware datetime. Without an
    offset it is this machine's local time."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--deadline: expected an ISO-8601 date and time such as "
                         f"2026-03-06T23:59+01:00, got {text!r}") from None
    return when.astimezone() if when.tzinfo is None else when


@dataclass(frozen=True)
class Roster:
    """The class list: the student ids in the file's order, and each student's other columns
    (a name, an LMS id, a section...) by their header."""

    students: tuple[str, ...]
    columns: tuple[str, ...]                        # the headers other than "student"
    extra: dict = field(default_factory=dict)       # student -> {header: value}


MAX_ROSTER_BYTES = 4 * 2**20


def read_roster(path: Path) -> Roster:
    """A CSV file with a header row holding a ``student`` column (the id: the student's folder
    name in SUBMISSIONS, their hub user name); a byte-order mark (Excel) is accepted."""
    path = Path(path)
    try:
        data = path.read_bytes()[:MAX_ROSTER_BYTES + 1]
    except OSError as exc:
        raise ValueError(f"--roster: cannot read {path} ({exc.strerror})") from None
    if len(data) > MAX_ROSTER_BYTES:
        raise ValueError(f"--roster: {path} is larger than 4 MB; expected a CSV class list")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"--roster: {path} is not UTF-8 text; save it as CSV UTF-8") from None
    reader = csv.reader(text.splitlines())
    header = [h.strip() for h in next(reader, [])]
    if "student" not in header:
        raise ValueError(f"--roster: {path} needs a header row with a 'student' column, got "
                         f"{header[:6]!r}")
    if len(set(header)) != len(header) or "" in header:
        raise ValueError(f"--roster: {path} has an empty or repeated column name in {header!r}")
    at = header.index("student")
    students, extra = [], {}
    for number, line in enumerate(reader, start=2):
        if not any(cell.strip() for cell in line):
            continue
        if len(line) != len(header):
            raise ValueError(f"--roster: {path} line {number} has {len(line)} cells, the header "
                             f"{len(header)}")
        student = line[at].strip()
        if not student or student.startswith(".") or "/" in student or "\0" in student:
            raise ValueError(f"--roster: {path} line {number}: {student!r} is not a student id "
                             "(a folder name: not empty, no '/', not starting with '.')")
        if student in extra:
            raise ValueError(f"--roster: {path} line {number}: student {student!r} is listed "
                             "twice")
        students.append(student)
        extra[student] = {h: c.strip() for h, c in zip(header, line, strict=False) if h != "student"}
    if not students:
        raise ValueError(f"--roster: {path} lists no students")
    return Roster(tuple(students), tuple(h for h in header if h != "student"), extra)


@dataclass(frozen=True)
class Assignment:
    """What counts: the exercises (None: every one a student handed in), each one's points, the
    roster (None: the folders in SUBMISSIONS are the class), the deadline (None: none)."""

    exercises: tuple[str, ...] | None = None
    points: dict = field(default_factory=dict)       # stem -> points (default DEFAULT_POINTS)
    roster: Roster | None = None
    deadline: datetime | None = None

    def __post_init__(self):
        unknown = set(self.points) - set(self.exercises or STEMS)
        if unknown:
            raise ValueError(f"--points: {', '.join(sorted(unknown))} is not among the assigned "
                             f"exercises ({', '.join(self.exercises or STEMS)})")

    def possible(self, stem: str) -> float:
        return self.points.get(stem, DEFAULT_POINTS)

    def late(self, submitted: datetime | None) -> bool:
        return self.deadline is not None and submitted is not None and submitted > self.deadline


UNASSIGNED = Assignment()     # every exercise handed in, the folders as the class, no deadline


def status(row: dict) -> str:
    """passed; failed; not attempted (the stub left as it was, or no notebook); missing (a roster
    student with no folder at all)."""
    if row["passed"]:
        return "passed"
    code = row.get("code") or ""
    if code == "submission.missing":
        return "missing"
    if code.endswith(".not_implemented") or (code == "submission.no_answer"
                                             and not row.get("notebook")):
        return "not attempted"
    return "failed"


def points(row: dict, possible: float) -> float:
    """All the points for a pass; for a failed answer, the share of the checker's checks that
    passed (partial credit: 10 of 13 checks is 10/13 of the points); nothing otherwise."""
    if row["passed"]:
        return possible
    if status(row) != "failed":
        return 0.0
    checks = [c for c in row.get("checks") or [] if c[:1] in ("✓", "✗")]
    if not checks:
        return 0.0
    return round(possible * sum(c.startswith("✓") for c in checks) / len(checks), 2)


def utc_iso(when: datetime | None) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds") if when else ""
