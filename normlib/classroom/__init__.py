"""Tools for a lecturer: hand out lessons with nbgitpuller links, collect the practice notebooks at a
deadline, grade an assignment by mistake code, return feedback, export grades to an LMS.

    python -m normlib.classroom link --repo URL --path practice/01_layer_norm.ipynb \\
        --hub https://hub.example.edu
    python -m normlib.classroom collect HOMES --out SUBMISSIONS --deadline 2026-03-06T23:59+01:00
    python -m normlib.classroom grade SUBMISSIONS --out OUT --exercises 01_layer_norm,03_rms_norm \\
        --roster roster.csv --format canvas      # gradebook.csv, report.html, feedback/, ...
    python -m normlib.classroom return OUT HOMES # each student's feedback page into their home

See ``normlib/classroom/ISOLATION.md`` for what the grader's per-submission isolation holds, and
docs/classroom.md for the lecturer's week.
"""

from .grade import Limits, grade_class
from .link import nbgitpuller_link

__all__ = ["Limits", "grade_class", "nbgitpuller_link"]
