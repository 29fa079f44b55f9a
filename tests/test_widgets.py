"""Every widget callback in the notebooks runs on its own and answers in under 100 ms.

Convention (see README, "Writing a lesson"): a notebook's cells tagged ``setup`` (imports, cheap
constants) and ``callback`` (the functions that widgets call, and the cheap data they need) run
without the rest of the notebook. Each function that a ``callback`` cell defines is called here
with its default arguments (the widget's initial values) and must return a matplotlib Figure or
nothing, drawing included, in under 100 ms median over repeated calls.
"""

import inspect
import pathlib
import statistics
import time
import warnings

import matplotlib
import nbformat
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)
BUDGET_S = 0.100


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


def _cases():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        if "widgets.interact" in "".join(c.source for c in nb.cells if c.cell_type == "code") \
                or _tagged(nb, "callback"):
            yield pytest.param(path, id=str(path.relative_to(ROOT / "notebooks")))


@pytest.mark.parametrize("path", list(_cases()))
def test_widget_callbacks_answer_fast(path):
    found = callbacks(path)
    assert found, f"{path.name} uses widgets but has no cell tagged 'callback'"
    for name, fn in found:
        timings = []
        for _ in range(5):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")       # Agg's "non-interactive, cannot show"
                out = fn()
            for num in plt.get_fignums():
                plt.figure(num).canvas.draw()          # include the rendering in the time
            timings.append(time.perf_counter() - start)
            assert out is None or isinstance(out, matplotlib.figure.Figure), \
                f"{name} returned {type(out).__name__}"
            plt.close("all")
        median = statistics.median(timings[1:])        # the first call warms caches
        print(f"{path.name}:{name} median {median * 1000:.1f} ms")
        assert median < BUDGET_S, f"{path.name}:{name} took {median * 1000:.0f} ms (budget 100 ms)"
