"""The online-softmax (tiled) attention checker, and the mistakes it can name.

The learner writes ``online_softmax_attention(q, k, v, block_size=2)`` for q (B, H, T, D) and
k, v (B, H, S, D): attention without a mask, computed over blocks of ``block_size`` keys with a
running maximum m, a running denominator l and an accumulator o per query row; when a block
raises the maximum from m to m', l and o are multiplied by exp(m - m') (Milakov & Gimelshein 2018,
arXiv 1805.02867, Algorithm 3; FlashAttention, Dao et al. 2022, arXiv 2205.14135, Algorithm 1).
The reference is ``F.scaled_dot_product_attention`` (normlib.flash.online_softmax_attention is the
library's version).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import normlib as nl

from ._cases import Case, run_cases
from ._compare import randn
from ._generic import catalogue
from ._probes import fmt, near
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["TITLE_ZH", "check_online_softmax_attention", "ONLINE_SOFTMAX_MISTAKES",
           "ONLINE_SOFTMAX_MUTANTS"]

# the exercise's title in the Chinese report (catalog.py shows it in the drill)
TITLE_ZH = "手撕在线 softmax 分块注意力（FlashAttention 的核心）"

_RESCALE = "when a block raises the running max from m to m', multiply BOTH the denominator l " \
    "and the accumulator o by exp(m - m') before adding the block's terms"

ONLINE_SOFTMAX_MISTAKES = catalogue("online_softmax_attention", {
    "no_rescale": ("nothing rescaled when the max grows", "the running sum and the accumulator "
                   f"keep terms taken against an old maximum: {_RESCALE}."),
    "acc_not_rescaled": ("only the denominator rescaled", "the denominator l is rescaled but the "
                         f"accumulator o is not: {_RESCALE}."),
    "sum_not_rescaled": ("only the accumulator rescaled", "the accumulator o is rescaled but the "
                         f"denominator l is not: {_RESCALE}."),
    "rescale_inverted": ("rescale factor inverted", "the old sums are multiplied by exp(m' - m); "
                         "the factor is exp(m - m') (at most 1: the new maximum is larger)."),
    "max_not_updated": ("running max not updated", "the running maximum m must become "
                        "max(m, the block's max) after every block: kept at its first value, "
                        "exp overflows when a later block holds a larger score; never assigned, "
                        "exp(-inf) = 0 wipes the earlier blocks."),
    "no_max": ("exp without subtracting the max", "exp of a large score overflows (inf / inf = "
               "NaN): subtract the running maximum before exp."),
    "normalized_per_tile": ("normalized per tile", "each block's weights are normalized on their "
                            "own (a softmax per tile); the softmax runs over all keys, so keep the "
                            "unnormalized sum and divide by l once, after the last block."),
    "no_final_division": ("no division by l", "the accumulator holds sum exp(s - m) v: divide it "
                          "by the running sum l after the last block."),
    "no_scaling": ("missing 1/sqrt(d)", "the scores are q k^T / sqrt(D), D the head dim."),
    "scale": ("wrong scale", "the scores are q . k / sqrt(D), D = q.shape[-1]."),
    "tile_merge": ("blocks combined wrongly", "with a single block the output is right, with "
                   f"several it is not: the blocks are merged wrongly; {_RESCALE}."),
})


def _online(q, k, v, block, mode="ok", scale=None):
    """The tiled loop with one mistake (mode); mode "ok" is the right answer."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)              # (B, H, T)
    first = None
    row_sum = torch.zeros_like(m)
    o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)               # (B, H, T, Dv)
    tiles = 0
    for j in range(0, k.shape[-2], block):
        s = q @ k[..., j:j + block, :].transpose(-2, -1) * scale            # (B, H, T, Bc)
        vj = v[..., j:j + block, :]
        if mode in ("per_tile", "per_tile_mean"):
            p = torch.exp(s - s.amax(-1, keepdim=True))
            o = o + (p / p.sum(-1, keepdim=True)) @ vj
            tiles += 1
            continue
        m_new = torch.maximum(m, s.amax(-1))
        if mode == "max_frozen":
            first = m_new if first is None else first
            m_new = first
        p = torch.exp(s - m_new[..., None])
        factor = torch.exp(m - m_new)
        if mode == "rescale_inverted":
            factor = torch.exp(m_new - m).nan_to_num(0.0, 0.0)
        row_sum = row_sum * (1.0 if mode in ("no_rescale", "sum_not_rescaled") else factor) \
            + p.sum(-1)
        o = o * (1.0 if mode in ("no_rescale", "acc_not_rescaled") else factor[..., None]) + p @ vj
        if mode != "max_forgotten":
            m = m_new
    if mode == "per_tile":
        return o
    if mode == "per_tile_mean":
        return o / tiles
    return o if mode == "no_final_division" else o / row_sum[..., None]


