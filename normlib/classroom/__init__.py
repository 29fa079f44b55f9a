"""Tools for a lecturer: grade a class's practice notebooks by mistake code, and hand out lessons
with nbgitpuller links.

    python -m normlib.classroom grade SUBMISSIONS --out OUT     # gradebook.csv, report.html, ...
    python -m normlib.classroom link --repo URL --path notebooks/exercises/01_layer_norm.ipynb \\
        --hub https://hub.example.edu

See ``normlib/classroom/ISOLATION.md`` for what the grader's per-submission isolation holds.
"""

from .grade import Limits, grade_class
from .link import nbgitpuller_link

__all__ = ["Limits", "grade_class", "nbgitpuller_link"]
