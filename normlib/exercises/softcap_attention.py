"""The soft-capped causal attention checker (Gemma 2's attention logits), and the mistakes it names.

The learner writes ``softcap_attention(q, k, v, cap)`` for q, k, v of shape (B, H, T, D): the
scores q k^T / sqrt(D), then cap * tanh(scores / cap), then the causal mask (-inf above the
diagonal), the softmax over the keys and the product with v; for float16 / bfloat16 inputs the
scores, the cap and the softmax are computed in float32 and the output is cast back to q's dtype.
The order (after the scale, before the mask) is Gemma 2's (arXiv 2408.00118, Section 2; HF
``eager_attention_forward`` in modeling_gemma2). The reference is
``nl.attention(q, k, v, causal=True, softcap=cap)``.
"""

from __future__ import annotations

import math

import torch

import normlib as nl

from ._cases import Case, run_backward, run_cases
from ._compare import randn
from ._generic import catalogue
from ._probes import causal_pattern, fmt, near, weighted
from ._session import Session
from .result import CheckResult

__all__ = ["check_softcap_attention", "SOFTCAP_MISTAKES", "SOFTCAP_MUTANTS"]

_ORDER = ("Cap the scaled scores first, then fill the masked ones with -inf (Gemma 2's order, "
          "HF eager_attention_forward).")

