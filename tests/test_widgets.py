"""Every widget callback in the notebooks runs on its own and draws one figure.

Convention (see README, "Writing a lesson"): a notebook's cells tagged ``setup`` (imports, cheap
constants) and ``callback`` (the functions that widgets call, and the cheap data they need) run
without the rest of the notebook. Each function that a ``callback`` cell defines is called here
with its default arguments (the widget's initial values) and must return a matplotlib Figure or
nothing, leaving exactly one figure drawn. How fast they answer is a benchmark, not a test:
``make bench`` times them (tests/bench.py).
"""

import inspect
import pathlib
import warnings

import matplotlib
import nbformat
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts and "zh" not in p.parts)


def _tagged(nb, tag):
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


def callbacks(path):
    """(name, function) for each function defined by the notebook's ``callback`` cells."""
    nb = nbformat.read(path, as_version=4)
    ns: dict = {"__name__": "__notebook__"}
    found = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", []) if cell.cell_type == "code" else []
        if "setup" in tags or "callback" in tags:
            before = set(ns)
            exec(compile(cell.source, f"{path.name}", "exec"), ns)
            if "callback" in tags:
                found += [(n, ns[n]) for n in ns.keys() - before if inspect.isfunction(ns[n])]
    return sorted(found, key=lambda item: item[0])


def widget_notebooks():
    """The notebooks that use widgets (or define callbacks)."""
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        if "widgets.interact" in "".join(c.source for c in nb.cells if c.cell_type == "code") \
                or _tagged(nb, "callback"):
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
    found = callbacks(path)
    assert found, f"{path.name} uses widgets but has no cell tagged 'callback'"
    for name, fn in found:
        plt.close("all")
        out = call_and_draw(fn)
        assert out is None or isinstance(out, matplotlib.figure.Figure), \
            f"{name} returned {type(out).__name__}"
        assert len(plt.get_fignums()) == 1, \
            f"{path.name}:{name} left {len(plt.get_fignums())} figures open (expected one plot)"
        plt.close("all")
