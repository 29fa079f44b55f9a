"""One palette and one plot style for the whole collection, a lecture (projector) mode, and the
one way the lessons build a widget: a live figure whose artists a control updates in place."""

from __future__ import annotations

import base64
import contextlib
import inspect
import io
import warnings
import weakref
from collections.abc import Callable

import matplotlib as mpl
import numpy as np
from matplotlib import _text_helpers, font_manager

__all__ = ["CJK_FONTS", "COLORS", "cjk_fonts", "color", "interactive", "lecture_mode", "levels", "live",
           "png", "reading_mode", "seed_band", "update"]

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
    "rope": "#999999", "pi": "#E69F00", "ntk": "#56B4E9", "yarn": "#009E73", "llama3": "#D55E00",
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


# ------------------------------------------------------------------------------ shared plots
# Two pieces of plotting code that several lessons repeat: training curves over seeds, and the
# reference losses they are read against.

def seed_band(ax, x, runs, color: str, label: str | None = None, *, fmt: str = "-",
              center: str = "mean", alpha: float = 0.15, **line_kw):
    """Plot runs over seeds on ``ax``: a line at their ``center`` ("mean" or "median") and a band
    over their range (min to max). ``runs`` is (seeds, len(x)); ``fmt`` is matplotlib's format
    string ("-", "--", "o-"...). Returns the line."""
    runs = np.asarray(runs, dtype=float)
    x = np.asarray(x, dtype=float)
    if runs.ndim != 2 or x.ndim != 1 or runs.shape[1] != x.shape[0]:
        raise ValueError(f"seed_band: runs must be (seeds, len(x)) with x one-dimensional, got runs "
                         f"of shape {runs.shape} and x of shape {x.shape}")
    if center not in ("mean", "median"):
        raise ValueError(f"seed_band: center must be 'mean' or 'median', got {center!r}")
    mid = runs.mean(0) if center == "mean" else np.median(runs, 0)
    ax.fill_between(x, runs.min(0), runs.max(0), color=color, alpha=alpha, lw=0)
    (line,) = ax.plot(x, mid, fmt, color=color, label=label, **line_kw)
    return line


def levels(ax, lines: dict, at: float, **text_kw) -> None:
    """Horizontal reference lines on ``ax``, each labelled at x = ``at``: ``lines`` maps a label to
    a level, e.g. ``{"log V": lang.uniform_loss, "entropy floor": lang.entropy}``. ``text_kw`` go
    to the labels (default: left-aligned after ``at``, centred on the line, size 8)."""
    if not isinstance(lines, dict) or not lines:
        raise ValueError(f"levels: lines must be a non-empty dict label -> level, got {lines!r}")
    text_kw = {"va": "center", "fontsize": 8, **text_kw}
    for label, y in lines.items():
        ax.axhline(float(y), color=COLORS["copy"], ls=":", lw=1)
        ax.text(at, float(y), f" {label} ", **text_kw)


# ------------------------------------------------------------------------------ widgets
# A control's move must answer like an instrument (JupyterLab's browser test measures the time from
# a key press to the new plot). Building a new figure per move and letting the inline backend ship
# it costs a figure build and two draws (bbox_inches="tight" lays the figure out once more to crop
# it). A live figure is built once; a move calls its update, which changes the artists in place
# (set_data, set_text...); then only the changed artists are drawn over a cached background (when
# limits and ticks stay put), cropped to the box measured at the first drawing, and sent to the
# browser as one message.

_UPDATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # figure -> its update
_CROPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # figure -> (size, dpi, bbox)
_BLITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # figure -> (frame, background, artists, footprints)