_MODES = [("no_rescale", "no_rescale"), ("acc_not_rescaled", "acc_not_rescaled"),
          ("sum_not_rescaled", "sum_not_rescaled"), ("rescale_inverted", "rescale_inverted"),
          ("max_not_updated", "max_forgotten"), ("normalized_per_tile", "per_tile"),
          ("normalized_per_tile", "per_tile_mean"), ("no_final_division", "no_final_division")]


def _in_double(f):
    """The mutant computed in float64, then cast to the input's dtype."""
    return lambda q, k, v, block: f(q.double(), k.double(), v.double(), block).to(q.dtype)


ONLINE_SOFTMAX_MUTANTS = [(key, _in_double(f)) for key, f in [
    *[(key, (lambda q, k, v, b, mode=mode: _online(q, k, v, b, mode))) for key, mode in _MODES],
    ("no_scaling", lambda q, k, v, b: _online(q, k, v, b, scale=1.0)),
    ("scale", lambda q, k, v, b: _online(q, k, v, b, scale=1 / q.shape[-1])),
]]


def _reference(q, k, v, block_size):
    return F.scaled_dot_product_attention(q, k, v)


def _case(T, S, block, seed, dtype=torch.float32, scale=2.0, note=""):
    """q (2, 2, T, 8) and k (2, 2, S, 8) ~ scale N(0, 1), v ~ N(0, 1), over blocks of ``block``."""
    return Case(f"S = {S} keys, block_size = {block}" + (f", {note}" if note else ""),
                lambda: tuple(randn(2, 2, n, 8, seed=seed + i, dtype=dtype,
                                    scale=scale if i < 2 else 1.0)
                              for i, n in enumerate((T, S, S))),
                {"block_size": block}, tol_factor=2)


CASES = [
    _case(5, 8, 2, 10),
    _case(4, 7, 3, 20, note="the last block smaller"),
    _case(3, 6, 1, 30, note="one key per block"),
    _case(6, 5, 8, 40, note="one block holds every key"),
    _case(5, 9, 4, 50, dtype=torch.float64),
    _case(4, 8, 2, 60, scale=12.0, note="large scores"),
]


_FORBIDDEN = {"scaled_dot_product_attention": "F.scaled_dot_product_attention",
              "_scaled_dot_product_attention_math": "torch's SDPA kernel",
              "softmax": "softmax (torch.softmax, F.softmax or Tensor.softmax)",
              "multi_head_attention_forward": "nn.MultiheadAttention"}


