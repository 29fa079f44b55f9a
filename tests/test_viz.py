"""normlib.viz: one colour per method, and a lecture mode that enlarges every plot and undoes itself."""

import gc
import io
import weakref

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from test_widgets import differing_pixels, drawn_in_full  # noqa: E402

from normlib import viz  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_matplotlib")


def _drawn(mode):
    """Pixel size of a figure, height of its title and width of its line in points, under ``mode``."""
    mode()
    fig, ax = plt.subplots()
    (line,) = ax.plot([0, 1], [0, 1])
    title = ax.set_title("a title")
    fig.canvas.draw()
    height = title.get_window_extent(fig.canvas.get_renderer()).height
    return fig.canvas.get_width_height(), height, line.get_linewidth()


def test_lecture_mode_enlarges_figures_text_and_lines():
    (w_read, h_read), title_read, lw_read = _drawn(viz.reading_mode)
    (w_lect, h_lect), title_lect, lw_lect = _drawn(viz.lecture_mode)
    assert (w_read, h_read) == (560, 288)
    assert (w_lect, h_lect) == (1000, 520)
    assert title_lect > 1.8 * title_read          # 17 pt at 100 dpi vs 11 pt at 80 dpi: 1.93x
    assert lw_lect >= 1.8 * lw_read


def test_lecture_mode_false_returns_exactly_to_reading_mode():
    viz.reading_mode()
    reading = {k: matplotlib.rcParams[k] for k in viz._KEYS}
    viz.lecture_mode()
    assert matplotlib.rcParams["axes.labelsize"] == 16
    viz.lecture_mode(False)
    assert {k: matplotlib.rcParams[k] for k in viz._KEYS} == reading


def test_lecture_mode_rejects_a_non_bool():
    with pytest.raises(TypeError, match="lecture_mode: on must be True or False, got 'yes'"):
        viz.lecture_mode("yes")


def test_every_colour_is_a_colour_and_lookup_is_forgiving():
    assert all(matplotlib.colors.is_color_like(c) for c in viz.COLORS.values())
    assert viz.color("LayerNorm") == viz.COLORS["layernorm"]
    assert viz.color("leaky relu") == viz.COLORS["leaky_relu"]
    with pytest.raises(ValueError, match="color: unknown method 'postnorm'"):
        viz.color("postnorm")


def test_seed_band_draws_the_centre_line_and_the_range():
    fig, ax = plt.subplots()
    runs = [[1.0, 2.0, 3.0], [3.0, 2.0, 7.0], [2.0, 5.0, 5.0]]           # (seeds, steps)
    line = viz.seed_band(ax, [0, 1, 2], runs, viz.color("pre"), "pre", fmt="o-")
    assert list(line.get_ydata()) == [2.0, 3.0, 5.0] and line.get_label() == "pre"
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == 1.0 and band.max() == 7.0
    median = viz.seed_band(ax, [0, 1, 2], runs, viz.color("post"), center="median")
    assert list(median.get_ydata()) == [2.0, 2.0, 5.0]


def test_seed_band_and_levels_reject_bad_input():
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match=r"runs must be \(seeds, len\(x\)\).*\(2, 3\).*\(4,\)"):
        viz.seed_band(ax, [0, 1, 2, 3], [[1, 2, 3], [4, 5, 6]], "red")
    with pytest.raises(ValueError, match="center must be 'mean' or 'median', got 'max'"):
        viz.seed_band(ax, [0, 1, 2], [[1, 2, 3]], "red", center="max")
    with pytest.raises(ValueError, match="lines must be a non-empty dict"):
        viz.levels(ax, {}, at=1)


def test_levels_draws_one_labelled_line_per_level():
    fig, ax = plt.subplots()
    viz.levels(ax, {"log V": 4.16, "entropy floor": 1.1}, at=80)
    assert [line.get_ydata()[0] for line in ax.lines] == [4.16, 1.1]
    assert [t.get_text().strip() for t in ax.texts] == ["log V", "entropy floor"]


def _pixels(data: bytes):
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(data))).astype(int)


