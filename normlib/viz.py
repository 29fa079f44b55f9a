"""One palette and one plot style for the whole collection, and a lecture (projector) mode."""

from __future__ import annotations

import warnings

import matplotlib as mpl
from matplotlib import _text_helpers, font_manager

__all__ = ["CJK_FONTS", "COLORS", "cjk_fonts", "color", "lecture_mode", "reading_mode"]

# One colour per method, the same in every lesson (colour-blind-safe Okabe-Ito hues first).
COLORS = {
    "batchnorm": "#E69F00", "layernorm": "#0072B2", "rmsnorm": "#009E73",
    "instancenorm": "#CC79A7", "groupnorm": "#D55E00",
    "post": "#D55E00", "pre": "#0072B2", "deepnorm": "#009E73", "sandwich": "#CC79A7",
    "plain": "#999999", "residual": "#0072B2",
    "relu": "#E69F00", "leaky_relu": "#F0C05A", "gelu": "#56B4E9", "gelu_tanh": "#0072B2",
    "swish": "#009E73", "silu": "#009E73", "sigmoid": "#CC79A7", "tanh": "#D55E00",
    "glu": "#CC79A7", "bilinear": "#999999", "reglu": "#E69F00", "geglu": "#56B4E9",
    "swiglu": "#009E73",
    "interleaved": "#0072B2", "half": "#D55E00",
    "torch": "#000000", "normlib": "#0072B2", "scratch": "#E69F00", "copy": "#999999",
    "scaled": "#0072B2", "unscaled": "#D55E00", "mha": "#D55E00", "gqa": "#0072B2", "mqa": "#009E73",
}


def color(method: str) -> str:
    """The collection's colour for ``method`` (a key of COLORS, case-insensitive)."""
    key = method.lower().replace("-", "").replace(" ", "_")
    if key not in COLORS:
        raise ValueError(f"color: unknown method {method!r}; expected one of {', '.join(COLORS)}")
    return COLORS[key]


_BASE = {"axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
         "axes.spines.right": False, "savefig.dpi": "figure"}
_READING = {**_BASE, "font.size": 10, "axes.titlesize": 11, "lines.linewidth": 1.6,
            "figure.figsize": (7.0, 3.6), "figure.dpi": 80}
# For a projector: larger text, thicker lines, ticks and markers, and a figure that is wider in
# inches and drawn at more pixels per inch (1000 x 520 px instead of 560 x 288).
_LECTURE = {**_BASE, "font.size": 16, "axes.titlesize": 17, "axes.labelsize": 16,
            "xtick.labelsize": 14, "ytick.labelsize": 14, "legend.fontsize": 14,
            "lines.linewidth": 3.0, "lines.markersize": 9, "lines.markeredgewidth": 1.5,
            "axes.linewidth": 1.5, "grid.linewidth": 1.2, "patch.linewidth": 1.5,
            "xtick.major.width": 1.5, "ytick.major.width": 1.5,
            "xtick.major.size": 6.0, "ytick.major.size": 6.0,
            "figure.figsize": (10.0, 5.2), "figure.dpi": 100}
# Every key either style sets: switching styles first resets these to matplotlib's defaults, so
# lecture_mode(False) leaves no large label or thick tick behind.
_KEYS = sorted(set(_READING) | set(_LECTURE))


# Chinese text in plots (a learner's own labels, say). matplotlib falls back glyph by glyph along
# font.family: DejaVu Sans, its default, draws Latin letters, digits and symbols as before, and the
# first installed font of this list draws the Chinese characters (Linux, Adobe's name for the same
# font, macOS, Windows, older Linux). Mathtext ($...$) does not fall back: put Chinese outside it.
CJK_FONTS = ("Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB",
             "Microsoft YaHei", "SimHei", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "Noto Sans CJK JP", "Arial Unicode MS")
NO_CJK_FONT = (
    "normlib.viz: no CJK font found (looked for {fonts}), so Chinese text in plots shows as empty "
    "boxes. Install one (README, 'Chinese fonts'): Debian/Ubuntu `sudo apt-get install "
    "fonts-noto-cjk`, Fedora `sudo dnf install google-noto-sans-cjk-fonts`; macOS and Windows ship "
    "PingFang SC and Microsoft YaHei. Then delete matplotlib's font cache (fontlist-*.json in "
    "{cache}) and restart the kernel.")
_CJK_RANGES = ((0x2E80, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0xFE30, 0xFE4F),
               (0xFF00, 0xFFEF), (0x20000, 0x3FFFF))


def cjk_fonts() -> list[str]:
    """The fonts of CJK_FONTS that matplotlib finds on this machine, in CJK_FONTS' order."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    return [name for name in CJK_FONTS if name in installed]


def _is_cjk(codepoint: int) -> bool:
    return any(low <= codepoint <= high for low, high in _CJK_RANGES)


_warned_no_cjk = False


def _warn_on_missing_glyph(codepoint, fontnames, _matplotlib=_text_helpers.warn_on_missing_glyph):
    """matplotlib warns once per missing glyph; for Chinese (CJK) characters, warn once in all,
    saying how to install a font. Only drawing such a character warns, so a machine without a CJK
    font runs the English lessons with no warning."""
    global _warned_no_cjk
    if not _is_cjk(codepoint):
        _matplotlib(codepoint, fontnames)
    elif not _warned_no_cjk:
        _warned_no_cjk = True
        warnings.warn(NO_CJK_FONT.format(fonts=", ".join(CJK_FONTS), cache=mpl.get_cachedir()),
                      stacklevel=2)


def _apply(style: dict) -> None:
    mpl.rcParams.update({key: mpl.rcParamsDefault[key] for key in _KEYS})
    mpl.rcParams.update(style)
    mpl.rcParams["font.family"] = ["DejaVu Sans", *cjk_fonts()]
    _text_helpers.warn_on_missing_glyph = _warn_on_missing_glyph


def reading_mode() -> None:
    """The default style, for reading on a laptop screen."""
    _apply(_READING)


def lecture_mode(on: bool = True) -> None:
    """Enlarge fonts, lines, markers and figures in every plot drawn after this call, for a
    projector. ``lecture_mode(False)`` returns to the reading style (same as ``reading_mode()``).

    One line in a lesson's setup cell switches a whole lesson: replace ``nl.viz.reading_mode()``
    with ``nl.viz.lecture_mode()``, then Run All."""
    if not isinstance(on, bool):
        raise TypeError(f"lecture_mode: on must be True or False, got {on!r}")
    _apply(_LECTURE if on else _READING)