def check_online_softmax_attention(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(q, k, v, block_size)`` against F.scaled_dot_product_attention (no mask)."""
    s = Session("Online-softmax attention", ONLINE_SOFTMAX_MISTAKES,
                exercise="online_softmax_attention", title_zh=TITLE_ZH, time_limit=time_limit,
                forbidden=_FORBIDDEN,
                references={nl.flash.online_softmax_attention: "nl.flash.online_softmax_attention",
                            nl.attention: "nl.attention"})
    if not s.require_callable(fn):
        return s.result()

    run_cases(s, fn, CASES, reference=_reference, mutants=ONLINE_SOFTMAX_MUTANTS)
    s.probe(*_probes(s, fn))
    return s.result()


def _probes(s: Session, fn) -> list:
    """Probes, float64. The scores of row t are c_t a_j (q = c_t sqrt(D) e_0, k_j = a_j e_0) with
    block maxima that fall, then rise (2, 1, 3 in row 0; other orders in the others), and v = I (S = D = 6), so the output *is* the
    weight matrix: each way of merging blocks wrongly gives its own weights. Then one block
    against several; the scale (one block, two keys); and overflow with the largest score in the
    first block, then in a later one."""
    S = D = 6
    a = torch.tensor([0.0, 2.0, 1.0, 0.5, 3.0, -1.0], dtype=torch.float64)
    c = torch.tensor([1.0, 1.5, -0.8], dtype=torch.float64)

    def inputs(a, c):
        q = torch.zeros(1, 1, len(c), D, dtype=torch.float64)
        q[..., 0] = c * math.sqrt(D)
        k = torch.zeros(1, 1, len(a), D, dtype=torch.float64)
        k[..., 0] = a
        return q, k

    q, k = inputs(a, c)
    eye = torch.eye(S, dtype=torch.float64).expand(1, 1, S, S)

    def weights(block, q=q, k=k):
        w = s.call(fn, q, k, eye, block_size=block)
        if not isinstance(w, torch.Tensor) or w.shape != (1, 1, q.shape[-2], S):
            raise Fail("unusable output")
        return w.detach().double()[0, 0]

    def merge():
        W = weights(2)
        P = _online(q, k, eye, 2)[0, 0]
        if near(W, P, 1e-6, 1e-9):
            return None
        if not bool(W.isfinite().all()):
            return None
        for key, mode in _MODES:
            if near(W, _online(q, k, eye, 2, mode)[0, 0], 1e-6, 1e-9):
                return (key, "With v = I your output is the attention weights. Over blocks of 2 "
                        f"keys yours are {_name(mode)}. "
                        + _cap(ONLINE_SOFTMAX_MISTAKES[key][1]))
        tiles = W.reshape(-1, 3, 2).sum(-1)
        if near(tiles, tiles[:, :1].expand_as(tiles), 1e-6, 1e-9):
            return ("normalized_per_tile", "With v = I your output is the attention weights, and "
                    f"each block of 2 keys gets the same total weight ({fmt(float(tiles[0, 0]))}) "
                    "in every row: each tile is normalized on its own. "
                    + _cap(ONLINE_SOFTMAX_MISTAKES["normalized_per_tile"][1]))
        return None

    def one_block():
        if near(weights(2), _online(q, k, eye, 2)[0, 0], 1e-6, 1e-9):
            return None
        W1 = weights(S)
        if not near(W1, _online(q, k, eye, S)[0, 0], 1e-6, 1e-9):
            return None
        return ("tile_merge", "With block_size >= S (one block) your weights are right; with "
                "blocks of 2 keys they are not, so the error is in how the blocks are combined: "
                f"{_RESCALE}.")

    def scale():
        Ds, step = 16, 1.5
        qs = torch.zeros(1, 1, 1, Ds, dtype=torch.float64)
        qs[..., 0] = 1.0
        ks = torch.zeros(1, 1, 2, Ds, dtype=torch.float64)
        ks[..., 1, 0] = step
        vs = torch.zeros(1, 1, 2, Ds, dtype=torch.float64)
        vs[..., 1, :] = 1.0
        y = s.call(fn, qs, ks, vs, block_size=2)
        if not isinstance(y, torch.Tensor) or y.shape != qs.shape:
            return None
        p = float(y[0, 0, 0, 0])                  # the weight of key 1 = sigmoid(step * scale)
        if not 0 < p < 1:
            return None
        got = math.log(p / (1 - p)) / step
        want = 1 / math.sqrt(Ds)
        if abs(got - want) <= 1e-6:
            return None
        known = [("no_scaling", 1.0, "1: not scaled"), ("scale", 1 / Ds, "1 / D")]
        key, text = next(((k, t) for k, v, t in known if abs(got - v) <= 1e-6),
                         ("scale", f"{fmt(got)} (with D = {Ds})"))
        return (key, f"In one block of two keys your scores are q . k times {text}; the scale is "
                f"1 / sqrt(D) = {fmt(want)}, D = q.shape[-1].")

    def overflow():
        # scores 800 .. 801 in the first block and 799 .. 800 after: exp(800) overflows float64
        big = torch.tensor([800.0, 801.0, 799.0, 800.0, 799.5, 800.5], dtype=torch.float64)
        rising = torch.tensor([0.0, 1.0, 2.0, 3.0, 801.0, 0.0], dtype=torch.float64)
        one = torch.ones(1, dtype=torch.float64)
        seen = []                                        # (finite, right) per input
        for scores in (big, rising):
            qa, ka = inputs(scores, one)
            w = s.call(fn, qa, ka, eye, block_size=2)
            if not isinstance(w, torch.Tensor) or w.shape != (1, 1, 1, S):
                return None
            w = w.detach().double()
            seen.append((bool(w.isfinite().all()),
                         near(w, _online(qa, ka, eye, 2), 1e-6, 1e-9)))
        if seen[0][1] and seen[1][1]:
            return None
        if not seen[0][0]:
            return ("no_max", "With scores near 800 (the largest in the first block), your "
                    "output is NaN or inf where the weights are finite: exp(800) overflows. "
                    + _cap(ONLINE_SOFTMAX_MISTAKES["no_max"][1]))
        if seen[0][1] and not seen[1][0]:
            return ("max_not_updated", "With the largest score (801) in the first block your "
                    "weights are right; with scores 0 .. 3 first and 801 in the third block "
                    "they are not finite: exp(801 - 3) overflows, so the maximum was not updated "
                    "when the third block raised it. "
                    + _cap(ONLINE_SOFTMAX_MISTAKES["max_not_updated"][1]))
        return None

    return [merge, one_block, scale, overflow]


def _name(mode: str) -> str:
    return {"no_rescale": "those of sums never rescaled",
            "acc_not_rescaled": "those of a rescaled denominator and an accumulator left as it was",
            "sum_not_rescaled": "those of a rescaled accumulator and a denominator left as it was",
            "rescale_inverted": "those of a rescale by exp(m' - m)",
            "max_forgotten": "those of the last block alone (a running max never assigned: "
                             "exp(-inf - m') = 0 wipes the earlier blocks)",
            "per_tile": "softmaxes per block, added", "per_tile_mean": "softmaxes per block, "
            "averaged", "no_final_division": "exp(s - m) not divided by l"}[mode]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
