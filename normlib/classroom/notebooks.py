"""Reading notebooks a student handed in, and the collection's own practice notebooks, without
trusting either: a regular file only (never through a symbolic link, never waiting on a FIFO), of
bounded size, JSON of the shape of a notebook, or a ValueError with a one-line reason."""

from __future__ import annotations

import functools
import json
import os
import stat
from pathlib import Path

__all__ = ["ROOT", "MAX_NOTEBOOK_BYTES", "read_notebook", "practice_cells"]

ROOT = Path(__file__).resolve().parents[2]
MAX_NOTEBOOK_BYTES = 20 * 2**20


def read_notebook(path: Path) -> list[dict]:
    """The notebook's code cells ({id, source}); ValueError with a one-line reason otherwise. Reads
    a regular file only, never through a symbolic link (O_NOFOLLOW), never waiting on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ValueError(f"{path.name} cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path.name} is not a regular file")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"{path.name} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MB")
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    try:
        nb = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"{path.name} is not a notebook (not JSON: "
                         f"{type(exc).__name__}: {str(exc)[:200]})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise ValueError(f"{path.name} is not a notebook (no list of cells)")
    out = []
    for i, cell in enumerate(cells):
        if not (isinstance(cell, dict) and cell.get("cell_type") == "code"):
            continue
        source, cell_id = cell.get("source", ""), cell.get("id")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ValueError(f"{path.name}: code cell {i} has a source that is neither text nor "
                             "a list of lines")
        if cell_id is not None and not isinstance(cell_id, str):
            raise ValueError(f"{path.name}: code cell {i} has an id that is not text")
        out.append({"id": cell_id, "source": source})
    return out


@functools.cache
def practice_cells(stem: str) -> tuple[frozenset, frozenset]:
    """(ids of the answer cells, texts of every code cell) of the collection's practice notebook,
    both editions (empty without the repository)."""
    ids, texts = set(), set()
    for folder in (ROOT / "notebooks" / "exercises", ROOT / "notebooks" / "zh" / "exercises"):
        try:
            cells = read_notebook(folder / f"{stem}.ipynb")
        except ValueError:
            continue
        ids |= {c["id"] for c in cells if "raise NotImplementedError" in c["source"]}
        texts |= {c["source"] for c in cells}
    return frozenset(ids), frozenset(texts)
