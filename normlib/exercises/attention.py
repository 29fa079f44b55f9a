"""The scaled dot-product attention checker, and the mistakes it can name.

The learner writes ``attention(q, k, v, causal=True)`` for (B, H, T, D) inputs:
softmax(q k^T / sqrt(D) + mask) v, where the causal mask lets position t attend to 0..t.
The reference is ``nl.attention`` (equal to ``F.scaled_dot_product_attention``).
"""

from __future__ import annotations

import math

import torch

import normlib as nl

from ._cases import Case, DoesNotApply, run_backward, run_cases
from ._compare import randn
from ._generic import catalogue
from ._probes import causal_pattern, fmt, near, output, weighted
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_attention", "ATTENTION_MISTAKES", "ATTENTION_MUTANTS"]

ATTENTION_MISTAKES = catalogue("attention", {
    "no_scaling": ("missing 1/sqrt(d)", "the scores are not scaled: divide q k^T by sqrt(D), the "
                   "head dim, or the softmax saturates as D grows (Vaswani et al. 2017, 3.2.1).",
                   "没有缩放：注意力分数应除以 sqrt(头维度)。"),
    "scaled_by_d": ("scaled by 1/d", "the scores are divided by D; the scale is 1 / sqrt(D).",
                    "分数除以了头维度：缩放系数是 1 / sqrt(头维度)。"),
    "scaled_by_sqrt_t": ("scaled by sqrt(T)", "the scale uses the sequence length; it is "
                         "1 / sqrt(D) with D = q.shape[-1], the head dim.",
                         "分数除以了 sqrt(T)：缩放系数是 1 / sqrt(头维度)。"),
    "mask_excludes_diagonal": ("mask off by one: token cannot see itself", "the causal mask hides "
                               "the diagonal, so a token cannot attend to itself (and row 0 is all "
                               "-inf: NaN). Keep j <= t: torch.ones(T, T).tril().",
                               "因果掩码有差一错误（off-by-one）：挡住了对角线，token 看不到自己（第 0 行全是 -inf，"
                               "得到 NaN）。应保留 j <= t：torch.ones(T, T).tril()。"),
    "mask_leaks_future": ("mask off by one: sees one token ahead", "the causal mask lets token t "
                          "see t + 1: use tril() (diagonal=0), or mask triu(diagonal=1).",
                          "因果掩码有差一错误（off-by-one）：token t 能看到 t + 1。用 tril()（diagonal=0）"
                          "，或屏蔽 triu(diagonal=1)。"),
    "mask_inverted": ("mask inverted", "the mask hides the past and keeps the future: mask out "
                      "j > t, i.e. where torch.ones(T, T).triu(1) is 1.",
                      "因果掩码反了：应屏蔽 j > t 的键。"),
    "mask_after_softmax": ("mask applied after softmax", "masking after the softmax leaves rows "
                           "that no longer sum to 1: set the scores to -inf before the softmax.",
                           "在 softmax 之后才做掩码：每行的权重之和不再为 1。应在 softmax 之前把分数设为 -inf。"),
    "mask_with_zero": ("masked scores set to 0", "masked scores must be -inf (or a very large "
                       "negative number), not 0: exp(0) = 1 still gives future tokens weight.",
                       "被屏蔽的分数设成了 0：应设为 -inf。"),
    "causal_ignored": ("causal flag ignored", "causal=True must hide future positions; "
                       "causal=False must not mask at all.",
                       "忽略了 causal 参数。"),
    "softmax_wrong_dim": ("softmax over the wrong dim", "the softmax must run over the keys, the "
                          "last dim of the (B, H, T, T) scores: each query's weights sum to 1.",
                          "softmax 作用在错误的维度上：应在键的维度（最后一维）上。"),
    "naive_softmax": ("exp without subtracting the max", "exp of large scores overflows to inf "
                      "(inf / inf = NaN): use torch.softmax, or subtract the row max first.",
                      "直接对分数取 exp：大分数会溢出为 inf（inf / inf = NaN）。请用 torch.softmax，"
                      "或先减去每行的最大值。"),
    "returns_weights": ("returns the attention weights", "multiply the weights by v: the output is "
                        "(B, H, T, D), not the (B, H, T, T) weights.",
                        "返回了注意力权重，而不是输出 weights @ v。"),
    "no_transpose": ("k not transposed", "the scores are q @ k.transpose(-2, -1): (T, D) @ (D, T).",
                     "k 没有转置：分数是 q @ k.transpose(-2, -1)。"),
    "mask_direction": ("mask hides the past", "the causal mask keeps keys j <= t and hides the "
                       "future, j > t: torch.ones(T, T).tril().",
                       "因果掩码方向反了：应保留 j <= t 的键、屏蔽未来的 j > t。"),
    "rows_not_normalized": ("weights do not sum to 1", "each query's attention weights are a "
                            "softmax over the keys: they sum to 1.",
                            "每个查询的注意力权重之和不为 1：应在键上做 softmax。"),
    "scale": ("wrong scale", "the scores are q . k / sqrt(D).",
              "缩放系数不对：分数是 q . k / sqrt(头维度)。"),
    "weights_transposed": ("weights transposed", "the output is weights @ v, the softmax taken "
                           "over the keys (the last dim).",
                           "注意力权重被转置了：输出是 weights @ v，softmax 在最后一维（键）上。"),
})


