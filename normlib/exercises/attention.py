"""The scaled dot-product attention checker, and the mistakes it can name.

The learner writes ``attention(q, k, v, causal=True)`` for (B, H, T, D) inputs:
softmax(q k^T / sqrt(D) + mask) v, where the causal mask lets position t attend to 0..t.
The reference is ``nl.attention`` (equal to ``F.scaled_dot_product_attention``).
"""

from __future__ import annotations

import math

import torch

import normlib as nl

from ._compare import label, randn, tolerance
from ._session import Session
from .result import CheckResult

__all__ = ["check_attention", "ATTENTION_MISTAKES"]

ATTENTION_MISTAKES = {
    "no_scaling": ("missing 1/sqrt(d)", "the scores are not scaled: divide q k^T by sqrt(D), the "
                   "head dim, or the softmax saturates as D grows (Vaswani et al. 2017, 3.2.1)."),
    "scaled_by_d": ("scaled by 1/d", "the scores are divided by D; the scale is 1 / sqrt(D)."),
    "scaled_by_sqrt_t": ("scaled by sqrt(T)", "the scale uses the sequence length; it is "
                         "1 / sqrt(D) with D = q.shape[-1], the head dim."),
    "mask_excludes_diagonal": ("mask off by one: token cannot see itself", "the causal mask hides "
                               "the diagonal, so a token cannot attend to itself (and row 0 is all "
                               "-inf: NaN). Keep j <= t: torch.ones(T, T).tril()."),
    "mask_leaks_future": ("mask off by one: sees one token ahead", "the causal mask lets token t "
                          "see t + 1: use tril() (diagonal=0), or mask triu(diagonal=1)."),
    "mask_inverted": ("mask inverted", "the mask hides the past and keeps the future: mask out "
                      "j > t, i.e. where torch.ones(T, T).triu(1) is 1."),
    "mask_after_softmax": ("mask applied after softmax", "masking after the softmax leaves rows "
                           "that no longer sum to 1: set the scores to -inf before the softmax."),
    "mask_with_zero": ("masked scores set to 0", "masked scores must be -inf (or a very large "
                       "negative number), not 0: exp(0) = 1 still gives future tokens weight."),
    "causal_ignored": ("causal flag ignored", "causal=True must hide future positions; "
                       "causal=False must not mask at all."),
    "softmax_wrong_dim": ("softmax over the wrong dim", "the softmax must run over the keys, the "
                          "last dim of the (B, H, T, T) scores: each query's weights sum to 1."),
    "naive_softmax": ("exp without subtracting the max", "exp of large scores overflows to inf "
                      "(inf / inf = NaN): use torch.softmax, or subtract the row max first."),
    "returns_weights": ("returns the attention weights", "multiply the weights by v: the output is "
                        "(B, H, T, D), not the (B, H, T, T) weights."),
    "no_transpose": ("k not transposed", "the scores are q @ k.transpose(-2, -1): (T, D) @ (D, T)."),
}


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


def _mutants(q, k, v, causal):
    T, D = q.shape[-2], q.shape[-1]
    out = [("no_scaling", lambda: _attn(q, k, v, causal, scale=1.0)),
           ("scaled_by_d", lambda: _attn(q, k, v, causal, scale=1 / D)),
           ("scaled_by_sqrt_t", lambda: _attn(q, k, v, causal, scale=1 / math.sqrt(T))),
           ("softmax_wrong_dim", lambda: _attn(q, k, v, causal, dim=-2)),
           ("softmax_wrong_dim", lambda: _attn(q, k, v, causal, dim=1)),
           ("naive_softmax", lambda: _attn(q, k, v, causal, naive=True)),
           ("returns_weights", lambda: _attn(q, k, v, causal, weights_only=True))]
    if causal:
        out += [("mask_excludes_diagonal", lambda: _attn(q, k, v, diagonal=-1)),
                ("mask_leaks_future", lambda: _attn(q, k, v, diagonal=1)),
                ("mask_inverted", lambda: _attn(q, k, v, mode="inverted")),
                ("mask_after_softmax", lambda: _attn(q, k, v, mode="after")),
                ("mask_with_zero", lambda: _attn(q, k, v, mode="zero")),
                ("causal_ignored", lambda: _attn(q, k, v, causal=False))]
    else:
        out += [("causal_ignored", lambda: _attn(q, k, v, causal=True))]
    return out


_FORBIDDEN = {"scaled_dot_product_attention": "F.scaled_dot_product_attention",
              "_scaled_dot_product_attention_math": "torch's SDPA kernel",
              "multi_head_attention_forward": "nn.MultiheadAttention",
              "_native_multi_head_attention": "nn.MultiheadAttention"}


def check_attention(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(q, k, v, causal=True)`` for (B, H, T, D) against nl.attention."""
    s = Session("Attention", ATTENTION_MISTAKES, time_limit=time_limit, forbidden=_FORBIDDEN,
                references={nl.attention: "nl.attention",
                            nl.MultiHeadAttention.forward: "nl.MultiHeadAttention"},
                error_hints=((r"cannot be multiplied|Expected size for first two dimensions|"
                              r"must match the size of tensor", "no_transpose"),))
    if not s.require_callable(fn):
        return s.result()

    def case(shape, seed, causal=True, dtype=torch.float32, scale=1.0, note="", pass_causal=True):
        q, k, v = (randn(*shape, seed=seed + i, dtype=dtype, scale=scale if i < 2 else 1.0)
                   for i in range(3))

        def check():
            got = s.call(fn, q, k, v, causal=causal) if pass_causal else s.call(fn, q, k, v)
            want = nl.attention(q, k, v, causal=causal)
            # mutants in the input's precision (float32 for half types), so that an exp that
            # overflows for the learner overflows for the mutant too
            qm, km, vm = (t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
                          for t in (q, k, v))
            s.expect_close(got, want, tol=tolerance(dtype, float(want.abs().max()), 2),
                           mutants=_mutants(qm, km, vm, causal))
        text = label(dtype, shape, ", ".join(filter(None, [f"causal={causal}", note])))
        s.run(text + ("" if pass_causal else " (default)"), check)

    case((2, 2, 5, 8), 10, pass_causal=False)
    case((2, 2, 5, 8), 20, causal=False)
    case((1, 3, 7, 6), 30, dtype=torch.float64, note="odd sizes")
    case((2, 1, 1, 4), 40, note="a batch of 2, T = 1")
    case((1, 2, 6, 8), 50, scale=12.0, note="large scores")
    case((1, 2, 5, 8), 60, dtype=torch.bfloat16)
    q, k, v = (randn(1, 2, 4, 6, seed=70 + i, dtype=torch.float64) for i in range(3))
    s.run(label(q.dtype, q.shape, "backward through q, k, v"), lambda: s.expect_grads(
        lambda q, k, v: fn(q, k, v, causal=True), lambda q, k, v: nl.attention(q, k, v),
        {"q": q, "k": k, "v": v},
        mutants=[(key, (lambda q, k, v, i=i: _mutants(q, k, v, True)[i][1]()))
                 for i, (key, _) in enumerate(_mutants(q, k, v, True))]))
    return s.result()
