"""Pre-rendered frames of every lesson widget, for the site's kernel-free widgets (make site).

    python -m tools.site.frames --out build/site-frames [NOTEBOOK ...]   # default: every lesson

Why a kernel. A lesson's widget callback is a closure over the lesson's own state (trained runs,
cached grids, the helper functions its cells define), so it exists only after the lesson's cells
have run. Exposing every callback from normlib would move lesson code out of the lessons, where a
reader reads it. So each lesson runs in a Jupyter kernel (nbclient, as `make execute` does), cell by
cell up to its last widget; after each widget cell, tools/site/kernel_frames.py moves that widget's
controls over its grid, inside the same kernel, and saves what its Output shows. A frame is thus the
lesson's own picture for those values. The Chinese lessons share the English lessons' code, outputs
and widget state (make check-translations), so their pages reuse the same frames.

Writes ``<out>/frames/<lesson>/<cell id>-<k>/<n>.png`` and ``<out>/frames/manifest.js``, which maps
each stored widget (its model id in the notebooks' saved widget state, English and Chinese) to its
controls' model ids, their kept values and the frames' folder (site/_static/widgets-render.js reads it).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import shutil
import sys

import nbformat

from tools.site import grid

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CELL_TIMEOUT_S = 300


def lessons() -> list[pathlib.Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def widget_views(cell) -> list[str]:
    """The model ids of the widgets a code cell's outputs display, in order."""
    return [o["data"][WIDGET_VIEW]["model_id"] for o in cell.get("outputs", [])
            if WIDGET_VIEW in o.get("data", {})]


def _stored_tree(state: dict, model_id: str) -> list[str]:
    """``model_id`` and its descendants' ids in the saved widget state, depth first."""
    children = state[model_id]["state"].get("children", [])
    return [model_id, *(m for c in children for m in _stored_tree(state, c.removeprefix("IPY_MODEL_")))]


def _is_control(model: dict) -> bool:
    """What kernel_frames counts as a control: a model with a value, other than an Output."""
    return model["model_name"] != "OutputModel" and ("value" in model["state"] or "index" in model["state"])


def stored_widgets(path: pathlib.Path) -> dict[tuple[str, int], dict]:
    """(cell id, k) -> the k-th widget the cell displays in the saved notebook: its model id, its
    controls' model ids (depth first) and its Output's model id. Only widgets with one Output."""
    nb = nbformat.read(path, as_version=4)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    found = {}
    for cell in nb.cells:
        for k, model_id in enumerate(widget_views(cell)):
            if model_id not in state:
                continue
            tree = _stored_tree(state, model_id)
            outputs = [m for m in tree if state[m]["model_name"] == "OutputModel"]
            controls = [m for m in tree if _is_control(state[m])]
            if len(outputs) == 1 and controls:
                found[cell.id, k] = {"model": model_id, "controls": controls, "output": outputs[0]}
    return found


def _kernel_code(model_id: str, folder: pathlib.Path, cap: int) -> str:
    return (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from tools.site import kernel_frames as _site_frames\n"
            f"print(_site_frames.render({model_id!r}, {str(folder)!r}, {cap}))")


def render_lesson(path: pathlib.Path, out: pathlib.Path, cap: int) -> dict:
    """Run ``path`` up to its last widget and render each widget's frames; returns
    {(cell id, k): grid} for the widgets stored_widgets finds."""
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    wanted = stored_widgets(path)
    last = max((i for i, c in enumerate(nb.cells) if (c.get("id"), 0) in wanted), default=-1)
    if last < 0:
        return {}
    nb.cells = nb.cells[:last + 1]          # nothing after the last widget is needed
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    grids = {}
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            client.execute_cell(cell, index)
            for k, model_id in enumerate(widget_views(cell)):
                if (cell.id, k) not in wanted:
                    continue
                folder = out / path.stem / f"{cell.id}-{k}"
                probe = nbformat.v4.new_code_cell(_kernel_code(model_id, folder, cap))
                client.execute_cell(probe, index)
                text = "".join(o.get("text", "") for o in probe.outputs if o.get("name") == "stdout")
                grids[cell.id, k] = json.loads(text.strip().splitlines()[-1])
    return grids


def manifest(grids_by_lesson: dict[str, dict], frames_url: str = "frames") -> dict:
    """Stored model id -> what the page needs, for the English and the Chinese lesson."""
    entries = {}
    for stem, grids in grids_by_lesson.items():
        for path in (NOTEBOOKS / f"{stem}.ipynb", NOTEBOOKS / "zh" / f"{stem}.ipynb"):
            if not path.exists():
                continue
            for (cell_id, k), stored in stored_widgets(path).items():
                g = grids.get((cell_id, k))
                if g is None:
                    continue
                if len(g["controls"]) != len(stored["controls"]):
                    raise ValueError(f"site frames: {path.name} cell {cell_id}: the saved widget has "
                                     f"{len(stored['controls'])} controls, the run {len(g['controls'])}; "
                                     "re-execute the lesson (make execute NB=...)")
                entries[stored["model"]] = {
                    "folder": f"{frames_url}/{stem}/{cell_id}-{k}", "count": g["count"],
                    "output": stored["output"],
                    "controls": [{"model": m, **c} for m, c in zip(stored["controls"], g["controls"], strict=True)]}
    return entries


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--cap", type=int, default=grid.CAP, help="frames per widget (default %(default)s)")
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or lessons()
    frames = args.out.resolve() / "frames"      # absolute: the kernels run in notebooks/
    shutil.rmtree(frames, ignore_errors=True)
    frames.mkdir(parents=True)
    workers = min(2, os.cpu_count() or 1, len(paths))
    grids = {}
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        jobs = {pool.submit(render_lesson, p, frames, args.cap): p for p in paths}
        for job in concurrent.futures.as_completed(jobs):
            path = jobs[job]
            grids[path.stem] = job.result()
            count = sum(g["count"] for g in grids[path.stem].values())
            print(f"frames: {path.name}: {len(grids[path.stem])} widgets, {count} frames", flush=True)
    entries = manifest(grids)
    (frames / "manifest.js").write_text(
        "// Generated by tools/site/frames.py: each lesson widget's pre-rendered frames.\n"
        f"window.normlibFrames = {json.dumps(entries, sort_keys=True)};\n", encoding="utf-8")
    print(f"frames: {len(entries)} widget views in {frames.relative_to(ROOT) if frames.is_relative_to(ROOT) else frames}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
