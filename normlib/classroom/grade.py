"""Grade a class: every student's practice notebooks, each student's answers in a sandbox of their own.

    python -m normlib.classroom grade SUBMISSIONS --out OUT [--exercises ... --roster ...]

SUBMISSIONS holds one folder per student (the folder's name is the student id) with the practice
notebooks as ``make exercises`` copies them (``01_layer_norm.ipynb`` ...; the Chinese edition in
``zh/``; a changed exercise released as ``01_layer_norm_v2.ipynb``: the highest version counts),
as ``python -m normlib.classroom collect`` gathers them. An assignment (assignment.py) says which
exercises count, who is in the class (a roster student without a folder gets
``submission.missing`` rows) and when it was due (each row's submitted-at time is its notebook's
modification time; later ones are graded and marked late). The grader reads each notebook as data (never following a symbolic link, every size
capped), picks the answer cell, and sends the answers to the student's sandbox (sandbox.py:
bubblewrap namespaces; inside, a process per answer runs it with the exercise's checker, limited in
time, memory, file size and output). It validates every record that comes back, appends each row
to ``OUT/results.jsonl`` as it is graded, and writes ``OUT/gradebook.csv`` and ``OUT/report.html``
at the end, or when it is stopped (Ctrl-C, SIGTERM), with what was graded. ISOLATION.md says what
this holds.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from normlib.exercises import EXERCISES

from .assignment import UNASSIGNED, Assignment, utc_iso, versioned
from .flags import fingerprint, flags
from .notebooks import practice_cells, read_notebook
from .sandbox import OPEN_SECONDS, Sandbox, SandboxUnavailable, bwrap_command, checked_record

__all__ = ["Limits", "find_submissions", "run_items", "grade_class", "student_id"]

NOTEBOOKS = {Path(e.notebook).stem: e for e in EXERCISES.values()}     # "01_layer_norm": Exercise
MAX_ANSWER_CHARS = 200_000       # a real answer cell is a few thousand characters
MAX_BEFORE_CHARS = 2_000_000     # the cells before it that the child replays the imports of
EPOCH = datetime.fromtimestamp(0, UTC)


@dataclass(frozen=True)
class Limits:
    """Per submission: wall-clock seconds (then killed), seconds per call of the learner's code
    inside the checker, memory beyond what torch maps (MiB), bytes per written file, processes of
    this Unix user (not enforced for root), characters the answer may print."""

    timeout: float = 60.0
    time_limit: float = 3.0
    memory_mb: int = 2048
    file_bytes: int = 16 * 2**20
    processes: int = 256
    output_chars: int = 1_000_000

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not value > 0:
                raise ValueError(f"Limits: {name} must be > 0, got {value!r}")


def _row(student, stem, edition, notebook, code, message, **extra) -> dict:
    return {"student": student, "exercise": stem, "edition": edition, "notebook": notebook,
            "passed": False, "code": code, "message": message, "message_zh": None,
            "checks": [], "output": "", **extra}


def inside_git(path: Path) -> Path | None:
    """The git work tree that ``path`` would be in (the nearest folder above it holding .git), or
    None."""
    for folder in (Path(path).resolve(), *Path(path).resolve().parents):
        if (folder / ".git").exists():
            return folder
    return None


def refuse_inside_git(path: Path, argument: str, allowed: bool) -> None:
    """ValueError when ``path`` is in a git work tree and that was not allowed: one
    ``git add -A`` there would publish the students' work or grades (a course repository is
    cloned by the whole class)."""
    top = inside_git(path)
    if top is not None and not allowed:
        raise ValueError(f"{argument}: {path} is inside the git work tree {top}, where one "
                         "`git add -A` would publish your students' work and grades; choose a "
                         "folder outside any repository (~/grading/...), or pass --inside-git")


def student_id(name: str) -> str:
    """A folder's name as the gradebook's student id: a name that is not UTF-8 (an LMS zip made
    elsewhere) keeps its bytes as \\x.. escapes instead of failing the run when it is written."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _defines(source: str, name: str) -> bool:
    """Whether the cell defines ``name`` at top level; parsed only when the name is in it and the
    cell is not larger than an answer can be."""
    if name not in source or len(source) > MAX_ANSWER_CHARS:
        return False
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                for t in node.targets):
            return True
        if isinstance(node, ast.ImportFrom | ast.Import) and any(
                (a.asname or a.name) == name for a in node.names):
            return True
    return False


