"""The QK-norm attention checker (Qwen3's attention), and the mistakes it can name.

The learner writes ``QKNormAttention(d_model, n_heads, eps=1e-6)``: bias-free q_proj, k_proj,
v_proj, o_proj (d_model -> d_model), and q_norm, k_norm, RMSNorms over head_dim with a weight of
shape (head_dim,); ``forward(x)`` for x (B, T, d_model) projects, splits the heads, applies q_norm
to every query head and k_norm to every key head, BEFORE RoPE (HF's "half" layout, positions
0 .. T - 1), then causal attention and o_proj. This is Qwen3's order (HF ``Qwen3Attention``:
``q_norm(q_proj(x).view(...))`` then ``apply_rotary_pos_emb``); QK-norm itself is from Dehghani et
al. 2023 (arXiv 2302.05442) and Wortsman et al. 2023 (arXiv 2309.14322, Section 3.1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import normlib as nl

from ._cases import Case, load_weights, new_module, run_cases
from ._compare import randn
from ._generic import catalogue
from ._probes import near
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_qk_norm_attention", "QK_NORM_MISTAKES", "QK_NORM_MUTANTS"]

QK_NORM_MISTAKES = catalogue("qk_norm_attention", {
    "norm_after_rope": ("norm after RoPE", "q_norm and k_norm come before RoPE (Qwen3): with a "
                        "learned weight the two orders differ, since the weight is per feature "
                        "and RoPE mixes feature pairs.",
                        "q_norm 和 k_norm 放在了 RoPE 之后：Qwen3 先归一化再施加 RoPE。"),
    "norm_whole_projection": ("norm over the whole projection", "the norm runs per head, over "
                              "head_dim: split the heads first, then RMSNorm(head_dim) on each.",
                              "在整个投影上做了归一化：应先拆成多头，再对每个头在 head_dim 上做 RMSNorm。"),
    "norm_on_v": ("v normalized too", "only q and k are normalized; v keeps its scale.",
                  "把 v 也归一化了：只有 q 和 k 要归一化。"),
    "no_qk_norm": ("no QK-norm", "apply q_norm to the query heads and k_norm to the key heads "
                   "before RoPE.",
                   "没有 QK-norm：在 RoPE 之前对查询头用 q_norm、对键头用 k_norm。"),
    "one_side_normed": ("only q or only k normalized", "both q and k are normalized, each with "
                        "its own norm.",
                        "只归一化了 q 或 k：两者都要归一化，各用各的归一化层。"),
    "no_eps": ("no eps", "the RMSNorm divides by sqrt(mean(x^2) + eps): use the eps given.",
               "均方根归一化漏掉了 eps：应除以 sqrt(mean(x^2) + eps)。"),
    "eps_ignored": ("eps ignored", "use the eps passed to the constructor in both norms.",
                    "忽略了传入的 eps 参数（写死了某个值？）：请使用传入的 eps。"),
    "layer_norm": ("LayerNorm instead of RMSNorm", "Qwen3's q_norm and k_norm are RMSNorms: no "
                   "mean subtracted.",
                   "q_norm、k_norm 用了层归一化：Qwen3 用均方根归一化，不减均值。"),
    "norm_weight_unused": ("norm weight unused", "multiply by q_norm.weight and k_norm.weight "
                           "after normalizing.",
                           "某个归一化的 weight 没有用到：两个归一化各乘各自的 weight。"),
    "norms_swapped": ("q_norm and k_norm swapped", "q_norm normalizes the queries, k_norm the "
                      "keys.",
                      "q_norm 和 k_norm 用反了：q_norm 归一化查询，k_norm 归一化键。"),
    "no_rope": ("no RoPE", "rotate q and k (after their norms) at positions 0 .. T - 1, HF's "
                "half layout.",
                "缺少旋转位置编码：在计算分数之前对 q 和 k 做旋转。"),
    "rope_layout": ("RoPE in the wrong layout", "HF's Qwen3 pairs feature i with i + head_dim/2 "
                    "(rotate_half): nl.apply_rope(x, layout='half').",
                    "旋转位置编码用了交错布局：本练习用前后两半布局（HF 的 rotate_half）。"),
    "sees_future": ("no causal mask", "query t attends to keys 0 .. t only.",
                    "注意力不是因果的：改变后面的 token 会改变前面的输出。"),
    "l2_norm": ("L2 norm instead of RMS", "F.normalize divides by the L2 norm, sqrt(head_dim) "
                "times the RMS: RMSNorm divides by sqrt(mean(x^2) + eps).",
                "除以了 L2 范数：均方根归一化除以 sqrt(mean(x^2) + eps)，两者差 sqrt(n) 倍。"),
    "eps_outside_sqrt": ("eps outside the square root", "RMSNorm divides by sqrt(mean(x^2) + "
                         "eps), eps inside the root.",
                         "eps 放在了开方之外：均方根归一化除以 sqrt(mean(x^2) + eps)。"),
    "gain_one_plus": ("gain 1 + weight", "Qwen3's RMSNorm multiplies by its weight; (1 + weight) "
                      "is Gemma's convention.",
                      "增益用了 1 + weight：Qwen3 的均方根归一化直接乘 weight，(1 + weight) 是 Gemma 的约定。"),
    "gain_before_norm": ("gain applied before normalizing", "normalize first, then multiply by "
                         "the weight: y = x / rms(x) * weight.",
                         "在归一化之前乘了增益：应先归一化，再乘 weight，y = x / rms(x) * weight。"),
    "norm_axis": ("norm over the wrong dim", "each head's vector is normalized over head_dim, "
                  "the last dim of (B, H, T, head_dim).",
                  "归一化的维度不对：每个头的向量在 head_dim（(B, H, T, head_dim) 的最后一维）"
                  "上归一化。"),
    "rope_base": ("RoPE base not 10000", "this exercise rotates with nl.apply_rope's default "
                  "base 10000 (Qwen3's checkpoints use rope_theta = 1,000,000; here the task "
                  "fixes the default).",
                  "旋转位置编码的 base 不是 10000：本练习用 nl.apply_rope 的默认 base 10000（Qwen3 的权重用 rope_theta = 1,000,000，"
                  "这里任务固定用默认值）。"),
    "mask_excludes_self": ("mask hides the query itself", "query t attends to keys 0 .. t, "
                           "itself included (tril(), not tril(-1)): the first token, with no "
                           "key left, gets NaN.",
                           "掩码把查询自己也遮住了：查询 t 关注键 0 .. t，包括自己（用 tril()，不是 tril(-1)）"
                           "；第一个 token 没有键可看，得到 NaN。"),
    "heads_split": ("heads split the wrong way", "split the features into heads with "
                    "view(B, T, n_heads, head_dim), then transpose(1, 2) to (B, H, T, head_dim).",
                    "拆分多头的方式不对：用 view(B, T, n_heads, head_dim)，再 transpose(1, 2) 得到 (B, H, T, head_dim)。"),
    "heads_merged": ("heads merged the wrong way", "merge back with y.transpose(1, 2)"
                     ".reshape(B, T, d_model): without the transpose the features of different "
                     "tokens are mixed.",
                     "合并多头的方式不对：用 y.transpose(1, 2).reshape(B, T, d_model)；"
                     "不转置就会把不同 token 的特征混在一起。"),
    "no_scaling": ("missing 1/sqrt(head_dim)", "the scores are q . k / sqrt(head_dim), after the "
                   "norms and RoPE (a scale before the norm is undone by it).",
                   "没有缩放：注意力分数应除以 sqrt(头维度)。"),
    "scale": ("wrong scale", "the scores are q . k / sqrt(head_dim), head_dim = d_model // "
              "n_heads.",
              "缩放系数不对：分数是 q . k / sqrt(头维度)。"),
    "has_bias": ("projections with bias", "Qwen3's q_proj, k_proj, v_proj and o_proj are "
                 "bias-free: nn.Linear(d_model, d_model, bias=False).",
                 "线性层带了 bias：应为 nn.Linear(..., bias=False)。"),
    "no_o_proj": ("o_proj not applied", "after merging the heads apply o_proj.",
                  "没有应用输出投影 o_proj。"),
    "wrong_projection": ("a projection used in the wrong place", "q = q_proj(x), k = k_proj(x), "
                         "v = v_proj(x): each input has its own projection.",
                         "某个投影用错了地方：q = q_proj(x)，k = k_proj(x)，v = v_proj(x)，"
                         "各用各的投影。"),
    "missing_module": ("missing or misshapen layer", "q_proj, k_proj, v_proj, o_proj "
                       "(d_model x d_model, no bias) and q_norm, k_norm with a weight of shape "
                       "(head_dim,).",
                       "缺少某个层或形状不对：q_proj、k_proj、v_proj、o_proj 为 (d_model, d_model) 且无 bias，"
                       "q_norm、k_norm 的权重形状为 (head_dim,)。"),
})


def _rms(t, g, eps, mean=False, mode="ok"):
    """RMSNorm over the last dim of t (-2 for mode "norm_axis"), with one mistake (mode)."""
    dim = -2 if mode == "norm_axis" else -1
    if mode == "gain_before_norm":
        t = t * g
    if mean:
        t = t - t.mean(dim, keepdim=True)
    if mode == "l2_norm":
        t = t / (t.pow(2).sum(dim, keepdim=True) + eps).sqrt()
    elif mode == "eps_outside_sqrt":
        t = t / (t.pow(2).mean(dim, keepdim=True).sqrt() + eps)
    else:
        t = t * torch.rsqrt(t.pow(2).mean(dim, keepdim=True) + eps)
    return {"gain_before_norm": t, "gain_one_plus": t * (1 + g)}.get(mode, t * g)


def _qk(x, W, gq, gk, H, eps, mode="ok"):
    """Qwen3 attention with one mistake (mode); "ok" is the right answer."""
    B, T, C = x.shape
    hd = C // H
    Wq, Wk, Wv, Wo = W
    q, k, v = (x @ w.T for w in (Wq, Wk, Wk if mode == "wrong_projection" else Wv))  # (B, T, C)
    if mode == "norm_whole_projection":
        q, k = _rms(q, gq.repeat(H), eps), _rms(k, gk.repeat(H), eps)
    split = {"split_no_transpose": lambda t: t.reshape(B, H, T, hd),
             "split_swapped": lambda t: t.view(B, T, hd, H).permute(0, 3, 1, 2)}.get(
        mode, lambda t: t.view(B, T, H, hd).transpose(1, 2))
    q, k, v = (split(t) for t in (q, k, v))                              # (B, H, T, hd)
    if mode == "norms_swapped":
        gq, gk = gk, gq
    if mode == "norm_weight_unused":
        gq = gk = torch.ones_like(gq)
    e = {"no_eps": 0.0, "eps_ignored": 1e-6 if eps != 1e-6 else 1e-5}.get(mode, eps)
    layout = "interleaved" if mode == "rope_layout" else "half"
    base = 1e6 if mode == "rope_base" else 10000.0

    def rope(t):
        return t if mode == "no_rope" else nl.apply_rope(t, layout=layout, base=base)

    normed = mode not in ("no_qk_norm", "norm_whole_projection")
    if mode == "norm_after_rope":
        q, k = rope(q), rope(k)
    if normed:
        if mode != "k_only":
            q = _rms(q, gq, e, mean=mode == "layer_norm", mode=mode)
        if mode != "q_only":
            k = _rms(k, gk, e, mean=mode == "layer_norm", mode=mode)
    if mode == "norm_on_v":
        v = _rms(v, torch.ones_like(gk), e)
    if mode != "norm_after_rope":
        q, k = rope(q), rope(k)
    scale = {"no_scaling": 1.0, "scale_head_dim": 1 / hd, "scale_d_model": C ** -0.5}.get(
        mode, hd ** -0.5)
    mask = torch.ones(T, T, dtype=torch.bool).tril(-1 if mode == "mask_excludes_self" else 0)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mode == "sees_future" else mask,
                                       scale=scale)
    if mode == "mask_excludes_self":          # SDPA gives 0 for a row with no key; a softmax, NaN
        y[..., 0, :] = float("nan")
    y = y.reshape(B, T, C) if mode == "heads_merged" else y.transpose(1, 2).reshape(B, T, C)
    return y if mode == "no_o_proj" else y @ Wo.T


_MODES = [("norm_after_rope", "norm_after_rope"), ("norm_whole_projection", "norm_whole_projection"),
          ("norm_on_v", "norm_on_v"), ("no_qk_norm", "no_qk_norm"), ("one_side_normed", "q_only"),
          ("one_side_normed", "k_only"), ("no_eps", "no_eps"), ("eps_ignored", "eps_ignored"),
          ("layer_norm", "layer_norm"), ("norm_weight_unused", "norm_weight_unused"),
          ("norms_swapped", "norms_swapped"), ("no_rope", "no_rope"),
          ("rope_layout", "rope_layout"), ("sees_future", "sees_future"),
          ("l2_norm", "l2_norm"), ("eps_outside_sqrt", "eps_outside_sqrt"),
          ("gain_one_plus", "gain_one_plus"), ("gain_before_norm", "gain_before_norm"),
          ("norm_axis", "norm_axis"), ("rope_base", "rope_base"),
          ("mask_excludes_self", "mask_excludes_self"), ("heads_split", "split_no_transpose"),
          ("heads_split", "split_swapped"), ("heads_merged", "heads_merged"),
          ("no_scaling", "no_scaling"), ("scale", "scale_head_dim"), ("scale", "scale_d_model"),
          ("no_o_proj", "no_o_proj"), ("wrong_projection", "wrong_projection")]


QK_NORM_MUTANTS = [(key, (lambda x, W, g, H, eps, mode=mode: _qk(x, W, *g, H, eps, mode)))
                   for key, mode in _MODES]


def _reference(x, W, g, H, eps):
    return _qk(x, W, *g, H, eps)


def _weights(C, H, seed, dtype):
    """[W_q, W_k, W_v, W_o] ~ N(0, 1 / C) and the norms' [g_q, g_k] ~ 1 + 0.5 N(0, 1)."""
    return ([randn(C, C, seed=seed + i, dtype=dtype, scale=C ** -0.5) for i in range(4)],
            [randn(C // H, seed=seed + 5 + i, dtype=dtype, scale=0.5, offset=1.0)
             for i in range(2)])


def _case(shape, H, eps, seed, dtype=torch.float64, scale=1.5, note=""):
    """x ~ scale N(0, 1) of ``shape`` (B, T, C), and the weights."""
    return Case(f"n_heads = {H}, eps = {eps:g}" + (f", {note}" if note else ""), lambda: (
        randn(*shape, seed=seed + 9, dtype=dtype, scale=scale),
        *_weights(shape[-1], H, seed, dtype)), {"n_heads": H, "eps": eps})


CASES = [
    _case((2, 5, 32), 4, 1e-6, 10),
    _case((1, 6, 16), 2, 0.5, 20, note="a large eps"),
    _case((2, 4, 24), 3, 1e-6, 30, scale=1e-4, note="tiny inputs"),
    _case((1, 7, 32), 2, 1e-6, 40, dtype=torch.float32),
]


def check_qk_norm_attention(cls, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``cls(d_model, n_heads, eps=1e-6)`` against Qwen3's attention with the same weights."""
    s = Session("QK-norm attention", QK_NORM_MISTAKES, exercise="qk_norm_attention",
                time_limit=time_limit,
                references={nl.MultiHeadAttention.forward: "nl.MultiHeadAttention"})
    if not s.require_callable(cls, "your class"):
        return s.result()

    def build(C, H, eps, seed, dtype=torch.float64, W=None, g=None):
        """The learner's module with known weights: (module, W, (gq, gk))."""
        m = new_module(s, cls, C, H, eps=eps, what=f"QKNormAttention({C}, {H})")
        hd = C // H
        for name, shape in (("q_proj", (C, C)), ("k_proj", (C, C)), ("v_proj", (C, C)),
                            ("o_proj", (C, C)), ("q_norm", (hd,)), ("k_norm", (hd,))):
            layer = getattr(m, name, None)
            weight = getattr(layer, "weight", None)
            if not isinstance(weight, torch.Tensor):
                raise Fail(f"no layer {name} with a weight", "missing_module")
            if tuple(weight.shape) != shape:
                key = "norm_whole_projection" if name in ("q_norm", "k_norm") and \
                    tuple(weight.shape) == (C,) else "missing_module"
                raise Fail(f"{name}.weight has shape {tuple(weight.shape)}, expected {shape}", key)
            if name.endswith("proj") and isinstance(getattr(layer, "bias", None), torch.Tensor):
                raise Fail(f"{name} has a bias", "has_bias")
        W0, g0 = _weights(C, H, seed, dtype)
        W, g = W or W0, g or g0
        m = load_weights(s, m, dict(zip(("q_proj.weight", "k_proj.weight", "v_proj.weight",
                                         "o_proj.weight", "q_norm.weight", "k_norm.weight"),
                                        [*W, *g], strict=True)), dtype)
        return m, W, g

    def forward(cls, x, W, g, n_heads, eps):
        m, _, _ = build(x.shape[-1], n_heads, eps, 0, x.dtype, W, g)
        return s.call(m, x)

    run_cases(s, cls, CASES, reference=_reference, mutants=QK_NORM_MUTANTS, call=forward)
    s.probe(*_probes(s, cls, build))
    return s.result()


def _probes(s: Session, cls, build) -> list:
    """Probes on the learner's module (float64, d_model 16, 2 heads): scaling W_q (or W_k) by 10
    must not change the output (q and k are normalized); scaling one head's rows of W_q must not
    either (per head, not over the projection); scaling W_v by 10 scales the output by 10 (v is
    not normalized); adding the same value to every feature of each query head changes it (RMSNorm
    does not subtract the mean; LayerNorm would)."""
    C, H, eps = 16, 2, 1e-6
    x = randn(2, 5, C, seed=990, dtype=torch.float64, scale=1.5)

    def out(W, g=None):
        m, _, _ = build(C, H, eps, 980, W=W, g=g)
        y = s.call(m, x)
        if not isinstance(y, torch.Tensor) or y.shape != x.shape or not bool(y.isfinite().all()):
            raise Fail("unusable output")
        return y.detach().double()

    W = [randn(C, C, seed=980 + i, dtype=torch.float64, scale=C ** -0.5) for i in range(4)]

    def scaled(i, factor, rows=slice(None)):
        V = [w.clone() for w in W]
        V[i][rows] *= factor
        return V

    def same(a, b):
        """Equal but for eps's effect (|change| ~ eps / mean(q^2) ~ 1e-6 of the output)."""
        return near(a, b, 1e-4, 1e-4 * float(b.abs().max()))

    def invariances():
        base = out(W)
        q_free = same(out(scaled(0, 10.0)), base)
        k_free = same(out(scaled(1, 10.0)), base)
        if not q_free and not k_free:
            return ("no_qk_norm", "Scaling W_q or W_k by 10 changes your output: neither q nor k "
                    "is normalized. " + QK_NORM_MISTAKES["no_qk_norm"][1].capitalize())
        if q_free != k_free:
            side = "W_k" if q_free else "W_q"
            return ("one_side_normed", f"Scaling W_q or W_k by 10 should change nothing (both are "
                    f"normalized); scaling {side} changes your output.")
        head = same(out(scaled(0, 10.0, slice(0, C // H))), base)
        if not head:
            return ("norm_whole_projection", "Scaling the rows of W_q for head 0 by 10 changes "
                    "your output, though scaling all of W_q does not: the norm runs over the "
                    "whole projection, not per head. Split the heads, then RMSNorm(head_dim).")
        if same(out(scaled(2, 10.0)), base):
            return ("norm_on_v", "Scaling W_v by 10 leaves your output unchanged, so v is "
                    "normalized too: only q and k are; the output must scale with v.")
        return None

    def mean():
        base = out(W)
        V = [w.clone() for w in W]
        shift = randn(C, seed=996, dtype=torch.float64)
        V[0] = V[0] + torch.outer(torch.ones(C, dtype=torch.float64), shift)
        if same(out(V), base) and not same(_qk(x, V, *_g(), H, eps), _qk(x, W, *_g(), H, eps)):
            return ("layer_norm", "Adding the same value to every feature of each query head "
                    "leaves your output unchanged: your norm subtracts the mean, as LayerNorm "
                    "does. " + QK_NORM_MISTAKES["layer_norm"][1])
        return None

    def _g():
        return [randn(C // H, seed=985 + i, dtype=torch.float64, scale=0.5, offset=1.0)
                for i in range(2)]

    def measured():
        got = out(W)
        g = _g()
        want = _qk(x, W, *g, H, eps)
        bad = [t for t in range(x.shape[1]) if not same(got[:, t], want[:, t])]
        if not bad:
            return None
        first = out(W)[:, :1]
        alone = build(C, H, eps, 980, W=W, g=g)[0]
        one = s.call(alone, x[:, :1])
        first_ok = isinstance(one, torch.Tensor) and one.shape == first.shape and \
            same(one.detach().double(), _qk(x[:, :1], W, *g, H, eps))
        findings = [
            f"tokens {', '.join(map(str, bad))} of {x.shape[1]} differ from Qwen3's attention "
            f"(max |error| {float((got - want).abs().max()):.3g})",
            "a single token alone (no attention to mix) is " + ("right: the error is in the "
                                                                "scores, the mask or RoPE" if
                                                                first_ok else "wrong too: the "
                                                                "error is in the projections, "
                                                                "the heads or the norms")]
        return ("cannot_tell", "No known mistake fits. Measured on float64 x (2, 5, 16), 2 heads: "
                + "; ".join(findings) + ".")

    def causal():
        x2 = x.clone()
        x2[:, -1] += randn(C, seed=997, dtype=torch.float64)
        m, _, _ = build(C, H, eps, 980, W=W)
        y, y2 = (s.call(m, t) for t in (x, x2))
        if not all(isinstance(t, torch.Tensor) and t.shape == x.shape for t in (y, y2)):
            return None
        if near(y[:, :-1].detach(), y2[:, :-1].detach(), 1e-9, 1e-12):
            return None
        return ("sees_future", "Changing the last token changes the outputs of earlier tokens: "
                "a query sees keys after it. " + QK_NORM_MISTAKES["sees_future"][1].capitalize())

    return [invariances, mean, causal, measured]
