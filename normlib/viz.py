"""One palette and one plot style for the whole collection, a lecture (projector) mode, and the
one way the lessons build a widget: a live figure whose artists a control updates in place."""

from __future__ import annotations

import base64
import contextlib
import functools
import inspect
import io
import traceback
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
# (set_data, set_text...) and returns the ones it moves. Those are drawn over a background kept
# from the last full drawing, as matplotlib's FuncAnimation(blit=True) does: they are marked
# animated, so a full drawing leaves them out, and a change to them does not mark the figure stale.
# A stale figure after an update (a new title, limits, a removed line: anything else) is drawn in
# full, which keeps a new background. The image is cropped to the content (found in the drawn
# pixels: measuring every text again with get_tightbbox cost as much as the drawing), and sent to
# the browser as one message.

class _Live:
    """A live figure's state, kept on the figure (``fig._normlib_live``): closing the figure frees
    it with the figure."""

    def __init__(self, update: Callable[..., object]):
        self.update = update
        self.moving: list = []          # the declared artists, in the order a full drawing draws them
        self.animated: list = []        # they and their parts, marked animated
        self.background = None          # the canvas without them, from the last full drawing
        self.box = None                 # the content's box (inches) at the last full drawing


def _state(fig, caller: str) -> _Live:
    state = getattr(fig, "_normlib_live", None)
    if state is None:
        raise ValueError(f"{caller}: fig is not a live figure; build it with "
                         "normlib.viz.live(fig, update)")
    return state


