"""Grade a class: every student's practice notebooks, each answer in its own limited process.

    python -m normlib.classroom grade SUBMISSIONS --out OUT

SUBMISSIONS holds one folder per student (the folder's name is the student id) with the practice
notebooks as ``make exercises`` copies them (``01_layer_norm.ipynb`` ...; the Chinese edition in
``zh/``). For each exercise the class handed in, each student's answer cell runs with the
exercise's checker in a child process (forked from a server that imported torch once; one per
core at a time), limited in time, memory, file size, processes and output (see ISOLATION.md).
The records go to ``OUT/gradebook.csv``, ``OUT/results.jsonl`` and ``OUT/report.html``.
"""

from __future__ import annotations

import ast
import contextlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import time
from collections import deque
from dataclasses import asdict, dataclass
from multiprocessing.connection import wait
from pathlib import Path

from normlib.exercises import EXERCISES

__all__ = ["Limits", "find_submissions", "run_items", "grade_class", "ROOT"]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {Path(e.notebook).stem: e for e in EXERCISES.values()}     # "01_layer_norm": Exercise
MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_RECORD_BYTES = 2**20


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


def _row(student, stem, edition, notebook, code, message) -> dict:
    return {"student": student, "exercise": stem, "edition": edition, "notebook": notebook,
            "passed": False, "code": code, "message": message, "message_zh": None,
            "checks": [], "output": ""}


def _read_notebook(path: Path) -> list[dict]:
    """The notebook's code cells ({id, source}); ValueError with a one-line reason otherwise."""
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MB")
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path.name} is not a notebook (not JSON: {exc})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise ValueError(f"{path.name} is not a notebook (no list of cells)")
    out = []
    for cell in cells:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            out.append({"id": cell.get("id"), "source": source})
    return out


def _answer_ids(stem: str) -> set:
    """Ids of the answer cells in the collection's practice notebook (empty without the repo)."""
    path = ROOT / "notebooks" / "exercises" / f"{stem}.ipynb"
    try:
        return {c["id"] for c in _read_notebook(path) if "raise NotImplementedError" in c["source"]}
    except (OSError, ValueError):
        return set()


