"""The grouped-query attention checker (GQA; MQA when H_kv = 1), and the mistakes it can name.

The learner writes ``gqa_attention(q, k, v)`` for q of shape (B, H_q, T, D) and k, v of shape
(B, H_kv, T, D), H_q a multiple of H_kv: causal attention in which query head h reads key/value
head h // (H_q // H_kv), as HF's ``repeat_kv`` (Ainslie et al. 2023, arXiv 2305.13245). The
reference is ``nl.attention(q, nl.repeat_kv(k, g), nl.repeat_kv(v, g), causal=True)`` with
g = H_q // H_kv.
"""

from __future__ import annotations

import math

import torch

import normlib as nl

from ._cases import Case, run_backward, run_cases
from ._compare import randn
from ._generic import catalogue
from ._probes import causal_pattern, fmt, near, output
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_gqa_attention", "GQA_MISTAKES", "GQA_MUTANTS"]

GQA_MISTAKES = catalogue("gqa_attention", {
    "kv_order": ("key/value heads in the wrong order", "query head h reads key/value head "
                 "h // g, g = H_q // H_kv: repeat each kv head in place, "
                 "k.repeat_interleave(g, dim=1) (HF's repeat_kv: heads 0, 0, 1, 1, ...). "
                 "k.repeat(1, g, 1, 1) tiles the whole block (0, 1, 0, 1, ...: head h reads "
                 "h % H_kv), and so does grouping q as view(B, g, H_kv, T, D): by outputs the two "
                 "are the same mistake.",
                 "键值头的对应关系不对：查询头 h 应读键值头 h // g（g = H_q // H_kv），"
                 "每个键值头应原地连续复制，k.repeat_interleave(g, dim=1)（HF 的 repeat_kv：头序 0,0,1,1,…）"
                 "。k.repeat(1, g, 1, 1) 是整块平铺（头序 0,1,0,1,…，查询头 h 读的是 h % H_kv）；"
                 "把 q 分组成 view(B, g, H_kv, T, D) 也一样：从输出上看，这两种写法是同一个错误。"),
    "kv_mean": ("key/value heads averaged", "the key/value heads are averaged into one, shared by "
                "every query head: each group of g query heads has its own kv head, h // g. "
                "(Averaging is how Ainslie et al. build the GQA weights from an MHA checkpoint, "
                "once, not what attention does at run time.)",
                "把键值头取了平均、所有查询头共用一个：每组 g 个查询头有自己的键值头 h // g。"
                "（平均是 Ainslie et al. 从多头注意力权重构造分组查询注意力权重的办法，只做一次，"
                "不是注意力运行时的计算。）"),
    "kv_sum": ("key/value heads summed", "the key/value heads are summed into one: each group of "
               "g query heads reads its own kv head, h // g, repeated, not added.",
               "把键值头加在了一起：每组 g 个查询头读自己的键值头 h // g，是复制，而不是相加。"),
    "kv_not_repeated": ("kv heads not repeated along dim 1", "q has H_q heads and k, v have "
                        "H_kv: repeat each kv head g = H_q // H_kv times along dim 1, the "
                        "heads, k.repeat_interleave(g, dim=1), before q @ k^T. An error about "
                        "dim 1 means they were not repeated there (or were repeated along T or "
                        "D instead).",
                        "q 有 H_q 个头，k、v 只有 H_kv 个：要先沿 dim 1（头的维度）把每个键值头复制 "
                        "g = H_q // H_kv 份，k.repeat_interleave(g, dim=1)，再算 q @ k^T。"
                        "报 dim 1 不匹配的错，说明没有在这一维复制（或者复制到了 T 或 D 维上）。"),
    "output_kv_heads": ("output with H_kv heads", "the output has one head per query head, "
                        "(B, H_q, T, D): each query head of a group attends on its own; only "
                        "k and v are shared.",
                        "输出只有 H_kv 个头：输出的形状是 (B, H_q, T, D)，每个查询头各自做注意力，共享的只有 k 和 v。"),
    "groups_not_merged": ("groups not merged back", "after computing with q grouped as (B, "
                          "H_kv, g, T, D), reshape the output back to (B, H_q, T, D): "
                          "out.reshape(B, H_q, T, D).",
                          "按 (B, H_kv, g, T, D) 分组计算之后，没有把输出变回 (B, H_q, T, D)："
                          "out.reshape(B, H_q, T, D)。"),
    "no_scaling": ("missing 1/sqrt(D)", "the scores are not scaled: divide q k^T by sqrt(D), D = "
                   "q.shape[-1], the head dim.",
                   "没有缩放：注意力分数应除以 sqrt(头维度)，D = q.shape[-1]。"),
    "scale": ("wrong scale", "the scores are q k^T / sqrt(D), D = q.shape[-1], the head dim: not "
              "the width H_q D, not D itself.",
              "缩放系数不对：分数是 q k^T / sqrt(D)，D = q.shape[-1] 是头维度；不是模型宽度 H_q D，也不是 D 本身。"),
    "no_causal_mask": ("no causal mask", "every query sees every key: hide the keys j > t with "
                       "-inf before the softmax (torch.ones(T, T).tril() keeps j <= t).",
                       "没有因果掩码：每个查询都看到了全部键。应在 softmax 之前把 j > t 的键设为 -inf"
                       "（torch.ones(T, T).tril() 保留 j <= t）。"),
    "mask_inverted": ("mask inverted", "the mask hides the past and keeps the future: hide the "
                      "keys j > t, where torch.ones(T, T).triu(1) is 1.",
                      "因果掩码反了：应屏蔽 j > t 的键（torch.ones(T, T).triu(1) 为 1 的位置）。"),
    "mask_excludes_diagonal": ("mask off by one: token cannot see itself", "the causal mask "
                               "hides the diagonal, so a token cannot attend to itself (and row 0 "
                               "has no key left: NaN). Keep j <= t: torch.ones(T, T).tril().",
                               "因果掩码有差一错误（off-by-one）：挡住了对角线，token 看不到自己（第 0 行没有键可看，"
                               "得到 NaN）。应保留 j <= t：torch.ones(T, T).tril()。"),
    "mask_leaks_future": ("mask off by one: sees one token ahead", "the causal mask lets token t "
                          "see t + 1: keep j <= t, torch.ones(T, T).tril() (diagonal=0).",
                          "因果掩码有差一错误（off-by-one）：token t 能看到 t + 1。应保留 j <= t："
                          "torch.ones(T, T).tril()（diagonal=0）。"),
    "softmax_dim": ("softmax over the queries", "the softmax runs over the keys, the last dim of "
                    "the (B, H_q, T, T) scores: softmax(scores, dim=-1).",
                    "softmax 的维度不对：应在键的维度（(B, H_q, T, T) 分数的最后一维）上，softmax(scores, dim=-1)。"),
})


