"""Labelled diagrams of the blocks the lessons build, drawn from code with matplotlib alone.

One function per diagram, each returning a matplotlib Figure:

    decoder_block_map()     a decoder-only Transformer block, each part tagged with its lesson (00)
    placements(kinds)       where the norm sits: Post-LN, Pre-LN, Sandwich, parallel, DeepNorm,
                            OLMo 2, with the gradient's identity path highlighted (04)
    swiglu_flow()           the SwiGLU FFN, with Meta's and Hugging Face's weight names (07)
    rope_layouts(head_dim)  which feature slots RoPE rotates together, in both layouts (08)
    attention_shapes()      tensor shapes through multi-head attention with GQA (10)

They render offline (no graphviz, no web fonts) and read the same in JupyterLab's light and dark
themes: an opaque white figure, black text, the collection's colours (``normlib.viz.color``).
Positions are in units of about two text heights, and the figure's size in inches grows with
rcParams["font.size"], so ``normlib.viz.lecture_mode()`` enlarges a diagram without crowding it.
Notation as in normlib.attention: B batch, T tokens, C = d_model, H query heads, H_kv key/value
heads, D = C / H head dim, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.colors import to_rgb
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from ._checks import check_choice, check_int
from .viz import color

__all__ = ["PLACEMENT_KINDS", "attention_shapes", "decoder_block_map", "placements",
           "rope_layouts", "swiglu_flow"]

UNIT_IN = 0.25            # inches per layout unit at font.size 10 (the reading style)
INK = "#1a1a1a"           # text and arrows
MUTED = "#555555"         # shapes and notes
PATH = color("pre")       # the gradient's identity path
ON_PATH = color("post")   # a box that sits on it
SHADE = {"norm": color("layernorm"), "attn": color("gelu"), "ffn": color("swiglu"),
         "rope": color("interleaved"), "io": color("plain"), "scale": color("deepnorm"),
         "meta": color("interleaved"), "hf": color("half")}


# ------------------------------------------------------------------------------ primitives

@dataclass(frozen=True)
class Box:
    """Where a drawn box sits: centre (x, y), width w, height h (layout units)."""
    x: float
    y: float
    w: float
    h: float

    @property
    def top(self):
        return (self.x, self.y + self.h / 2)

    @property
    def bottom(self):
        return (self.x, self.y - self.h / 2)

    @property
    def left(self):
        return (self.x - self.w / 2, self.y)

    @property
    def right(self):
        return (self.x + self.w / 2, self.y)


def _tint(c, amount: float = 0.2):
    """An opaque light version of colour c (amount of c over white), for box fills."""
    return tuple(1 - amount * (1 - v) for v in to_rgb(c))


def _size(scale: float = 1.0) -> float:
    return mpl.rcParams["font.size"] * scale


def _lw(scale: float = 1.0) -> float:
    return mpl.rcParams["lines.linewidth"] * 0.7 * scale


def _canvas(width: float, height: float):
    """A white figure of width x height layout units with one axes spanning it, axis off."""
    inch = UNIT_IN * mpl.rcParams["font.size"] / 10
    fig = plt.figure(figsize=(width * inch, height * inch), facecolor="white")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_facecolor("white")
    ax.axis("off")
    return fig, ax


def _box(ax, x, y, w, h, text, shade="io", *, edge=None) -> Box:
    """A rounded box centred at (x, y) with a centred label; ``edge`` overrides the edge colour
    (a box on the identity path), ``shade`` a key of SHADE or a method of normlib.viz.COLORS."""
    c = SHADE[shade] if shade in SHADE else color(shade)
    ax.add_artist(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                boxstyle="round,pad=0,rounding_size=0.18",
                                facecolor=_tint(c), edgecolor=edge or c,
                                linewidth=_lw(2.2 if edge else 1.2), zorder=3))
    ax.text(x, y, text, ha="center", va="center", fontsize=_size(), color=INK, zorder=4,
            linespacing=1.25)
    return Box(x, y, w, h)


def _arrow(ax, start, end, *, head=True):
    """A straight arrow (or a plain line, head=False) from start to end."""
    ax.add_artist(FancyArrowPatch(start, end, arrowstyle="-|>" if head else "-",
                                  mutation_scale=_size(0.85), color=INK, linewidth=_lw(),
                                  shrinkA=0, shrinkB=0, zorder=2, joinstyle="miter",
                                  capstyle="butt"))


def _line(ax, points, *, head=True):
    """A polyline through points, with an arrow head on its last segment."""
    for a, b in zip(points[:-2], points[1:-1], strict=True):
        ax.plot(*zip(a, b, strict=True), color=INK, linewidth=_lw(), zorder=2,
                solid_capstyle="projecting")
    _arrow(ax, points[-2], points[-1], head=head)


def _highlight(ax, points):
    """The gradient's identity path: a broad light band under the arrows along points."""
    xs, ys = zip(*points, strict=True)
    ax.plot(xs, ys, color=_tint(PATH, 0.35), linewidth=_lw(9), zorder=1,
            solid_capstyle="round", solid_joinstyle="round")


