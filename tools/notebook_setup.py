"""The setup cell every notebook starts with, written from one template (``make notebook-setup``).

Where normlib is importable (``make lab``, ``pip install``, Binder, a class hub) the cell does
nothing and prints nothing, so a local Run All and nbval are unchanged. On Google Colab it installs
normlib from the repository (``REPOSITORY``, the one place its address is written). Anywhere else it
stops with the one command to run. The cell is the first code cell of every lesson, solution
notebook and the drill; the practice notebooks get it from their solutions (tools/generate_exercises.py)
and the Chinese edition from the English notebooks. tests/test_notebook_setup.py checks that every
notebook holds this exact cell.

    python -m tools.notebook_setup            # write or update the cell in every notebook
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CELL_ID = "normlib-setup"

# The collection's public git address, for Colab (pip's "name @ git+URL" form). Empty until the
# collection is published: the cell then tells a Colab reader to install it from their own copy.
REPOSITORY = ""

SOURCE = f'''# Setup: where normlib is installed (make lab, pip, Binder, a class hub) this does nothing.
import importlib.util
import sys

if importlib.util.find_spec("normlib") is None:
    REPOSITORY = "{REPOSITORY}"
    if "google.colab" in sys.modules and REPOSITORY:   # Colab: install normlib and its extras
        import subprocess
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"normlib[hf] @ git+{{REPOSITORY}}"],
                       check=True)
    else:
        raise ModuleNotFoundError(
            "normlib is not installed. In a clone of the collection run `make lab`, or "
            "`pip install -c requirements.txt '.[hf]'` for this Python; on Colab, "
            "`!pip install 'normlib[hf] @ git+URL'` with the URL of your copy of the repository.")'''


def notebooks(root: Path = NOTEBOOKS) -> list[Path]:
    """The notebooks written by hand: lessons, solutions and the drill (not the generated ones)."""
    return (sorted(root.glob("*.ipynb")) + sorted((root / "exercises" / "solutions").glob("*.ipynb"))
            + [root / "exercises" / "00_interview_drill.ipynb"])


def setup_cell() -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(SOURCE)
    cell.id = CELL_ID
    cell.metadata = {"slideshow": {"slide_type": "skip"}}
    return cell


def write(path: Path) -> bool:
    """Put the setup cell first among the code cells of ``path``; True when the file changed."""
    nb = nbformat.read(path, as_version=4)
    old = [i for i, c in enumerate(nb.cells) if c.get("id") == CELL_ID]
    if old and nb.cells[old[0]].source == SOURCE:
        return False
    for i in reversed(old):
        del nb.cells[i]
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    nb.cells.insert(first_code, setup_cell())
    nbformat.write(nb, path)
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.notebook_setup", description=__doc__)
    parser.parse_args(argv)
    for path in notebooks():
        if write(path):
            print(f"wrote the setup cell into {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
