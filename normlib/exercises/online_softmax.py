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

__all__ = ["check_online_softmax_attention", "ONLINE_SOFTMAX_MISTAKES",
           "ONLINE_SOFTMAX_MUTANTS"]

_RESCALE = "when a block raises the running max from m to m', multiply BOTH the denominator l " \
    "and the accumulator o by exp(m - m') before adding the block's terms"

ONLINE_SOFTMAX_MISTAKES = catalogue("online_softmax_attention", {
    "no_rescale": ("nothing rescaled when the max grows", "the running sum and the accumulator "
                   f"keep terms taken against an old maximum: {_RESCALE}.",
                   "最大值变大时没有重新缩放：分母 l 和累加器 o 都要乘以 exp(m - m')。"),
    "acc_not_rescaled": ("only the denominator rescaled", "the denominator l is rescaled but the "
                         f"accumulator o is not: {_RESCALE}.",
                         "只缩放了分母 l，没有缩放累加器 o：两者都要乘以 exp(m - m')。"),
    "sum_not_rescaled": ("only the accumulator rescaled", "the accumulator o is rescaled but the "
                         f"denominator l is not: {_RESCALE}.",
                         "只缩放了累加器 o，没有缩放分母 l：两者都要乘以 exp(m - m')。"),
    "rescale_inverted": ("rescale factor inverted", "the old sums are multiplied by exp(m' - m); "
                         "the factor is exp(m - m') (at most 1: the new maximum is larger).",
                         "缩放因子写反了：应为 exp(m - m')（不大于 1），不是 exp(m' - m)。"),
    "max_not_updated": ("running max not updated", "the running maximum m must become "
                        "max(m, the block's max) after every block: kept at its first value, "
                        "exp overflows when a later block holds a larger score; never assigned, "
                        "exp(-inf) = 0 wipes the earlier blocks.",
                        "当前最大值没有更新：每个块之后 m 都要变成 max(m, 该块的最大值)。"),
    "no_max": ("exp without subtracting the max", "exp of a large score overflows (inf / inf = "
               "NaN): subtract the running maximum before exp.",
               "直接对分数取 exp，没有减去当前最大值：大分数会溢出（inf / inf = NaN）"
               "。"),
    "normalized_per_tile": ("normalized per tile", "each block's weights are normalized on their "
                            "own (a softmax per tile); the softmax runs over all keys, so keep the "
                            "unnormalized sum and divide by l once, after the last block.",
                            "每个块单独做了归一化：softmax 是对全部键的，应在最后一个块之后再除以 l。"),
    "no_final_division": ("no division by l", "the accumulator holds sum exp(s - m) v: divide it "
                          "by the running sum l after the last block.",
                          "最后没有除以累计分母 l：累加器里是 sum exp(s - m) v，最后一个块之后除以 l。"),
    "no_scaling": ("missing 1/sqrt(d)", "the scores are q k^T / sqrt(D), D the head dim.",
                   "没有缩放：注意力分数应除以 sqrt(头维度)。"),
    "scale": ("wrong scale", "the scores are q . k / sqrt(D), D = q.shape[-1].",
              "缩放系数不对：分数是 q . k / sqrt(头维度)。"),
    "max_starts_at_zero": ("running max starts at 0", "m starts at -inf, the max of nothing: "
                           "started at 0 it never follows a row whose scores are all below 0, and "
                           "when they are all below about -87 (float32) every exp(s - 0) "
                           "underflows to 0 and the output is 0 / 0 = NaN.",
                           "当前最大值从 0 开始：m 应从 -inf 开始；一行的分数全都低于约 -87（float32）"
                           "时，exp(s - 0) 全部下溢为 0，输出 0 / 0 = NaN。"),
    "block_not_rescaled": ("block terms taken against the block's own max", "the block's terms "
                           "exp(s - m_block) must be taken against the new running max m': "
                           f"exp(s - m') = exp(s - m_block) exp(m_block - m'); {_RESCALE}.",
                           "块内各项按该块自己的最大值取了 exp(s - m_block)：应相对新的当前最大值 m' 取，"
                           "即再乘 exp(m_block - m')。"),
    "terms_old_max": ("block terms taken against the old max", "exp(s - m) with the max from "
                      "before the block is exp(s + inf) = inf in the first block (m = -inf): "
                      "update m' = max(m, block max) first, then take exp(s - m').",
                      "块内各项按更新前的最大值取了 exp(s - m)：第一块时 m = -inf，得到 inf。"
                      "先更新 m' = max(m, 块最大值)，再取 exp(s - m')。"),
    "rescale_wrong_max": ("rescale factor from the block's max", "the old sums were taken "
                          "against the old running max m, so they are rescaled by exp(m - m'), "
                          "not exp(m_block - m').",
                          "重新缩放因子用了块的最大值：旧的和是相对旧的当前最大值 m 取的，应乘 exp(m - m')，"
                          "不是 exp(m_block - m')。"),
    "exp2": ("exp2 without log2(e)", "2^x = e^(x ln 2): with torch.exp2 the scores must be "
             "multiplied by log2(e) = 1.4427 (FlashAttention's kernels do), or use torch.exp.",
             "用了 exp2 却没有乘 log2(e)：2^x = e^(x ln 2)，分数要先乘 log2(e) = 1.4427，"
             "或者直接用 torch.exp。"),
    "keys_counted_twice": ("keys counted twice", "blocks overlap: block j covers keys j*B .. "
                           "j*B + B - 1 (k[..., j:j + block_size, :] with j stepping by "
                           "block_size), so each key enters exactly one block.",
                           "有的键被算了两次：块与块重叠了。第 j 块覆盖键 j*B .. j*B + B - 1，"
                           "每个键只进入一个块。"),
    "keys_skipped": ("keys left out", "some keys are in no block: step j over range(0, S, "
                     "block_size) and slice k[..., j:j + block_size, :]; the last block may "
                     "be smaller, keep it.",
                     "有的键没有进入任何块：用 range(0, S, block_size) 遍历，切片 k[..., j:j + block_size, :]；"
                     "最后一块可以更小，要保留。"),
    "tile_merge": ("blocks combined wrongly", "with a single block the output is right, with "
                   f"several it is not: the blocks are merged wrongly; {_RESCALE}.",
                   "只有一个块时结果正确，多个块时不对：块与块的合并（重新缩放）写错了。"),
})