SOFTCAP_MISTAKES = catalogue("softcap_attention", {
    "cap_after_mask": ("cap applied after the mask", "the cap runs after the mask: tanh(-inf) = "
                       "-1, so every masked score becomes -cap and the future keys get weight "
                       "exp(-cap) instead of 0 (plain to see when cap is small). " + _ORDER,
                       "软截断放在了因果掩码之后：tanh(-inf) = -1，被屏蔽的分数都变成 -cap，"
                       "未来的键得到 exp(-cap) 量级的权重而不是 0（cap 小时一眼可见）。"
                       "应先对缩放后的分数做软截断，再把被屏蔽的分数设为 -inf"
                       "（Gemma 2 的顺序，HF 的 eager_attention_forward）。"),
    "cap_before_scale": ("cap before the 1/sqrt(D) scale", "the cap runs on q k^T before the "
                         "scale: cap * tanh(q k^T / cap) / sqrt(D) squeezes the logits into "
                         "(-cap / sqrt(D), cap / sqrt(D)). Scale first, then cap: "
                         "cap * tanh((q k^T / sqrt(D)) / cap).",
                         "软截断放在了 1/sqrt(D) 缩放之前：cap * tanh(q k^T / cap) / sqrt(D) "
                         "把 logit 压进了 (-cap / sqrt(D), cap / sqrt(D))。应先缩放再截断："
                         "cap * tanh((q k^T / sqrt(D)) / cap)。"),
    "tanh_no_divide": ("cap * tanh(s), no division by cap", "the soft cap is cap * tanh(s / cap): "
                       "without the division inside, small logits are multiplied by cap instead "
                       "of passing unchanged (the slope at 0 must be 1).",
                       "软截断是 cap * tanh(s / cap)：tanh 里面没有除以 cap，小的 logit 被乘上了 cap，"
                       "而不是原样通过（在 0 处斜率应为 1）。"),
    "tanh_no_multiply": ("tanh(s / cap), not multiplied back", "tanh(s / cap) squeezes the "
                         "logits into (-1, 1): multiply back by cap, cap * tanh(s / cap), so "
                         "that small logits pass unchanged and the bound is +-cap.",
                         "tanh(s / cap) 把 logit 压进了 (-1, 1)：还要乘回 cap，cap * tanh(s / cap)，"
                         "小的 logit 才会原样通过，上下界才是 ±cap。"),
    "cap_on_weights": ("cap on the weights, after the softmax", "the cap goes on the logits, "
                       "before the softmax: capping the attention weights (all in [0, 1]) "
                       "leaves rows that no longer sum to 1 and bounds nothing.",
                       "软截断加在了 softmax 之后的注意力权重上：应加在 softmax 之前的 logit 上；"
                       "截断 [0, 1] 里的权重什么也没限制，每行之和也不再为 1。"),
    "cap_on_output": ("cap on the output", "the cap goes on the attention logits, before the "
                      "mask and the softmax, not on the output weights @ v.",
                      "软截断加在了输出 weights @ v 上：应加在掩码和 softmax 之前的注意力 logit 上。"),
    "clamp_instead": ("hard clamp instead of tanh", "clamp(s, -cap, cap) is a hard cap: Gemma "
                      "2's soft cap, cap * tanh(s / cap), is smooth, bends every logit a little, "
                      "and keeps a small gradient, 1 - tanh^2(s / cap), past the cap, where "
                      "clamp's is 0.",
                      "用 clamp 做了硬截断：Gemma 2 的软截断 cap * tanh(s / cap) 是光滑的，"
                      "每个 logit 都会被压弯一点；超过 cap 之后仍有很小的梯度 1 - tanh^2(s / cap)，"
                      "clamp 的梯度则是 0。"),
    "no_softcap": ("no soft cap", "the logits are not capped: apply cap * tanh(s / cap) to the "
                   "scaled scores before the mask.",
                   "没有做软截断：在掩码之前对缩放后的分数施加 cap * tanh(s / cap)。"),
    "cap_ignored": ("cap argument ignored", "the cap argument is ignored (a fixed 50, Gemma 2's "
                    "value?): use the cap passed in.",
                    "忽略了传入的 cap 参数（写死成了 Gemma 2 的 50？）：请使用传入的 cap。"),
    "no_scaling": ("missing 1/sqrt(D)", "the scores are not scaled: divide q k^T by sqrt(D), "
                   "the head dim, before the cap.",
                   "没有缩放：注意力分数应先除以 sqrt(头维度)，再做软截断。"),
    "scale": ("wrong scale", "the scores are q k^T / sqrt(D), D = q.shape[-1], before the cap.",
              "缩放系数不对：分数是 q k^T / sqrt(D)，D = q.shape[-1]，在软截断之前缩放。"),
    "mask_inverted": ("mask inverted", "the mask hides the past and keeps the future: hide the "
                      "keys j > t, where torch.ones(T, T).triu(1) is 1.",
                      "因果掩码反了：应屏蔽 j > t 的键（torch.ones(T, T).triu(1) 为 1 的位置）。"),
    "mask_excludes_diagonal": ("mask off by one: token cannot see itself", "the causal mask "
                               "hides the diagonal, so a token cannot attend to itself (and row 0 "
                               "has no key left: NaN). Keep j <= t: torch.ones(T, T).tril().",
                               "因果掩码有差一错误（off-by-one）：挡住了对角线，token 看不到自己（第 0 行没有键可看，"
                               "得到 NaN）。应保留 j <= t：torch.ones(T, T).tril()。"),
    "mask_leaks_future": ("mask off by one: sees one token ahead", "the causal mask lets token t "
                          "see t + 1: keep j <= t, torch.ones(T, T).tril() (diagonal=0), or hide "
                          "triu(diagonal=1).",
                          "因果掩码有差一错误（off-by-one）：token t 能看到 t + 1。应保留 j <= t："
                          "torch.ones(T, T).tril()（diagonal=0），或屏蔽 triu(diagonal=1)。"),
    "no_causal_mask": ("no causal mask", "every query sees every key: hide the keys j > t with "
                       "-inf, after the cap and before the softmax.",
                       "没有因果掩码：每个查询都看到了全部键。应在软截断之后、softmax 之前把 j > t 的键设为 -inf。"),
    "mask_with_zero": ("masked scores set to 0", "masked scores must be -inf, not 0: exp(0) "
                       "still gives the future keys weight.",
                       "被屏蔽的分数设成了 0：应设为 -inf，exp(0) 仍会给未来的键权重。"),
    "mask_after_softmax": ("mask applied after the softmax", "masking the weights after the "
                           "softmax leaves rows that no longer sum to 1: set the capped scores "
                           "of the keys j > t to -inf before the softmax.",
                           "在 softmax 之后才做掩码：每行的权重之和不再为 1。应在 softmax 之前把软截断后 j > t "
                           "的分数设为 -inf。"),
    "sees_future": ("future keys get weight", "a query gives weight to keys after it: after the "
                    "cap, set the scores of keys j > t to -inf, so that their weight is exactly 0.",
                    "查询给了它之后的键权重：软截断之后，把 j > t 的键的分数设为 -inf，"
                    "它们的权重才恰好为 0。"),
    "softmax_dim": ("softmax over the queries", "the softmax runs over the keys, the last dim of "
                    "the (B, H, T, T) scores: softmax(scores, dim=-1).",
                    "softmax 的维度不对：应在键的维度（(B, H, T, T) 分数的最后一维）上，softmax(scores, dim=-1)。"),
    "no_upcast": ("no float32 for half inputs", "for float16 / bfloat16 inputs compute the "
                  "scores, the cap and the softmax in float32 (q.float()), then cast the output "
                  "back to q's dtype: in half precision a logit near 50 is rounded to a step of "
                  "1/32 (float16) or 1/4 (bfloat16).",
                  "float16 / bfloat16 输入没有升到 float32 计算：分数、软截断和 softmax 都应在 float32 "
                  "下计算（q.float()），最后把输出转回 q 的 dtype。半精度下，50 附近的 logit 只能取到 "
                  "1/32（float16）或 1/4（bfloat16）的整数倍。"),
})