def _attn(q, k, v, causal=True, scale=None, diagonal=0, mode="fill", dim=-1, naive=False,
          weights_only=False):
    T = q.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    keep = torch.ones(T, T, dtype=torch.bool).tril(diagonal)
    if mode == "inverted":
        keep = torch.ones(T, T, dtype=torch.bool).triu()
    if causal and mode in ("fill", "inverted"):
        s = s.masked_fill(~keep, float("-inf"))
    if causal and mode == "zero":
        s = s.masked_fill(~keep, 0.0)
    if naive:
        w = s.exp() / s.exp().sum(dim, keepdim=True)
    else:
        w = torch.softmax(s, dim=dim)
    if causal and mode == "after":
        w = w * keep
    return w if weights_only else w @ v


def _causal_only(f):
    """A mistake in the mask: it means nothing with causal=False."""
    def g(q, k, v, causal):
        if not causal:
            raise DoesNotApply
        return f(q, k, v)
    return g


def _upcast(f):
    """The mutant in the input's precision (float32 for half types), so that an exp that
    overflows for the learner overflows for the mutant too."""
    def g(q, k, v, causal):
        return f(*(t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
                   for t in (q, k, v)), causal)
    return g


ATTENTION_MUTANTS = [(key, _upcast(f)) for key, f in [
    ("no_scaling", lambda q, k, v, c: _attn(q, k, v, c, scale=1.0)),
    ("scaled_by_d", lambda q, k, v, c: _attn(q, k, v, c, scale=1 / q.shape[-1])),
    ("scaled_by_sqrt_t", lambda q, k, v, c: _attn(q, k, v, c, scale=1 / math.sqrt(q.shape[-2]))),
    ("softmax_wrong_dim", lambda q, k, v, c: _attn(q, k, v, c, dim=-2)),
    ("softmax_wrong_dim", lambda q, k, v, c: _attn(q, k, v, c, dim=1)),
    ("naive_softmax", lambda q, k, v, c: _attn(q, k, v, c, naive=True)),
    ("returns_weights", lambda q, k, v, c: _attn(q, k, v, c, weights_only=True)),
    ("mask_excludes_diagonal", _causal_only(lambda q, k, v: _attn(q, k, v, diagonal=-1))),
    ("mask_leaks_future", _causal_only(lambda q, k, v: _attn(q, k, v, diagonal=1))),
    ("mask_inverted", _causal_only(lambda q, k, v: _attn(q, k, v, mode="inverted"))),
    ("mask_after_softmax", _causal_only(lambda q, k, v: _attn(q, k, v, mode="after"))),
    ("mask_with_zero", _causal_only(lambda q, k, v: _attn(q, k, v, mode="zero"))),
    ("causal_ignored", lambda q, k, v, c: _attn(q, k, v, causal=not c)),
]]


