"""The multi-head attention checker (手撕 MHA, with GQA/MQA and a KV cache), and the mistakes it names.

The learner writes ``MultiHeadAttention(d_model, n_heads, n_kv_heads=None)`` with bias-free
``q_proj`` (C -> C), ``k_proj`` and ``v_proj`` (C -> H_kv * D) and ``o_proj`` (C -> C), D = C / H,
and ``forward(x, cache=None)``: causal self-attention of x (B, T, C) -> (B, T, C), query head h
reading key/value head h // (H / H_kv) (HF's ``repeat_kv``).

The cache contract (stated in the exercise): ``cache`` is an ``nl.KVCache``, the object an
interviewer hands over: ``cache.seq_len`` is the number of tokens already cached (the position of
the first new token) and ``cache.update(k, v)`` appends this step's (B, H_kv, T, D) keys and values
and returns all of them. Decoding token by token must give the outputs of the full forward pass,
and the cache must hold H_kv heads (before the repeat: that is what GQA saves).

The reference is ``nl.MultiHeadAttention`` with the learner's weights copied in.
"""

from __future__ import annotations

import math

import torch

import normlib as nl

from ._cases import Case, load_weights, new_module, run_cases
from ._compare import bind_last, close, randn, tolerance
from ._generic import catalogue
from ._probes import fmt, near, output
from ._session import Fail, Session
from ._shared import PROJECTION_MISTAKES
from .result import CheckResult

__all__ = ["check_multi_head_attention", "MHA_MISTAKES", "MHA_MUTANTS"]

MHA_MISTAKES = catalogue("multi_head_attention", {
    **PROJECTION_MISTAKES,
    "missing_projection": ("q_proj, k_proj, v_proj or o_proj missing", "the module needs four "
                           "bias-free nn.Linear layers: q_proj and o_proj (C -> C), k_proj and "
                           "v_proj (C -> n_kv_heads * head_dim).",
                           "缺少 q_proj、k_proj、v_proj 或 o_proj（名字不对或没有定义）。"),
    "wrong_kv_shape": ("k_proj / v_proj of the wrong size", "with GQA, k_proj and v_proj map C to "
                       "n_kv_heads * head_dim (head_dim = d_model // n_heads), not to d_model.",
                       "k_proj / v_proj 的大小不对：使用分组查询注意力时映射到 n_kv_heads * 头维度。"),
    "no_scaling": ("missing 1/sqrt(head_dim)", "the scores are not scaled: divide q k^T by "
                   "sqrt(head_dim) (Vaswani et al. 2017, 3.2.1).",
                   "没有缩放：注意力分数应除以 sqrt(头维度)。"),
    "scaled_by_d_model": ("scaled by 1/sqrt(d_model)", "the scale uses d_model; each head's scores "
                          "are divided by sqrt(head_dim), head_dim = d_model // n_heads.",
                          "缩放用了 d_model：每个头的分数除以 sqrt(头维度)。"),
    "scaled_by_d": ("scaled by 1/head_dim", "the scores are divided by head_dim; the scale is "
                    "1 / sqrt(head_dim).",
                    "分数除以了头维度：缩放系数是 1 / sqrt(头维度)。"),
    "scale": ("wrong scale", "the scores are q . k / sqrt(head_dim).",
              "缩放系数不对：分数是 q . k / sqrt(头维度)。"),
    "softmax_wrong_dim": ("softmax over the wrong dim", "the softmax must run over the keys, the "
                          "last dim of the (B, H, T, S) scores: each query's weights sum to 1.",
                          "softmax 作用在错误的维度上：应在键的维度（最后一维）上。"),
    "mask_diagonal": ("mask hides the token itself", "the causal mask hides the diagonal, so a "
                      "token cannot attend to itself and row 0 is all -inf (NaN). Keep j <= t: "
                      "torch.ones(T, T).tril().",
                      "因果掩码挡住了对角线：token 看不到自己，第 0 行全是 -inf（NaN）。"),
    "mask_after_softmax": ("mask applied after the softmax", "masking the weights after the "
                           "softmax leaves rows that no longer sum to 1: set the scores to -inf "
                           "before the softmax.",
                           "在 softmax 之后才做掩码：每行的权重之和不再为 1。应在 softmax 之前把分数设为 -inf。"),
    "weights_not_normalized": ("weights do not sum to 1", "each query's attention weights are the "
                               "softmax over the keys: they sum to 1.",
                               "每个查询的注意力权重之和不为 1。"),
    "view_after_transpose": ("view after transpose", "y.transpose(1, 2) is not contiguous, so "
                             ".view(B, T, C) fails: use .reshape(B, T, C) (or .contiguous().view).",
                             "transpose 之后直接 view：张量不连续，请用 .reshape(B, T, C)。"),
    "head_reshape": ("heads split or merged wrongly", "split with x.view(B, T, H, D).transpose(1, 2) "
                     "and merge with y.transpose(1, 2).reshape(B, T, C): a view to (B, H, T, D) "
                     "without the transpose mixes positions and heads.",
                     "拆分或合并头的方式不对：拆分用 view(B, T, H, D).transpose(1, 2)，"
                     "合并用 transpose(1, 2).reshape(B, T, C)。"),
    "cache_offset": ("the mask ignores the cache offset", "with a cache, the T new queries sit at "
                     "positions S .. S + T - 1 (S = cache.seq_len, read before the update): "
                     "query i keeps keys j <= S + i, e.g. torch.ones(T, S + T).tril(S). A mask "
                     "built as tril() of (T, S + T) lets a new token see only the first keys.",
                     "掩码忽略了缓存偏移：新的查询位于 S .. S + T - 1，保留 j <= S + i。"),
    "cache_unused": ("the cache is not used", "each step must append its keys and values with "
                     "cache.update(k, v) and attend to everything it returns: the earlier tokens' "
                     "keys and values live only in the cache.",
                     "没有使用键值缓存（KV cache）：每一步要 cache.update(k, v)，并对返回的全部键值做注意力。"),
    "cache_no_mask": ("no mask when a cache is passed", "with a cache you drop the causal mask: "
                      "one token alone needs none, but a prompt of several tokens then sees its "
                      "own future. Keep the mask, shifted by the offset: "
                      "torch.ones(T, S + T).tril(S), S = cache.seq_len before the update.",
                      "传入缓存后去掉了因果掩码：多个 token 的提示词会看到自己的未来。"),
    "cache_after_repeat": ("the cache holds the repeated heads", "cache the n_kv_heads keys and "
                           "values before repeating them for the query heads: the smaller cache "
                           "is the point of GQA (Ainslie et al. 2023).",
                           "缓存里存的是重复后的头：应在重复之前缓存 n_kv_heads 个键值头。"),
    "cache_steps": ("decoding differs from the full pass", "decoding step by step with the cache "
                    "must give the full forward pass's outputs, token by token.",
                    "逐步解码的结果与整段前向计算不同。"),
})

