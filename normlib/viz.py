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
         "axes.spines.right": False, "figure.dpi": 80, "savefig.dpi": 80}
_READING = {**_BASE, "font.size": 10, "axes.titlesize": 11, "lines.linewidth": 1.6,
            "figure.figsize": (7.0, 3.6)}
_LECTURE = {**_BASE, "font.size": 16, "axes.titlesize": 17, "axes.labelsize": 16,
            "xtick.labelsize": 14, "ytick.labelsize": 14, "legend.fontsize": 14,
            "lines.linewidth": 3.0, "lines.markersize": 9, "figure.figsize": (10.0, 5.2)}


def reading_mode() -> None:
    """The default style, for reading on a laptop screen."""
    mpl.rcParams.update(_READING)


def lecture_mode(on: bool = True) -> None:
    """Enlarge fonts, lines and figures in every plot drawn after this call, for a projector.
    ``lecture_mode(False)`` returns to the reading style."""
    mpl.rcParams.update(_LECTURE if on else _READING)
