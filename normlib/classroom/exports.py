"""Grades for a learning management system: a wide CSV per LMS, and Gradescope-style results.json.

``--format canvas`` writes ``canvas.csv`` in the layout of Canvas's own gradebook export, which its
Grades › Import reads back: the columns Student, ID, SIS User ID, SIS Login ID and Section (filled
from the roster's columns of those names, in any case, with ``_`` for a space; Student from a
``name`` column, else the student id; SIS Login ID, else the student id), a "Points Possible" row,
then one column per assigned exercise, named by its notebook (``01_layer_norm``): Canvas matches
a column to the assignment of that name or creates one. ``--format moodle`` writes ``moodle.csv``:
the student id, every roster column, one column per exercise and the total; Moodle's Import ›
CSV file asks which column identifies the user and which grade item each column fills.

Points: all of an exercise's points for a pass, the share of checks passed for a failed answer
(assignment.points), 0 when it was not attempted or nothing was handed in; a row the run did not
reach (``submission.not_graded``) is left blank, so an import keeps what the LMS has. Late work
counts in full and is marked in gradebook.csv, the report and the student's feedback: apply your
course's late policy in the LMS.

``gradescope/<student>/results.json`` is one file per student in the format of Gradescope's
autograder (``score``, and per exercise a test with ``score``, ``max_score``, ``status``,
``output`` and ``tags``): the tags carry the mistake code, so a platform or a script that reads
this format can count mistakes as the report does.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

from normlib.exercises import EXERCISES

from .assignment import UNASSIGNED, Assignment, points, status
from .report import one_line, private_file, private_folder

__all__ = ["write_lms", "write_gradescope", "safe_name", "CANVAS_COLUMNS"]

STEMS = {Path(e.notebook).stem: e for e in EXERCISES.values()}
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_FROM = {"Student": "name"}                # Canvas's column: the roster's, when named apart


def safe_name(student: str) -> str:
    """A student id as a file name: as it is, unless it is too long for one (then its start and
    a hash of the whole)."""
    if len(student.encode("utf-8", "surrogateescape")) <= 200:
        return student
    digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return student[:60] + "-" + digest


def _table(rows: list[dict]) -> tuple[list[str], list[str], dict]:
    """(students in order, exercises in order, (student, exercise) -> row)."""
    students = list(dict.fromkeys(r["student"] for r in rows))
    stems = list(dict.fromkeys(r["exercise"] for r in rows))
    return students, stems, {(r["student"], r["exercise"]): r for r in rows}


def _score(row: dict | None, possible: float) -> str:
    if row is None or row.get("code") == "submission.not_graded":
        return ""
    return f"{points(row, possible):g}"


def _roster_value(extra: dict, column: str) -> str:
    wanted = {column.lower().replace(" ", "_"), CANVAS_FROM.get(column, "\0")}
    return next((v for k, v in extra.items() if k.lower().replace(" ", "_") in wanted), "")


def write_lms(rows: list[dict], path: Path, fmt: str, assignment: Assignment = UNASSIGNED,
              bom: bool = False) -> None:
    """One row per student, one column of points per exercise, in ``fmt`` (canvas or moodle)."""
    students, stems, table = _table(rows)
    roster = assignment.roster
    extra = {s: (roster.extra.get(s, {}) if roster else {}) for s in students}
    possible = [assignment.possible(stem) for stem in stems]
    with private_file(path, bom, newline="") as f:
        writer = csv.writer(f)
        if fmt == "canvas":
            writer.writerow([*CANVAS_COLUMNS, *stems])
            writer.writerow(["    Points Possible", "", "", "", "", *(f"{p:g}" for p in possible)])
            for s in students:
                ids = [_roster_value(extra[s], c) for c in CANVAS_COLUMNS]
                ids[0], ids[3] = ids[0] or s, ids[3] or s
                writer.writerow([*map(one_line, ids),
                                 *(_score(table.get((s, stem)), p)
                                   for stem, p in zip(stems, possible, strict=False))])
        elif fmt == "moodle":
            columns = list(roster.columns) if roster else []
            writer.writerow(["student", *columns, *stems, "total"])
            for s in students:
                scores = [_score(table.get((s, stem)), p) for stem, p in zip(stems, possible, strict=False)]
                total = sum(float(x) for x in scores if x)
                writer.writerow([one_line(s), *(one_line(extra[s].get(c, "")) for c in columns),
                                 *scores, f"{total:g}"])
        else:
            raise ValueError(f"--format: expected canvas or moodle, got {fmt!r}")


def write_gradescope(rows: list[dict], folder: Path, assignment: Assignment = UNASSIGNED) -> None:
    """``folder/<student>/results.json`` for every student, in Gradescope's autograder format."""
    students, stems, table = _table(rows)
    private_folder(folder)
    for s in students:
        tests = []
        for stem in stems:
            r = table.get((s, stem))
            if r is None:
                continue
            possible = assignment.possible(stem)
            lines = [r["message"] or "", *(r.get("checks") or [])]
            tests.append({
                "name": f"{stem}: {STEMS[stem].title}", "number": stem[:2],
                "score": points(r, possible), "max_score": possible,
                "status": "passed" if r["passed"] else "failed",
                "output": "\n".join(lines), "tags": [] if r["passed"] else [r["code"]],
                "visibility": "visible",
                "extra_data": {"status": status(r), "late": bool(r.get("late")),
                               "submitted_at": r.get("submitted_at") or ""}})
        result = {"score": round(sum(t["score"] for t in tests), 2), "tests": tests,
                  "extra_data": {"student": s}}
        private_folder(folder / safe_name(s))
        with private_file(folder / safe_name(s) / "results.json") as f:
            json.dump(result, f, ensure_ascii=False, indent=1)