def _moved(fig, values) -> np.ndarray:
    """Make each move (``values``: one dict of controls per move) as a widget does, the figure drawn
    after each; the canvas after the last one, as RGBA pixels."""
    for kw in values:
        viz.update(fig, **kw)
        viz.png(fig)
    return np.asarray(fig.canvas.buffer_rgba()).copy()


def _line_and_legend():
    """A live figure with a fixed line, a moving line and its legend, fixed limits."""
    x = np.linspace(-3, 3, 101)
    fig, ax = plt.subplots()
    ax.plot(x, x / 2, ":", label="fixed")
    (line,) = ax.plot(x, x, label="moving")
    legend = ax.legend(loc="upper left")
    ax.set(ylim=(-3, 3), xlabel="x")
    return fig, ax, x, line, legend


@pytest.mark.parametrize("mode", [viz.reading_mode, viz.lecture_mode])
def test_a_live_figure_redrawn_in_part_looks_like_one_drawn_in_full(mode):
    mode()
    fig, ax, x, line, legend = _line_and_legend()

    def update(a=1.0):
        line.set_ydata(a * np.tanh(x))
        legend.get_texts()[1].set_text(f"a = {a:g}")
        ax.set_title(f"a = {a:g}")
        return [line, legend, ax.title]
    viz.live(fig, update)
    viz.png(fig)
    drawn = []
    fig_draw = fig.draw
    fig.draw = lambda renderer: (drawn.append(renderer), fig_draw(renderer))[1]
    part = _moved(fig, [{"a": a} for a in (1.5, 2.0, 0.5)])
    assert drawn == []                         # no full drawing: the three moves were drawn in part
    del fig.draw
    assert differing_pixels(part, drawn_in_full(fig)) == 0


@pytest.mark.parametrize("change", ["xlabel", "ylabel", "facecolor", "grid"])
def test_a_change_the_update_does_not_return_is_drawn_in_full(change):
    """Review finding 2: an axis label, the axes' colour or its grid changed by the update, which
    returns only its line. Before: 165 to 95,620 px kept their first drawing."""
    viz.reading_mode()
    fig, ax = plt.subplots()
    (line,) = ax.plot([0, 1], [0, 1])
    ax.set_ylim(0, 2)

    def update(d=8):
        line.set_ydata([0, d / 8])
        {"xlabel": lambda: ax.xaxis.label.set_text(f"d = {d}"),
         "ylabel": lambda: ax.set_ylabel(f"loss at d = {d}"),
         "facecolor": lambda: ax.set_facecolor((1.0, 1.0, 1 - d / 64)),
         "grid": lambda: ax.grid(d % 2 == 0)}[change]()
        return [line]
    viz.live(fig, update)
    viz.png(fig)
    part = _moved(fig, [{"d": d} for d in (9, 10, 13)])
    assert differing_pixels(part, drawn_in_full(fig)) == 0


def test_a_line_removed_and_plotted_again_leaves_no_ghost():
    """Review finding 3: before, every removed line was still drawn (4,903 px differed)."""
    viz.reading_mode()
    fig, ax = plt.subplots()
    ax.set(xlim=(0, 1), ylim=(0, 3))
    state = {}

    def update(k=1.0):
        if "line" in state:
            state["line"].remove()
        (state["line"],) = ax.plot([0, 1], [0, k], lw=4)
        return [state["line"]]
    viz.live(fig, update)
    viz.png(fig)
    part = _moved(fig, [{"k": k} for k in (1.5, 2.0, 2.5)])
    assert len(ax.lines) == 1
    assert differing_pixels(part, drawn_in_full(fig)) == 0


def test_a_band_replaced_in_the_update_is_drawn_and_the_old_one_is_gone():
    """Review finding 3: removing and re-adding a fill_between band (seed_band's band) raised
    AttributeError: 'NoneType' object has no attribute 'dpi' on the second move."""
    viz.reading_mode()
    fig, ax = plt.subplots()
    ax.set(xlim=(0, 1), ylim=(0, 3))
    ax.set_axisbelow(True)               # the grid under the band, which is drawn over the rest
    state = {}

    def update(k=1.0):
        if "band" in state:
            state["band"].remove()
        state["band"] = ax.fill_between([0, 1], [0, 0], [k, k], alpha=0.3)
        return [state["band"]]
    viz.live(fig, update)
    viz.png(fig)
    part = _moved(fig, [{"k": k} for k in (1.5, 2.0, 0.5)])
    assert len(ax.collections) == 1
    assert differing_pixels(part, drawn_in_full(fig)) == 0


