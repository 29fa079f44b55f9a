"""Every widget in the notebooks runs on its own, draws one live figure and answers each move exactly.

Convention (see CONTRIBUTING, "Writing a lesson"): a notebook's cells tagged ``setup`` (imports,
cheap constants) and ``callback`` (the functions that widgets call, and the cheap data they need)
run without the rest of the notebook, and so do the cells that display its widgets. Every widget,
in the lessons and the practice notebooks, is built by ``normlib.viz.interactive``, which calls its
callback once and requires a live figure (``normlib.viz.live(fig, update)``); each function a
``callback`` cell defines must be shown by a widget and leave no other figure open. Each displayed
widget's controls are then moved one step each (a move runs the figure's ``update`` and draws it to
PNG as the widget shows it, ``normlib.viz.png``), and after every move the picture (only the
artists its update returns, drawn over the last full drawing) must equal, pixel for pixel, the
figure drawn in full. How fast they answer is a benchmark, not a test: ``make bench`` times them
(tools/bench.py).

Each distinct widget code is run once: a practice notebook (notebooks/exercises/NN_*.ipynb) whose
widget cells (``widget_code``: the cells these tests run, with their tags) are identical to those
of the solution notebook it is generated from is tested with it, not again on its own (its widgets
would draw the same figures), and its own saved widget pictures are compared with the ones drawn
for the solution notebook. A practice notebook whose widget code differs is tested on its own
(``widget_test_groups``).
"""

import ast
import base64
import contextlib
import inspect
import io
import math
import pathlib
import re
import warnings

import ipywidgets as widgets
import matplotlib
import nbformat
import numpy as np
import pytest
from PIL import Image

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tools.images import compare  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts and "zh" not in p.parts)


def _tagged(nb, tag):
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


def widget_cells(nb, also=lambda cell: False) -> list:
    """The notebook's code cells tagged ``setup`` or ``callback``, and those ``also`` accepts."""
    return [c for c in nb.cells if c.cell_type == "code" and (
        "setup" in c.metadata.get("tags", []) or "callback" in c.metadata.get("tags", [])
        or also(c))]


def run_widget_cells(path, ns: dict, also=lambda cell: False):
    """Run the notebook's ``setup`` and ``callback`` cells, and the code cells ``also`` accepts,
    in order in the namespace ``ns``; yield each cell after it ran, with the names it defined."""
    for cell in widget_cells(nbformat.read(path, as_version=4), also):
        before = set(ns)
        exec(compile(cell.source, f"{path.name}", "exec"), ns)
        yield cell, ns.keys() - before


def displays_widget(cell) -> bool:
    """A cell that displays an ``nl.viz.interactive`` widget (``shown_widgets`` runs it)."""
    return "nl.viz.interactive(" in cell.source


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


def shown_widgets(path: pathlib.Path) -> list[tuple[str, object]]:
    """(callback name, widget) for each ``nl.viz.interactive`` widget the notebook displays: its
    setup and callback cells run, then the cells that display widgets, with ``display`` caught."""
    shown: list = []
    ns: dict = {"__name__": "__notebook__", "display": shown.append}
    names = []
    with contextlib.redirect_stdout(io.StringIO()):
        for cell, _ in run_widget_cells(path, ns, also=displays_widget):
            names += re.findall(r"nl\.viz\.interactive\(\s*(\w+)", cell.source)
            ns["display"] = shown.append                   # a setup cell may import display
    return list(zip(names, shown, strict=True))


def widget_code(path: pathlib.Path) -> list[tuple[list[str], str]]:
    """(its ``setup`` / ``callback`` tags, source) of each cell the widget tests run in the notebook
    (``shown_widgets`` runs them all, ``callbacks`` the tagged ones), in order."""
    return [(sorted({"setup", "callback"} & set(c.metadata.get("tags", []))), c.source)
            for c in widget_cells(nbformat.read(path, as_version=4), also=displays_widget)]


def solution_of(path: pathlib.Path) -> pathlib.Path | None:
    """The solution notebook a practice notebook (notebooks/exercises/NN_*.ipynb) is generated from
    by tools/generate_exercises.py; None for any other notebook."""
    if path.parent == ROOT / "notebooks" / "exercises":
        return path.parent / "solutions" / path.name
    return None