def _answer(cells: list[dict], ids: frozenset, name: str) -> int | None:
    """Index of the answer cell: the one with the practice notebook's answer-cell id, unless it no
    longer defines ``name`` and a later cell does (the last such cell wins, as in Run All)."""
    by_id = next((i for i, c in enumerate(cells) if c["id"] in ids), None)
    defining = [i for i, c in enumerate(cells) if _defines(c["source"], name)]
    if by_id is not None and (by_id in defining or not defining):
        return by_id
    return defining[-1] if defining else None


SYMLINK = ("{what} is a symbolic link: the grader reads only files in the student's own folder "
           "(gather submissions with a copy, e.g. rsync -a --no-links, never with links)")


def _entries(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as it:
        return sorted(it, key=lambda e: e.name)


def find_submissions(root: Path, assignment: Assignment = UNASSIGNED
                     ) -> tuple[list[str], list[str], list[dict]]:
    """(students, exercise stems, one item per student and stem): each item is either a job for a
    sandbox (``answer`` set) or a finished row (``code`` set). The stems are the assigned ones, or
    every one handed in; the students are the roster's (then anyone else with a folder), or the
    folders. Symbolic links are never followed: a student folder, a ``zh`` folder or a notebook
    that is a link gives that student a ``submission.symlink`` row."""
    root = Path(root)
    assigned = assignment.exercises
    folders, refused = {}, {}                   # student id -> folder; id -> why it is refused
    for entry in _entries(root):
        if entry.name.startswith("."):
            continue
        student = student_id(entry.name)
        if entry.is_symlink():
            refused[student] = SYMLINK.format(what=f"the folder {student}")
        elif entry.is_dir(follow_symlinks=False):
            folders[student] = Path(entry.path)
    found: dict[tuple[str, str], list] = {}
    for student, folder in folders.items():
        try:
            places = [("en", folder, _entries(folder))]
            zh = folder / "zh"
            if zh.is_symlink():
                refused[student] = SYMLINK.format(what=f"{student}/zh")
            elif zh.is_dir():
                places.append(("zh", zh, _entries(zh)))
        except OSError as exc:
            refused[student] = f"the folder cannot be read ({exc.strerror})"
            continue
        for edition, _, entries in places:
            for entry in entries:
                stem, version = versioned(entry.name) or (None, 0)
                if stem is not None and (assigned is None or stem in assigned):
                    found.setdefault((student, stem), []).append(
                        (edition, version, Path(entry.path)))
    handed_in = sorted({*folders, *refused})
    roster = assignment.roster.students if assignment.roster else ()
    students = [*roster, *(s for s in handed_in if s not in roster)]
    stems = list(assigned) if assigned is not None else sorted({stem for _, stem in found})
    items = []
    for student in students:
        for stem in stems:
            if student not in handed_in:
                items.append(_row(student, stem, "en", "", "submission.missing",
                                  f"nothing was handed in: the roster lists {student}, and "
                                  "SUBMISSIONS has no folder of that name"))
            elif student in refused:
                code = "submission.symlink" if "symbolic link" in refused[student] else \
                    "submission.unreadable"
                items.append(_row(student, stem, "en", "", code, refused[student]))
            else:
                items.append(_item(folders[student], student, stem,
                                   found.get((student, stem), []), assignment))
    return students, stems, items


def _item(folder: Path, student: str, stem: str, copies: list, assignment: Assignment) -> dict:
    exercise = NOTEBOOKS[stem]
    if not copies:
        return _row(student, stem, "en", "", "submission.no_answer",
                    f"no {stem}.ipynb in the student's folder")
    top = max(version for _, version, _ in copies)          # the highest version counts
    copies = [(edition, path) for edition, version, path in copies if version == top]
    (ids, given), candidates, problems = practice_cells(stem), [], []
    for edition, path in copies:
        notebook = student_id(path.relative_to(folder).as_posix())
        if path.is_symlink():
            problems.append(_row(student, stem, edition, notebook, "submission.symlink",
                                 SYMLINK.format(what=notebook)))
            continue
        try:
            cells = read_notebook(path)
            i = _answer(cells, ids, exercise.name)
        except ValueError as exc:
            problems.append(_row(student, stem, edition, notebook, "submission.not_json", str(exc)))
            continue
        except (RecursionError, MemoryError) as exc:
            problems.append(_row(student, stem, edition, notebook, "submission.not_json",
                                 f"{notebook} could not be read ({type(exc).__name__})"))
            continue
        if i is None:
            problems.append(_row(student, stem, edition, notebook, "submission.no_answer",
                                 f"no cell of {notebook} defines {exercise.name}"))
            continue
        answer = cells[i]["source"]
        if len(answer) > MAX_ANSWER_CHARS:
            problems.append(_row(student, stem, edition, notebook, "submission.too_large",
                                 f"the answer cell is {len(answer):,} characters long (at most "
                                 f"{MAX_ANSWER_CHARS:,})"))
            continue
        before, size = [], 0
        for c in cells[:i]:
            if "import" in c["source"] and size + len(c["source"]) <= MAX_BEFORE_CHARS:
                before.append(c["source"])
                size += len(c["source"])
        worked = "raise NotImplementedError" not in answer
        submitted = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        # the edition the student worked in; both: the one saved last; neither: English
        candidates.append((worked, submitted if worked else EPOCH, edition == "en", {
            "student": student, "exercise": exercise.key, "stem": stem, "edition": edition,
            "notebook": notebook, "answer": answer, "before": before,
            "flags": flags(answer, "\n".join(c for c in before if c not in given)),
            "sha256": fingerprint(answer), "version": top,
            "submitted_at": utc_iso(submitted) if worked else "",
            "late": worked and assignment.late(submitted)}))
    if not candidates:
        return problems[0]
    return max(candidates, key=lambda c: c[:3])[3]


class _Lane:
    """One student's jobs still to run."""

    def __init__(self, student: str, queue: deque):
        self.student, self.queue = student, queue
        self.failed_starts = 0


class _Worker:
    """A worker sandbox and the student it serves (a new sandbox after a crash, a timeout or a
    refused record: the student it served is opened again in it)."""

    def __init__(self):
        self.sandbox: Sandbox | None = None
        self.lane: _Lane | None = None


def _finished(item: dict, record: dict, started: float) -> dict:
    row = _row(item["student"], item["stem"], item["edition"], item["notebook"], None, "")
    row.update({k: record[k] for k in ("passed", "code", "message", "message_zh", "checks",
                                       "output") if k in record})
    row["output"] = row["output"] or ""
    row["seconds"] = round(time.monotonic() - started, 2)      # wall clock, from the job's start
    row["cpu_seconds"] = record.get("cpu_seconds")
    row["flags"], row["sha256"] = item["flags"], item["sha256"]
    for key in ("version", "submitted_at", "late"):
        row[key] = item[key]
    if row["code"] == "submission.tampered":
        row["flags"] = [*row["flags"], "the sandbox returned a record the grader refused"]
    return row


def _failure(item: dict, code: str, message: str, started: float | None = None) -> dict:
    return _finished(item, {"passed": False, "code": code, "message": message},
                     started if started is not None else time.monotonic())


_READY = b'{"ready": true}'        # the worker: started, or the student it served has ended
_OPENED = b'{"opened": true}'      # the student's namespaces: ready for jobs


def run_items(items: list[dict], limits: Limits, *, workers: int | None = None,
              progress: bool = True, command: list[str] | None = None, on_row=None,
              stop=None) -> tuple[list[dict], bool]:
    """(every item's row in the items' order, whether all were graded): finished rows as they
    are, jobs in ``workers`` worker sandboxes (``command``: sandbox.bwrap_command(); default: one
    per core this process may use), each serving one student at a time in namespaces of their
    own. ``on_row(row)`` is called as each job's row is ready; ``stop()`` returning True ends the
    run: every sandbox is killed and the jobs left get ``submission.not_graded``."""
    from tqdm import tqdm

    from normlib.exercises.codes import registry

    workers = workers or len(os.sched_getaffinity(0))
    if workers < 1:
        raise ValueError(f"run_items: workers must be >= 1, got {workers}")
    command = command or bwrap_command()
    known = set(registry())
    rows: list[dict | None] = [None if "answer" in item else item for item in items]
    by_student: dict[str, deque] = {}
    for i, item in enumerate(items):
        if "answer" in item:
            by_student.setdefault(item["student"], deque()).append(i)
    waiting = deque(_Lane(s, q) for s, q in by_student.items())
    pool = [_Worker() for _ in range(min(workers, len(waiting)))]
    job = asdict(limits)
    selector = selectors.DefaultSelector()

    def done(i: int, row: dict) -> None:
        rows[i] = row
        bar.update(1)
        if on_row is not None:
            on_row(row)

    def replace(w: _Worker) -> None:
        """Kill the worker's sandbox; the next round starts a new one."""
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(w.sandbox)
        w.sandbox.kill()
        w.sandbox = None

    def end_job(w: _Worker, code: str, message: str) -> None:
        """The job in flight ends as ``code``, and the worker is replaced."""
        i = w.lane.queue.popleft()
        done(i, _failure(items[i], code, message, w.sandbox.job["started"]))
        replace(w)

    def failed_start(w: _Worker) -> None:
        """The worker or the student's namespaces did not come up: twice for one student, and
        that student's jobs are rows saying so."""
        replace(w)
        if w.lane is None:
            return
        w.lane.failed_starts += 1
        if w.lane.failed_starts >= 2:
            while w.lane.queue:
                i = w.lane.queue.popleft()
                done(i, _failure(items[i], "submission.sandbox", "the grader could not start a "
                                 "sandbox for this student (twice)"))
            w.lane = None

    def step(w: _Worker) -> None:
        """Give the worker its next message: a student to open, a job, or the end of a student."""
        sb = w.sandbox
        if w.lane is None and waiting and (sb is None or sb.state == "idle"):
            w.lane = waiting.popleft()     # a worker that cannot start counts against it
        if sb is None:
            if w.lane is not None:
                w.sandbox = Sandbox(command)
                selector.register(w.sandbox, selectors.EVENT_READ)
        elif sb.outbox:
            sb.flush()
        elif sb.state == "idle" and w.lane is not None:
            sb.state = "opening"
            sb.command({"student": True}, OPEN_SECONDS)
        elif sb.state == "serving" and sb.job is None:
            if w.lane.queue:
                item = items[w.lane.queue[0]]
                sb.send(item, {**job, "exercise": item["exercise"], "notebook": item["notebook"],
                               "answer": item["answer"], "before": item["before"]})
            else:
                w.lane, sb.state = None, "closing"
                sb.command({"end": True}, OPEN_SECONDS)

    def receive(w: _Worker) -> None:
        """What the worker sent: a ready frame (started, a student opened or closed), the record
        of the job in flight, or the end of its output."""
        sb = w.sandbox
        try:
            frames, closed = sb.read()
        except ValueError as exc:
            frames, closed = [], True
            if sb.job is not None:
                end_job(w, "submission.tampered", str(exc))
                return
        for data in frames:
            if sb.job is not None:
                if data == _READY:                  # the student's process ended: no record
                    end_job(w, "submission.crashed", "the student's sandbox ended before the "
                            "record came back (the answer killed its server, or crashed it)")
                    return
                try:
                    record = checked_record(data, sb.job["nonce"], sb.job["item"]["exercise"],
                                            known)
                except ValueError as exc:
                    end_job(w, "submission.tampered", f"the grader refused the record: {exc}")
                    return
                i = w.lane.queue.popleft()
                done(i, _finished(items[i], record, sb.job["started"]))
                sb.job, sb.deadline = None, float("inf")
            elif (sb.state, data) in (("starting", _READY), ("closing", _READY)):
                sb.state, sb.deadline = "idle", float("inf")
            elif (sb.state, data) == ("opening", _OPENED):
                sb.state, sb.deadline = "serving", float("inf")
                w.lane.failed_starts = 0
            elif sb.state == "opening":             # the student's namespaces did not open
                failed_start(w)
                return
            else:                                   # a frame nobody asked for
                replace(w)
                return
        if closed:
            if sb.job is not None:
                end_job(w, "submission.crashed", "the sandbox ended before the record came back")
            elif sb.state in ("starting", "opening"):
                failed_start(w)
            else:
                replace(w)

    with tqdm(total=len(items), disable=not progress, unit="answer", desc="grading") as bar:
        bar.update(sum(r is not None for r in rows))
        try:
            while any(w.sandbox is not None or w.lane is not None for w in pool) or waiting:
                if stop and stop():
                    break
                for w in pool:
                    step(w)
                live = [w for w in pool if w.sandbox is not None]
                if not live:
                    continue
                soonest = min(w.sandbox.deadline for w in live)
                ready = {key.fileobj for key, _ in
                         selector.select(max(0.0, min(0.25, soonest - time.monotonic())))}
                for w in live:
                    if w.sandbox in ready:
                        receive(w)
                    if w.sandbox is not None and time.monotonic() > w.sandbox.deadline:
                        if w.sandbox.job is not None:
                            end_job(w, "submission.timeout",
                                    f"killed after {limits.timeout:g} s (wall clock): an endless "
                                    "loop outside any function, or far too slow")
                        else:
                            failed_start(w)
                if not waiting and all(w.lane is None and (w.sandbox is None or
                                       w.sandbox.state == "idle") for w in pool):
                    break
        finally:
            for w in pool:
                if w.sandbox is not None:
                    replace(w)
            selector.close()
    complete = all(r is not None for r in rows)
    for i, r in enumerate(rows):
        if r is None:
            rows[i] = _failure(items[i], "submission.not_graded",
                               "the run was stopped before this answer was graded")
    return rows, complete


_PROBE = """import os, sys
from normlib.classroom._namespaces import drop_privileges, enter_student_namespaces
pid = os.fork()
if pid == 0:
    try:
        enter_student_namespaces(2**20)
        drop_privileges()
    except BaseException as exc:
        print(f"a student's namespaces: {exc}", file=sys.stderr)
        os._exit(1)
    os._exit(0)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def _check_sandbox(command: list[str]) -> None:
    """SandboxUnavailable, with the reason, when a worker or a student's namespaces inside it
    cannot be made here (no bubblewrap, user namespaces switched off, AppArmor's restriction)."""
    probe = command[:command.index("-m")] + ["-c", _PROBE]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=60, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"grade: bubblewrap could not start a sandbox: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SandboxUnavailable(f"grade: the sandbox cannot be made here: {why} (see "
                                 "normlib/classroom/ISOLATION.md)")


@contextlib.contextmanager
def _stop_on_signals():
    """Ctrl-C, SIGTERM or SIGHUP set a flag the grading loop reads; it then kills every sandbox
    and writes what was graded. Outside the main thread, nothing is installed."""
    pressed = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield pressed.is_set
        return
    names = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, lambda *_: pressed.set()) for s in names}
    try:
        yield pressed.is_set
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def grade_class(submissions: Path, out: Path, *, limits: Limits = Limits(),
                workers: int | None = None, progress: bool = True,
                assignment: Assignment = UNASSIGNED, outputs=None, inside_git: bool = False,
                extra_paths=(), preload=()) -> list[dict]:
    """Grade every student in ``submissions`` and write OUT/gradebook.csv, results.jsonl,
    report.html, feedback/ and the exports ``outputs`` asks for (report.Outputs; 0600, in 0700
    folders); returns the rows (one per student and exercise: the assigned exercises, or every
    one handed in). OUT must be outside any git work tree unless ``inside_git``. Stopped by a
    signal, it writes what was graded, the rest marked ``submission.not_graded``, and the report
    says the run is incomplete. ``extra_paths`` and ``preload`` (folders the sandboxes also see,
    modules they import once) are for tests."""
    from .outputs import Outputs, write_all
    from .report import private_folder
    from .similarity import similar_pairs

    outputs = outputs or Outputs()
    submissions, out = Path(submissions), Path(out)
    if not submissions.is_dir():
        raise FileNotFoundError(f"grade: SUBMISSIONS must be a folder of student folders, "
                                f"got {submissions}")
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"grade: --out must be a folder, got the file {out}")
    refuse_inside_git(out, "grade --out", inside_git)
    students, stems, items = find_submissions(submissions, assignment)
    if not students:
        raise ValueError(f"grade: {submissions} holds no student folders")
    if not stems:
        raise ValueError(f"grade: no practice notebook (01_layer_norm.ipynb ...) in any student "
                         f"folder of {submissions}")
    similar = similar_pairs(items, outputs.similarity)
    command = bwrap_command(exclude=[submissions, out], extra_paths=list(extra_paths),
                            preload=list(preload))
    _check_sandbox(command)
    private_folder(out)
    live = os.open(out / "results.jsonl", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                   0o600)
    with _stop_on_signals() as stop, os.fdopen(live, "w", encoding="utf-8") as f:

        def append(row: dict) -> None:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()

        rows, complete = run_items(items, limits, workers=workers, progress=progress,
                                   command=command, on_row=append, stop=stop)
    write_all(rows, out, complete=complete, assignment=assignment, outputs=outputs,
              similar=similar)
    return rows