def test_update_refuses_an_artist_that_is_not_drawn_by_an_axes_or_the_figure():
    viz.reading_mode()
    fig, ax, x, line, legend = _line_and_legend()
    with pytest.raises(ValueError, match="return what draws it"):
        viz.live(fig, lambda: [legend.get_texts()[0]])
    with pytest.raises(TypeError, match=r"must return the artists it moves \(a list\), got 3"):
        viz.live(fig, lambda: 3)
    with pytest.raises(ValueError, match="png: fig is not a live figure"):
        viz.png(plt.figure())


def _with_a_bad_label():
    fig, ax = plt.subplots()
    (line,) = ax.plot([0, 1], [0, 1], lw=6, color="red")

    def update(k=1.0, label="x"):
        line.set_ydata([0, k])
        ax.set_ylim(0, 2 * k)
        ax.set_xlabel(label)
        return [line]
    return viz.live(fig, update), line


def test_a_draw_error_leaves_the_figure_drawable():
    """Review finding 4: a label that fails to draw (mathtext) hid the moving line for good."""
    viz.reading_mode()
    fig, line = _with_a_bad_label()
    viz.png(fig)
    viz.update(fig, k=1.5, label=r"$\notacommand$")
    with pytest.raises(ValueError, match="notacommand"):
        viz.png(fig)
    assert line.get_visible()
    part = _moved(fig, [{"k": 1.2, "label": "fixed"}, {"k": 1.1, "label": "fixed"}])
    assert differing_pixels(part, drawn_in_full(fig)) == 0
    assert ((part[..., 0] == 255) & (part[..., 1] == 0) & (part[..., 2] == 0)).sum() > 100   # red line


def test_a_draw_error_shows_its_traceback_in_the_widget_and_the_next_move_draws():
    """Review finding 4: the traceback of a drawing went to the kernel's log, not the widget."""
    viz.reading_mode()
    box = viz.interactive(lambda k=1.0, label="x": _with_a_bad_label()[0],
                          k=(0.5, 2.0, 0.1), label=["x", r"$\notacommand$", "fixed"])
    k, label, out = box.children
    label.value = r"$\notacommand$"
    errors = [o for o in out.outputs if o["output_type"] == "error"]
    assert [e["ename"] for e in errors] == ["ValueError"]
    assert "notacommand" in "".join(errors[0]["traceback"])
    assert [o["output_type"] for o in out.outputs] == ["display_data", "error"]   # under the last plot
    label.value = "fixed"
    assert [o["output_type"] for o in out.outputs] == ["display_data"]
    assert differing_pixels(np.asarray(box.figure.canvas.buffer_rgba()).copy(),
                            drawn_in_full(box.figure)) == 0
    box.close()


def test_overlapping_axes_are_drawn_in_order():
    """Review finding 9: a twinx axes' line over the first axes' legend; before, the fast path drew
    the legend on top (790 px differed)."""
    viz.reading_mode()
    fig, ax1 = plt.subplots()
    ax2 = ax1.twinx()
    x = np.linspace(0, 1, 50)
    (loss,) = ax1.plot(x, 1 - x, label="loss")
    legend = ax1.legend(loc="center", fontsize=14)
    (lr,) = ax2.plot(x, 0.5 + 0 * x, color="black", lw=8)
    ax1.set_ylim(0, 1)
    ax2.set(ylim=(0, 1))
    ax2.grid(False)                      # drawn over ax1's moving line and legend otherwise

    def update(k=1.0):
        loss.set_ydata(1 - k * x)
        legend.get_texts()[0].set_text(f"loss, k = {k:g}")
        lr.set_ydata(0.5 + 0 * x)
        return [lr, legend, loss]                       # any order: drawn in the figure's order
    viz.live(fig, update)
    viz.png(fig)
    part = _moved(fig, [{"k": k} for k in (0.9, 0.8, 0.7)])
    assert differing_pixels(part, drawn_in_full(fig)) == 0