def _op(ax, x, y, symbol, *, r=0.32):
    """A circled operator: "+" for a residual add, "×" for an elementwise product."""
    ax.add_artist(Circle((x, y), r, facecolor="white", edgecolor=INK, linewidth=_lw(1.2),
                        zorder=3))
    ax.text(x, y, symbol, ha="center", va="center_baseline", fontsize=_size(1.1),
            color=INK, zorder=4)
    return Box(x, y, 2 * r, 2 * r)


def _note(ax, x, y, text, *, size=0.85, c=MUTED, ha="center", va="center", **kw):
    """A small label: a shape, a formula, a model name."""
    ax.text(x, y, text, ha=ha, va=va, fontsize=_size(size), color=c, zorder=4, **kw)


def _tag(ax, x, y, text):
    """A lesson tag: the lesson number(s) and topic in a dark rounded label, starting at x."""
    ax.text(x, y, text, ha="left", va="center", fontsize=_size(0.85), color="white", zorder=5,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "#333333", "edgecolor": "none"})


# ------------------------------------------------------------------------------ lesson 00

def decoder_block_map():
    """A decoder-only Transformer (a LLaMA-style Pre-norm block) with each part tagged by the
    lesson that teaches it: the map of the collection."""
    fig, ax = _canvas(24, 21.4)
    cx, w, h, skip = 6.6, 8.0, 1.05, 1.7            # column centre, box size, skip line x
    tag_x = cx + w / 2 + 0.7

    _note(ax, cx, 0.7, "token ids (B, T)", size=1.0, c=INK)
    emb = _box(ax, cx, 2.2, w, h, "Token embedding", "io")
    _arrow(ax, (cx, 1.05), emb.bottom)
    _tag(ax, tag_x, emb.y, "00  this map")

    y0, y1 = 2.9, 15.0                              # the repeated block
    ax.add_artist(FancyBboxPatch((0.8, y0), cx + w / 2 + 0.3 - 0.8, y1 - y0,
                                boxstyle="round,pad=0,rounding_size=0.3", facecolor="#f4f4f4",
                                edgecolor="#999999", linewidth=_lw(1.0), linestyle="--", zorder=0))
    _note(ax, 1.1, y1 - 0.45, "× N blocks", size=1.0, c=INK, ha="left")
    _tag(ax, tag_x, y1 - 0.45, "04  norm placement, warmup   05  DeepNorm")

    def sublayer(y_in, body, shade, body_tags):
        """Norm -> body -> add, with the skip line on the left; returns the add's y."""
        norm = _box(ax, cx, y_in + 1.3, w, h, "RMSNorm (or LayerNorm)", "norm")
        f = _box(ax, cx, y_in + 3.05, w, 1.5 if "\n" in body else h, body, shade)
        add = _op(ax, cx, y_in + 4.8, "+")
        _arrow(ax, (cx, y_in), norm.bottom)
        _arrow(ax, norm.top, f.bottom)
        _arrow(ax, f.top, (cx, add.y - 0.32))
        _line(ax, [(cx, y_in + 0.35), (skip, y_in + 0.35), (skip, add.y), (cx - 0.32, add.y)])
        ax.add_artist(Circle((cx, y_in + 0.35), 0.08, color=INK, zorder=4))
        _tag(ax, tag_x, norm.y, "02  03  normalization")
        _tag(ax, tag_x, f.y, body_tags)
        _tag(ax, tag_x, add.y, "01  residual connection")
        return add.y

    add1 = sublayer(emb.top[1], "Causal self-attention\nRoPE on q and k", "attn",
                    "10  attention, GQA   08  RoPE")
    add2 = sublayer(add1 + 0.32, "FFN: SwiGLU", "ffn", "07  GLU and FFN   06  SiLU")

    fin = _box(ax, cx, 16.3, w, h, "Final RMSNorm", "norm")
    _arrow(ax, (cx, add2 + 0.32), fin.bottom)
    _tag(ax, tag_x, fin.y, "04  Pre-LN ends with a norm")
    head = _box(ax, cx, 18.3, w, h, "LM head: Linear C → V", "io")
    _arrow(ax, fin.top, head.bottom)
    _note(ax, cx + 0.25, 17.3, "(B, T, C)", ha="left")
    _arrow(ax, head.top, (cx, 19.85))
    _note(ax, cx, 20.3, "logits (B, T, V)", size=1.0, c=INK)
    _tag(ax, tag_x, 20.3, "09  which model uses which part")
    return fig


