"""``python -m normlib.classroom grade ...`` and ``... link ...`` (see the package docstring)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from .grade import Limits, grade_class
from .link import nbgitpuller_link
from .sandbox import SandboxUnavailable


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m normlib.classroom")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade a folder of student folders")
    g.add_argument("submissions", type=Path, help="one folder per student (its name: the id)")
    g.add_argument("--out", type=Path, required=True, help="where gradebook.csv, results.jsonl "
                                                           "and report.html go")
    g.add_argument("--workers", type=int, help="submissions at a time (default: every core)")
    g.add_argument("--timeout", type=float, default=Limits.timeout,
                   help="wall-clock seconds per submission, then it is killed (default %(default)s)")
    g.add_argument("--time-limit", type=float, default=Limits.time_limit,
                   help="seconds per call of the student's code in the checker (default "
                        "%(default)s)")
    g.add_argument("--memory-mb", type=int, default=Limits.memory_mb,
                   help="memory per submission beyond torch's own, MiB (default %(default)s)")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    k = sub.add_parser("link", help="print an nbgitpuller link")
    k.add_argument("--repo", required=True, help="the git URL students pull from")
    k.add_argument("--branch", default="main")
    k.add_argument("--path", required=True, help="the notebook, relative to the repository root")
    k.add_argument("--hub", required=True, help="the hub's address, https://...")
    k.add_argument("--target", help="the folder to clone into (default: the repository's name)")
    args = parser.parse_args(argv)
    try:
        if args.command == "link":
            print(nbgitpuller_link(args.repo, args.path, args.hub, branch=args.branch,
                                   target=args.target))
            return 0
        limits = Limits(timeout=args.timeout, time_limit=args.time_limit,
                        memory_mb=args.memory_mb)
        rows = grade_class(args.submissions, args.out, limits=limits, workers=args.workers,
                           progress=not args.quiet)
    except (OSError, ValueError, SandboxUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    students = len({r["student"] for r in rows})
    passed = sum(r["passed"] for r in rows)
    codes = Counter(r["code"] for r in rows if not r["passed"]).most_common(3)
    print(f"{students} students, {len(rows)} answers: {passed} passed, {len(rows) - passed} "
          f"failed. Most common: {', '.join(f'{c} ({n})' for c, n in codes) or 'none'}. "
          f"Wrote {args.out}/gradebook.csv, results.jsonl, report.html")
    left = sum(r["code"] == "submission.not_graded" for r in rows)
    if left:
        print(f"stopped: {left} answers were not graded (submission.not_graded); the report says "
              "the run is incomplete", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