def _image_over_a_line(alpha=None):
    """Code review 2, finding 9's figure: an image over a thick line, no tick marks over it (as
    lesson 10's attention maps)."""
    fig, ax = plt.subplots()
    ax.plot([0, 7], [0, 7], color="k", lw=3, zorder=-1)
    image = ax.imshow(np.zeros((8, 8)), vmin=0, vmax=1, alpha=alpha, cmap="viridis")
    ax.grid(False)
    ax.tick_params(length=0)
    return fig, image


@pytest.mark.parametrize("alpha", [None, 0.5])
def test_a_moving_image_is_drawn_once(alpha):
    """Code review 2, finding 9: matplotlib draws an animated image in a full drawing too, so the
    background held it and the move composited it again: with alpha 0.5, 49,062 px of the first
    picture differed from matplotlib's."""
    viz.reading_mode()
    fig, image = _image_over_a_line(alpha)

    def update(k=0):
        image.set_data((np.arange(64).reshape(8, 8) + 10 * k) % 7 / 7)
        return [image]
    viz.live(fig, update)
    viz.png(fig)
    assert differing_pixels(np.asarray(fig.canvas.buffer_rgba()).copy(), drawn_in_full(fig)) == 0
    part = _moved(fig, [{"k": k} for k in (1, 2, 3)])
    assert differing_pixels(part, drawn_in_full(fig)) == 0


def test_a_masked_image_leaves_no_ghost_in_its_transparent_cells():
    """Code review 2, finding 9: a causal mask drawn as NaN cells (transparent) grown over three
    moves: the old cells showed through the new transparent ones (16,018 px differed)."""
    viz.reading_mode()
    fig, image = _image_over_a_line()

    def update(k=7):
        scores = np.full((8, 8), 0.8)
        scores[np.triu_indices(8, 1 + k)] = np.nan                 # masked: transparent
        image.set_data(scores)
        return [image]
    viz.live(fig, update)
    viz.png(fig)
    part = _moved(fig, [{"k": k} for k in (5, 3, 1)])
    assert differing_pixels(part, drawn_in_full(fig)) == 0


def _edges_are_blank(data: bytes) -> bool:
    image = _pixels(data)[..., :3]
    return all((edge == 255).all() for edge in (image[0], image[-1], image[:, 0], image[:, -1]))


def test_a_title_that_grows_after_the_first_drawing_is_not_cut():
    """Review finding 10: the crop was measured at the first drawing; a title that gained lines
    was cut at the top."""
    viz.reading_mode()
    fig, ax = plt.subplots()
    (line,) = ax.plot([0, 1], [0, 1])

    def update(lines=1):
        line.set_ydata([0, lines / 3])
        ax.set_title("\n".join(["a title line"] * lines))
        return [line, ax.title]                         # the title moves: drawn in part
    viz.live(fig, update)
    first = viz.png(fig)
    viz.update(fig, lines=3)
    grown = viz.png(fig)
    assert _pixels(grown).shape[0] > _pixels(first).shape[0] + 20
    assert _edges_are_blank(first) and _edges_are_blank(grown)


def test_tick_labels_that_grow_past_the_figure_are_not_cut():
    """Review finding 10: ylim (0, 1) to (0, 123456789), plain numbers: the tick labels stuck out
    of the figure on the left, beyond the crop measured at the first drawing."""
    viz.reading_mode()
    fig, ax = plt.subplots()
    ax.ticklabel_format(style="plain", useOffset=False)
    (line,) = ax.plot([0, 1], [0, 1])

    def update(top=1.0):
        line.set_ydata([0, top])
        ax.set_ylim(0, top)
        return [line]
    viz.live(fig, update)
    first = viz.png(fig)
    viz.update(fig, top=123456789.0)
    assert _edges_are_blank(first) and _edges_are_blank(viz.png(fig))