# ------------------------------------------------------------------------------ lesson 04

# kind: (name, formula, models, boxes on the stream before the add, the branch, boxes after the
# add). A branch entry that is a tuple is drawn as parallel boxes. Checked against Xiong et al.
# 2020 (Fig. 1), CogView (Ding et al. 2021, Sandwich-LN), PaLM (§2, "parallel layers", after
# GPT-J), DeepNet (Wang et al. 2022, §2), Gemma 2 (§2: RMSNorm on the input and the output of each
# sublayer) and OLMo 2 (§2.1, reordered norm: x + RMSNorm(F(x)), as HF's Olmo2DecoderLayer).
_PLACEMENTS = {
    "post": ("Post-LN", "x ← LN(x + F(x))", "Vaswani et al. 2017, BERT", [], ["F"], ["LN"]),
    "pre": ("Pre-LN", "x ← x + F(LN(x))", "GPT-2, LLaMA (+ a final LN)", [], ["LN", "F"], []),
    "sandwich": ("Sandwich-LN, Gemma 2", "x ← x + LN(F(LN(x)))", "CogView (LN), Gemma 2 (RMSNorm)",
                 [], ["LN", "F", "LN"], []),
    "parallel": ("Parallel (GPT-J, PaLM)", "x ← x + Attn(LN(x)) + FFN(LN(x))",
                 "GPT-J, PaLM, Falcon: one LN", [], ["LN", ("Attn", "FFN")], []),
    "deepnorm": ("DeepNorm", "x ← LN(α·x + F(x))", "DeepNet 2022 (β: init only)", ["× α"], ["F"],
                 ["LN"]),
    "olmo2": ("OLMo 2: output norm", "x ← x + RMSNorm(F(x))", "OLMo 2 (+ QK-norm)", [],
              ["F", "RMSNorm"], []),
}
PLACEMENT_KINDS = tuple(_PLACEMENTS)
_PW, _PH = 10.0, 13.2                      # one panel, in layout units