def _sca(q, k, v, cap, mode="ok"):
    """Soft-capped causal attention with one mistake (mode); "ok" is the right answer. Computed
    in float32 for half inputs (in the input's dtype for "no_upcast")."""
    given = q.dtype
    half = given in (torch.float16, torch.bfloat16)
    dtype = torch.float32 if half and mode != "no_upcast" else given
    q, k, v = (t.to(dtype) for t in (q, k, v))
    T, D = q.shape[-2], q.shape[-1]
    c = 50.0 if mode == "cap_ignored" else cap

    def soft(s):
        if mode == "tanh_no_divide":
            return c * torch.tanh(s)
        if mode == "tanh_no_multiply":
            return torch.tanh(s / c)
        if mode == "clamp_instead":
            return s.clamp(-c, c)
        return c * torch.tanh(s / c)

    scale = {"no_scaling": 1.0, "scale": 1 / D}.get(mode, D ** -0.5)
    s = q @ k.transpose(-2, -1)                                             # (B, H, T, T)
    s = soft(s) * scale if mode == "cap_before_scale" else s * scale
    ones = torch.ones(T, T, dtype=torch.bool, device=q.device)
    keep = {"mask_inverted": ones.triu(), "mask_excludes_diagonal": ones.tril(-1),
            "mask_leaks_future": ones.tril(1), "no_causal_mask": ones}.get(mode, ones.tril())
    if mode == "cap_after_mask":
        s = soft(s.masked_fill(~keep, float("-inf")))
    elif mode == "mask_with_zero":
        s = soft(s).masked_fill(~keep, 0.0)
    else:
        if mode not in ("no_softcap", "cap_before_scale", "cap_on_weights", "cap_on_output",
                        "mask_after_softmax"):
            s = soft(s)
        if mode != "mask_after_softmax":
            s = s.masked_fill(~keep, float("-inf"))
    if mode == "mask_after_softmax":
        s = soft(s)
    w = torch.softmax(s, dim=-2 if mode == "softmax_dim" else -1)
    if mode == "mask_after_softmax":
        w = w * ones.tril()
    if mode == "cap_on_weights":
        w = c * torch.tanh(w / c)
    out = w @ v
    if mode == "cap_on_output":
        out = c * torch.tanh(out / c)
    return out.to(given)