def _gqa(q, k, v, mode="ok"):
    """Grouped-query causal attention with one mistake (mode); "ok" is the right answer.
    Computed in float32 for half inputs, returned in q's dtype."""
    given = q.dtype
    if given in (torch.float16, torch.bfloat16):
        q, k, v = q.float(), k.float(), v.float()
    B, Hq, T, D = q.shape
    Hkv = k.shape[1]
    g = Hq // Hkv
    if mode == "kv_order":
        k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
    elif mode in ("kv_mean", "kv_sum"):
        pool = (lambda t: t.mean(1, keepdim=True)) if mode == "kv_mean" else \
            (lambda t: t.sum(1, keepdim=True))
        k, v = pool(k).expand(B, Hq, T, D), pool(v).expand(B, Hq, T, D)
    else:
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    scale = {"no_scaling": 1.0, "scale": 1 / D, "scale_width": (Hq * D) ** -0.5}.get(
        mode, D ** -0.5)
    s = q @ k.transpose(-2, -1) * scale                                     # (B, Hq, T, T)
    ones = torch.ones(T, T, dtype=torch.bool, device=q.device)
    keep = {"mask_inverted": ones.triu(), "mask_excludes_diagonal": ones.tril(-1),
            "mask_leaks_future": ones.tril(1), "no_causal_mask": ones}.get(mode, ones.tril())
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-2 if mode == "softmax_dim" else -1)
    out = w @ v                                                             # (B, Hq, T, D)
    if mode == "output_kv_heads":
        out = out.view(B, Hkv, g, T, D).mean(2)
    return out.to(given)