def _online(q, k, v, block, mode="ok", scale=None):
    """The tiled loop with one mistake (mode); mode "ok" is the right answer."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)              # (B, H, T)
    first = None
    row_sum = torch.zeros_like(m)
    o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)               # (B, H, T, Dv)
    tiles = 0
    if mode == "max_zero":
        m = torch.zeros_like(m)
    for j in range(0, k.shape[-2], block):
        s = q @ k[..., j:j + block, :].transpose(-2, -1) * scale            # (B, H, T, Bc)
        vj = v[..., j:j + block, :]
        if mode in ("per_tile", "per_tile_mean"):
            p = torch.exp(s - s.amax(-1, keepdim=True))
            o = o + (p / p.sum(-1, keepdim=True)) @ vj
            tiles += 1
            continue
        m_block = s.amax(-1)
        m_new = torch.maximum(m, m_block)
        if mode == "max_frozen":
            first = m_new if first is None else first
            m_new = first
        p = torch.exp(s - {"terms_block": m_block, "terms_old": m}.get(mode, m_new)[..., None])
        factor = torch.exp((m_block if mode == "factor_block" else m) - m_new)
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
          ("normalized_per_tile", "per_tile_mean"), ("no_final_division", "no_final_division"),
          ("block_not_rescaled", "terms_block"), ("terms_old_max", "terms_old"),
          ("rescale_wrong_max", "factor_block")]


def _in_double(f):
    """The mutant computed in float64, then cast to the input's dtype."""
    return lambda q, k, v, block: f(q.double(), k.double(), v.double(), block).to(q.dtype)


