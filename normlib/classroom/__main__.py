"""``python -m normlib.classroom collect | grade | return | link`` (see the package docstring)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from .assignment import (
    Assignment,
    parse_deadline,
    parse_exercises,
    parse_points,
    read_roster,
    status,
)
from .grade import Limits, grade_class
from .link import nbgitpuller_link
from .sandbox import SandboxUnavailable
from .similarity import THRESHOLD


def _checked(parse):
    """``parse`` as an argparse type whose ValueError message is the one printed (argparse would
    print "invalid parse_x value" instead)."""
    def checked(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
    return checked


INSIDE_GIT = ("write there even inside a git work tree (by default refused: one `git add -A` "
              "would publish it)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m normlib.classroom")
    sub = parser.add_subparsers(dest="command", required=True)

    c = sub.add_parser("collect", help="snapshot every student's practice notebooks")
    c.add_argument("homes", type=Path, help="one home folder per student (the hub's homes)")
    c.add_argument("--out", type=Path, required=True, help="a new folder: SUBMISSIONS for grade")
    c.add_argument("--deadline", type=_checked(parse_deadline),
                   help="ISO-8601 (2026-03-06T23:59+01:00): notebooks saved later are copied "
                        "and counted late")
    c.add_argument("--course", default="course",
                   help="the course's folder in each home (the repository's name; default "
                        "%(default)s)")
    c.add_argument("--prefix", default="", help="the start of each home's name before the "
                                                "student id (TLJH: jupyter-)")
    c.add_argument("--inside-git", action="store_true", help=INSIDE_GIT)

    g = sub.add_parser("grade", help="grade a folder of student folders")
    g.add_argument("submissions", type=Path, help="one folder per student (its name: the id)")
    g.add_argument("--out", type=Path, required=True, help="where gradebook.csv, report.html, "
                                                           "feedback/ ... go")
    g.add_argument("--exercises", type=_checked(parse_exercises),
                   help="the assigned exercises, 01_layer_norm,03_rms_norm (default: every one "
                        "handed in)")
    g.add_argument("--points", type=_checked(parse_points),
                   help="points per exercise, 01_layer_norm=20,... (default 10 each)")
    g.add_argument("--roster", type=Path, help="the class list: a CSV with a 'student' column")
    g.add_argument("--deadline", type=_checked(parse_deadline),
                   help="ISO-8601; default: the one collect was given")
    g.add_argument("--format", action="append", default=[], choices=("canvas", "moodle"),
                   help="also write an LMS gradebook, canvas.csv or moodle.csv (repeatable)")
    g.add_argument("--bom", action="store_true",
                   help="write the CSV files with a UTF-8 byte-order mark (for Excel)")
    g.add_argument("--lessons-url", help="where the lessons are (the slides, a rendered copy): "
                                         "the report and feedback link the sections there")
    g.add_argument("--similarity", type=float, default=THRESHOLD,
                   help="list pairs of answers at least this similar (0-1, default %(default)s)")
    g.add_argument("--inside-git", action="store_true", help=INSIDE_GIT)
    g.add_argument("--workers", type=int, help="submissions at a time (default: every core)")
    g.add_argument("--timeout", type=float, default=Limits.timeout,
                   help="wall-clock seconds per submission, then it is killed (default %(default)s)")
    g.add_argument("--time-limit", type=float, default=Limits.time_limit,
                   help="seconds per call of the student's code in the checker (default "
                        "%(default)s)")
    g.add_argument("--memory-mb", type=int, default=Limits.memory_mb,
                   help="memory per submission beyond torch's own, MiB (default %(default)s)")
    g.add_argument("--quiet", action="store_true", help="no progress bar")

    r = sub.add_parser("return", help="copy each student's feedback page into their home")
    r.add_argument("out", type=Path, help="the OUT folder of a grade run")
    r.add_argument("homes", type=Path, help="one home folder per student")
    r.add_argument("--name", help="the page's name in ~/feedback/ (default: OUT's folder name)")
    r.add_argument("--prefix", default="", help="the start of each home's name (TLJH: jupyter-)")

    k = sub.add_parser("link", help="print an nbgitpuller link")
    k.add_argument("--repo", required=True, help="the git URL students pull from")
    k.add_argument("--branch", default="main")
    k.add_argument("--path", required=True, help="the notebook, relative to the repository root")
    k.add_argument("--hub", required=True, help="the hub's address, https://...")
    k.add_argument("--target", help="the folder to clone into (default: the repository's name)")
    return parser


def _collect(args) -> int:
    from .collect import collect

    found = collect(args.homes, args.out, deadline=args.deadline, course=args.course,
                    prefix=args.prefix, inside_git=args.inside_git)
    files = sum(map(len, found.files.values()))
    late = sum(map(len, found.late.values()))
    print(f"Collected {files} notebooks of {len(found.files)} students into {args.out}"
          + (f"; {late} saved after the deadline (graded, marked late)" if args.deadline else ""))
    for student, why in found.skipped.items():
        print(f"  {student}: {why}", file=sys.stderr)
    return 0


def _grade(args) -> int:
    from .collect import collected_deadline
    from .outputs import Outputs

    roster = read_roster(args.roster) if args.roster else None
    deadline = args.deadline or collected_deadline(args.submissions)
    assignment = Assignment(exercises=args.exercises, points=args.points or {}, roster=roster,
                            deadline=deadline)
    outputs = Outputs(formats=tuple(dict.fromkeys(args.format)), bom=args.bom,
                      lessons_url=args.lessons_url, similarity=args.similarity)
    limits = Limits(timeout=args.timeout, time_limit=args.time_limit, memory_mb=args.memory_mb)
    rows = grade_class(args.submissions, args.out, limits=limits, workers=args.workers,
                       progress=not args.quiet, assignment=assignment, outputs=outputs,
                       inside_git=args.inside_git)
    n = Counter(status(r) for r in rows)
    codes = Counter(r["code"] for r in rows if status(r) == "failed").most_common(3)
    students = len({r["student"] for r in rows})
    late = sum(bool(r.get("late")) for r in rows)
    print(f"{students} students, {len({r['exercise'] for r in rows})} exercises: "
          f"{n['passed']} of {n['passed'] + n['failed']} attempted answers passed; "
          f"{n['not attempted']} not attempted, {n['missing']} missing"
          + (f", {late} late" if deadline else "") + ". Most common mistakes: "
          f"{', '.join(f'{c} ({k})' for c, k in codes) or 'none'}. Wrote {args.out}/: "
          "gradebook.csv, report.html, feedback/, results.jsonl, gradescope/"
          + "".join(f", {f}.csv" for f in dict.fromkeys(args.format)))
    if roster:
        extra = sorted({r["student"] for r in rows} - set(roster.students))
        if extra:
            print(f"not on the roster, graded anyway: {', '.join(extra)}", file=sys.stderr)
    left = sum(r["code"] == "submission.not_graded" for r in rows)
    if left:
        print(f"stopped: {left} answers were not graded (submission.not_graded); the report says "
              "the run is incomplete", file=sys.stderr)
        return 130
    return 0


def _return(args) -> int:
    from .feedback import return_feedback

    done = return_feedback(args.out, args.homes, name=args.name, prefix=args.prefix)
    for student, why in done:
        if why.startswith(("skipped", "not returned")):
            print(f"{student}: {why}", file=sys.stderr)
    failed = sum(why.startswith("not returned") for _, why in done)
    returned = sum(not why.startswith(("skipped", "not returned")) for _, why in done)
    print(f"Returned {returned} of {len(done)} feedback pages"
          + (f"; {failed} could not be written (above)" if failed else "") + ".")
    return 1 if failed else 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "link":
            print(nbgitpuller_link(args.repo, args.path, args.hub, branch=args.branch,
                                   target=args.target))
            return 0
        return {"collect": _collect, "grade": _grade, "return": _return}[args.command](args)
    except (OSError, ValueError, SandboxUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