_FORBIDDEN = {"scaled_dot_product_attention": "F.scaled_dot_product_attention",
              "_scaled_dot_product_attention_math": "torch's SDPA kernel",
              "multi_head_attention_forward": "nn.MultiheadAttention",
              "_native_multi_head_attention": "nn.MultiheadAttention"}


def _mha(x, Wq, Wk, Wv, Wo, H, H_kv, *, scale=None, mask="causal", dim=-1, split="ok",
         merge="ok", repeat="interleave", o_proj=True):
    """Causal self-attention with the classic mistakes as options (the mutants)."""
    B, T, C = x.shape
    D = C // H

    def heads(t, n):
        if split == "view":
            return t.reshape(B, n, T, D)                                  # wrong: no transpose
        return t.reshape(B, T, n, D).transpose(1, 2)                      # (B, n, T, D)

    q, k, v = heads(x @ Wq.T, H), heads(x @ Wk.T, H_kv), heads(x @ Wv.T, H_kv)
    g = H // H_kv
    if repeat == "interleave":
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)      # (B, H, T, D)
    else:
        k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(D) if scale is None else scale)
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    if mask == "inverted":
        keep = keep.T
    if mask != "none":
        s = s.masked_fill(~keep, float("-inf"))
    y = torch.softmax(s, dim) @ v                                         # (B, H, T, D)
    y = y.reshape(B, T, C) if merge == "reshape" else y.transpose(1, 2).reshape(B, T, C)
    return y @ Wo.T if o_proj else y