SOFTCAP_MUTANTS = [
    ("cap_after_mask", lambda q, k, v, cap: _sca(q, k, v, cap, "cap_after_mask")),
    ("cap_before_scale", lambda q, k, v, cap: _sca(q, k, v, cap, "cap_before_scale")),
    ("tanh_no_divide", lambda q, k, v, cap: _sca(q, k, v, cap, "tanh_no_divide")),
    ("tanh_no_multiply", lambda q, k, v, cap: _sca(q, k, v, cap, "tanh_no_multiply")),
    ("cap_on_weights", lambda q, k, v, cap: _sca(q, k, v, cap, "cap_on_weights")),
    ("cap_on_output", lambda q, k, v, cap: _sca(q, k, v, cap, "cap_on_output")),
    ("clamp_instead", lambda q, k, v, cap: _sca(q, k, v, cap, "clamp_instead")),
    ("no_softcap", lambda q, k, v, cap: _sca(q, k, v, cap, "no_softcap")),
    ("cap_ignored", lambda q, k, v, cap: _sca(q, k, v, cap, "cap_ignored")),
    ("no_scaling", lambda q, k, v, cap: _sca(q, k, v, cap, "no_scaling")),
    ("scale", lambda q, k, v, cap: _sca(q, k, v, cap, "scale")),
    ("mask_inverted", lambda q, k, v, cap: _sca(q, k, v, cap, "mask_inverted")),
    ("mask_excludes_diagonal", lambda q, k, v, cap: _sca(q, k, v, cap, "mask_excludes_diagonal")),
    ("mask_leaks_future", lambda q, k, v, cap: _sca(q, k, v, cap, "mask_leaks_future")),
    ("no_causal_mask", lambda q, k, v, cap: _sca(q, k, v, cap, "no_causal_mask")),
    ("mask_with_zero", lambda q, k, v, cap: _sca(q, k, v, cap, "mask_with_zero")),
    ("mask_after_softmax", lambda q, k, v, cap: _sca(q, k, v, cap, "mask_after_softmax")),
    ("softmax_dim", lambda q, k, v, cap: _sca(q, k, v, cap, "softmax_dim")),
    ("no_upcast", lambda q, k, v, cap: _sca(q, k, v, cap, "no_upcast")),
]


def _reference(q, k, v, cap):
    return nl.attention(q, k, v, causal=True, softcap=cap)


def _qkv(shape, seed, dtype=torch.float32, scale=1.0, offset=0.0):
    """q and k ~ offset + scale N(0, 1), v ~ N(0, 1), each (B, H, T, D). Without an offset the
    scaled scores have standard deviation scale^2; with one they crowd around offset^2 sqrt(D),
    where half precision rounds them coarsely and the softmax still spreads its weight."""
    return lambda: tuple(randn(*shape, seed=seed + i, dtype=dtype, scale=scale if i < 2 else 1.0,
                               offset=offset if i < 2 else 0.0) for i in range(3))


CASES = [
    Case("cap = 50, logits beyond the cap", _qkv((2, 2, 6, 8), 10, scale=8.0), {"cap": 50.0},
         tol_factor=2),
    Case("cap = 2, odd sizes", _qkv((1, 3, 7, 6), 20, torch.float64, scale=1.5), {"cap": 2.0},
         tol_factor=2),
    Case("cap = 5, T = 1", _qkv((2, 1, 1, 4), 30, scale=3.0), {"cap": 5.0}, tol_factor=2),
    Case("cap = 30, D = 16", _qkv((1, 2, 5, 16), 40, scale=5.0), {"cap": 30.0}, tol_factor=2),
    Case("cap = 50, logits near 45", _qkv((1, 2, 6, 8), 50, torch.float16, 0.5, 4.0),
         {"cap": 50.0}, tol_factor=2),
    Case("cap = 50, logits near 25", _qkv((1, 2, 6, 8), 50, torch.bfloat16, 1.0, 3.0),
         {"cap": 50.0}, tol_factor=2),
    Case("cap = 20", _qkv((1, 2, 5, 8), 60, torch.bfloat16, scale=4.0), {"cap": 20.0},
         tol_factor=2),
]
BACKWARD = Case("backward through q, k, v, cap = 3", lambda: tuple(
    randn(1, 2, 5, 6, seed=70 + i, dtype=torch.float64, scale=1.5 if i < 2 else 1.0)
    for i in range(3)), {"cap": 3.0})


_FORBIDDEN = {"scaled_dot_product_attention": "F.scaled_dot_product_attention",
              "_scaled_dot_product_attention_math": "torch's SDPA kernel"}


