"""normlib.viz and Chinese text in plots: the CJK font fallback list, and one warning (not one per
character) when no CJK font is installed."""

import warnings

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from normlib import viz  # noqa: E402

CHINESE = "层归一化与均方根归一化"


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    monkeypatch.setattr(viz, "_warned_no_cjk", False)
    with matplotlib.rc_context():
        yield
    plt.close("all")


def _draw(*labels):
    """Draw a figure with these labels; returns the warnings raised while drawing."""
    fig, ax = plt.subplots()
    ax.set_title(labels[0])
    for i, label in enumerate(labels[1:]):
        ax.text(0.1, 0.1 + 0.1 * i, label)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    return [str(w.message) for w in caught]


def test_the_fallback_list_puts_installed_cjk_fonts_after_dejavu():
    viz.reading_mode()
    assert matplotlib.rcParams["font.family"] == ["DejaVu Sans", *viz.cjk_fonts()]
    assert set(viz.cjk_fonts()) <= set(viz.CJK_FONTS)


def test_chinese_draws_without_warnings_when_a_cjk_font_is_installed():
    if not viz.cjk_fonts():
        pytest.skip("no CJK font installed (.ci/run installs fonts-noto-cjk)")
    viz.reading_mode()
    assert _draw(CHINESE, "warmup 学习率预热") == []


def test_without_a_cjk_font_one_warning_says_how_to_install_one(monkeypatch):
    monkeypatch.setattr(viz, "CJK_FONTS", ())              # as on a machine with none of them
    viz.lecture_mode()
    assert matplotlib.rcParams["font.family"] == ["DejaVu Sans"]
    messages = _draw(CHINESE, "旋转位置编码", "LayerNorm")      # 15 distinct missing characters
    assert len(messages) == 1, messages
    assert "no CJK font found" in messages[0] and "fonts-noto-cjk" in messages[0]
    assert _draw("门控线性单元") == []                             # once per session, not per figure


def test_other_missing_glyphs_keep_matplotlibs_own_warning():
    viz.reading_mode()
    messages = _draw("\U0001d4ab\U0001f600")                 # an emoji: no font in the list has it
    assert any("missing from font" in m for m in messages), messages
    assert not any("no CJK font" in m for m in messages)