def _variant(scale=None, **options):
    """A mutant of the table: ``scale(C, D)`` gives its scale (None: the right one)."""
    def f(x, W, H, H_kv):
        C = x.shape[-1]
        return _mha(x, *W, H, H_kv or H, scale=None if scale is None else scale(C, C // H), **options)
    return f


MHA_MUTANTS = [
    ("no_scaling", _variant(lambda C, D: 1.0)),
    ("scaled_by_d_model", _variant(lambda C, D: 1 / math.sqrt(C))),
    ("scaled_by_d", _variant(lambda C, D: 1 / D)),
    ("sees_future", _variant(mask="none")),
    ("sees_future", _variant(mask="inverted")),
    ("softmax_wrong_dim", _variant(dim=-2)),
    ("head_reshape", _variant(split="view")),
    ("head_reshape", _variant(merge="reshape")),
    ("kv_repeat", _variant(repeat="tile")),
    ("no_o_proj", _variant(o_proj=False)),
]


def _weights(C, H, H_kv, seed, dtype):
    """W_q, W_k, W_v, W_o ~ N(0, 1 / C); k and v project to H_kv heads."""
    kv = (H_kv or H) * (C // H)
    return [randn(*shape, seed=seed + i, dtype=dtype, scale=C ** -0.5)
            for i, shape in enumerate(((C, C), (kv, C), (kv, C), (C, C)))]


def _case(shape, H, H_kv, seed, dtype=torch.float64, note=""):
    """x ~ 1.5 N(0, 1) of ``shape`` (B, T, C), and the weights."""
    return Case(note, lambda: (randn(*shape, seed=seed + 9, dtype=dtype, scale=1.5),
                               _weights(shape[-1], H, H_kv, seed, dtype)),
                {"n_heads": H, "n_kv_heads": H_kv})


CASES = [
    _case((2, 5, 16), 4, None, 10, torch.float32, "4 heads"),
    _case((1, 7, 24), 6, 2, 20, note="GQA: 6 heads, 2 kv heads"),
    _case((2, 4, 16), 4, 1, 30, note="MQA: 4 heads, 1 kv head"),
]


def _reference(W, H, H_kv, dtype):
    ref = nl.MultiHeadAttention(W[0].shape[1], H, H_kv).to(dtype)
    with torch.no_grad():
        for layer, w in zip((ref.q_proj, ref.k_proj, ref.v_proj, ref.o_proj), W, strict=True):
            layer.weight.copy_(w)
    return ref


def _forward_reference(x, W, H, H_kv):
    return _reference(W, H, H_kv or H, x.dtype)(x).detach()


def check_multi_head_attention(cls, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``cls(d_model, n_heads, n_kv_heads=None)`` against ``nl.MultiHeadAttention``."""
    s = Session("Multi-head attention", MHA_MISTAKES, exercise="multi_head_attention",
                time_limit=time_limit, forbidden=_FORBIDDEN,
                references={nl.MultiHeadAttention.forward: "nl.MultiHeadAttention",
                            nl.attention: "nl.attention"},
                error_hints=((r"view size is not compatible", "view_after_transpose"),
                             (r"expanded size of the tensor", "kv_repeat")),
                vague=("cache_steps", "weights_not_normalized"))
    if not s.require_callable(cls, "your class"):
        return s.result()

    def build(C, H, H_kv=None, dtype=torch.float64, seed=0, weights=None):
        """The learner's module with known weights: (module, (Wq, Wk, Wv, Wo))."""
        m = new_module(s, cls, C, H, *([] if H_kv is None else [H_kv]),
                       what=f"MultiHeadAttention({C}, {H})")
        kv = (H_kv or H) * (C // H)
        for name, shape in (("q_proj", (C, C)), ("k_proj", (kv, C)), ("v_proj", (kv, C)),
                            ("o_proj", (C, C))):
            layer = getattr(m, name, None)
            weight = getattr(layer, "weight", None)
            if not isinstance(weight, torch.Tensor):
                raise Fail(f"no linear layer {name}", "missing_projection")
            if tuple(weight.shape) != shape:
                key = "wrong_kv_shape" if name in ("k_proj", "v_proj") else "missing_projection"
                raise Fail(f"{name}.weight has shape {tuple(weight.shape)}, expected {shape}", key)
            if getattr(layer, "bias", None) is not None:
                raise Fail(f"{name} has a bias", "has_bias")
        weights = weights or _weights(C, H, H_kv, seed, dtype)
        m = load_weights(s, m, dict(zip(("q_proj.weight", "k_proj.weight", "v_proj.weight",
                                         "o_proj.weight"), weights, strict=True)), dtype)
        return m, [w.to(dtype) for w in weights]

    def forward(cls, x, W, n_heads, n_kv_heads):
        m, _ = build(x.shape[-1], n_heads, n_kv_heads, x.dtype, weights=W)
        return s.call(m, x)

    def run_steps(m, x, cuts, cache):
        """The outputs for the tokens between ``cuts``, one call each, concatenated."""
        steps = []
        for a, b in zip(cuts, cuts[1:], strict=False):
            step = s.call(m, x[:, a:b], cache)
            want = (x.shape[0], b - a, x.shape[2])
            if not isinstance(step, torch.Tensor) or tuple(step.shape) != want:
                raise Fail(f"a call on {b - a} new token(s) returned {type(step).__name__} "
                           f"{tuple(getattr(step, 'shape', ()))}, expected {want}", "wrong_shape")
            steps.append(step.detach())
        return torch.cat(steps, 1)

    def decode(H, H_kv, prefill, seed):
        """Full pass, then the same tokens through the cache: `prefill` tokens, then one by one."""
        def check():
            B, T, C = 2, 6, 16
            m, W = build(C, H, H_kv, torch.float64, seed)
            x = randn(B, T, C, seed=seed + 9, dtype=torch.float64, scale=1.5)
            want = _reference(W, H, H_kv, torch.float64)(x).detach()
            full = s.call(m, x)
            cache = nl.KVCache()
            cuts = [0, *range(prefill, T + 1)]
            got = run_steps(m, x, cuts, cache)
            if cache.seq_len != T:
                raise Fail(f"after {len(cuts) - 1} steps the cache holds {cache.seq_len} tokens, "
                           f"expected {T}: call cache.update(k, v) in every step", "cache_unused")
            if cache.k.shape[1] != H_kv:
                raise Fail(f"the cache holds {cache.k.shape[1]} key heads, expected n_kv_heads = "
                           f"{H_kv}: cache before repeating", "cache_after_repeat")
            tol = tolerance(torch.float64, float(want.abs().max()))
            if close_to(got, want, tol):
                return f"{len(cuts) - 1} steps, cache (B, H_kv, S, D) = {tuple(cache.k.shape)}"
            if not close_to(full, want, tol):
                raise Fail("the steps disagree with the reference, and so does your full pass "
                           "(see above)")
            # what the step outputs look like: each token alone, or each query at position 0..
            alone = run_steps(m, x, list(range(T + 1)), None)
            if close_to(got, _steps(x, W, H, H_kv, cuts, "top_left"), tol):
                raise Fail("steps differ from the full pass (looks like: the mask ignores the "
                           "cache offset)", "cache_offset")
            if close_to(got, _steps(x, W, H, H_kv, cuts, "none"), tol):
                raise Fail("the prompt's tokens see each other's future (looks like: no mask "
                           "when a cache is passed)", "cache_no_mask")
            if close_to(got[:, prefill:], alone[:, prefill:], tol):
                raise Fail("each step sees only its own token (looks like: the cache is not "
                           "used)", "cache_unused")
            raise Fail("steps differ from the full pass, max |error| "
                       f"{float((got - want).abs().max()):.3g}", "cache_steps")
        return check

    def backward():
        m, W = build(8, 2, None, torch.float64, 60)
        x = randn(2, 4, 8, seed=69, dtype=torch.float64)
        ref = _reference(W, 2, 2, torch.float64)
        s.expect_grads(lambda x: m(x), lambda x: ref(x), {"x": x},
                       mutants=bind_last(MHA_MUTANTS, W, 2, 2))

    s.run("__init__(16, 4): bias-free q_proj, k_proj, v_proj, o_proj (16 -> 16)",
          lambda: build(16, 4))
    s.run("__init__(16, 4, 2): GQA, k_proj and v_proj 16 -> 8", lambda: build(16, 4, 2))
    run_cases(s, cls, CASES, reference=_forward_reference, mutants=MHA_MUTANTS, call=forward,
              prefix="forward ")
    s.run("KV cache: 6 tokens one at a time = the full pass (4 heads, 2 kv heads)",
          decode(4, 2, 1, 40))
    s.run("KV cache: a prompt of 3, then 3 tokens one at a time (4 heads)", decode(4, 4, 3, 50))
    s.run("backward float64: gradient w.r.t. x", backward)
    s.probe(*_probes(s, cls, build))
    return s.result()


def close_to(a, b, tol) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and close(a, b, tol)


def _steps(x, W, H, H_kv, cuts, mask):
    """The outputs of the steps between ``cuts`` with a wrong mask: "top_left", tril() of
    (T_new, S), so that query i keeps keys j <= i; or "none", no mask when a cache is passed."""
    Wq, Wk, Wv, Wo = W
    B, T, C = x.shape
    D, g = C // H, H // H_kv
    q = (x @ Wq.T).view(B, T, H, D).transpose(1, 2)
    k = (x @ Wk.T).view(B, T, H_kv, D).transpose(1, 2).repeat_interleave(g, 1)
    v = (x @ Wv.T).view(B, T, H_kv, D).transpose(1, 2).repeat_interleave(g, 1)
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        sc = q[:, :, a:b] @ k[:, :, :b].transpose(-2, -1) / math.sqrt(D)   # (B, H, T_new, S)
        if mask == "top_left":
            sc = sc.masked_fill(~torch.ones(b - a, b, dtype=torch.bool).tril(), float("-inf"))
        y = torch.softmax(sc, -1) @ v[:, :, :b]
        out.append(y.transpose(1, 2).reshape(B, b - a, C) @ Wo.T)
    return torch.cat(out, 1)


def _probes(s: Session, cls, build) -> list:
    """Designed weights, float64, d_model 8, in this order: one token (NaN: the diagonal is
    masked); o_proj = 0; the same token at every position with v_proj = o_proj = I (heads split
    and merged, weights that sum to 1; then k_proj = 0 tells the softmax axis from a mask applied
    after it); key/value heads that carry their own features (the repeat order); a change to the
    last token (causal); the scale measured from one score. Heads or positions mixed up stop the
    later probes, which would only echo it."""
    C = 8
    eye = torch.eye(C, dtype=torch.float64)
    x = randn(1, 5, C, seed=700, dtype=torch.float64)
    mixed = []          # heads or positions mixed up: the later probes would only echo it

    def run_module(H, weights, H_kv=None):
        return build(C, H, H_kv, torch.float64, weights=weights)[0]

    def run(H, H_kv, weights, x):
        return output(s, run_module(H, weights, H_kv), x, like=x)

    def rand(rows, seed):
        return randn(rows, C, seed=seed, dtype=torch.float64, scale=C ** -0.5)

    def o_proj():
        y = run(2, None, [rand(C, 1), rand(C, 2), rand(C, 3), torch.zeros(C, C,
                                                                           dtype=torch.float64)], x)
        if near(y, torch.zeros_like(y), 0, 1e-12):
            return None
        return ("no_o_proj", "With o_proj's weight set to 0 your output is not 0: the merged heads "
                "never go through o_proj. Finish with self.o_proj(y).")

    def same_token():
        xs = x[:, :1].expand(1, 4, C).contiguous()
        y = run(2, None, [rand(C, 4), rand(C, 5), eye, eye], xs)
        if near(y, xs, 1e-9, 1e-12):
            return None
        ratio = y / xs
        if near(ratio, ratio[..., :1].expand_as(ratio), 1e-6, 1e-9):
            mixed.append(True)
            return weights_sum(ratio[0, :, 0])
        mixed.append(True)
        return ("head_reshape", "With the same token at every position and v_proj = o_proj = "
                "identity, any attention weights must give the token back; your output moves "
                "features between heads or positions. Split with x.view(B, T, H, D)"
                ".transpose(1, 2) and merge with y.transpose(1, 2).reshape(B, T, C).")

    def weights_sum(sums):
        """Rows of attention weights that do not sum to 1: which computation gives them. With
        k_proj = 0 every score is 0; v_proj = o_proj = identity shows the weights themselves."""
        T = x.shape[1]
        y = run(2, None, [rand(C, 12), torch.zeros(C, C, dtype=torch.float64), eye, eye], x)
        lower = torch.ones(T, T, dtype=torch.float64).tril()
        over_queries = lower / lower.sum(0, keepdim=True)     # softmax down each column
        after = lower / T                                     # softmax over all keys, then masked
        seen = f"{fmt(float(sums[0]))}, ..., {fmt(float(sums[-1]))}"
        if near(y[0], over_queries @ x[0], 1e-6, 1e-9):
            return ("softmax_wrong_dim", "Your attention weights do not sum to 1 per query (the "
                    f"same token everywhere comes back times {seen}), and with all scores equal "
                    "they are normalized down each column: the softmax runs over the queries. It "
                    "runs over the keys, the last dim of the (B, H, T, S) scores.")
        if near(y[0], after @ x[0], 1e-6, 1e-9):
            return ("mask_after_softmax", "Your attention weights do not sum to 1 per query (the "
                    f"same token everywhere comes back times {seen}): the mask is applied after "
                    "the softmax. Set the masked scores to -inf before the softmax.")
        return ("weights_not_normalized", "Your attention weights do not sum to 1 per query (the "
                f"same token everywhere comes back times {seen}): the weights must be the softmax "
                "over the keys of the masked scores, nothing applied after it.")

    def one_token():
        x1 = x[:, :1]
        y = s.call(run_module(2, [rand(C, 13), rand(C, 14), rand(C, 15), eye]), x1)
        if isinstance(y, torch.Tensor) and y.shape == x1.shape and bool(y.isnan().all()):
            mixed.append(True)
            return ("mask_diagonal", "A one-token sequence gives NaN: your causal mask hides the "
                    "token itself, so its only score is -inf. Keep j <= t: torch.ones(T, T).tril() "
                    "(diagonal=0), or mask triu(diagonal=1).")
        return None

    def groups():
        if mixed:
            return None
        xs = x[:, :1].expand(1, 3, C).contiguous()
        H, H_kv = 4, 2                                 # head_dim 2; kv head j = features 2j, 2j+1
        y = run(H, H_kv, [rand(C, 6), rand(4, 7), eye[:4], eye], xs)
        t = xs[0, 0]
        want = torch.cat([t[0:2], t[0:2], t[2:4], t[2:4]])
        if near(y[0, -1], want, 1e-9, 1e-12):
            return None
        if near(y[0, -1], torch.cat([t[0:2], t[2:4], t[0:2], t[2:4]]), 1e-9, 1e-12):
            return ("kv_repeat", "With 4 query heads and 2 key/value heads, your query head 1 "
                    "reads kv head 1 and head 2 reads kv head 0: you tile the kv heads "
                    "(k.repeat(1, 2, 1, 1)). Heads 0, 1 share kv head 0 and heads 2, 3 kv head 1: "
                    "k.repeat_interleave(2, dim=1), as HF's repeat_kv.")
        return ("kv_repeat", "With 4 query heads and 2 key/value heads, your query heads do not "
                "read kv head h // 2: repeat each kv head in place, "
                "k.repeat_interleave(n_heads // n_kv_heads, dim=1).")

    def future():
        if mixed:
            return None
        W = [rand(C, 8), rand(C, 9), rand(C, 10), rand(C, 11)]
        y = run(2, None, W, x)
        x2 = x.clone()
        x2[:, -1] += randn(C, seed=701, dtype=torch.float64, scale=3.0)
        if near(run(2, None, W, x2)[:, :-1], y[:, :-1], 1e-9, 1e-12):
            return None
        return ("sees_future", "Changing the last token changed the outputs of earlier "
                "positions: a token sees the future. Keep keys j <= t (torch.ones(T, T).tril()) "
                "and set the others to -inf before the softmax.")

    def scale():
        if mixed:
            return None
        H, D = 2, 4
        u = randn(C, seed=702, dtype=torch.float64, scale=0.5, offset=0.5)
        xs = torch.stack([torch.zeros(C, dtype=torch.float64), u]).unsqueeze(0)     # (1, 2, C)
        y = run(H, None, [eye, eye, eye, eye], xs)
        got = []
        for h in range(H):
            uh = u[h * D:(h + 1) * D]
            p = float((y[0, 1, h * D:(h + 1) * D] / uh).mean())   # the weight of key 1
            if not 0 < p < 1:
                return None
            got.append(math.log(p / (1 - p)) / float(uh @ uh))
        want = 1 / math.sqrt(D)
        if all(abs(g - want) <= 1e-6 for g in got):
            return None
        known = [("no_scaling", 1.0, "1: not scaled"), ("scaled_by_d", 1 / D, "1 / head_dim"),
                 ("scaled_by_d_model", 1 / math.sqrt(C), "1 / sqrt(d_model)")]
        key, text = next(((k, t) for k, v, t in known if abs(got[0] - v) <= 1e-6),
                         ("scale", f"{fmt(got[0])}"))
        return (key, f"Your scores are q . k times {text} (d_model {C}, {H} heads); the scale is "
                f"1 / sqrt(head_dim) = {fmt(want)}, head_dim = d_model // n_heads "
                "(Vaswani et al. 2017, 3.2.1).")

    return [one_token, o_proj, same_token, groups, future, scale]