def _qkv(shape, seed, dtype=torch.float32, scale=1.0):
    """q and k ~ scale N(0, 1), v ~ N(0, 1), each (B, H, T, D)."""
    return lambda: tuple(randn(*shape, seed=seed + i, dtype=dtype, scale=scale if i < 2 else 1.0)
                         for i in range(3))


def _reference(q, k, v, causal):
    return nl.attention(q, k, v, causal=causal)


CASES = [
    Case("causal=True (default)", _qkv((2, 2, 5, 8), 10), {"causal": True}, ("causal",), 2),
    Case("causal=False", _qkv((2, 2, 5, 8), 20), {"causal": False}, tol_factor=2),
    Case("causal=True, odd sizes", _qkv((1, 3, 7, 6), 30, torch.float64), {"causal": True},
         tol_factor=2),
    Case("causal=True, a batch of 2, T = 1", _qkv((2, 1, 1, 4), 40), {"causal": True},
         tol_factor=2),
    Case("causal=True, large scores", _qkv((1, 2, 6, 8), 50, scale=12.0), {"causal": True},
         tol_factor=2),
    Case("causal=True", _qkv((1, 2, 5, 8), 60, torch.bfloat16), {"causal": True}, tol_factor=2),
]
BACKWARD = Case("backward through q, k, v", lambda: tuple(
    randn(1, 2, 4, 6, seed=70 + i, dtype=torch.float64) for i in range(3)), {"causal": True})


_FORBIDDEN = {"scaled_dot_product_attention": "F.scaled_dot_product_attention",
              "_scaled_dot_product_attention_math": "torch's SDPA kernel",
              "multi_head_attention_forward": "nn.MultiheadAttention",
              "_native_multi_head_attention": "nn.MultiheadAttention"}


