"""normlib.viz: one colour per method, and a lecture mode that enlarges every plot and undoes itself."""

import io

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

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


def test_a_live_figure_redrawn_in_part_looks_like_one_drawn_in_full():
    viz.reading_mode()
    x = np.linspace(-3, 3, 101)
    fig, ax = plt.subplots()
    ax.plot(x, x / 2, ":", label="fixed")
    (line,) = ax.plot(x, x, label="moving")
    legend = ax.legend(loc="upper left")
    ax.set(ylim=(-3, 3), xlabel="x")

    def update(a=1.0):
        line.set_ydata(a * np.tanh(x))
        legend.get_texts()[1].set_text(f"a = {a:g}")
        ax.set_title(f"a = {a:g}")
    viz.live(fig, update)
    viz.png(fig)
    for a in (1.5, 2.0, 0.5):                    # the first move draws in full, later ones in part
        viz.update(fig, a=a)
        part = viz.png(fig)
    viz._BLITS.pop(fig)
    assert (_pixels(part) == _pixels(viz.png(fig))).all()


@pytest.mark.parametrize("mode", [viz.reading_mode, viz.lecture_mode])
def test_axes_that_rescale_are_redrawn_alone_and_look_as_in_a_full_drawing(mode):
    """Left: a histogram-like line whose limits follow the data. Right: fixed limits, a moving
    line and title. A move redraws the left axes (its ticks changed) but not the right one."""
    mode()
    x = np.linspace(-1, 1, 50)
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3))
    (grows,) = left.plot(x, x)
    (moves,) = right.plot(x, x)
    right.set(xlim=(-1, 1), ylim=(-10, 10), xlabel="fixed")
    fig.subplots_adjust(wspace=0.4)        # apart: the left axes' tick labels stay off the right's

    def update(a=1.0):
        grows.set_data(a * x, a * x ** 2)
        left.relim()
        left.autoscale_view()
        moves.set_ydata(a * x)
        right.set_title(f"a = {a:g}")
    viz.live(fig, update)
    viz.png(fig)
    drawn = []
    right_draw = right.draw
    right.draw = lambda renderer: (drawn.append(renderer), right_draw(renderer))[1]
    for a in (2.0, 5.0, 0.5, 9.0):        # the first move draws in full, later ones in part
        viz.update(fig, a=a)
        part = viz.png(fig)
    assert len(drawn) == 1                 # the right axes: only in the first move's full drawing
    del right.draw
    viz._BLITS.pop(fig)
    assert (_pixels(part) == _pixels(viz.png(fig))).all()


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
        return viz.live(fig, lambda norm=norm, eps=eps: ax.set_title(f"{norm} {eps}"))
    box = viz.interactive(callback, norm=["layernorm", "all", "rmsnorm"], eps=(0.0, 1.0, 0.1))
    assert [(c.description, c.value) for c in box.children[:2]] == [("norm", "all"), ("eps", 0.3)]
    plt.close("all")