ONLINE_SOFTMAX_MUTANTS = [(key, _in_double(f)) for key, f in [
    *[(key, (lambda q, k, v, b, mode=mode: _online(q, k, v, b, mode))) for key, mode in _MODES],
    ("no_scaling", lambda q, k, v, b: _online(q, k, v, b, scale=1.0)),
    ("scale", lambda q, k, v, b: _online(q, k, v, b, scale=1 / q.shape[-1])),
    ("exp2", lambda q, k, v, b: _online(q, k, v, b, scale=math.log(2) / math.sqrt(q.shape[-1]))),
]] + [("max_starts_at_zero", lambda q, k, v, b: _online(q, k, v, b, "max_zero"))]  # underflows
# in the input's dtype, so not in float64


def _axis(D: int, c: float) -> torch.Tensor:
    """c e_0 in D dims: q = c e_0 and k = -c e_0 give the score -c^2 / sqrt(D)."""
    e = torch.zeros(D)
    e[0] = c
    return e


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
    Case("S = 6 keys, block_size = 2, D = 16, every score below -100", lambda: (
        randn(2, 2, 4, 16, seed=70, scale=0.3) + _axis(16, 24.0),
        randn(2, 2, 6, 16, seed=71, scale=0.3) - _axis(16, 24.0), randn(2, 2, 6, 16, seed=72)),
        {"block_size": 2}, tol_factor=2),
]


_FORBIDDEN = {"scaled_dot_product_attention": "F.scaled_dot_product_attention",
              "_scaled_dot_product_attention_math": "torch's SDPA kernel",
              "softmax": "softmax (torch.softmax, F.softmax or Tensor.softmax)",
              "multi_head_attention_forward": "nn.MultiheadAttention"}