def live(fig, update: Callable[..., object]):
    """Make ``fig`` a live figure and return it. ``update(**controls)`` changes the figure's moving
    parts in place and returns them (a list of artists, as ``FuncAnimation(blit=True)``'s function
    does): lines, bars, texts, a legend (not its texts), an axes' title, an image. A move draws
    just those, in the order a full drawing would (then each axes' spines), over the rest of the
    figure as last drawn; if the update changed anything else (a title it does not return, the
    axes' limits, an artist added or removed), the figure is drawn in full. So return too what is
    drawn over a moving artist (a legend over a line, a fixed line over a band), and put the grid
    under bars, bands and images (``ax.set_axisbelow(True)``). ``update``'s defaults are the
    controls' values the figure shows first; ``live`` calls it once with them. A widget callback
    builds the fixed parts of its figure (axes, labels, empty artists), defines ``update`` and
    returns ``live(fig, update)``."""
    from matplotlib.figure import Figure
    if not isinstance(fig, Figure):
        raise TypeError(f"live: fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not callable(update):
        raise TypeError(f"live: update must be a function of the controls' values, got {update!r}")
    fig._normlib_live = state = _Live(update)
    _declare(fig, state, update())
    _wire_stale(fig)
    return fig


def _wire_stale(parent) -> None:
    """Give each part of ``parent`` that matplotlib leaves without a stale callback (axis labels,
    tick parts, a legend's frame: ``ax.xaxis.label.set_text`` would not mark the figure stale) one
    that marks its parent stale, so that a stale figure after an update means that something it
    did not return changed."""
    for child in parent.get_children():
        if child.stale_callback is None:
            child.stale_callback = functools.partial(_mark_stale, parent)
        _wire_stale(child)


def _mark_stale(parent, artist, stale: bool) -> None:
    if stale:
        parent.stale = True


def update(fig, **values) -> None:
    """Call the update of the live figure ``fig`` (see ``live``) with the controls' ``values``, and
    mark the artists it returns as the moving ones."""
    state = _state(fig, "update")
    _declare(fig, state, state.update(**values))


def _declare(fig, state: _Live, returned) -> None:
    """Make ``returned`` (an update's result) the figure's animated artists, in drawing order."""
    from matplotlib.artist import Artist
    returned = [] if returned is None else [returned] if isinstance(returned, Artist) else returned
    try:
        returned = list(returned)
    except TypeError:
        raise TypeError(f"live: update must return the artists it moves (a list), got "
                        f"{returned!r}") from None
    # a full drawing draws the figure's children by zorder, each axes drawing its own by zorder
    order = {a: i for i, a in enumerate(sorted(
        (a for a in fig.get_children() if a is not fig.patch), key=lambda a: a.get_zorder()))}
    rank = {}
    for artist in returned:
        if not isinstance(artist, Artist):
            raise TypeError(f"live: update must return the artists it moves, got {artist!r} in "
                            f"{returned!r}")
        if artist in order:
            rank[artist] = (order[artist], 0, 0)
        elif artist.axes in order and artist in (children := artist.axes.get_children()):
            rank[artist] = (order[artist.axes], artist.get_zorder(), children.index(artist))
        else:
            raise ValueError(f"live: update returned {artist!r}, which is not drawn by an axes or "
                             "the figure itself (a legend's text, a tick label, or an artist "
                             "removed from the figure): return what draws it (the legend, the axes)")
    for ax in {artist.axes for artist in returned if artist.axes in order}:
        children = ax.get_children()
        # the spines are drawn over a line at the axes' edge; set_title also moves the left and
        # right titles (private names: if matplotlib renames them, a new title is drawn in full)
        also = [*ax.spines.values()] if ax.axison else []
        if ax.title in rank:
            also += [getattr(ax, name, None) for name in ("_left_title", "_right_title")]
        rank.update({a: (order[ax], a.get_zorder(), children.index(a))
                     for a in also if a in children and a not in rank})
    moving = sorted(rank, key=rank.get)
    if moving != state.moving:                # a new set: what leaves it goes into the background
        for artist in state.animated:
            artist.set_animated(False)
        # their parts too (a legend's texts): a change to an animated artist does not mark the
        # axes stale, and a legend's text would mark them directly
        state.animated = [part for artist in moving for part in _parts(artist)]
        for artist in state.animated:
            artist.set_animated(True)
        state.moving, state.background = moving, None


def _parts(artist) -> list:
    """``artist`` and every artist it draws, depth first."""
    return [artist, *(part for child in artist.get_children() for part in _parts(child))]


def _draw(fig, state: _Live) -> None:
    """Draw ``fig`` into its Agg buffer: in full (animated artists left out: the background, kept;
    then the content's box measured) when something other than its moving artists changed, or the
    last drawing failed; then the moving artists over it. A drawing that raises leaves the next
    one to draw in full."""
    from matplotlib.image import AxesImage
    try:
        full = state.background is None or fig.stale
        if full:
            state.background = None
            # matplotlib leaves animated artists out of a full drawing, except images
            # (axes/_base.py: "not a.get_animated() or isinstance(a, mimage.AxesImage)"): hidden
            # here, or the background holds the image and draw_artist composites it twice
            images = [a for a in state.moving if isinstance(a, AxesImage) and a.get_visible()]
            for image in images:
                image.set_visible(False)          # animated: no stale callback fires
            try:
                fig.canvas.draw()
            finally:
                for image in images:
                    image.set_visible(True)
            state.background = fig.canvas.copy_from_bbox(fig.bbox)
        else:
            fig.canvas.restore_region(state.background)
        for artist in state.moving:
            fig.draw_artist(artist)
        if full:
            state.box = _drawn_box(fig)
            if state.box is None:   # something may go on past the canvas: measure it all
                state.box = fig.get_tightbbox(fig.canvas.get_renderer())
        fig.stale = False           # drawing them places their parts (ticks): not a change
    except BaseException:
        state.background = None
        raise


def _drawn_box(fig):
    """The box (inches) of what is on the canvas: the rows and columns with a pixel that is not
    the figure's background colour. None when a drawn pixel touches the canvas's edge (the content
    may go on past it) or the background is not opaque: then only ``fig.get_tightbbox`` can tell,
    which lays out every tick label again and costs about as much as the drawing itself."""
    face = mpl.colors.to_rgba(fig.get_facecolor())
    if face[3] < 1 or not fig.patch.get_visible():
        return None
    from matplotlib.transforms import Bbox
    rgba = np.asarray(fig.canvas.buffer_rgba())                       # (H, W, 4) uint8
    height, width = rgba.shape[:2]
    background = np.array([round(c * 255) for c in face], dtype=np.uint8).view(np.uint32)
    drawn = np.ascontiguousarray(rgba).view(np.uint32)[..., 0] != background      # (H, W)
    rows, cols = np.flatnonzero(drawn.any(1)), np.flatnonzero(drawn.any(0))
    if rows.size == 0:
        return Bbox.from_extents(0, 0, width / fig.dpi, height / fig.dpi)
    if rows[0] == 0 or cols[0] == 0 or rows[-1] == height - 1 or cols[-1] == width - 1:
        return None
    return Bbox.from_extents(cols[0] / fig.dpi, (height - 1 - rows[-1]) / fig.dpi,
                             (cols[-1] + 1) / fig.dpi, (height - rows[0]) / fig.dpi)


def _content_box(fig, state: _Live):
    """The box (inches) around everything drawn: the last full drawing's, with the moving
    artists' (they may have grown since); artists clipped to their axes' box, and the spines, are
    inside it."""
    from matplotlib.spines import Spine
    from matplotlib.transforms import Bbox
    renderer, stale, boxes = fig.canvas.get_renderer(), fig.stale, [state.box]
    for artist in state.moving:
        inside = isinstance(artist, Spine) or (
            artist.get_clip_on() and artist.axes is not None
            and artist.get_clip_box() is artist.axes.bbox and artist.get_clip_path() is None)
        if artist.get_visible() and artist.get_in_layout() and not inside:
            box = artist.get_tightbbox(renderer)
            if box is not None and box.width > 0 and box.height > 0:
                boxes.append(box.transformed(fig.dpi_scale_trans.inverted()))
    fig.stale = stale               # measuring re-places ticks and titles where they are drawn
    return Bbox.union(boxes)


def _grow_to_fit(fig, tight) -> None:
    """Enlarge ``fig`` to hold ``tight`` (inches, its content's box), keeping every axes' size and
    place relative to the content: what savefig's bbox_inches="tight" does for one image, done
    when the content first sticks out, so that later drawings fit the canvas."""
    (w, h), pad = fig.get_size_inches(), 0.02
    x0, y0 = min(tight.x0, 0) - pad, min(tight.y0, 0) - pad
    new_w, new_h = max(tight.x1, w) + pad - x0, max(tight.y1, h) + pad - y0
    for ax in fig.axes:
        b = ax.get_position()
        ax.set_position([(b.x0 * w - x0) / new_w, (b.y0 * h - y0) / new_h,
                         b.width * w / new_w, b.height * h / new_h])
    fig.set_size_inches(new_w, new_h)


def png(fig) -> bytes:
    """The live figure ``fig`` drawn to PNG bytes (see ``_draw``), cropped to its content with
    savefig's padding, as the inline backend crops (bbox_inches="tight"), but never narrower than
    the figure, so that the image keeps its width while a title changes. A figure whose content
    sticks out of it is enlarged to hold it (except under a layout engine, which keeps the
    content inside)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox
    from PIL import Image
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    state = _state(fig, "png")
    _draw(fig, state)
    size = tuple(fig.get_size_inches())
    tight = _content_box(fig, state)
    if fig.get_layout_engine() is None and (tight.x0 < 0 or tight.y0 < 0 or tight.x1 > size[0]
                                            or tight.y1 > size[1]):
        _grow_to_fit(fig, tight)                  # marks the figure stale: drawn in full
        _draw(fig, state)
        size, tight = tuple(fig.get_size_inches()), _content_box(fig, state)
    box = Bbox.union([tight, Bbox.from_extents(0, tight.y0, size[0], tight.y1)]).padded(
        mpl.rcParams["savefig.pad_inches"])
    dpi, out = fig.dpi, io.BytesIO()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    height, width = rgba.shape[:2]
    # the canvas has whole pixels (a grown figure's size in pixels need not be): clamp, or a box
    # edge rounded one pixel beyond the canvas makes a negative index and a one-row image
    left, right = max(round(box.x0 * dpi), 0), min(round(box.x1 * dpi), width)
    top, bottom = max(height - round(box.y1 * dpi), 0), min(height - round(box.y0 * dpi), height)
    # compress_level 1: a third faster than Pillow's default for a few per cent more bytes
    Image.fromarray(rgba[top:bottom, left:right]).save(out, format="png", compress_level=1)
    return out.getvalue()


# The widgets each notebook cell showed in its last run, by the cell's id: (that run's message id,
# its widgets). ipywidgets keeps every widget that is not closed, and a widget's controls hold its
# figure, so each re-run of a widget cell kept one more figure alive (about 5 MB in lecture mode;
# code review 2, finding 10). Weak, so a widget closed by other means is not kept either.
_SHOWN_BY_CELL: dict[str, tuple[str, weakref.WeakSet]] = {}


def _this_run() -> tuple[str, str] | None:
    """(the id of the notebook cell running now, this run's message id), from the kernel's parent
    message (JupyterLab and Notebook 7 send the cell's id as its metadata's ``cellId``); None
    outside a kernel, or when the front end sends no cell id."""
    from IPython import get_ipython
    parent = getattr(get_ipython(), "parent_header", None)
    if not isinstance(parent, dict):
        return None
    cell = (parent.get("metadata") or {}).get("cellId")
    run = (parent.get("header") or {}).get("msg_id")
    return (cell, run) if cell and run else None


def _widgets_of_this_run() -> weakref.WeakSet | None:
    """The set of the widgets the running cell shows in this run, after closing the ones it showed
    in its last run; None when the cell is not known (see ``_this_run``)."""
    here = _this_run()
    if here is None:
        return None
    cell, run = here
    last_run, shown = _SHOWN_BY_CELL.get(cell, (None, weakref.WeakSet()))
    if last_run != run:
        for widget in list(shown):
            widget.close()
        shown = weakref.WeakSet()
        _SHOWN_BY_CELL[cell] = (run, shown)
    return shown


def interactive(callback: Callable, **controls):
    """The widget for ``callback``: one control per keyword (an ipywidgets control, an abbreviation
    such as a list of options, or ``ipywidgets.fixed(value)``), above the plot. ``callback`` is
    called once with every value and must return a live figure (see ``live``); each move calls the
    figure's update with the values of the shown controls (fixed ones never change) and shows the
    figure drawn once. Text the update prints shows under the plot, and so does the traceback of an update or a drawing
    that raises (the plot stays as last drawn). Labels are never cut off. ``display()`` the
    result; its ``close()`` closes its controls too, which frees the figure. Running a notebook
    cell again closes the widgets its last run made (in a front end that sends the cell's id, as
    JupyterLab does), so re-running a widget cell does not keep one more figure alive each time."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    this_run = _widgets_of_this_run()

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
        return {name: control.value for name, control in shown.items()}

    first = io.StringIO()
    with contextlib.redirect_stdout(first):
        fig = callback(**fixed, **values())
    if getattr(fig, "_normlib_live", None) is None:
        raise TypeError(f"interactive: {getattr(callback, '__name__', callback)} must return a live "
                        "figure: return normlib.viz.live(fig, update)")
    plt.close(fig)                     # the widget shows it; the inline backend must not show it again
    out = widgets.Output()
    drawn = {"image": None}

    def show(printed: str, error: BaseException | None = None) -> None:
        # One message: the Output widget's content replaced at once (clear_output and display
        # inside `with out:` send four: capture on, clear, image, capture off).
        if error is None:
            drawn["image"] = {"output_type": "display_data", "metadata": {},
                              "data": {"image/png": base64.b64encode(png(fig)).decode("ascii")}}
        text = [{"output_type": "stream", "name": "stdout", "text": printed}] if printed else []
        if error is not None:
            text.append({"output_type": "error", "ename": type(error).__name__,
                         "evalue": str(error),
                         "traceback": traceback.format_exception(error)})
        out.outputs = (*([drawn["image"]] if drawn["image"] else []), *text)

    def move(change):
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                update(fig, **values())
                show(printed.getvalue())
        except Exception as error:     # the traceback shows in the widget, under the last plot
            show(printed.getvalue(), error)

    for control in shown.values():
        control.observe(move, "value")
    show(first.getvalue())
    widget = _widget_class()([*shown.values(), out], fig)
    if this_run is not None:
        this_run.add(widget)
    return widget


@functools.cache
def _widget_class():
    import ipywidgets as widgets

    class Widget(widgets.VBox):
        """An ``interactive`` widget: closing it closes its controls and output, whose callbacks
        hold the figure (ipywidgets keeps every open widget). ``figure`` is the live figure."""

        def __init__(self, children, figure):
            super().__init__(children)
            self.figure = figure
            self.add_class("widget-interact")

        def close(self):
            for child in self.children:
                child.close()
            super().close()
    return Widget