def check_softcap_attention(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(q, k, v, cap)`` for (B, H, T, D) against nl.attention(..., softcap=cap)."""
    s = Session("Soft-capped attention", SOFTCAP_MISTAKES, exercise="softcap_attention",
                time_limit=time_limit, forbidden=_FORBIDDEN,
                references={nl.attention: "nl.attention", nl.softcap: "nl.softcap",
                            nl.MultiHeadAttention.forward: "nl.MultiHeadAttention"})
    if not s.require_callable(fn):
        return s.result()

    run_cases(s, fn, CASES, reference=_reference, mutants=SOFTCAP_MUTANTS)
    run_backward(s, fn, BACKWARD, ("q", "k", "v"), reference=_reference, mutants=SOFTCAP_MUTANTS)
    s.probe(*_probes(s, fn))
    return s.result()


# causal_pattern's wrong masks -> this exercise's keys ("none" is told apart by the mutants first)
_MASK_KEYS = {"inverted": "mask_inverted", "excludes_diagonal": "mask_excludes_diagonal",
              "leaks_future": "mask_leaks_future"}


def _probes(s: Session, fn) -> list:
    """Probes, float64. With v = I (T = D = 6, cap = 1.5) the output *is* the weight matrix: its
    zeros show the mask, and equal weights on every future key show masked scores that became a
    finite number (the cap after the mask: -cap). Then the logit transform itself: one query, a
    key of 0 and a key whose raw dot product is r (T = 2, D = 16, cap = 2, v = (0, 1)), so that
    the output is sigmoid(f(r) - f(0)) and f(r), measured at eight r, is matched to the forms a
    slip gives."""
    T, cap = 6, 1.5
    q, k = (randn(1, 1, T, T, seed=950 + i, dtype=torch.float64, scale=1.3) for i in range(2))
    eye = torch.eye(T, dtype=torch.float64).expand(1, 1, T, T)
    lower = torch.ones(T, T, dtype=torch.bool).tril()

    def pattern():
        W = s.call(fn, q, k, eye, cap)
        if not isinstance(W, torch.Tensor) or W.shape != eye.shape:
            return None
        W = W.detach().double()[0, 0]
        if near(W, _sca(q, k, eye, cap)[0, 0], 1e-5, 1e-8):
            return None
        for mode in ("cap_after_mask", "mask_with_zero", "no_causal_mask", "mask_after_softmax"):
            if near(W, _sca(q, k, eye, cap, mode)[0, 0], 1e-5, 1e-8):
                return (mode, "With v = I (your output is the attention weights), cap = 1.5: "
                        + _PATTERN[mode])
        found = causal_pattern(W)
        if found and found[0] in _MASK_KEYS:
            return (_MASK_KEYS[found[0]], f"With v = I, query t attends to {found[1]}. The causal "
                    "mask keeps keys j <= t (torch.ones(T, T).tril()) and sets the others to -inf "
                    "after the cap, before the softmax.")
        future = weighted(W) & ~lower
        if bool(future.any()):
            rows = [t for t in range(T - 1) if bool(future[t, t + 1:].all())]
            same = rows and all(near(W[t, t + 1:], W[t, t + 1:].mean().expand(T - 1 - t),
                                     1e-6, 1e-12) for t in rows)
            how = (" and every future key of a row gets the same weight: the masked scores "
                   "became one finite number before the softmax (a cap after the mask turns -inf "
                   "into -cap; a fill with 0 or a finite number does the same)") if same else ""
            return ("cap_after_mask" if same else "sees_future",
                    "With v = I (your output is the attention weights), future keys j > t get "
                    f"weight{how}. " + _ORDER)
        return None

    def transform():
        D, c = 16, 2.0
        r = torch.tensor([-6.0, 0.5, 1.0, 2.0, 6.0, 12.0, 24.0, 40.0], dtype=torch.float64)
        n = len(r)
        qs = torch.zeros(n, 1, 2, D, dtype=torch.float64)
        qs[:, 0, 1, 0] = 1.0
        ks = torch.zeros(n, 1, 2, D, dtype=torch.float64)
        ks[:, 0, 1, 0] = r
        vs = torch.zeros(n, 1, 2, D, dtype=torch.float64)
        vs[:, 0, 1, :] = 1.0
        y = s.call(fn, qs, ks, vs, c)
        if not isinstance(y, torch.Tensor) or y.shape != qs.shape:
            return None
        p = y.detach().double()[:, 0, 1, 0]
        if not bool(((p > 0) & (p < 1)).all()):
            return None
        got = torch.log(p / (1 - p))                       # f(r) - f(0), f(0) = 0 for all forms
        sd = math.sqrt(D)
        forms = [
            (None, c * torch.tanh(r / sd / c)),
            ("no_softcap", r / sd),
            ("cap_ignored", 50.0 * torch.tanh(r / sd / 50.0)),
            ("cap_before_scale", c * torch.tanh(r / c) / sd),
            ("tanh_no_divide", c * torch.tanh(r / sd)),
            ("tanh_no_multiply", torch.tanh(r / sd / c)),
            ("clamp_instead", (r / sd).clamp(-c, c)),
            ("no_scaling", c * torch.tanh(r / c)),
            ("scale", c * torch.tanh(r / D / c)),
        ]
        for key, want in forms:
            if near(got, want, 1e-3, 1e-3):
                if key is None:
                    return None
                return (key, f"One query, a key with q . k = r and a key with q . k = 0 (D = 16, "
                        f"cap = 2): your logits at r = 12, 40 are {fmt(float(got[5]))}, "
                        f"{fmt(float(got[7]))}, those of {_FORMS[key]}; Gemma 2's are "
                        f"{fmt(float(forms[0][1][5]))}, {fmt(float(forms[0][1][7]))}, "
                        "cap * tanh((q . k / sqrt(D)) / cap). " + SOFTCAP_MISTAKES[key].en)
        fit = got.abs() < 0.95 * c                           # where atanh is well-conditioned
        if int(fit.sum()) >= 2:
            a = c * torch.atanh(got[fit] / c) / r[fit]       # the scale, if the form is right
            if near(a, a.mean().expand_as(a), 1e-3, 1e-6):
                a0 = float(a.mean())
                key = "no_scaling" if abs(a0 - 1) < 1e-3 else "scale"
                return (key, f"One query, a key with q . k = r and a key with q . k = 0 (D = 16, "
                        f"cap = 2): your logits are cap * tanh(a r / cap) with a = {fmt(a0)}; "
                        f"the scale is 1 / sqrt(D) = {fmt(1 / sd)}, D = q.shape[-1], the head "
                        "dim, applied before the cap.")
        return ("cannot_tell", "No known mistake fits. Measured with one query, a key with "
                "q . k = r and a key with q . k = 0 (D = 16, cap = 2), the logit your code gives "
                "the first key, at r = " + ", ".join(f"{v:g}" for v in r.tolist()) + ": "
                + ", ".join(fmt(float(g)) for g in got) + "; cap * tanh((r / sqrt(D)) / cap) "
                "gives " + ", ".join(fmt(float(g)) for g in forms[0][1]) + ".")

    return [pattern, transform]


_PATTERN = {
    "cap_after_mask": "every future key gets the same small weight, that of a score of -cap: "
                      "the cap runs after the mask, and tanh(-inf) = -1 turns -inf into -cap.",
    "mask_with_zero": "every future key gets the weight of a score of 0: the masked scores are "
                      "set to 0, not -inf.",
    "no_causal_mask": "every query attends to every key, the future included: no causal mask.",
    "mask_after_softmax": "the future keys get no weight, but the rows sum to less than 1: the "
                          "mask is applied to the weights after the softmax. Set the capped "
                          "scores of the keys j > t to -inf before it.",
}

_FORMS = {
    "no_softcap": "no cap at all, r / sqrt(D)",
    "cap_ignored": "a cap of 50 (the cap argument ignored)",
    "cap_before_scale": "the cap before the scale, cap * tanh(r / cap) / sqrt(D)",
    "tanh_no_divide": "cap * tanh(r / sqrt(D)), no division by cap inside",
    "tanh_no_multiply": "tanh((r / sqrt(D)) / cap), not multiplied back by cap",
    "clamp_instead": "a hard clamp of r / sqrt(D) to [-cap, cap]",
    "no_scaling": "cap * tanh(r / cap), no 1/sqrt(D)",
    "scale": "cap * tanh((r / D) / cap), scaled by 1/D",
}