def check_attention(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(q, k, v, causal=True)`` for (B, H, T, D) against nl.attention."""
    s = Session("Attention", ATTENTION_MISTAKES, exercise="attention",
                time_limit=time_limit, forbidden=_FORBIDDEN,
                references={nl.attention: "nl.attention",
                            nl.MultiHeadAttention.forward: "nl.MultiHeadAttention"},
                error_hints=((r"cannot be multiplied|Expected size for first two dimensions|"
                              r"must match the size of tensor", "no_transpose"),))
    if not s.require_callable(fn):
        return s.result()

    run_cases(s, fn, CASES, reference=_reference, mutants=ATTENTION_MUTANTS)
    run_backward(s, fn, BACKWARD, ("q", "k", "v"), reference=_reference,
                 mutants=ATTENTION_MUTANTS)
    s.probe(*_probes(s, fn))
    return s.result()


# causal_pattern's wrong masks -> this exercise's keys
_MASK_KEYS = {"inverted": "mask_direction", "excludes_diagonal": "mask_excludes_diagonal",
              "leaks_future": "mask_leaks_future"}


def _probes(s: Session, fn) -> list:
    """Property probes, float64: with v = I (T = D = 6) the output *is* the weight matrix, so its
    zeros (the mask), its row sums (the softmax) and its orientation show; then one query against a
    key of 0 and a key of s e_0 (D = 16, H = 3, T = 2) measures the scale of the scores."""
    T = 6
    q, k = (randn(1, 1, T, T, seed=950 + i, dtype=torch.float64) for i in range(2))
    eye = torch.eye(T, dtype=torch.float64).expand(1, 1, T, T)
    lower = torch.ones(T, T, dtype=torch.bool).tril()

    def weights(causal):
        w = s.call(fn, q, k, eye, causal=causal)
        if not isinstance(w, torch.Tensor) or w.shape != eye.shape:
            raise Fail("unusable output")
        return w.detach().double()[0, 0]

    def reference(causal):
        return nl.attention(q, k, eye, causal=causal)[0, 0]

    def pattern():
        W, P = weights(True), reference(True)
        if near(W, P, 1e-6, 1e-9) and near(weights(False), reference(False), 1e-6, 1e-9):
            return None
        if near(W.T, P, 1e-6, 1e-9):
            return ("weights_transposed", "With v = I your output is the transpose of the "
                    "attention weights: you multiply weights^T by v (or take the softmax over the "
                    "queries and transpose). The output is weights @ v, weights (T_q, T_k) with "
                    "each row summing to 1.")
        found = causal_pattern(W)
        if found and found[0] in _MASK_KEYS:
            return (_MASK_KEYS[found[0]], f"With causal=True, v = I shows that query t attends to "
                    f"{found[1]}. The causal mask keeps keys j <= t (torch.ones(T, T).tril()) and "
                    "sets the others to -inf before the softmax.")
        sums = W.sum(-1)
        if not near(sums, torch.ones_like(sums), 1e-6, 1e-9):
            if near(W.sum(-2), torch.ones(T, dtype=torch.float64), 1e-6, 1e-9):
                return ("softmax_wrong_dim", "With v = I the columns of your weights sum to 1, "
                        "not the rows: the softmax runs over the queries. It runs over the keys, "
                        "the last dim of the (..., T_q, T_k) scores.")
            return ("rows_not_normalized", f"With v = I the rows of your weights sum to "
                    f"{fmt(float(sums.min()))} .. {fmt(float(sums.max()))}, not 1: the weights are "
                    "the softmax itself, nothing applied after it (no scaling, no log).")
        if near(W, reference(False), 1e-6, 1e-9):
            return ("causal_ignored", "With causal=True your weights are those without a mask: "
                    "causal=True must hide the keys j > t.")
        if bool(weighted(W)[~lower].any()):
            return ("mask_with_zero", "With causal=True, future keys still get some weight (less "
                    "than without a mask): the masked scores must be -inf, not 0 (exp(0) = 1), "
                    "and the mask goes on the scores, not on q or k.")
        if near(weights(False), P, 1e-6, 1e-9):
            return ("causal_ignored", "With causal=False your weights are still masked: "
                    "causal=False must let every query see every key.")
        return None

    def scale():
        D, H, step = 16, 3, 1.5
        qs = torch.zeros(1, H, 2, D, dtype=torch.float64)
        qs[..., 0] = 1.0
        ks = torch.zeros(1, H, 2, D, dtype=torch.float64)
        ks[..., 1, 0] = step
        vs = torch.zeros(1, H, 2, D, dtype=torch.float64)
        vs[..., 1, :] = 1.0
        y = output(s, fn, qs, ks, vs, causal=False, like=qs)
        p = float(y[0, 0, 1, 0])                 # the weight of key 1 = sigmoid(step * scale)
        if not 0 < p < 1:
            return None
        got = math.log(p / (1 - p)) / step
        want = 1 / math.sqrt(D)
        if abs(got - want) <= 1e-6:
            return None
        known = [("no_scaling", 1.0, "1: not scaled"), ("scaled_by_d", 1 / D, "1 / D"),
                 ("scaled_by_sqrt_t", 1 / math.sqrt(2), "1 / sqrt(T)")]
        key, text = next(((k, t) for k, v, t in known if abs(got - v) <= 1e-6),
                         ("scale", f"{fmt(got)} (with D = {D}, H = {H}, T = 2)"))
        return (key, f"Your scores are q . k times {text}; the scale is 1 / sqrt(D) = "
                f"{fmt(want)}, D = q.shape[-1], the head dim (Vaswani et al. 2017, 3.2.1).")

    return [pattern, scale]
