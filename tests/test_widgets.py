"""Every widget callback in the notebooks runs on its own and draws one live figure.

Convention (see README, "Writing a lesson"): a notebook's cells tagged ``setup`` (imports, cheap
constants) and ``callback`` (the functions that widgets call, and the cheap data they need) run
without the rest of the notebook. Each function that a ``callback`` cell defines is called here
with its default arguments (the widget's initial values); it must leave exactly one figure open and
return it as a live figure (``normlib.viz.live(fig, update)``): its ``update`` (what a control's
move runs) is then called with the same values and the figure drawn to PNG as the widget shows it
(``normlib.viz.png``). Every widget, in the lessons and the practice notebooks, is built by
``normlib.viz.interactive``. How fast they answer is a benchmark, not a test: ``make bench`` times
them (tests/bench.py).
"""

import inspect
import io
import pathlib
import warnings

import matplotlib
import nbformat
import pytest
from PIL import Image

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from normlib import viz  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts and "zh" not in p.parts)


def _tagged(nb, tag):
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


def run_widget_cells(path, ns: dict, also=lambda cell: False):
    """Run the notebook's ``setup`` and ``callback`` cells, and the code cells ``also`` accepts,
    in order in the namespace ``ns``; yield each cell after it ran, with the names it defined."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.get("tags", [])
        if "setup" in tags or "callback" in tags or also(cell):
            before = set(ns)
            exec(compile(cell.source, f"{path.name}", "exec"), ns)
            yield cell, ns.keys() - before


def callbacks(path):
    """(name, function) for each function defined by the notebook's ``callback`` cells."""
    ns: dict = {"__name__": "__notebook__"}
    found = []
    for cell, defined in run_widget_cells(path, ns):
        if "callback" in cell.metadata.get("tags", []):
            found += [(n, ns[n]) for n in defined if inspect.isfunction(ns[n])]
    return sorted(found, key=lambda item: item[0])


def widget_notebooks():
    """The notebooks that use widgets (or define callbacks)."""
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = "".join(c.source for c in nb.cells if c.cell_type == "code")
        if "widgets.interact" in code or "viz.interactive" in code or _tagged(nb, "callback"):
            yield path


def call_and_draw(fn):
    """Call a callback with its defaults and render every figure it left open; return its result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # Agg's "non-interactive, cannot show"
        out = fn()
    for num in plt.get_fignums():
        plt.figure(num).canvas.draw()
    return out


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(ROOT / "notebooks")))
                                  for p in widget_notebooks()])
def test_widget_callbacks_run_alone_and_draw_one_figure(path):
    """One live figure per callback, and every widget built by nl.viz.interactive."""
    nb = nbformat.read(path, as_version=4)
    other = [line.strip() for c in nb.cells if c.cell_type == "code"
             for line in c.source.splitlines() if "widgets.interact" in line]
    assert not other, (
        f"{path.name}: build widgets with nl.viz.interactive (one figure updated in place), not "
        f"ipywidgets' interact/interactive: {other}")
    found = callbacks(path)
    assert found, f"{path.name} uses widgets but has no cell tagged 'callback'"
    for name, fn in found:
        plt.close("all")
        fig = call_and_draw(fn)
        assert isinstance(fig, matplotlib.figure.Figure), f"{name} returned {type(fig).__name__}"
        assert len(plt.get_fignums()) == 1, \
            f"{path.name}:{name} left {len(plt.get_fignums())} figures open (expected one plot)"
        viz.update(fig)               # a control's move, at the initial values: raises unless live
        image = Image.open(io.BytesIO(viz.png(fig)))        # the widget's picture: the whole plot
        w, h = fig.canvas.get_width_height()
        assert image.width > w / 2 and image.height > h / 2, \
            f"{path.name}:{name}: a {image.width}x{image.height} PNG of a {w}x{h} canvas"
        assert len(plt.get_fignums()) == 1, f"{path.name}:{name}: its update opened another figure"
        plt.close("all")