def widget_test_groups(paths, code=widget_code) -> list[tuple[pathlib.Path, list[pathlib.Path]]]:
    """(notebook whose widgets are run, the practice notebooks checked with it): a practice notebook
    goes with its solution notebook when ``code`` (its widget cells) is identical for both, else it
    is a group of its own. Every one of ``paths`` is in exactly one group."""
    paths = list(paths)
    twins: dict = {}
    for path in paths:
        solution = solution_of(path)
        if solution in paths and code(path) == code(solution):
            twins.setdefault(solution, []).append(path)
    merged = {p for group in twins.values() for p in group}
    return [(path, twins.get(path, [])) for path in paths if path not in merged]


def one_step(control, forward: bool):
    """The value one key press gives ``control``: the other state (checkbox, toggle), the next
    option (dropdown, toggle buttons, selection slider), or one step up or down (slider; down at
    the top, up at the bottom; a log slider steps its exponent)."""
    if isinstance(control.value, bool):
        return not control.value
    if hasattr(control, "options"):
        values = [o[1] if isinstance(o, tuple) else o for o in control.options]
        return values[(values.index(control.value) + 1) % len(values)]
    log = isinstance(control, widgets.FloatLogSlider)
    at = math.log(control.value, control.base) if log else control.value
    up = forward and at + control.step <= control.max or at - control.step < control.min
    at += control.step if up else -control.step
    return control.base ** at if log else at


def drawn_in_full(fig) -> np.ndarray:
    """The canvas of ``fig`` drawn by matplotlib alone (no artist left out as animated), as RGBA
    pixels. A live figure's own background is a copy, so its next move is drawn as before."""
    animated = [a for a in (*fig.get_children(), *(c for ax in fig.axes for c in ax.get_children()))
                if a.get_animated()]
    for artist in animated:
        artist.set_animated(False)
    try:
        fig.canvas.draw()
        return np.asarray(fig.canvas.buffer_rgba()).copy()
    finally:
        for artist in animated:
            artist.set_animated(True)


def differing_pixels(part: np.ndarray, full: np.ndarray) -> int:
    """How many pixels differ between two canvases (all of them if their sizes differ)."""
    if part.shape != full.shape:
        return max(part.size, full.size) // 4
    return int((part != full).any(-1).sum())


def saved_widget_images(path: pathlib.Path) -> list[str]:
    """The PNGs (base64) the saved notebook's Output widgets hold: each widget's picture as the
    notebook was last executed."""
    nb = nbformat.read(path, as_version=4)
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return [out["data"]["image/png"] for model in state.get("state", {}).values()
            if model.get("model_name") == "OutputModel"
            for out in model["state"].get("outputs", []) if "image/png" in out.get("data", {})]


