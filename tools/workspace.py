"""Copy the practice notebooks into your own folder, never overwriting what is there.

``make exercises`` runs ``python -m tools.workspace``: every notebook in
notebooks/exercises/ (the learner versions and the drill, not the solutions) is copied into the
git-ignored ``workspace/``, and every Chinese practice notebook in notebooks/zh/exercises/ into
``workspace/zh/``, with its outputs cleared and made editable again (the originals are
read-only in JupyterLab). A file that already exists is skipped and
named, so updating the collection never destroys your work; delete your copy to get a fresh one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

__all__ = ["copy_exercises", "editions", "main"]

ROOT = Path(__file__).resolve().parents[1]


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


def editions(root: Path = ROOT, dest: Path | None = None) -> list[tuple[Path, Path]]:
    """The (source, destination) folders ``make exercises`` copies: the English practice notebooks
    into ``dest`` (default ``root/workspace``), and the Chinese ones, once notebooks/zh/exercises/
    exists, into ``dest/zh``."""
    dest = Path(root) / "workspace" if dest is None else Path(dest)
    pairs = [(Path(root) / "notebooks" / "exercises", dest)]
    chinese = Path(root) / "notebooks" / "zh" / "exercises"
    if chinese.is_dir():
        pairs.append((chinese, dest / "zh"))
    return pairs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.workspace",
                                     description="Copy the practice notebooks into workspace/ "
                                                 "(the Chinese ones into workspace/zh/).")
    parser.add_argument("--source", type=Path,
                        help="copy only this folder of notebooks (default: both editions)")
    parser.add_argument("--dest", type=Path, help="the workspace folder (default: workspace/)")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    dest = args.root / "workspace" if args.dest is None else args.dest
    pairs = [(args.source, dest)] if args.source is not None else editions(args.root, dest)
    n_copied = n_skipped = 0
    for source, target in pairs:
        copied, skipped = copy_exercises(source, target)
        prefix = target.relative_to(dest).as_posix() + "/" if target != dest else ""
        for name in copied:
            print(f"copied   {prefix}{name}")
        for name in skipped:
            print(f"skipped  {prefix}{name} (already in {dest.name}/{prefix}; yours is kept)")
        n_copied, n_skipped = n_copied + len(copied), n_skipped + len(skipped)
    print(f"{n_copied} copied, {n_skipped} skipped. Open them with `make practice` "
          f"(JupyterLab on {dest.name}/).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