def live(fig, update: Callable[..., object]):
    """Make ``fig`` a live figure and return it: ``update(**controls)`` redraws its changing parts
    in place. ``update``'s defaults are the controls' values the figure shows first; ``live`` calls
    it once with them. A widget callback builds the fixed parts of its figure (axes, labels, empty
    artists), defines ``update`` and returns ``live(fig, update)``."""
    from matplotlib.figure import Figure
    if not isinstance(fig, Figure):
        raise TypeError(f"live: fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not callable(update):
        raise TypeError(f"live: update must be a function of the controls' values, got {update!r}")
    _UPDATES[fig] = update
    update()
    return fig


def update(fig, **values) -> None:
    """Call the update of the live figure ``fig`` (see ``live``) with the controls' ``values``."""
    if fig not in _UPDATES:
        raise ValueError("update: fig is not a live figure; build it with normlib.viz.live(fig, update)")
    _UPDATES[fig](**values)


def _frame(fig) -> tuple:
    """What the unchanging parts of a drawing depend on: size, resolution, and each axes' place,
    limits, scales and tick labels."""
    def ticks(axis):
        locs = axis.get_majorticklocs()
        return tuple(locs), tuple(axis.major.formatter.format_ticks(locs))
    return (tuple(fig.get_size_inches()), fig.dpi,
            tuple((ax.get_position().bounds, ax.get_xlim(), ax.get_ylim(), ax.get_xscale(),
                   ax.get_yscale(), ticks(ax.xaxis), ticks(ax.yaxis)) for ax in fig.axes))


def _moving(fig) -> set:
    """The artists an update changed (matplotlib marks them stale), with whatever is drawn above
    them in their axes (a legend over a line). Axes and spines count as the frame (_frame)."""
    from matplotlib.axis import Axis
    from matplotlib.spines import Spine
    moving = {a for a in fig.get_children() if a.stale and a not in fig.axes and a is not fig.patch}
    for ax in fig.axes:
        changed = [a for a in ax.get_children()
                   if a.stale and a is not ax.patch and not isinstance(a, (Axis, Spine))]
        if changed:
            low = min(a.get_zorder() for a in changed)
            moving |= {a for a in ax.get_children() if a.get_zorder() >= low and a is not ax.patch}
    return moving


def _in_drawing_order(fig, artists) -> list:
    """``artists`` in the order a full drawing draws them: by zorder, ties in the order added."""
    rank = {a: i for i, a in enumerate(fig.get_children())}
    rank.update({a: i for ax in fig.axes for i, a in enumerate(ax.get_children())})
    return sorted(artists, key=lambda a: (a.get_zorder(), rank.get(a, 0)))


def _hidden(artists):
    """Hide ``artists`` for a drawing; return a function that shows them again. The axes place their
    titles while drawing as if hidden ones were empty: their positions are put back too."""
    from matplotlib.text import Text
    shown = {a: a.get_visible() for a in artists}
    placed = {a: a.get_position() for a in artists if isinstance(a, Text)}
    for artist in artists:
        artist.set_visible(False)

    def show():
        for artist, visible in shown.items():
            artist.set_visible(visible)
        for text, position in placed.items():
            text.set_position(position)
    return show


def _footprints(fig, axes) -> dict:
    """Each axes' box on the canvas with everything it draws (ticks, labels, title), in pixels."""
    renderer = fig.canvas.get_renderer()
    return {ax: ax.get_tightbbox(renderer) for ax in axes}


def _draw(fig) -> None:
    """Draw ``fig`` into its Agg buffer. When only some artists changed since the last drawing and
    the frame (limits, ticks, size) did not, restore a background drawn without them and draw
    just those (blitting): a figure's text (ticks, labels) is most of a full drawing's time. When
    the frame of some axes changed (a plot that rescales) but not of the others, only those axes
    are drawn again (``_redraw_axes``)."""
    from matplotlib.image import AxesImage
    frame, last = _frame(fig), _BLITS.get(fig)
    moving = _moving(fig) if last is not None else set()     # a first drawing: nothing moved yet
    if fig.get_layout_engine() is not None or any(isinstance(a, AxesImage) for a in moving):
        # a layout engine places the axes around what is shown; images are composited: draw in full
        fig.canvas.draw()
        _BLITS.pop(fig, None)
        return
    if last is not None and last[0] == frame and moving <= last[2]:
        fig.canvas.restore_region(last[1])
        for artist in _in_drawing_order(fig, last[2]):
            fig.draw_artist(artist)
        return
    if last is not None and _redraw_axes(fig, frame, last, moving):
        return
    moving |= last[2] if last is not None and last[0] == frame else set()
    show = _hidden(moving)
    fig.canvas.draw()
    background = fig.canvas.copy_from_bbox(fig.bbox)
    footprints = _footprints(fig, fig.axes) if len(fig.axes) > 1 else None   # for _redraw_axes
    show()
    for artist in _in_drawing_order(fig, moving):
        fig.draw_artist(artist)
    _BLITS[fig] = (frame, background, moving, footprints)


def _redraw_axes(fig, frame, last, moving) -> bool:
    """Redraw in part a figure in which the frame of some axes changed but not of the others: on
    the last background, clear the changed axes' footprints (old and new) to the figure's colour,
    draw those axes again without their moving artists, keep that as the new background, then draw
    every moving artist. Returns False, having drawn nothing, where that could differ from a full
    drawing: a new size, every axes changed, a footprint that touches another axes' or the
    figure's own artists, a figure colour that is not opaque, or an artist of an unchanged axes
    that did not move last time."""
    old_frame, background, last_moving, old_prints = last
    if old_prints is None or old_frame[:2] != frame[:2] or len(old_frame[2]) != len(frame[2]):
        return False
    changed = [ax for ax, new, old in zip(fig.axes, frame[2], old_frame[2], strict=True) if new != old]
    if not changed or len(changed) == len(fig.axes) or any(ax not in old_prints for ax in fig.axes):
        return False
    face = mpl.colors.to_rgba(fig.get_facecolor())
    if face[3] != 1:
        return False
    inside = {a for ax in changed for a in ax.get_children()}
    if any(a not in last_moving for a in moving - inside):
        return False                    # it is in the last background in its old state
    show = _hidden(moving)
    new_prints = _footprints(fig, changed)
    show()
    renderer = fig.canvas.get_renderer()
    from matplotlib.transforms import Bbox
    cleared = [Bbox.union([old_prints[ax], new_prints[ax]]).padded(2) for ax in changed]
    others = [old_prints[ax] for ax in fig.axes if ax not in changed]
    others += [a.get_window_extent(renderer) for a in fig.get_children()
               if a.get_visible() and a not in fig.axes and a is not fig.patch and a not in moving]
    if any(box.overlaps(other.padded(2)) for box in cleared for other in others):
        return False
    fig.canvas.restore_region(background)
    pixels = np.asarray(fig.canvas.buffer_rgba())
    height, width = pixels.shape[:2]
    color = np.array([round(255 * c) for c in face], dtype=np.uint8)
    for box in cleared:
        x0, x1 = max(int(np.floor(box.x0)), 0), min(int(np.ceil(box.x1)), width)
        y0, y1 = max(height - int(np.ceil(box.y1)), 0), min(height - int(np.floor(box.y0)), height)
        pixels[y0:y1, x0:x1] = color
    moving = moving | (last_moving - inside)
    show = _hidden(moving)
    for ax in changed:
        fig.draw_artist(ax)
    background = fig.canvas.copy_from_bbox(fig.bbox)
    show()
    for artist in _in_drawing_order(fig, moving):
        fig.draw_artist(artist)
    _BLITS[fig] = (frame, background, moving, {**old_prints, **new_prints})
    return True


def _grow_to_fit(fig, tight) -> None:
    """Enlarge ``fig`` to hold ``tight`` (inches, its content's box), keeping every axes' size and
    place relative to the content: what savefig's bbox_inches="tight" does for one image, done
    once, so that every later drawing fits the canvas."""
    (w, h), pad = fig.get_size_inches(), 0.02
    x0, y0 = min(tight.x0, 0) - pad, min(tight.y0, 0) - pad
    new_w, new_h = max(tight.x1, w) + pad - x0, max(tight.y1, h) + pad - y0
    for ax in fig.axes:
        b = ax.get_position()
        ax.set_position([(b.x0 * w - x0) / new_w, (b.y0 * h - y0) / new_h,
                         b.width * w / new_w, b.height * h / new_h])
    fig.set_size_inches(new_w, new_h)


def png(fig) -> bytes:
    """``fig`` drawn to PNG bytes, cropped as the inline backend crops (bbox_inches="tight"), but
    to the box measured at its first drawing (widened to the figure's width, so a longer title
    still fits; a figure whose labels stick out is enlarged once to hold them): measuring the box
    on every move costs half a drawing more. Only what changed since the last call is redrawn
    when the axes' limits and ticks did not change (see ``_draw``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox
    from PIL import Image
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    _draw(fig)
    size, dpi = tuple(fig.get_size_inches()), fig.dpi
    crop = _CROPS.get(fig)
    if crop is None or crop[:2] != (size, dpi):
        tight = fig.get_tightbbox(fig.canvas.get_renderer())
        if tight.x0 < 0 or tight.y0 < 0 or tight.x1 > size[0] or tight.y1 > size[1]:
            _grow_to_fit(fig, tight)                     # once: labels beyond the edge get room
            _draw(fig)
            size, tight = tuple(fig.get_size_inches()), fig.get_tightbbox(fig.canvas.get_renderer())
        box = Bbox.union([tight, Bbox.from_extents(0, tight.y0, size[0], tight.y1)]).padded(
            mpl.rcParams["savefig.pad_inches"])
        crop = (size, dpi, Bbox.from_extents(max(box.x0, 0), max(box.y0, 0), min(box.x1, size[0]),
                                             min(box.y1, size[1])))
        _CROPS[fig] = crop
    box = crop[2]
    out = io.BytesIO()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    height, width = rgba.shape[:2]
    # the canvas has whole pixels (a grown figure's size in pixels need not be): clamp, or a box
    # edge rounded one pixel beyond the canvas makes a negative index and a one-row image
    left, right = max(round(box.x0 * dpi), 0), min(round(box.x1 * dpi), width)
    top, bottom = max(height - round(box.y1 * dpi), 0), min(height - round(box.y0 * dpi), height)
    # compress_level 1: a third faster than Pillow's default for a few per cent more bytes
    Image.fromarray(rgba[top:bottom, left:right]).save(out, format="png", compress_level=1)
    return out.getvalue()


def interactive(callback: Callable, **controls):
    """The widget for ``callback``: one control per keyword (an ipywidgets control, an abbreviation
    such as a list of options, or ``ipywidgets.fixed(value)``), above the plot. ``callback`` is
    called once with every value and must return a live figure (see ``live``); each move calls the
    figure's update with the values of the shown controls (fixed ones never change) and shows the
    figure drawn once. Text the update prints shows under the plot.
    Labels are never cut off. ``display()`` the result."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    fixed, shown = {}, {}
    for name, control in controls.items():
        if isinstance(control, widgets.fixed):
            fixed[name] = control.value
            continue
        if not isinstance(control, widgets.ValueWidget):
            default = inspect.signature(callback).parameters.get(name)  # the start: its default
            made = widgets.interactive.widget_from_abbrev(
                control, inspect.Parameter.empty if default is None else default.default)
            if made is None:
                raise ValueError(f"interactive: cannot make a control for {name}={control!r}")
            control = made
        if not control.description:
            control.description = name
        if not control.style.description_width:
            control.style.description_width = "initial"
        shown[name] = control

    def values():
        return {**fixed, **{name: control.value for name, control in shown.items()}}

    first = io.StringIO()
    with contextlib.redirect_stdout(first):
        fig = callback(**values())
    if fig not in _UPDATES:
        raise TypeError(f"interactive: {getattr(callback, '__name__', callback)} must return a live "
                        "figure: return normlib.viz.live(fig, update)")
    plt.close(fig)                     # the widget shows it; the inline backend must not show it again
    out = widgets.Output()

    def show(printed: str) -> None:
        # One message: the Output widget's content replaced at once (clear_output and display
        # inside `with out:` send four: capture on, clear, image, capture off).
        image = {"output_type": "display_data", "metadata": {},
                 "data": {"image/png": base64.b64encode(png(fig)).decode("ascii")}}
        text = [{"output_type": "stream", "name": "stdout", "text": printed}] if printed else []
        out.outputs = (image, *text)

    def move(change):
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                update(fig, **{name: control.value for name, control in shown.items()})
        except Exception:
            with out:                  # the traceback shows in the widget, under the last plot
                raise
        else:
            show(printed.getvalue())

    for control in shown.values():
        control.observe(move, "value")
    show(first.getvalue())
    box = widgets.VBox([*shown.values(), out])
    box.add_class("widget-interact")
    return box