def test_closed_live_figures_are_freed():
    """Review finding 5: 40 closed live figures stayed alive (+188 MB): the module's weak
    dictionaries held them through their values. Their state now lives on the figure. Five are
    enough to tell: with the old engine every one stayed alive."""
    viz.lecture_mode()
    alive = []
    for _ in range(5):
        fig, ax, x, line, legend = _line_and_legend()
        viz.live(fig, lambda a=1.0, line=line, legend=legend: [line, legend])
        _moved(fig, [{"a": a} for a in (1.5, 2.0, 0.5)])
        plt.close(fig)
        alive.append(weakref.ref(fig))
        del fig, ax, line, legend
    gc.collect()
    assert sum(ref() is not None for ref in alive) == 0


def test_a_closed_widget_frees_its_figure_and_a_closed_figure_still_moves():
    """interactive closes its figure (the widget shows it, not the inline backend): moves still
    draw it; closing the widget closes its controls, whose callbacks held the figure."""
    viz.reading_mode()

    def callback(a=1.0):
        fig, ax, x, line, legend = _line_and_legend()

        def update(a=a):
            line.set_ydata(a * np.tanh(x))
            return [line, legend]
        return viz.live(fig, update)
    box = viz.interactive(callback, a=(0.5, 2.0, 0.5))
    assert plt.get_fignums() == []
    box.children[0].value = 2.0
    part = np.asarray(box.figure.canvas.buffer_rgba()).copy()
    assert differing_pixels(part, drawn_in_full(box.figure)) == 0
    figure = weakref.ref(box.figure)
    box.close()
    del box
    gc.collect()
    assert figure() is None


def _tanh_widget(a=1.0):
    """A widget callback: a live figure whose line follows a (the review's viz_leak.py)."""
    fig, ax, x, line, legend = _line_and_legend()

    def update(a=a):
        line.set_ydata(a * np.tanh(x))
        return [line, legend]
    return viz.live(fig, update)


def _run_cell(monkeypatch, cell: str, run: int, show):
    """Run ``show`` as the notebook cell ``cell`` would in its run number ``run`` (see
    test_a_cells_id_comes_from_the_kernels_parent_message)."""
    monkeypatch.setattr(viz, "_this_run", lambda: (cell, f"{cell}-run-{run}"))
    return show()


def test_a_cells_id_comes_from_the_kernels_parent_message(monkeypatch):
    """ipykernel's shell keeps the execute_request it runs as ``parent_header``: JupyterLab puts
    the cell's id in its metadata (cellId), and each run has its own header.msg_id."""
    import types

    import IPython
    parent = {"header": {"msg_id": "m-1"}, "metadata": {"cellId": "c-1"}, "content": {}}
    for shell, expected in ((types.SimpleNamespace(parent_header=parent), ("c-1", "m-1")),
                            (types.SimpleNamespace(parent_header={**parent, "metadata": {}}), None),
                            (types.SimpleNamespace(parent_header={}), None), (None, None)):
        monkeypatch.setattr(IPython, "get_ipython", lambda shell=shell: shell)
        assert viz._this_run() == expected


def test_a_widget_cell_run_again_frees_the_figures_of_its_last_run(monkeypatch):
    """Code review 2, finding 10: ipywidgets keeps every widget not closed, and its controls hold
    the figure: 30 runs of a widget cell kept 30 figures alive (+147 MB in lecture mode)."""
    viz.reading_mode()
    figures, boxes = [], []
    for run in range(30):
        box = _run_cell(monkeypatch, "cell-a", run,
                        lambda: viz.interactive(_tanh_widget, a=(0.5, 2.0, 0.5)))
        box.children[0].value = 1.5                                # one move
        figures.append(weakref.ref(box.figure))
        boxes.append(weakref.ref(box))
    part = np.asarray(box.figure.canvas.buffer_rgba()).copy()     # the last one moves as before
    assert differing_pixels(part, drawn_in_full(box.figure)) == 0
    del box
    gc.collect()
    assert [f() is not None for f in figures] == [False] * 29 + [True]   # only the one shown
    assert boxes[-1]().comm is not None                               # and it is still open
    plt.close("all")