GQA_MUTANTS = [
    ("kv_order", lambda q, k, v: _gqa(q, k, v, "kv_order")),
    ("kv_mean", lambda q, k, v: _gqa(q, k, v, "kv_mean")),
    ("kv_sum", lambda q, k, v: _gqa(q, k, v, "kv_sum")),
    ("no_scaling", lambda q, k, v: _gqa(q, k, v, "no_scaling")),
    ("scale", lambda q, k, v: _gqa(q, k, v, "scale")),
    ("scale", lambda q, k, v: _gqa(q, k, v, "scale_width")),
    ("no_causal_mask", lambda q, k, v: _gqa(q, k, v, "no_causal_mask")),
    ("mask_inverted", lambda q, k, v: _gqa(q, k, v, "mask_inverted")),
    ("mask_excludes_diagonal", lambda q, k, v: _gqa(q, k, v, "mask_excludes_diagonal")),
    ("mask_leaks_future", lambda q, k, v: _gqa(q, k, v, "mask_leaks_future")),
    ("softmax_dim", lambda q, k, v: _gqa(q, k, v, "softmax_dim")),
    ("output_kv_heads", lambda q, k, v: _gqa(q, k, v, "output_kv_heads")),
]


def _reference(q, k, v):
    g = q.shape[1] // k.shape[1]
    return nl.attention(q, nl.repeat_kv(k, g), nl.repeat_kv(v, g), causal=True)


def _qkv(B, Hq, Hkv, T, D, seed, dtype=torch.float32, scale=1.0):
    """q ~ scale N(0, 1) of (B, Hq, T, D); k ~ scale N(0, 1), v ~ N(0, 1) of (B, Hkv, T, D):
    every kv head different, so that which one a query head reads shows."""
    return lambda: (randn(B, Hq, T, D, seed=seed, dtype=dtype, scale=scale),
                    randn(B, Hkv, T, D, seed=seed + 1, dtype=dtype, scale=scale),
                    randn(B, Hkv, T, D, seed=seed + 2, dtype=dtype))


CASES = [
    Case("H_q = 4, H_kv = 2", _qkv(2, 4, 2, 5, 8, 10)),
    Case("H_q = 6, H_kv = 3, odd sizes", _qkv(1, 6, 3, 7, 6, 20, torch.float64)),
    Case("H_q = 4, H_kv = 1 (MQA)", _qkv(2, 4, 1, 5, 8, 30)),
    Case("H_q = H_kv = 3 (MHA)", _qkv(1, 3, 3, 6, 8, 40)),
    Case("H_q = 8, H_kv = 2, T = 1", _qkv(2, 8, 2, 1, 4, 50)),
    Case("H_q = 4, H_kv = 2, large scores", _qkv(1, 4, 2, 6, 8, 60, scale=4.0), tol_factor=2),
    Case("H_q = 4, H_kv = 2", _qkv(1, 4, 2, 5, 8, 70, torch.bfloat16), tol_factor=2),
]
BACKWARD = Case("backward through q, k, v, H_q = 4, H_kv = 2",
                _qkv(1, 4, 2, 4, 6, 80, torch.float64))


