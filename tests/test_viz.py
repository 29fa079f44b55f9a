"""normlib.viz: one colour per method, and a lecture mode that enlarges every plot and undoes itself."""

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from normlib import viz  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_rcparams():
    with matplotlib.rc_context():
        yield
    plt.close("all")


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