def test_only_a_cells_own_last_run_is_closed(monkeypatch):
    """Two widgets of one run, and another cell's widget, stay open; outside a kernel (no cell id)
    nothing is closed."""
    viz.reading_mode()
    both = _run_cell(monkeypatch, "cell-b", 0, lambda: [viz.interactive(_tanh_widget, a=(0.5, 2.0))
                                                        for _ in range(2)])
    other = _run_cell(monkeypatch, "cell-c", 0, lambda: viz.interactive(_tanh_widget, a=(0.5, 2.0)))
    assert all(w.comm is not None for w in (*both, other))
    again = _run_cell(monkeypatch, "cell-b", 1, lambda: viz.interactive(_tanh_widget, a=(0.5, 2.0)))
    assert [w.comm is None for w in (*both, other, again)] == [True, True, False, False]
    monkeypatch.undo()                                   # no kernel: get_ipython() is None
    assert viz._this_run() is None
    plain = [viz.interactive(_tanh_widget, a=(0.5, 2.0)) for _ in range(2)]
    assert all(w.comm is not None for w in (other, again, *plain))
    for widget in (other, again, *plain):
        widget.close()


def test_interactive_refuses_a_figure_that_is_not_live():
    def plain():
        return plt.figure()
    with pytest.raises(TypeError, match="plain must return a live figure"):
        viz.interactive(plain)


def test_interactive_controls_start_at_the_callbacks_defaults():
    """An abbreviated control (a list of options, a (min, max, step) tuple) starts at the callback's
    default, as ipywidgets.interact does; not at no selection."""
    def callback(norm="all", eps=0.3):
        fig, ax = plt.subplots()
        return viz.live(fig, lambda norm=norm, eps=eps: [ax.set_title(f"{norm} {eps}")])
    box = viz.interactive(callback, norm=["layernorm", "all", "rmsnorm"], eps=(0.0, 1.0, 0.1))
    assert [(c.description, c.value) for c in box.children[:2]] == [("norm", "all"), ("eps", 0.3)]
    plt.close("all")


def test_a_figure_under_a_layout_engine_keeps_its_axes_in_the_layout():
    """Review finding 16: growing a figure to fit its labels moved the axes with set_position,
    which takes them out of a constrained layout; the engine keeps the labels inside instead."""
    viz.reading_mode()
    fig, ax = plt.subplots(layout="constrained")
    (line,) = ax.plot([0, 1], [0, 1])

    def update(top=1.0):
        line.set_ydata([0, top])
        ax.set_ylim(0, top)
        ax.set_ylabel("a long label\non three\nlines" if top > 1 else "y")
        return [line]
    viz.live(fig, update)
    viz.png(fig)
    viz.update(fig, top=123456789.0)
    moved = viz.png(fig)
    assert ax.get_in_layout() and tuple(fig.get_size_inches()) == tuple(plt.rcParams["figure.figsize"])
    assert _edges_are_blank(moved)


@pytest.mark.parametrize("mode", [viz.reading_mode, viz.lecture_mode])
def test_the_crop_found_in_the_pixels_is_the_measured_one(mode):
    """A full drawing finds its content box in the drawn pixels instead of measuring every text
    again (get_tightbbox): the two agree to within 4 px (a text's box includes the blank above
    and below its glyphs: 3.6 px for lecture mode's x label; a line's antialiased edge lies
    outside the axes' box by a pixel or two); content
    touching the canvas's edge, or a transparent background, leaves the measuring to
    get_tightbbox."""
    mode()
    fig, ax, x, line, legend = _line_and_legend()
    ax.set_title("a title with descenders: gyp")
    fig.canvas.draw()
    found, measured = viz._drawn_box(fig), fig.get_tightbbox(fig.canvas.get_renderer())
    assert found is not None
    px = np.abs(np.array(found.extents) - np.array(measured.extents)) * fig.dpi
    assert px.max() <= 4, (found.extents, measured.extents)
    fig.text(-0.02, 0.5, "past the left edge")
    fig.canvas.draw()
    assert viz._drawn_box(fig) is None
    fig.patch.set_alpha(0.5)
    fig.canvas.draw()
    assert viz._drawn_box(fig) is None
    plt.close(fig)