def _placement_panel(ax, kind: str, ox: float, oy: float) -> None:
    name, formula, models, before, branch, after = _PLACEMENTS[kind]
    sx, bx, bw, bh = ox + 2.2, ox + 6.2, 3.6, 0.95       # stream x, branch x, box size
    y_in, y_split, y_add, y_out = oy + 1.75, oy + 2.55, oy + 7.3, oy + 9.9
    _note(ax, ox + _PW / 2, oy + 12.6, name, size=1.05, c=INK, fontweight="bold")
    _note(ax, ox + _PW / 2, oy + 11.8, formula, size=0.9, c=INK)
    _note(ax, ox + _PW / 2, oy + 11.1, models, size=0.8)

    # the stream (the identity path) on the left, highlighted
    _highlight(ax, [(sx, y_in), (sx, y_out)])
    ax.text(sx, y_in - 0.45, "$x_l$", ha="center", va="center", fontsize=_size(1.0), color=INK)
    ax.text(sx, y_out + 0.45, "$x_{l+1}$", ha="center", va="center", fontsize=_size(1.0),
            color=INK)
    ax.add_artist(Circle((sx, y_split), 0.08, color=INK, zorder=4))
    y = y_in
    for label in before:                                  # DeepNorm's alpha
        b = _box(ax, sx, (y_split + y_add) / 2, 1.6, bh, label, "scale", edge=ON_PATH)
        _arrow(ax, (sx, y), b.bottom)
        y = b.top[1]
    add = _op(ax, sx, y_add, "+")
    _arrow(ax, (sx, y), (sx, y_add - 0.32))
    y = y_add + 0.32
    for label in after:                                   # Post-LN's and DeepNorm's LN
        b = _box(ax, sx, (y_add + y_out) / 2 + 0.05, 1.6, bh, label, "norm", edge=ON_PATH)
        _arrow(ax, (sx, y), b.bottom)
        y = b.top[1]
    _arrow(ax, (sx, y), (sx, y_out))

    # the branch on the right: out of the stream, through the sublayer, back into the add
    n = len(branch)
    ys = [oy + 4.9] if n == 1 else [oy + 3.6 + i * (2.3 if n == 2 else 1.4) for i in range(n)]
    _line(ax, [(sx, y_split), (bx, y_split), (bx, ys[0] - bh / 2)])
    top = None
    for i, (label, yb) in enumerate(zip(branch, ys, strict=True)):
        if isinstance(label, tuple):                      # attention and FFN side by side
            xs = (bx - 1.15, bx + 1.15)
            for xb, part in zip(xs, label, strict=True):
                b = _box(ax, xb, yb, 2.0, bh, part, "attn" if part == "Attn" else "ffn")
                _line(ax, [(bx, ys[i - 1] + bh / 2), (bx, yb - bh / 2 - 0.3),
                           (xb, yb - bh / 2 - 0.3), b.bottom])
                _line(ax, [b.top, (xb, y_add), (add.right[0], y_add)])
            top = None
            continue
        norm = label in ("LN", "RMSNorm")
        b = _box(ax, bx, yb, bw, bh, "sublayer F" if label == "F" else label,
                 "norm" if norm else "attn")
        if top is not None:
            _arrow(ax, top, b.bottom)
        top = b.top
    if top is not None:
        _line(ax, [top, (bx, y_add), (add.right[0], y_add)])

    crossed = (*before, *after)
    if crossed:
        text, c = f"identity path crosses {' and '.join(crossed)}", ON_PATH
    else:
        text, c = "identity path: untouched", PATH
    _note(ax, ox + _PW / 2, oy + 0.45, text, size=0.8, c=c)