def call_and_draw(fn):
    """Call a callback with its defaults and render every figure it left open; return its result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # Agg's "non-interactive, cannot show"
        out = fn()
    for num in plt.get_fignums():
        plt.figure(num).canvas.draw()
    return out


def _name(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT / "notebooks"))


WIDGET_GROUPS = [pytest.param(path, twins, id=" + ".join(_name(p) for p in (path, *twins)))
                 for path, twins in widget_test_groups(widget_notebooks())]


def test_a_practice_notebook_is_left_out_only_when_its_widget_code_is_its_solutions():
    """The dedupe above cannot hide a difference: different widget cells (source or tags) keep a
    practice notebook on its own, and every widget notebook is in exactly one group."""
    practice = ROOT / "notebooks" / "exercises" / "99_x.ipynb"
    solution = ROOT / "notebooks" / "exercises" / "solutions" / "99_x.ipynb"
    lesson = ROOT / "notebooks" / "99_x.ipynb"
    cells = [(["setup"], "import numpy as np"), (["callback"], "def f(a=1):\n    return a")]
    for other in ([cells[0], (["callback"], "def f(a=2):\n    return a")],    # another source
                  [cells[0], (["setup"], cells[1][1])],                        # another tag
                  cells[:1],                                                  # a cell fewer
                  [*cells, ([], "display(nl.viz.interactive(f, a=(0, 2)))")]):  # a cell more
        code = {practice: other, solution: cells, lesson: cells}
        assert widget_test_groups([practice, solution, lesson], code.get) == [
            (practice, []), (solution, []), (lesson, [])], \
            f"a practice notebook whose widget cells differ ({other}) was left out"
    code = {practice: list(cells), solution: list(cells), lesson: list(cells)}
    assert widget_test_groups([practice, solution, lesson], code.get) == [
        (solution, [practice]), (lesson, [])]
    assert widget_test_groups([practice, lesson], code.get) == [(practice, []), (lesson, [])], \
        "a practice notebook whose solution notebook is not among the widget notebooks was left out"
    grouped = [p for param in WIDGET_GROUPS for p in (param.values[0], *param.values[1])]
    assert sorted(grouped) == list(widget_notebooks()), "a widget notebook is in no group, or two"


def _built_by_viz_interactive(path):
    nb = nbformat.read(path, as_version=4)
    other = [line.strip() for c in nb.cells if c.cell_type == "code"
             for line in c.source.splitlines() if "widgets.interact" in line]
    assert not other, (
        f"{path.name}: build widgets with nl.viz.interactive (one figure updated in place), not "
        f"ipywidgets' interact/interactive: {other}")


def callback_names(path: pathlib.Path) -> set[str]:
    """The functions the notebook's ``callback`` cells define (read from the source, not run)."""
    nb = nbformat.read(path, as_version=4)
    return {node.name for c in _tagged(nb, "callback") for node in ast.parse(c.source).body
            if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("path, twins", WIDGET_GROUPS)
def test_widgets_run_alone_and_each_move_equals_the_figure_drawn_in_full(path, twins):
    """The notebook's setup and callback cells run on their own, and every function a callback
    cell defines is shown by an ``nl.viz.interactive`` widget (which checks that it returns a live
    figure), leaving no other figure open; its picture is a PNG of the whole plot. Each control
    is then moved one step forward then back (the first control four times): after each move, the
    canvas the widget cropped its picture from equals the figure drawn in full, pixel for pixel;
    the picture is a PNG of it, and the update opened no figure. The first picture is the one
    saved in the notebook, and in each of ``twins`` (practice notebooks with the same widget code)."""
    for notebook in (path, *twins):
        _built_by_viz_interactive(notebook)
    plt.close("all")
    found = shown_widgets(path)
    assert found, f"{path.name}: no nl.viz.interactive widget is displayed"
    unshown = callback_names(path) - {name for name, _ in found}
    assert not unshown, (f"{path.name}: the callback cells define {sorted(unshown)}, which no "
                         "widget shows: put helpers in a setup cell or inside the plotting function")
    assert not plt.get_fignums(), (f"{path.name}: its callbacks left {len(plt.get_fignums())} "
                                   "figure(s) open besides the ones their widgets show")
    saved = {}
    for notebook in (path, *twins):
        saved[notebook] = saved_widget_images(notebook)
        assert len(saved[notebook]) == len(found), (
            f"{_name(notebook)}: {len(found)} widgets drawn, {len(saved[notebook])} pictures "
            "saved: re-execute it (make execute NB=...)")
    for name, box in found:
        fig, controls = box.figure, [c for c in box.children if isinstance(c, widgets.ValueWidget)]
        # The first picture is the one saved when the notebook was executed (a stale one fails).
        first = next(o["data"]["image/png"] for o in box.children[-1].outputs
                     if "image/png" in o.get("data", {}))
        image = Image.open(io.BytesIO(base64.b64decode(first)))
        w, h = fig.canvas.get_width_height()
        assert image.width > w / 2 and image.height > h / 2, \
            f"{path.name}:{name}: a {image.width}x{image.height} PNG of a {w}x{h} canvas"
        for notebook, pictures in saved.items():
            checks = [compare(s, first) for s in pictures]
            assert any(ok for ok, _, _ in checks), (
                f"{_name(notebook)}:{name}: its picture is not the one saved in the notebook "
                f"({'; '.join(m for _, m, _ in checks)}): re-execute it (make execute NB=...)")
        moves = [(controls[0], i % 2 == 0) for i in range(4)]
        moves += [(c, forward) for c in controls[1:] for forward in (True, False)]
        for control, forward in moves:
            with contextlib.redirect_stdout(io.StringIO()):
                control.value = one_step(control, forward)
            outputs = box.children[-1].outputs
            assert not [o for o in outputs if o["output_type"] == "error"], \
                f"{path.name}:{name} raised on {control.description} = {control.value!r}: {outputs}"
            part = np.asarray(fig.canvas.buffer_rgba()).copy()
            differ = differing_pixels(part, drawn_in_full(fig))
            assert differ == 0, (f"{path.name}:{name}: after {control.description} = "
                                 f"{control.value!r}, {differ} px differ from a full drawing: "
                                 "does its update return every artist drawn over what it moves?")
        assert not plt.get_fignums(), f"{path.name}:{name}: its update opened another figure"
        box.close()