def _defines(source: str, name: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
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


def _answer(cells: list[dict], ids: set, name: str) -> int | None:
    """Index of the answer cell: the one with the practice notebook's answer-cell id, unless it no
    longer defines ``name`` and a later cell does (the last such cell wins, as in Run All)."""
    by_id = next((i for i, c in enumerate(cells) if c["id"] in ids), None)
    defining = [i for i, c in enumerate(cells) if _defines(c["source"], name)]
    if by_id is not None and (by_id in defining or not defining):
        return by_id
    return defining[-1] if defining else None


def find_submissions(root: Path) -> tuple[list[str], list[str], list[dict]]:
    """(students, exercise stems handed in, one item per student and stem): each item is either a
    job for a child (``answer`` set) or a finished row (``code`` set)."""
    root = Path(root)
    students = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    found = {}
    for student in students:
        for edition, folder in (("en", root / student), ("zh", root / student / "zh")):
            for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else ():
                if path.stem in NOTEBOOKS and path.is_file():
                    found.setdefault((student, path.stem), []).append((edition, path))
    stems = sorted({stem for _, stem in found})
    items = []
    for student in students:
        for stem in stems:
            items.append(_item(root, student, stem, found.get((student, stem), [])))
    return students, stems, items


def _item(root: Path, student: str, stem: str, copies: list) -> dict:
    exercise = NOTEBOOKS[stem]
    if not copies:
        return _row(student, stem, "en", "", "submission.no_answer",
                    f"no {stem}.ipynb in the student's folder")
    ids, candidates, problems = _answer_ids(stem), [], []
    for edition, path in copies:
        notebook = path.relative_to(root / student).as_posix()
        try:
            cells = _read_notebook(path)
        except ValueError as exc:
            problems.append(_row(student, stem, edition, notebook, "submission.not_json", str(exc)))
            continue
        i = _answer(cells, ids, exercise.name)
        if i is None:
            problems.append(_row(student, stem, edition, notebook, "submission.no_answer",
                                 f"no cell of {notebook} defines {exercise.name}"))
            continue
        worked = "raise NotImplementedError" not in cells[i]["source"]
        candidates.append((worked, path.stat().st_mtime, edition == "en", {
            "student": student, "exercise": exercise.key, "stem": stem, "edition": edition,
            "notebook": notebook, "answer": cells[i]["source"],
            "before": [c["source"] for c in cells[:i]]}))
    if not candidates:
        return problems[0]
    # the edition the student worked in; both: the one saved last; a tie: English
    return max(candidates, key=lambda c: c[:3])[3]


# Modules the server imports once before it forks the children (torch, normlib, matplotlib come
# with the first); set before the first grading of the process.
PRELOAD = ["normlib.classroom._child"]


def _context():
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class _Running:
    def __init__(self, ctx, item: dict, limits: Limits):
        from . import _child
        self.item, self.limits = item, limits
        self.workdir = tempfile.mkdtemp(prefix="normlib-grade-")
        self.conn, child_end = ctx.Pipe(duplex=False)
        job = {**item, **asdict(limits), "workdir": self.workdir, "notebook": item["notebook"]}
        self.process = ctx.Process(target=_child.run, args=(child_end, job))
        try:
            self.process.start()
        except BaseException:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.conn.close()
            raise
        finally:
            child_end.close()
        # The timeout and the row's seconds count from the child's start: start() also starts the
        # server the first time (or after a submission killed it), importing torch, which is not
        # the submission's time.
        self.started = time.monotonic()
        self.deadline = self.started + limits.timeout

    def finish(self, record: dict) -> dict:
        """Kill what is left of the submission's processes, clean up, and the row."""
        self.process.join(1.0)
        _kill_group(self.process.pid)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        output = record.get("output") or self._output()
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.conn.close()
        item = self.item
        row = _row(item["student"], item["stem"], item["edition"], item["notebook"], None, "")
        row.update({k: record[k] for k in ("passed", "code", "message", "message_zh", "checks")
                    if k in record})
        row["output"] = output
        row["seconds"] = round(time.monotonic() - self.started, 2)      # wall clock
        row["cpu_seconds"] = record.get("cpu_seconds")
        return row

    def _output(self) -> str:
        with contextlib.suppress(OSError):
            with open(os.path.join(self.workdir, "output.txt"), "rb") as f:
                return f.read(2000).decode("utf-8", "replace")
        return ""

    def ended(self) -> dict:
        """The child ended: its record, or why there is none."""
        if self.conn.poll():
            try:
                data = self.conn.recv_bytes(MAX_RECORD_BYTES)
                record = json.loads(data.decode("utf-8"))
                if isinstance(record, dict) and isinstance(record.get("passed"), bool):
                    return self.finish(record)
            except (EOFError, OSError, ValueError):
                pass
        self.process.join(1.0)
        code = self.process.exitcode
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            if -code == signal.SIGKILL:
                return self.finish({"passed": False, "code": "submission.memory",
                                    "message": "killed by the system (SIGKILL), most likely for "
                                               "using too much memory"})
            return self.finish({"passed": False, "code": "submission.crashed",
                                "message": f"the process died of {name}"})
        return self.finish({"passed": False, "code": "submission.crashed",
                            "message": f"the process exited with status {code} before the "
                                       "checker finished (os._exit or a crash)"})

    def timed_out(self) -> dict:
        _kill_group(self.process.pid)
        return self.finish({"passed": False, "code": "submission.timeout",
                            "message": f"killed after {self.limits.timeout:g} s (wall clock): "
                                       "an endless loop outside any function, or far too slow"})


def _start(ctx, item: dict, limits: Limits) -> _Running:
    """A running child for ``item``. A submission can kill the server the children are forked from
    (it is their parent); multiprocessing starts a new one when it finds it dead, which may take a
    moment to show: try again."""
    for attempt in range(2):
        try:
            return _Running(ctx, item, limits)
        except (EOFError, OSError):
            time.sleep(0.5 * (attempt + 1))
    return _Running(ctx, item, limits)


def run_items(items: list[dict], limits: Limits, *, workers: int | None = None,
              progress: bool = True) -> list[dict]:
    """Every item's row, in the items' order: finished rows as they are, jobs run in children,
    ``workers`` at a time (default: every core this process may use)."""
    from tqdm import tqdm

    workers = workers or len(os.sched_getaffinity(0))
    if workers < 1:
        raise ValueError(f"run_items: workers must be >= 1, got {workers}")
    rows: list[dict | None] = [None if "answer" in item else item for item in items]
    pending = deque(i for i, item in enumerate(items) if "answer" in item)
    running: dict[int, _Running] = {}
    ctx = _context() if pending else None
    with tqdm(total=len(items), disable=not progress, unit="answer", desc="grading") as bar:
        bar.update(len(items) - len(pending))
        while pending or running:
            while pending and len(running) < workers:
                i = pending.popleft()
                try:
                    running[i] = _start(ctx, items[i], limits)
                except (EOFError, OSError) as exc:
                    rows[i] = _row(items[i]["student"], items[i]["stem"], items[i]["edition"],
                                   items[i]["notebook"], "submission.error",
                                   f"the grader could not start a process for it: {exc!r}")
                    bar.update(1)
            if not running:
                continue
            now = time.monotonic()
            soonest = min(r.deadline for r in running.values())
            # A child's pipe is readable when it sent its record or ended (EOF). Not the process
            # sentinels: those come from the server, and read as ended if a submission kills it.
            ready = set(wait([r.conn for r in running.values()],
                             timeout=max(0.0, soonest - now)))
            for i, r in list(running.items()):
                if r.conn in ready:
                    rows[i] = r.ended()
                elif time.monotonic() > r.deadline:
                    rows[i] = r.timed_out()
                else:
                    continue
                del running[i]
                bar.update(1)
    return rows


def grade_class(submissions: Path, out: Path, *, limits: Limits = Limits(),
                workers: int | None = None, progress: bool = True) -> list[dict]:
    """Grade every student in ``submissions`` and write OUT/gradebook.csv, results.jsonl and
    report.html; returns the rows (one per student and exercise handed in by the class)."""
    from .report import write_all

    submissions, out = Path(submissions), Path(out)
    if not submissions.is_dir():
        raise FileNotFoundError(f"grade: SUBMISSIONS must be a folder of student folders, "
                                f"got {submissions}")
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"grade: --out must be a folder, got the file {out}")
    students, stems, items = find_submissions(submissions)
    if not students:
        raise ValueError(f"grade: {submissions} holds no student folders")
    if not stems:
        raise ValueError(f"grade: no practice notebook (01_layer_norm.ipynb ...) in any student "
                         f"folder of {submissions}")
    rows = run_items(items, limits, workers=workers, progress=progress)
    write_all(rows, out)
    return rows