_FORBIDDEN = {"scaled_dot_product_attention": "F.scaled_dot_product_attention (it has enable_gqa)",
              "_scaled_dot_product_attention_math": "torch's SDPA kernel"}


def check_gqa_attention(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(q, k, v)``, q (B, H_q, T, D), k and v (B, H_kv, T, D), against nl.attention
    with nl.repeat_kv."""
    s = Session("Grouped-query attention", GQA_MISTAKES, exercise="gqa_attention",
                time_limit=time_limit, forbidden=_FORBIDDEN,
                references={nl.attention: "nl.attention", nl.repeat_kv: "nl.repeat_kv",
                            nl.MultiHeadAttention.forward: "nl.MultiHeadAttention"},
                error_hints=((r"at non-singleton dimension 1\b|subscript \w+ has size \d+ for "
                              r"operand 1 which does not broadcast", "kv_not_repeated"),))
    if not s.require_callable(fn):
        return s.result()

    run_cases(s, fn, CASES, reference=_reference, mutants=GQA_MUTANTS,
              call=lambda fn, *args: s.call(_shape_checked(fn), *args))
    run_backward(s, _shape_checked(fn), BACKWARD, ("q", "k", "v"), reference=_reference,
                 mutants=GQA_MUTANTS)
    s.probe(*_probes(s, fn))
    return s.result()


def _shape_checked(fn):
    """The learner's function, whose output with H_kv heads, or still grouped, is named by its
    shape (before the values are compared with mutants of the right shape)."""
    def call(q, k, v):
        out = fn(q, k, v)
        if isinstance(out, torch.Tensor) and out.shape != q.shape:
            B, Hq, T, D = q.shape
            Hkv = k.shape[1]
            if Hkv != Hq and tuple(out.shape) == (B, Hkv, T, D):
                raise Fail(f"output has shape {tuple(out.shape)}: H_kv = {Hkv} heads, expected "
                           f"{tuple(q.shape)}, one per query head", "output_kv_heads")
            if out.dim() == 5 and out.numel() == q.numel() and Hkv not in (1, Hq):
                raise Fail(f"output has shape {tuple(out.shape)}, the groups not merged back: "
                           f"expected {tuple(q.shape)}", "groups_not_merged")
        return out
    return call


# causal_pattern's wrong masks -> this exercise's keys
_MASK_KEYS = {"none": "no_causal_mask", "inverted": "mask_inverted",
              "excludes_diagonal": "mask_excludes_diagonal", "leaks_future": "mask_leaks_future"}


def _probes(s: Session, fn) -> list:
    """Probes, float64. One token (T = 1), H_q = 6, H_kv = 3, and value head j filled with j + 1:
    with a single key the softmax gives it weight 1, so query head h's output *is* the number of
    the kv head it reads (plus 1), whatever q, k, the scale or the mask. Then with H_q = 2,
    H_kv = 1 (one kv head: no order to get wrong) and v = I (T = D = 6) the output is the weight
    matrix, whose zeros show the mask; and one query against a key of 0 and a key of s e_0
    (D = 16) measures the scale."""
    Hq, Hkv = 6, 3
    g = Hq // Hkv

    def heads():
        q = randn(1, Hq, 1, 4, seed=960, dtype=torch.float64)
        k = randn(1, Hkv, 1, 4, seed=961, dtype=torch.float64)
        v = torch.arange(1, Hkv + 1, dtype=torch.float64).view(1, Hkv, 1, 1).expand(1, Hkv, 1, 4)
        y = output(s, fn, q, k, v.clone(), like=q)[0, :, 0]             # (Hq, 4)
        if not near(y, y[:, :1].expand_as(y), 1e-9, 1e-9):
            return None
        got = y[:, 0]
        want = torch.tensor([h // g + 1 for h in range(Hq)], dtype=torch.float64)
        if near(got, want, 1e-9, 1e-9):
            return None
        where = f"With one token, H_q = {Hq}, H_kv = {Hkv} and value head j filled with j + 1"
        if near(got, torch.full_like(got, (Hkv + 1) / 2), 1e-9, 1e-9):
            return ("kv_mean", f"{where}, every query head outputs {fmt((Hkv + 1) / 2)}, the mean "
                    "of the value heads: they are averaged. " + GQA_MISTAKES["kv_mean"].en)
        if near(got, torch.full_like(got, Hkv * (Hkv + 1) / 2), 1e-9, 1e-9):
            return ("kv_sum", f"{where}, every query head outputs {fmt(Hkv * (Hkv + 1) / 2)}, the "
                    "sum of the value heads: they are added. " + GQA_MISTAKES["kv_sum"].en)
        read = got - 1
        if near(read, read.round(), 1e-9, 1e-9) and bool(((read >= 0) & (read < Hkv)).all()):
            read = [int(r) for r in read.round()]
            right = [h // g for h in range(Hq)]
            return ("kv_order", f"{where}, query heads 0 .. {Hq - 1} read kv heads {read}; they "
                    f"should read {right} (h // g, g = {g}). " + GQA_MISTAKES["kv_order"].en)
        return None

    T = 6
    q1, k1 = (randn(1, 2 if i == 0 else 1, T, T, seed=950 + i, dtype=torch.float64)
              for i in range(2))
    eye = torch.eye(T, dtype=torch.float64).expand(1, 1, T, T)

    def pattern():
        W = s.call(fn, q1, k1, eye.clone())
        if not isinstance(W, torch.Tensor) or W.shape != q1.shape:
            return None
        W = W.detach().double()[0, 0]
        if near(W, _gqa(q1, k1, eye)[0, 0], 1e-6, 1e-9):
            return None
        found = causal_pattern(W)
        if found:
            return (_MASK_KEYS[found[0]], f"With one kv head and v = I (the output is the "
                    f"weights), query t attends to {found[1]}. The causal mask keeps keys j <= t "
                    "(torch.ones(T, T).tril()) and sets the others to -inf before the softmax.")
        sums = W.sum(-1)
        if bool(W.isfinite().all()) and not near(sums, torch.ones_like(sums), 1e-6, 1e-9) and \
                near(W.sum(-2), torch.ones(T, dtype=torch.float64), 1e-6, 1e-9):
            return ("softmax_dim", "With one kv head and v = I the columns of your weights sum "
                    "to 1, not the rows: the softmax runs over the queries. It runs over the keys, "
                    "the last dim of the (B, H_q, T, T) scores.")
        return None

    def scale():
        D, step = 16, 1.5
        qs = torch.zeros(1, 2, 2, D, dtype=torch.float64)
        qs[..., 0] = 1.0
        ks = torch.zeros(1, 1, 2, D, dtype=torch.float64)
        ks[..., 1, 0] = step
        vs = torch.zeros(1, 1, 2, D, dtype=torch.float64)
        vs[..., 1, :] = 1.0
        y = output(s, fn, qs, ks, vs, like=qs)
        p = float(y[0, 0, 1, 0])                 # the weight of key 1 = sigmoid(step * scale)
        if not 0 < p < 1:
            return None
        got = math.log(p / (1 - p)) / step
        want = 1 / math.sqrt(D)
        if abs(got - want) <= 1e-6:
            return None
        known = [("no_scaling", 1.0, "1: not scaled"), ("scale", 1 / D, "1 / D"),
                 ("scale", 1 / math.sqrt(2 * D), "1 / sqrt(H_q D), the width")]
        key, text = next(((k, t) for k, v, t in known if abs(got - v) <= 1e-6),
                         ("scale", f"{fmt(got)} (with D = {D}, H_q = 2)"))
        return (key, f"Your scores are q . k times {text}; the scale is 1 / sqrt(D) = "
                f"{fmt(want)}, D = q.shape[-1], the head dim (Vaswani et al. 2017, 3.2.1).")

    return [heads, pattern, scale]
