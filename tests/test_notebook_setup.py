"""Every English notebook starts with the same setup cell (tools/notebook_setup.py), and the cell
does nothing where normlib is importable and names the command to run where it is not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tools import notebook_setup

ROOT = Path(__file__).resolve().parents[1]
ENGLISH = (sorted((ROOT / "notebooks").glob("*.ipynb"))
           + sorted((ROOT / "notebooks" / "exercises").glob("*.ipynb"))
           + sorted((ROOT / "notebooks" / "exercises" / "solutions").glob("*.ipynb")))


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: str(p.relative_to(ROOT)))
def test_first_code_cell_is_the_setup_cell(path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.get("id") == notebook_setup.CELL_ID and first.source == notebook_setup.SOURCE, (
        f"{path.relative_to(ROOT)}: the first code cell is not the setup cell; "
        "run `make notebook-setup` (python -m tools.notebook_setup)")


def _run_cell(cwd: Path, without_site_packages: bool) -> subprocess.CompletedProcess:
    # -S: no site-packages (where normlib is installed), as on a fresh Colab; run outside the
    # repository, whose normlib/ folder would otherwise be importable from the working directory.
    flags = ["-S"] if without_site_packages else []
    return subprocess.run([sys.executable, *flags, "-c", notebook_setup.SOURCE],
                          capture_output=True, text=True, cwd=cwd)


def test_the_cell_is_silent_where_normlib_is_installed(tmp_path):
    proc = _run_cell(tmp_path, without_site_packages=False)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""


def test_the_cell_names_the_command_where_normlib_is_missing(tmp_path):
    proc = _run_cell(tmp_path, without_site_packages=True)
    assert proc.returncode != 0
    assert "normlib is not installed" in proc.stderr and "make lab" in proc.stderr
