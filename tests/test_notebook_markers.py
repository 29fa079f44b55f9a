"""nbval's cell markers are spelled exactly, or nbval silently ignores them.

nbval recognises a comment line only when, stripped of '#' and spaces, it is exactly the marker
("# NBVAL_IGNORE_OUTPUT"); "# NBVAL_IGNORE_OUTPUT: why" is an ordinary comment, and the cell's
output is compared after all. Say why on the next line.
"""

import pathlib
import re

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)
MARKERS = ("NBVAL_IGNORE_OUTPUT", "NBVAL_CHECK_OUTPUT", "NBVAL_RAISES_EXCEPTION", "NBVAL_SKIP")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_nbval_markers_are_exact(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            comment = line.strip()
            if comment.startswith("#") and re.search("|".join(MARKERS), comment):
                assert comment.lstrip("#").strip() in MARKERS, \
                    f"{path.name} cell {i} ({cell.get('id')}): {comment!r} is not an nbval marker; " \
                    f"put the marker alone on its line"
