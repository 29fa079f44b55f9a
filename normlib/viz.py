"""One palette and one plot style for the whole collection, and a lecture (projector) mode."""

from __future__ import annotations

import matplotlib as mpl

__all__ = ["COLORS", "color", "lecture_mode", "reading_mode"]

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


def _apply(style: dict) -> None:
    mpl.rcParams.update({key: mpl.rcParamsDefault[key] for key in _KEYS})
    mpl.rcParams.update(style)


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