def check_online_softmax_attention(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(q, k, v, block_size)`` against F.scaled_dot_product_attention (no mask)."""
    s = Session("Online-softmax attention", ONLINE_SOFTMAX_MISTAKES,
                exercise="online_softmax_attention", time_limit=time_limit,
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
        known = [("no_scaling", 1.0, "1: not scaled"), ("scale", 1 / Ds, "1 / D"),
                 ("exp2", math.log(2) / math.sqrt(Ds), "ln(2) / sqrt(D): exp2 without log2(e)")]
        key, text = next(((k, t) for k, v, t in known if abs(got - v) <= 1e-6),
                         ("scale", f"{fmt(got)} (with D = {Ds})"))
        return (key, f"In one block of two keys your scores are q . k times {text}; the scale is "
                f"1 / sqrt(D) = {fmt(want)}, D = q.shape[-1].")

    def overflow():
        # scores 800 .. 801 in the first block and 799 .. 800 after: exp(800) overflows float64
        big = torch.tensor([800.0, 801.0, 799.0, 800.0, 799.5, 800.5], dtype=torch.float64)
        rising = torch.tensor([0.0, 1.0, 2.0, 3.0, 801.0, 0.0], dtype=torch.float64)
        falling = torch.tensor([801.0, 0.0, 0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
        one = torch.ones(1, dtype=torch.float64)
        seen = []                                        # (finite, right) per input
        for scores in (big, rising, falling):
            qa, ka = inputs(scores, one)
            w = s.call(fn, qa, ka, eye, block_size=2)
            if not isinstance(w, torch.Tensor) or w.shape != (1, 1, 1, S):
                return None
            w = w.detach().double()
            seen.append((bool(w.isfinite().all()),
                         near(w, _online(qa, ka, eye, 2), 1e-6, 1e-9)))
        if seen[0][1] and seen[1][1] and seen[2][1]:
            return None
        if seen[0][1] and seen[1][1] and not seen[2][0]:
            return ("max_not_updated", "With the largest score (801) in the first block and "
                    "scores 0 .. 3 after it, your output is not finite: exp(801 - 1) overflows, "
                    "so the running max fell back to a later block's own max. "
                    + _cap(ONLINE_SOFTMAX_MISTAKES["max_not_updated"][1]))
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

    def counted():
        """Keys counted n_j times give weights n_j exp(s_j) / sum_i n_i exp(s_i): the ratio to
        the true weights is n_j up to a factor per row, the same for every row."""
        for block in (2, 4):
            W, P = weights(block), _online(q, k, eye, block)[0, 0]
            if not bool(W.isfinite().all()) or near(W, P, 1e-6, 1e-9):
                continue
            r = W / P                                            # (rows, S)
            once = torch.where(r > 1e-12, r, math.inf).amin(-1, keepdim=True)  # a key seen once
            n = r / once
            counts = torch.round(n[0])
            if not near(n, counts.expand_as(n), 1e-6, 1e-6) or bool((counts == 1).all()) or \
                    float(counts.max()) > 3:
                continue
            twice = [j for j in range(S) if counts[j] > 1]
            skipped = [j for j in range(S) if counts[j] == 0]
            if skipped:
                return ("keys_skipped", f"With v = I your output is the weights: over blocks of "
                        f"{block} of S = {S} keys, keys {skipped} get no weight at all, the "
                        "others their right share of what is left. "
                        + _cap(ONLINE_SOFTMAX_MISTAKES["keys_skipped"][1]))
            return ("keys_counted_twice", f"With v = I your output is the weights: over blocks "
                    f"of {block} of S = {S} keys, keys {twice} weigh {int(counts.max())} times "
                    "their share against the others: they are counted more than once. "
                    + _cap(ONLINE_SOFTMAX_MISTAKES["keys_counted_twice"][1]))
        return None

    def underflow():
        """Every score of a row near -1000: exp(s - m) underflows unless m follows the scores
        down. The same scores shifted up by 1000 must give the same weights."""
        low, high = (inputs(a + shift, torch.ones(1, dtype=torch.float64))
                     for shift in (-1000.0, 0.0))
        w_low = s.call(fn, *low, eye, block_size=2)
        w_high = s.call(fn, *high, eye, block_size=2)
        if not all(isinstance(w, torch.Tensor) and w.shape == (1, 1, 1, S)
                   for w in (w_low, w_high)):
            return None
        right = _online(*high, eye, 2)
        if near(w_low, right, 1e-6, 1e-9) or not near(w_high, right, 1e-6, 1e-9):
            return None
        return ("max_starts_at_zero", "With scores near 1 your weights are right; with the same "
                "scores minus 1000 (every score of the row near -1000) they are "
                f"{ {True: 'wrong', False: 'not finite'}[bool(w_low.isfinite().all())]}: "
                "exp(s - m) "
                "underflowed to 0 for every key, so m did not follow the scores down. "
                + _cap(ONLINE_SOFTMAX_MISTAKES["max_starts_at_zero"][1]))

    def measured():
        rows = []
        for block in (S, 2, 1):
            W = weights(block)
            P = _online(q, k, eye, block)[0, 0]
            bad = ~torch.isclose(W, P, 1e-6, 1e-9)
            rows.append(f"block_size = {block}: " + ("right" if not bool(bad.any()) else
                        f"{int(bad.sum())} of {bad.numel()} weights wrong (max |error| "
                        f"{float((W - P).abs().nan_to_num(float('inf')).max()):.3g}, "
                        f"{ {True: 'finite', False: 'NaN or inf'}[bool(W.isfinite().all())]}, "
                        f"row sums {', '.join(fmt(float(x)) for x in W.sum(-1))})"))
        if all(row.endswith("right") for row in rows):
            return None
        return ("cannot_tell", "No known mistake fits. Measured with v = I (your output is the "
                f"weights) on 3 queries and S = {S} keys: " + "; ".join(rows) + ". Weights that "
                "go wrong only with several blocks point at the merge; wrong with one block, at "
                "the scores or the softmax itself.")

    return [counted, merge, one_block, overflow, underflow, scale, measured]


def _name(mode: str) -> str:
    return {"no_rescale": "those of sums never rescaled",
            "acc_not_rescaled": "those of a rescaled denominator and an accumulator left as it was",
            "sum_not_rescaled": "those of a rescaled accumulator and a denominator left as it was",
            "rescale_inverted": "those of a rescale by exp(m' - m)",
            "max_forgotten": "those of the last block alone (a running max never assigned: "
                             "exp(-inf - m') = 0 wipes the earlier blocks)",
            "per_tile": "softmaxes per block, added", "per_tile_mean": "softmaxes per block, "
            "averaged", "no_final_division": "exp(s - m) not divided by l",
            "terms_block": "those of block terms exp(s - m_block) added without exp(m_block - m')",
            "terms_old": "those of block terms taken against the max before the block",
            "factor_block": "those of old sums rescaled by exp(m_block - m')"}[mode]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
