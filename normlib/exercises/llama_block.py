"""The LLaMA decoder block checker (手撕 LLaMA block), and the mistakes it can name.

The learner writes ``LlamaBlock(d_model, n_heads, hidden_dim, n_kv_heads=None)`` from their own
pieces, with these parameters (Meta's LLaMA names, shortened):

    attn_norm.weight, ffn_norm.weight                  (C,)     RMSNorm, eps 1e-5
    attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj          bias-free, GQA as in exercise 11
    ffn.w1 (gate), ffn.w3 (up): C -> hidden, ffn.w2 (down): hidden -> C    bias-free SwiGLU

and ``forward(x)`` for x (B, T, C), positions 0 .. T - 1:

    h   = x + attn(rmsnorm(x) * attn_norm.weight)      causal, RoPE on q and k ("half" layout, HF)
    out = h + w2(silu(w1 z) * w3 z),  z = rmsnorm(h) * ffn_norm.weight

The reference is ``nl.TransformerBlock(d_model, n_heads, n_kv_heads, norm="rmsnorm",
placement="pre", ffn="swiglu", rope=True, d_ff=hidden_dim)`` with the learner's weights copied in.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import normlib as nl

from ._cases import Case, load_weights, new_module, run_cases
from ._compare import bind_last, randn
from ._generic import catalogue
from ._probes import near, output
from ._session import Fail, Session
from ._shared import PROJECTION_MISTAKES
from .result import CheckResult

__all__ = ["check_llama_block", "LLAMA_MISTAKES", "LLAMA_MUTANTS"]

LLAMA_MISTAKES = catalogue("llama_block", {
    **PROJECTION_MISTAKES,
    "missing_parameter": ("a parameter is missing or misnamed", "the block needs attn_norm.weight "
                          "and ffn_norm.weight (C,), attn.q_proj / k_proj / v_proj / o_proj and "
                          "ffn.w1 / w2 / w3, bias-free.",
                          "缺少参数或参数名不对：块需要 attn_norm.weight 和 ffn_norm.weight (C,)、"
                          "attn.q_proj / k_proj / v_proj / o_proj 和 ffn.w1 / w2 / w3，"
                          "都不带 bias。"),
    "weight_shape": ("a weight of the wrong shape", "q_proj and o_proj are (C, C), k_proj and "
                     "v_proj (n_kv_heads * head_dim, C), w1 and w3 (hidden_dim, C), w2 (C, "
                     "hidden_dim).",
                     "某个权重的形状不对：q_proj、o_proj 为 (C, C)，k_proj、v_proj 为 (n_kv_heads * 头维度, C)，"
                     "w1、w3 为 (hidden_dim, C)，w2 为 (C, hidden_dim)。"),
    "post_norm": ("norm after the residual add (Post-LN)", "LLaMA normalizes the input of each "
                  "sublayer and adds its output to the un-normalized stream: h = x + attn(norm(x)), "
                  "not norm(x + attn(x)).",
                  "归一化放在了残差相加之后（后置归一化）：LLaMA 用前置归一化，h = x + attn(norm(x))。"),
    "no_residual": ("residual connections missing", "each sublayer's output is added to its "
                    "input: h = x + attn(norm(x)), out = h + ffn(norm(h)).",
                    "缺少残差连接：h = x + attn(norm(x))，out = h + ffn(norm(h))。"),
    "no_attn_residual": ("attention residual missing", "add the attention's output to its input: "
                         "h = x + attn(attn_norm(x)).",
                         "注意力子层缺少残差连接：h = x + attn(attn_norm(x))。"),
    "no_ffn_residual": ("FFN residual missing", "add the FFN's output to its input: "
                        "out = h + ffn(ffn_norm(h)).",
                        "前馈网络子层缺少残差连接：out = h + ffn(ffn_norm(h))。"),
    "layer_norm": ("LayerNorm instead of RMSNorm", "LLaMA's norm is RMSNorm (Zhang & Sennrich "
                   "2019): x / sqrt(mean(x^2) + eps) * weight, no mean subtracted, no bias.",
                   "用了层归一化而不是均方根归一化：LLaMA 的归一化是 RMSNorm（Zhang & Sennrich 2019）"
                   "，x / sqrt(mean(x^2) + eps) * weight，不减均值、没有 bias。"),
    "no_norm": ("a sublayer input is not normalized", "normalize the input of each sublayer: "
                "attn(attn_norm(x)) and ffn(ffn_norm(h)).",
                "子层的输入没有归一化：attn(attn_norm(x))、ffn(ffn_norm(h))。"),
    "norm_weight_unused": ("a norm's weight is unused", "each RMSNorm multiplies by its own weight: "
                           "attn_norm.weight before the attention, ffn_norm.weight before the FFN.",
                           "某个均方根归一化的 weight 没有用到：各乘各自的 weight，注意力之前乘 attn_norm.weight，"
                           "前馈网络之前乘 ffn_norm.weight。"),
    "norm_axis": ("norm over the wrong dims", "RMSNorm normalizes each token on its own, over "
                  "the last dim: x.pow(2).mean(-1, keepdim=True).",
                  "归一化的维度不对：均方根归一化对每个 token 单独在最后一维上归一化，x.pow(2).mean(-1, keepdim=True)。"),
    "no_rope": ("RoPE missing", "rotate q and k by their positions before the scores; without it "
                "causal attention cannot tell the order of earlier tokens.",
                "缺少旋转位置编码：在计算分数之前对 q 和 k 做旋转。"),
    "rope_layout": ("RoPE in the interleaved layout", "this exercise uses HF's \"half\" layout: "
                    "pairs (i, i + D/2), x * cos + rotate_half(x) * sin. Meta's original code "
                    "pairs (2i, 2i + 1); a checkpoint converted to HF has its q/k rows permuted to "
                    "match.",
                    "旋转位置编码用了交错布局：本练习用 HF 的前后两半布局，(i, i + D/2) 配对，"
                    "x * cos + rotate_half(x) * sin。Meta 的原始代码按 (2i, 2i + 1) 配对；"
                    "转换成 HF 格式的权重已把 q/k 的行重新排列与之对应。"),
    "rope_frequencies": ("RoPE frequencies without the 2", "theta_i = base^(-2i / D) for "
                         "i = 0 .. D/2 - 1 (torch.arange(0, D, 2) / D): with base^(-i / D) the "
                         "frequencies fall too slowly.",
                         "旋转位置编码的频率漏掉了 2：theta_i = base^(-2i/D)。"),
    "gate_activation": ("the gate's activation is not SiLU", "SwiGLU gates with SiLU, "
                        "x * sigmoid(x): w2(silu(w1(z)) * w3(z)); GELU gives GEGLU, sigmoid GLU.",
                        "门控的激活函数不是 SiLU：SwiGLU 是 w2(silu(w1(x)) * w3(x))。"),
    "attention_scale": ("wrong attention scale", "the scores are q . k / sqrt(head_dim), "
                        "head_dim = d_model // n_heads (Vaswani et al. 2017, 3.2.1).",
                        "注意力缩放不对：分数是 q . k / sqrt(头维度)。"),
    "no_down_projection": ("w2 not applied", "the FFN ends with the down projection w2 "
                           "(hidden_dim -> d_model): w2(silu(w1(z)) * w3(z)).",
                           "没有应用下投影 w2：w2(silu(w1(z)) * w3(z))。"),
    "gate_up_swapped": ("gate and up swapped", "SiLU goes on w1 (the gate): "
                        "w2(silu(w1(z)) * w3(z)).",
                        "门控投影和上投影用反了：SiLU 作用在 w1（门控）上，w2(silu(w1(x)) * w3(x))。"),
})

_NAMES = ("attn_norm.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
          "attn.o_proj.weight", "ffn_norm.weight", "ffn.w1.weight", "ffn.w3.weight",
          "ffn.w2.weight")
_REFERENCE_NAMES = ("norm1.weight", "attn.q_proj.weight", "attn.k_proj.weight",
                    "attn.v_proj.weight", "attn.o_proj.weight", "norm2.weight", "ffn.w1.weight",
                    "ffn.w3.weight", "ffn.w2.weight")


def _shapes(C, H, hidden, H_kv):
    kv = H_kv * (C // H)
    return ((C,), (C, C), (kv, C), (kv, C), (C, C), (C,), (hidden, C), (hidden, C), (C, hidden))


def _rope(t, layout, step=2):
    """t (B, H, T, D) rotated at positions 0 .. T - 1, theta_i = 10000^(-step i / D) (step 2 is
    RoPE's; step 1 forgets the 2). Positions 1 .. T are no mistake a block can show: attention
    scores depend only on the distance between positions, so every offset gives the same block."""
    T, D = t.shape[-2:]
    theta = 10000.0 ** (-step * torch.arange(D // 2, dtype=torch.float64) / D)     # (D/2,)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * theta                  # (T, D/2)
    cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)
    if layout == "half":
        a, b = t[..., : D // 2], t[..., D // 2:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), -1)
    a, b = t[..., 0::2], t[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


def _block(x, W, H, H_kv, *, placement="pre", res_attn=True, res_ffn=True, norm="rms",
           rope="half", swap=False, gate=F.silu, rope_step=2, repeat="interleave"):
    """The block with the classic mistakes as options (the mutants); W in the order of _NAMES."""
    n1, Wq, Wk, Wv, Wo, n2, W1, W3, W2 = W
    B, T, C = x.shape
    D, g = C // H, H // H_kv

    def normed(t, w):
        if norm == "layer":
            return F.layer_norm(t, (C,), w, None, 1e-5)
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def attn(t):
        q = (t @ Wq.T).view(B, T, H, D).transpose(1, 2)
        k = (t @ Wk.T).view(B, T, H_kv, D).transpose(1, 2)
        v = (t @ Wv.T).view(B, T, H_kv, D).transpose(1, 2)
        if repeat == "tile":
            k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)                      # (B, H, T, D)
        else:
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        if rope != "none":
            q, k = _rope(q, rope, rope_step), _rope(k, rope, rope_step)
        s = (q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(
            ~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C) @ Wo.T

    def ffn(t):
        a, u = t @ W1.T, t @ W3.T
        if swap:
            a, u = u, a
        return (gate(a) * u) @ W2.T

    if placement == "post":
        h = normed(x + attn(x), n1)
        return normed(h + ffn(h), n2)
    h = attn(normed(x, n1)) + (x if res_attn else 0)
    return ffn(normed(h, n2)) + (h if res_ffn else 0)


def _variant(**options):
    """A mutant of the table, called like the reference: (x, W, H, H_kv, hidden)."""
    return lambda x, W, H, H_kv, hidden: _block(x, W, H, H_kv or H, **options)


LLAMA_MUTANTS = [
    ("post_norm", _variant(placement="post")),
    ("no_residual", _variant(res_attn=False, res_ffn=False)),
    ("no_attn_residual", _variant(res_attn=False)),
    ("no_ffn_residual", _variant(res_ffn=False)),
    ("layer_norm", _variant(norm="layer")),
    ("no_rope", _variant(rope="none")),
    ("rope_layout", _variant(rope="interleaved")),
    ("gate_up_swapped", _variant(swap=True)),
    ("rope_frequencies", _variant(rope_step=1)),
    ("gate_activation", _variant(gate=F.gelu)),
    ("gate_activation", _variant(gate=torch.sigmoid)),
    ("kv_repeat", _variant(repeat="tile")),
]


def _weights(C, H, hidden, H_kv, seed, dtype):
    """The weights in the order of _NAMES: norm weights ~ 1 + 0.2 N(0, 1), linear layers
    ~ N(0, 1 / fan_in)."""
    return [randn(*shape, seed=seed + i, dtype=dtype, scale=0.2, offset=1.0) if len(shape) == 1
            else randn(*shape, seed=seed + i, dtype=dtype, scale=shape[1] ** -0.5)
            for i, shape in enumerate(_shapes(C, H, hidden, H_kv or H))]


def _case(shape, H, hidden, H_kv, seed, dtype=torch.float64, note=""):
    """x ~ 1.5 N(0, 1) of ``shape`` (B, T, C), and the weights."""
    return Case(note, lambda: (randn(*shape, seed=seed + 20, dtype=dtype, scale=1.5),
                               _weights(shape[-1], H, hidden, H_kv, seed, dtype)),
                {"n_heads": H, "n_kv_heads": H_kv, "hidden": hidden})


CASES = [
    _case((2, 5, 16), 4, 40, None, 10, note="4 heads, hidden 40"),
    _case((1, 7, 24), 6, 64, 2, 30, note="GQA: 6 heads, 2 kv heads, hidden 64"),
    _case((2, 6, 16), 2, 44, None, 50, torch.float32, "2 heads, hidden 44"),
]


def _forward_reference(x, W, H, H_kv, hidden):
    return _reference(W, H, H_kv or H, hidden, x.dtype)(x).detach()


def _reference(W, H, H_kv, hidden, dtype):
    C = W[0].shape[0]
    ref = nl.TransformerBlock(C, H, H_kv, norm="rmsnorm", placement="pre", ffn="swiglu",
                              rope=True, d_ff=hidden).to(dtype)
    params = dict(ref.named_parameters())
    with torch.no_grad():
        for name, w in zip(_REFERENCE_NAMES, W, strict=True):
            params[name].copy_(w)
    return ref


def check_llama_block(cls, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``cls(d_model, n_heads, hidden_dim, n_kv_heads=None)`` against normlib's LLaMA block."""
    s = Session("LLaMA block", LLAMA_MISTAKES, exercise="llama_block",
                time_limit=time_limit,
                forbidden={"scaled_dot_product_attention": "F.scaled_dot_product_attention"},
                references={nl.TransformerBlock.forward: "nl.TransformerBlock",
                            nl.MultiHeadAttention.forward: "nl.MultiHeadAttention"})
    if not s.require_callable(cls, "your class"):
        return s.result()

    def build(C, H, hidden, H_kv=None, dtype=torch.float64, seed=0, weights=None):
        """The learner's block with known weights: (module, weights in the order of _NAMES)."""
        m = new_module(s, cls, C, H, hidden, *([] if H_kv is None else [H_kv]),
                       what=f"LlamaBlock({C}, {H}, {hidden})")
        params = dict(m.named_parameters())
        for name, shape in zip(_NAMES, _shapes(C, H, hidden, H_kv or H), strict=True):
            if name not in params:
                raise Fail(f"no parameter {name}", "missing_parameter")
            if tuple(params[name].shape) != shape:
                raise Fail(f"{name} has shape {tuple(params[name].shape)}, expected {shape}",
                           "weight_shape")
        extra = sorted(set(params) - set(_NAMES))
        if extra:
            key = "has_bias" if any(n.endswith("bias") for n in extra) else "missing_parameter"
            raise Fail(f"unexpected parameters: {', '.join(extra[:3])}", key)
        weights = weights or _weights(C, H, hidden, H_kv, seed, dtype)
        m = load_weights(s, m, dict(zip(_NAMES, weights, strict=True)), dtype)
        return m, [w.to(dtype) for w in weights]

    def forward(cls, x, W, n_heads, n_kv_heads, hidden):
        m, _ = build(x.shape[-1], n_heads, hidden, n_kv_heads, x.dtype, weights=W)
        return s.call(m, x)

    def backward():
        m, W = build(8, 2, 12, None, torch.float64, 60)
        x = randn(2, 4, 8, seed=69, dtype=torch.float64)
        ref = _reference(W, 2, 2, 12, torch.float64)
        s.expect_grads(lambda x: m(x), lambda x: ref(x), {"x": x},
                       mutants=bind_last(LLAMA_MUTANTS, W, 2, 2, 12))

    s.run("__init__(16, 4, 40): RMSNorm weights, attention, SwiGLU FFN (bias-free)",
          lambda: build(16, 4, 40))
    s.run("__init__(16, 4, 40, 2): GQA, k_proj and v_proj 16 -> 8", lambda: build(16, 4, 40, 2))
    run_cases(s, cls, CASES, reference=_forward_reference, mutants=LLAMA_MUTANTS, call=forward,
              prefix="forward ")
    s.run("backward float64: gradient w.r.t. x", backward)
    s.probe(*_probes(s, build))
    return s.result()


def _probes(s: Session, build) -> list:
    """Designed weights, float64, d_model 8, 2 heads, hidden 12, in this order: every linear layer
    0, then o_proj and w2 (the residual stream: x must come back); one sublayer on (its residual);
    one token changed with the attention off (the norm's axis); a constant added, a token tripled
    (LayerNorm or no norm) and the norm weights doubled; the last token changed (causal); w1 and
    w3 doubled (which one gates); w1 = w3 = w2^T = I (the gate's activation); two tokens swapped
    (does order reach later tokens?) and RoPE's variants; the scale from one score. A broken
    residual stream stops the later probes, which would only echo it."""
    C, H, hidden = 8, 2, 12
    shapes = _shapes(C, H, hidden, H)
    base = [randn(*shape, seed=800 + i, dtype=torch.float64, scale=0.2, offset=1.0)
            if len(shape) == 1 else randn(*shape, seed=800 + i, dtype=torch.float64,
                                           scale=shape[1] ** -0.5)
            for i, shape in enumerate(shapes)]
    x = randn(1, 5, C, seed=820, dtype=torch.float64, scale=1.5, offset=0.3)
    broken = []         # the residual stream is wrong: the later probes would only echo it

    def run(x, **changes):
        W = list(base)
        for name, w in changes.items():
            W[_NAMES.index(name)] = w
        m, _ = build(C, H, hidden, None, torch.float64, weights=W)
        return output(s, m, x, like=x)

    def zero(name):
        return torch.zeros(shapes[_NAMES.index(name)], dtype=torch.float64)

    def times(name, k):
        return base[_NAMES.index(name)] * k

    def rms(t, w):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def residual():
        every = {name: zero(name) for name in _NAMES[1:5] + _NAMES[6:]}   # every linear layer 0
        y = run(x, **every)
        if near(y, x, 1e-9, 1e-12):
            off = {name: zero(name) for name in ("attn.o_proj.weight", "ffn.w2.weight")}
            if near(run(x, **off), x, 1e-9, 1e-12):
                return None
            broken.append(True)
            off.update({name: zero(name) for name in ("ffn.w1.weight", "ffn.w3.weight")})
            if near(run(x, **off), x, 1e-9, 1e-12):          # the FFN's own output was the rest
                return ("no_down_projection", "With w2 = 0 your FFN still changes the output: its "
                        "result does not go through the down projection w2 (hidden_dim -> "
                        "d_model). ffn(z) = w2(silu(w1(z)) * w3(z)).")
            return ("no_o_proj", "With o_proj = 0 your attention still changes the output: the "
                    "merged heads do not go through o_proj.")
        broken.append(True)
        n1, n2 = base[0], base[5]
        # loose: a norm whose eps is 1e-6 (LLaMA 1's) is still recognised
        if near(y, rms(rms(x, n1), n2), 1e-4, 1e-7) or near(y, rms(x, n2), 1e-4, 1e-7):
            return ("post_norm", "With every linear layer set to 0 your block returns x "
                    "normalized, not x: the norm sits on the residual stream (after the add, "
                    "Post-LN). LLaMA adds each sublayer's output to the raw stream: "
                    "h = x + attn(norm(x)).")
        if near(y, torch.zeros_like(y), 0, 1e-12):
            return ("no_residual", "With every linear layer set to 0 your block returns 0: there "
                    "is no residual path. h = x + attn(attn_norm(x)), out = h + ffn(ffn_norm(h)).")
        return ("no_residual", "With every linear layer set to 0 your block does not return x: "
                "the residual stream itself is changed. Only the sublayers' outputs are added "
                "to it.")

    def one_residual():
        if broken:
            return None
        for off, key, what, fix in (
                ("ffn.w2.weight", "no_attn_residual", "attention", "h = x + attn(attn_norm(x))"),
                ("attn.o_proj.weight", "no_ffn_residual", "FFN", "out = h + ffn(ffn_norm(h))")):
            W = list(base)
            W[_NAMES.index(off)] = zero(off)
            with torch.no_grad():
                want = _reference(W, H, H, hidden, torch.float64)(x)     # x + that sublayer
            if near(run(x, **{off: zero(off)}), want - x, 1e-6, 1e-9):
                broken.append(True)
                return (key, f"With only the {what} switched on (the other sublayer's output "
                        f"set to 0), your block returns the {what}'s output without x: the "
                        f"residual is missing, {fix}.")
        return None

    def norm():
        if broken:
            return None
        off = {"attn.o_proj.weight": zero("attn.o_proj.weight")}   # out = x + ffn(ffn_norm(x))
        c = randn(1, 5, 1, seed=821, dtype=torch.float64, scale=2.0)
        f = run(x, **off) - x
        if near(run(x + c, **off) - (x + c), f, 1e-6, 1e-9):
            return ("layer_norm", "Adding a constant to every feature of a token does not change "
                    "what your FFN receives: your norm subtracts the mean, which is LayerNorm. "
                    "LLaMA's RMSNorm only re-scales: x / sqrt(mean(x^2) + eps) * weight.")
        if not near(run(3 * x, **off) - 3 * x, f, 1e-4, 1e-7):
            return ("no_norm", "Multiplying a token by 3 changes what your FFN receives: its input "
                    "is not normalized. Apply ffn_norm to h before the FFN (and attn_norm to x "
                    "before the attention).")
        for name in ("attn_norm.weight", "ffn_norm.weight"):
            if near(run(x, **{name: times(name, 2.0)}), run(x), 1e-9, 1e-12):
                return ("norm_weight_unused", f"Changing {name} does not change your output: each "
                        "RMSNorm multiplies by its own weight (attn_norm before the attention, "
                        "ffn_norm before the FFN).")
        return None

    def axis():
        if broken:
            return None
        off = {"attn.o_proj.weight": zero("attn.o_proj.weight")}   # each token on its own
        x2 = x.clone()
        x2[:, 1] += randn(C, seed=822, dtype=torch.float64, scale=3.0)
        others = [0, 2, 3, 4]
        if near(run(x2, **off)[:, others], run(x, **off)[:, others], 1e-9, 1e-12):
            return None
        broken.append(True)
        return ("norm_axis", "With the attention switched off, changing token 1 changed the "
                "output of other tokens: your norm takes its statistics over more than one token. "
                "RMSNorm works per token, over the last dim: x.pow(2).mean(-1, keepdim=True).")

    def future():
        if broken:
            return None
        x2 = x.clone()
        x2[:, -1] += randn(C, seed=823, dtype=torch.float64, scale=3.0)
        if near(run(x2)[:, :-1], run(x)[:, :-1], 1e-9, 1e-12):
            return None
        return ("sees_future", "Changing the last token changed the outputs of earlier tokens: "
                "the attention is not causal. Mask the scores of keys j > t with -inf before the "
                "softmax.")

    def gate():
        if broken:
            return None
        off = {"attn.o_proj.weight": zero("attn.o_proj.weight")}
        f = run(x, **off) - x
        up = run(x, **off, **{"ffn.w3.weight": times("ffn.w3.weight", 2.0)}) - x
        if near(up, 2 * f, 1e-6, 1e-9):
            return None
        gate = run(x, **off, **{"ffn.w1.weight": times("ffn.w1.weight", 2.0)}) - x
        if near(gate, 2 * f, 1e-6, 1e-9):
            return ("gate_up_swapped", "Doubling w1 doubles your FFN's output and doubling w3 does "
                    "not: SiLU is on w3. The gate is w1 and the up projection w3, which enters "
                    "linearly: w2(silu(w1(z)) * w3(z)).")
        return None

    def activation():
        """w1 = w3 = w2^T = [I; 0]: the FFN returns act(z) * z per feature, z = ffn_norm(x). Both
        norms get the same weight, so that a block that uses one norm twice reads the same z."""
        if broken:
            return None
        pick = torch.eye(hidden, C, dtype=torch.float64)
        f = run(x, **{"attn.o_proj.weight": zero("attn.o_proj.weight"), "ffn.w1.weight": pick,
                      "ffn.w3.weight": pick, "ffn.w2.weight": pick.T.contiguous(),
                      "attn_norm.weight": base[5]}) - x
        z = rms(x, base[5])
        act = f / z                         # loose below: the learner's eps may be 1e-6
        if near(act, F.silu(z), 1e-4, 1e-7):
            return None
        for name, fn in (("GELU, which makes GEGLU", F.gelu),
                         ("GELU (tanh), which makes GEGLU", lambda t: F.gelu(t, approximate="tanh")),
                         ("sigmoid, which makes GLU", torch.sigmoid), ("ReLU (ReGLU)", torch.relu),
                         ("the identity (Bilinear)", lambda t: t)):
            if near(act, fn(z), 1e-4, 1e-7):
                return ("gate_activation", f"With w1 = w3 = w2^T = identity your FFN returns "
                        f"act(z) * z with act = {name}: SwiGLU's gate is SiLU, z * sigmoid(z).")
        return ("gate_activation", "With w1 = w3 = w2^T = identity your FFN does not return "
                "silu(z) * z: the FFN is w2(silu(w1(z)) * w3(z)).")

    def scale():
        """Token 0 = 0, token 1 = u; q = k = v = o = identity and the FFN off: the output at
        position 1 is u + p * z (z = attn_norm(u)), p = sigmoid(scale * |z_h|^2) per head (RoPE
        rotates a query and a key at the same position alike). Both norms get the same weight."""
        if broken:
            return None
        D = C // H
        u = randn(C, seed=824, dtype=torch.float64, scale=0.5, offset=0.5)
        xs = torch.stack([torch.zeros(C, dtype=torch.float64), u]).unsqueeze(0)     # (1, 2, C)
        eye = torch.eye(C, dtype=torch.float64)
        y = run(xs, **{name: eye for name in _NAMES[1:5]}, **{"ffn.w2.weight": zero("ffn.w2.weight"),
                                                          "ffn_norm.weight": base[0]})
        z = rms(u, base[0])
        got = []
        for h in range(H):
            zh = z[h * D:(h + 1) * D]
            p = float(((y[0, 1] - u)[h * D:(h + 1) * D] / zh).mean())
            if not 0 < p < 1:
                return None
            got.append(math.log(p / (1 - p)) / float(zh @ zh))
        want = 1 / math.sqrt(D)
        if all(abs(g / want - 1) <= 1e-3 for g in got):
            return None
        text = next((t for v, t in ((1.0, "1: not scaled"), (1 / D, "1 / head_dim"),
                                    (1 / math.sqrt(C), "1 / sqrt(d_model)"))
                     if abs(got[0] / v - 1) <= 1e-3), f"{got[0]:.4g}")
        return ("attention_scale", f"Your attention scores are q . k times {text}; the scale is "
                f"1 / sqrt(head_dim) = {want:.4g} (head_dim = d_model // n_heads).")

    def order():
        if broken:
            return None
        off = {"ffn.w2.weight": zero("ffn.w2.weight")}      # attention only
        swapped = x[:, [1, 0, 2, 3, 4]]
        if near(run(swapped, **off)[:, 2:], run(x, **off)[:, 2:], 1e-9, 1e-12):
            return ("no_rope", "Swapping tokens 0 and 1 leaves the outputs of tokens 2, 3, 4 "
                    "unchanged: your attention cannot tell the order of earlier tokens, so the "
                    "positions never enter. Rotate both q and k with RoPE before the scores.")
        W = list(base)
        W[_NAMES.index("ffn.w2.weight")] = zero("ffn.w2.weight")
        y = run(x, **off)
        if near(y, _block(x, W, H, H), 1e-6, 1e-9):          # the attention is right
            return None
        for key, kw, text in _ROPE_VARIANTS:
            if near(y, _block(x, W, H, H, **kw), 1e-6, 1e-9):
                return (key, text)
        return None

    return [residual, one_residual, axis, norm, future, gate, activation, order, scale]


_ROPE_VARIANTS = [
    ("rope_layout", dict(rope="interleaved"), "Your attention matches RoPE with pairs (2i, 2i + 1), "
     "Meta's interleaved layout; this block uses HF's \"half\" layout, pairs (i, i + D/2): "
     "x * cos + rotate_half(x) * sin."),
    ("rope_frequencies", dict(rope_step=1), "Your attention matches RoPE with theta_i = "
     "base^(-i / D): the exponent misses its 2. theta_i = base^(-2i / D), i = 0 .. D/2 - 1, "
     "i.e. 1 / base ** (torch.arange(0, D, 2) / D)."),
]
