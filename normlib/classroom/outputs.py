"""What one grading run writes into OUT: the report's files, each student's feedback, the
Gradescope-style results and the LMS gradebooks asked for (``Outputs``), all private to the lecturer
(a 0700 folder, 0600 files)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .assignment import UNASSIGNED, Assignment
from .exports import write_gradescope, write_lms
from .feedback import write_feedback
from .report import explanation, private_folder, write_gradebook, write_report, write_results
from .similarity import THRESHOLD

__all__ = ["Outputs", "FORMATS", "write_all"]

FORMATS = ("canvas", "moodle")


@dataclass(frozen=True)
class Outputs:
    """What else to write: LMS gradebooks (``formats``: canvas, moodle), a UTF-8 byte-order mark
    in every CSV (``bom``: for Excel), where the lessons are for links (``lessons_url``: the
    slides or a rendered copy; None: the lesson and section are named, not linked), and the
    similarity at or above which a pair of answers is listed."""

    formats: tuple[str, ...] = ()
    bom: bool = False
    lessons_url: str | None = None
    similarity: float = THRESHOLD

    def __post_init__(self):
        for f in self.formats:
            if f not in FORMATS:
                raise ValueError(f"--format: expected one of {', '.join(FORMATS)}, got {f!r}")
        if self.lessons_url is not None and not self.lessons_url.strip():
            raise ValueError("--lessons-url: expected an address or a folder, got an empty one")


def write_all(rows: list[dict], out: Path, complete: bool = True,
              assignment: Assignment = UNASSIGNED, outputs: Outputs = Outputs(),
              similar=()) -> None:
    """Every output into ``out`` (created, 0700; files 0600): gradebook.csv, results.jsonl,
    report.html, feedback/<student>.html, gradescope/<student>/results.json, and the LMS
    gradebooks ``outputs`` asks for. A grader-level row gets its code's Chinese."""
    for r in rows:
        if r["code"] and r["code"].startswith("submission.") and not r.get("message_zh"):
            r["message_zh"] = (explanation(r["code"]) or ("", None))[1]
    out = Path(out)
    private_folder(out)
    write_gradebook(rows, out / "gradebook.csv", assignment, outputs.bom)
    write_results(rows, out / "results.jsonl")
    write_report(rows, out / "report.html", outputs.lessons_url, complete, assignment, similar)
    write_feedback(rows, out / "feedback", assignment, outputs.lessons_url)
    write_gradescope(rows, out / "gradescope", assignment)
    for name in outputs.formats:
        write_lms(rows, out / f"{name}.csv", name, assignment, outputs.bom)