def placements(kinds: str | Sequence[str] = ("post", "pre")):
    """Where the norm sits around one sublayer F (attention or FFN), one panel per placement,
    with the gradient's identity path (the residual stream) highlighted.

    Args:
        kinds: a kind or a sequence of kinds, each one of PLACEMENT_KINDS: "post", "pre",
            "sandwich" (CogView's Sandwich-LN; Gemma 2's pre- and post-sublayer norms), "parallel"
            (GPT-J, PaLM), "deepnorm", "olmo2" (the norm on the sublayer's output only).
    Returns:
        a Figure, one panel per kind: up to three per row (two for four kinds).
    """
    if isinstance(kinds, str):
        kinds = (kinds,)
    if not isinstance(kinds, Sequence) or not kinds:
        raise TypeError(f"placements: kinds must be a kind or a non-empty sequence of kinds, "
                        f"got {kinds!r}")
    for kind in kinds:
        check_choice("placements", "kinds entry", kind, PLACEMENT_KINDS)
    n = len(kinds)
    cols = n if n <= 3 else 2 if n == 4 else 3
    rows = -(-n // cols)
    fig, ax = _canvas(cols * _PW, rows * _PH)
    for i, kind in enumerate(kinds):
        _placement_panel(ax, kind, (i % cols) * _PW, (rows - 1 - i // cols) * _PH)
    return fig


# ------------------------------------------------------------------------------ lesson 07

def _projection(ax, x, y, role, meta, hf, dims) -> Box:
    """A projection box: its role and shape, Meta's name on the left, Hugging Face's on the right."""
    w, h = 8.0, 1.75
    ax.add_artist(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                 boxstyle="round,pad=0,rounding_size=0.18",
                                 facecolor=_tint(color("plain")), edgecolor=color("plain"),
                                 linewidth=_lw(1.2), zorder=3))
    _note(ax, x, y + 0.4, f"{role}: {dims}", size=1.0, c=INK)
    _note(ax, x - w / 2 + 0.4, y - 0.42, meta, size=0.95, c=SHADE["meta"], ha="left",
          fontweight="bold")
    _note(ax, x + w / 2 - 0.4, y - 0.42, hf, size=0.95, c=SHADE["hf"], ha="right",
          fontweight="bold")
    return Box(x, y, w, h)


def swiglu_flow(d_model: int | None = None, hidden: int | None = None):
    """The SwiGLU FFN, y = w2(SiLU(w1 x) * w3 x), with Meta's (w1, w3, w2) and Hugging Face's
    (gate_proj, up_proj, down_proj) names and the shapes d_model -> hidden -> d_model.

    Args:
        d_model, hidden: sizes to print (e.g. 4096 and 11008 for LLaMA 7B); None prints the names.
    """
    for name, value in (("d_model", d_model), ("hidden", hidden)):
        if value is not None:
            check_int("swiglu_flow", name, value, minimum=1)
    c = "d_model" if d_model is None else f"{d_model:,}"
    f = "hidden" if hidden is None else f"{hidden:,}"
    fig, ax = _canvas(33, 12.2)
    y_gate, y_up, y_mid = 7.6, 2.9, 5.25
    ax.text(1.0, y_mid, "$x$", ha="center", va="center", fontsize=_size(1.3), color=INK)
    _note(ax, 2.0, y_mid - 0.8, f"(…, {c})")
    split = 3.0
    ax.add_artist(Circle((split, y_mid), 0.08, color=INK, zorder=4))
    _arrow(ax, (1.45, y_mid), (split, y_mid), head=False)
    gate = _projection(ax, 9.4, y_gate, "gate", "w1", "gate_proj", f"{c} → {f}")
    up = _projection(ax, 9.4, y_up, "up", "w3", "up_proj", f"{c} → {f}")
    _line(ax, [(split, y_mid), (split, y_gate), gate.left])
    _line(ax, [(split, y_mid), (split, y_up), up.left])
    silu = _box(ax, 16.3, y_gate, 2.6, 1.1, "SiLU", "silu")
    _arrow(ax, gate.right, silu.left)
    mul = _op(ax, 19.6, y_mid, "×")
    _line(ax, [silu.right, (mul.x, y_gate), (mul.x, y_mid + 0.32)])
    _line(ax, [up.right, (mul.x, y_up), (mul.x, y_mid - 0.32)])
    _note(ax, (up.right[0] + mul.x) / 2, y_up + 0.45, f"(…, {f})")
    down = _projection(ax, 25.2, y_mid, "down", "w2", "down_proj", f"{f} → {c}")
    _arrow(ax, (mul.x + 0.32, y_mid), down.left)
    _arrow(ax, down.right, (30.7, y_mid))
    ax.text(31.4, y_mid, "$y$", ha="center", va="center", fontsize=_size(1.3), color=INK)
    _note(ax, 31.0, y_mid - 0.8, f"(…, {c})")
    _note(ax, 16.5, 11.4, "Meta LLaMA:  y = w2( silu(w1(x)) * w3(x) )", size=1.0,
          c=SHADE["meta"])
    _note(ax, 16.5, 10.5, "Hugging Face LlamaMLP:  down_proj( act_fn(gate_proj(x)) * up_proj(x) )",
          size=1.0, c=SHADE["hf"])
    _note(ax, 16.5, 0.7, f"bias-free nn.Linear weights: w1, w3 ({f}, {c}); w2 ({c}, {f})",
          size=0.85)
    return fig


# ------------------------------------------------------------------------------ lesson 08

_PAIR_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0C05A",
                "#999999")


def rope_layouts(head_dim: int = 8):
    """Which feature slots of one head RoPE rotates together: interleaved pairs (2i, 2i+1), as
    Meta's LLaMA, and split halves (i, i + d/2), as Hugging Face's rotate_half; pair i turns by
    m·θ_i at position m.

    Args:
        head_dim: d, even, 2 to 16 (one slot per feature).
    """
    check_int("rope_layouts", "head_dim", head_dim, minimum=2)
    if head_dim % 2 or head_dim > 16:
        raise ValueError(f"rope_layouts: head_dim must be even and at most 16 (one box per "
                         f"feature), got {head_dim}")
    d, half, pitch = head_dim, head_dim // 2, 1.3
    width = max(18.0, d * pitch + 7.0)
    x0 = (width - d * pitch) / 2 + pitch / 2 + 1.0
    fig, ax = _canvas(width, 12.2)
    rise = {"interleaved": lambda i: 0.55, "half": lambda i: 0.55 + 1.6 * i / half}
    rows = [("interleaved", "Interleaved (Meta LLaMA)", "pair i = slots (2i, 2i + 1)",
             lambda j: j // 2, 8.85),
            ("half", "Split halves (Hugging Face rotate_half)", "pair i = slots (i, i + d/2)",
             lambda j: j % half, 2.55)]
    for layout, title, rule, pair_of, y in rows:
        top = y + 0.55 + rise[layout](half - 1)           # the highest bracket
        _note(ax, width / 2, top + 1.45, title, size=1.05, c=color(layout), fontweight="bold")
        _note(ax, width / 2, top + 0.7, rule, size=0.95, c=INK)
        slots = {}
        for j in range(d):
            i = pair_of(j)
            x = x0 + j * pitch
            ax.add_artist(FancyBboxPatch((x - 0.5, y - 0.5), 1.0, 1.0,
                                         boxstyle="round,pad=0,rounding_size=0.12",
                                         facecolor=_tint(_PAIR_COLORS[i % 8], 0.45),
                                         edgecolor=_PAIR_COLORS[i % 8], linewidth=_lw(1.2),
                                         zorder=3))
            _note(ax, x, y, str(j), size=1.0, c=INK)
            ax.text(x, y - 1.0, f"$\\theta_{{{i}}}$", ha="center", va="center",
                    fontsize=_size(0.95), color=INK)
            slots.setdefault(i, []).append(x)
        for i, (xa, xb) in slots.items():                 # a bracket over each pair
            yb = y + 0.55 + rise[layout](i)
            ax.plot([xa, xa, xb, xb], [y + 0.55, yb, yb, y + 0.55],
                    color=_PAIR_COLORS[i % 8], linewidth=_lw(1.4), zorder=2)
        _note(ax, x0 - 0.8, y, "feature slot", ha="right", size=0.85)
        _note(ax, x0 - 0.8, y - 1.0, "frequency", ha="right", size=0.85)
    _note(ax, width / 2, 0.45, f"d = {d}: pair i turns by m·θ_i at position m, θ_i = base^(−2i/d)",
          size=0.85)
    return fig


# ------------------------------------------------------------------------------ lesson 10

def attention_shapes():
    """Tensor shapes through causal multi-head attention with grouped-query attention (GQA), as
    normlib.MultiHeadAttention and HF's LlamaAttention compute it, with the KV cache: keys are
    stored after RoPE and before repeat_kv, and decoding has T = 1 new token against S cached."""
    fig, ax = _canvas(29, 23.2)
    cols = {"q": 4.2, "k": 11.0, "v": 17.8}
    qk, mid = (cols["q"] + cols["k"]) / 2, (cols["q"] + cols["v"]) / 2
    kv = (cols["k"] + cols["v"]) / 2
    _note(ax, cols["k"], 22.6, "x  (B, T, C)", size=1.0, c=INK)
    _line(ax, [(cols["q"], 21.5), (cols["v"], 21.5)], head=False)
    _arrow(ax, (cols["k"], 22.2), (cols["k"], 21.5), head=False)
    dims = {"q": "C → H·D", "k": "C → H_kv·D", "v": "C → H_kv·D"}
    shapes = {"q": "(B, H, T, D)", "k": "(B, H_kv, T, D)", "v": "(B, H_kv, T, D)"}
    for name, x in cols.items():
        b = _box(ax, x, 20.1, 5.8, 1.0, f"{name}_proj: {dims[name]}", "io")
        _arrow(ax, (x, 21.5), b.top)
        _note(ax, x + 0.25, 18.55, f"{name}  {shapes[name]}", ha="left")
    rope = _box(ax, qk, 17.0, 12.6, 1.0, "RoPE on q and k (lesson 08)", "rope")
    cache = _box(ax, kv, 14.6, 12.6, 1.0, "KV cache: after RoPE, before repeat_kv", "io")
    rep = _box(ax, kv, 12.0, 12.6, 1.0, "repeat_kv: each k, v head × H / H_kv", "attn")
    for name in "qk":
        _arrow(ax, (cols[name], 19.6), (cols[name], rope.top[1]))
    _arrow(ax, (cols["v"], 19.6), (cols["v"], cache.top[1]))
    _arrow(ax, (cols["k"], rope.bottom[1]), (cols["k"], cache.top[1]))
    _note(ax, kv, 13.3, "k, v  (B, H_kv, S, D)")
    for name in "kv":
        _arrow(ax, (cols[name], cache.bottom[1]), (cols[name], rep.top[1]))
        _note(ax, cols[name] + 0.25, 10.75, "(B, H, S, D)", ha="left")
    scores = _box(ax, qk, 9.2, 12.6, 1.0, "scores = q kᵀ / √D", "attn")
    _arrow(ax, (cols["q"], rope.bottom[1]), (cols["q"], scores.top[1]))
    _arrow(ax, (cols["k"], rep.bottom[1]), (cols["k"], scores.top[1]))
    _note(ax, cols["q"] + 0.25, 7.95, "(B, H, T, S)", ha="left")
    soft = _box(ax, qk, 6.7, 12.6, 1.0, "causal mask (future → −∞), softmax", "attn")
    _arrow(ax, (cols["q"], scores.bottom[1]), (cols["q"], soft.top[1]))
    _note(ax, cols["q"] + 0.25, 5.45, "weights (B, H, T, S)", ha="left")
    mix = _box(ax, mid, 4.2, 19.4, 1.0, "weights @ v", "attn")
    _arrow(ax, (cols["q"], soft.bottom[1]), (cols["q"], mix.top[1]))
    _arrow(ax, (cols["v"], rep.bottom[1]), (cols["v"], mix.top[1]))
    _note(ax, cols["q"] + 0.25, 2.95, "(B, H, T, D)", ha="left")
    cat = _box(ax, 6.7, 1.5, 11.0, 1.0, "concat heads: transpose, reshape", "io")
    _arrow(ax, (cols["q"], mix.bottom[1]), (cols["q"], cat.top[1]))
    out = _box(ax, 17.0, 1.5, 4.4, 1.0, "o_proj: C → C", "io")
    _arrow(ax, cat.right, out.left)
    _note(ax, (cat.right[0] + out.left[0]) / 2, 2.05, "(B, T, C)")
    _arrow(ax, out.right, (21.3, 1.5))
    _note(ax, 21.5, 1.5, "(B, T, C)", ha="left", size=1.0, c=INK)
    _note(ax, 21.8, 9.6, "B batch, T new tokens\nS keys: cached + new\nC = H · D model width\n"
          "H query heads, D head dim\nH_kv key/value heads:\n  GQA: H_kv divides H\n"
          "  MHA: H_kv = H\n  MQA: H_kv = 1\n\ntraining, prefill: S = T\n"
          "  scores (B, H, T, T)\ndecoding: T = 1\n  scores (B, H, 1, S)",
          ha="left", size=0.85, c=INK, linespacing=1.5)
    return fig
