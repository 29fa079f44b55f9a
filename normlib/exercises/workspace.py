"""Copy the practice notebooks into your own folder, never overwriting what is there.

``make exercises`` runs ``python -m normlib.exercises.workspace``: every notebook in
notebooks/exercises/ (the learner versions and the drill, not the solutions) is copied into the
git-ignored ``workspace/``, with its outputs cleared and made editable again (the originals are
read-only in JupyterLab). A file that already exists is skipped and
named, so updating the collection never destroys your work; delete your copy to get a fresh one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

__all__ = ["copy_exercises", "main"]

ROOT = Path(__file__).resolve().parents[2]


def _clean(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` without outputs, execution counts, saved widget state or the
    read-only mark (``editable: false``) of the generated notebooks."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
        cell.metadata.pop("editable", None)
    return nb


def copy_exercises(source: Path, dest: Path) -> tuple[list[str], list[str]]:
    """Copy ``source/*.ipynb`` into ``dest`` (created if needed), outputs cleared.

    Returns (copied, skipped): the file names written, and those left alone because ``dest``
    already had a file of that name. Existing files are never opened for writing.
    """
    source, dest = Path(source), Path(dest)
    if not source.is_dir():
        raise FileNotFoundError(f"copy_exercises: source must be a folder of notebooks, "
                                f"got {source}")
    dest.mkdir(parents=True, exist_ok=True)
    copied, skipped = [], []
    for path in sorted(source.glob("*.ipynb")):
        target = dest / path.name
        if target.exists():
            skipped.append(path.name)
            continue
        nb = _clean(path)
        with open(target, "x", encoding="utf-8") as f:      # "x": fails rather than overwrite
            nbformat.write(nb, f)
        copied.append(path.name)
    return copied, skipped


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m normlib.exercises.workspace",
                                     description="Copy the practice notebooks into workspace/.")
    parser.add_argument("--source", type=Path, default=ROOT / "notebooks" / "exercises")
    parser.add_argument("--dest", type=Path, default=ROOT / "workspace")
    args = parser.parse_args(argv)
    copied, skipped = copy_exercises(args.source, args.dest)
    for name in copied:
        print(f"copied   {name}")
    for name in skipped:
        print(f"skipped  {name} (already in {args.dest.name}/; yours is kept)")
    print(f"{len(copied)} copied, {len(skipped)} skipped. Open them with `make practice` "
          f"(JupyterLab on {args.dest.name}/).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
