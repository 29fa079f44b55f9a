"""Scaled dot-product attention and multi-head attention (MHA, GQA, MQA), with optional RoPE.

Notation: B batch, T query tokens, S key tokens, C = d_model, H query heads, H_kv key/value heads,
D = C / H head dim.
    attention(q, k, v) = softmax(q k^T / sqrt(D) + mask) v
The causal mask lets row t attend to columns 0..t (the top-left aligned lower triangle, as
``F.scaled_dot_product_attention(is_causal=True)``); with ``offset`` (decoding with a KV cache,
where q's first row is token ``offset``) row t attends to columns 0..offset+t. Scores and softmax
are computed in float32 for fp16/bf16 inputs.

Grouped-query attention (Ainslie et al. 2023) gives each group of H / H_kv query heads one shared
key/value head; H_kv = H is multi-head attention, H_kv = 1 multi-query attention (Shazeer 2019).
Query head h reads key/value head h // (H / H_kv), as HF's ``repeat_kv`` and
``F.scaled_dot_product_attention(enable_gqa=True)``.

The blocks of 2025 models: ``qk_norm`` normalizes q and k with an RMSNorm before RoPE (Qwen3 and
Gemma 3 per head; OLMo 2 over the whole projection), ``window`` / ``sliding_window`` limits each
query to the last W keys (``sliding_window``), ``softcap`` soft-caps the logits (``softcap``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_choice, check_int, check_number, check_tensor, compute_dtype
from .kv_cache import KVCache
from .norms import RMSNorm
from .rope import ROPE_LAYOUTS, apply_rope, rope_cos_sin, rope_frequencies, rotate
from .sliding_window import RollingKVCache, sliding_window_mask
from .softcap import softcap as soft_cap

__all__ = ["attention", "repeat_kv", "MultiHeadAttention", "QK_NORMS"]

# qk_norm -> what one RMSNorm weight spans: "per_head" D (Qwen3, arXiv 2505.09388; Gemma 3),
# "projection" H * D for q and H_kv * D for k (OLMo 2, arXiv 2501.00656; HF Olmo2Attention)
QK_NORMS = ("per_head", "projection")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True,
              rope: str | None = None, offset: int = 0, scale: float | None = None,
              window: int | None = None, softcap: float | None = None) -> torch.Tensor:
    """Scaled dot-product attention; equals ``F.scaled_dot_product_attention(q, k, v,
    is_causal=causal)`` when rope is None and offset is 0. ``causal`` defaults to True (a decoder's
    self-attention), where torch's ``is_causal`` defaults to False.

    Args:
        q: (B, H, T, D) queries; k: (B, H, S, D) keys; v: (B, H, S, Dv) values.
        causal: mask out keys after the query's position.
        rope: None, or a RoPE layout ("interleaved" | "half") applied to q and k (never to v)
            before the scores are taken, q at positions offset .. offset+T-1, k at 0 .. S-1.
        offset: the position of q's first row, k's first row being position 0 (with a KV cache:
            the number of tokens cached before q). Row t attends to keys 0 .. offset+t.
        scale: the factor on q k^T, default 1 / sqrt(D) (``F.scaled_dot_product_attention``'s
            name and default; MLA's absorbed q has another width than its scale's D + R).
        window: W, a causal sliding window: row t attends to keys offset+t-W+1 .. offset+t
            (``sliding_window_mask``); None attends to every earlier key. Needs causal=True.
        softcap: c, logits become c * tanh(logits / c) after the scale and before the mask
            (Gemma 2's order, HF ``eager_attention_forward``); None leaves them.
    Returns:
        (B, H, T, Dv) in q's dtype.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor("attention", name, t)
    check_int("attention", "offset", offset, minimum=0)
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(f"attention: q, k and v must have shape (..., T, D), got q {tuple(q.shape)},"
                         f" k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: q (.., T, D) and k (.., S, D) must share D, and k and v "
                         f"must share S; got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    T, S, D = q.shape[-2], k.shape[-2], q.shape[-1]
    if window is not None and not causal:
        raise ValueError(f"attention: window={window} is a causal sliding window and needs "
                         f"causal=True, got causal=False")
    if scale is not None:
        check_number("attention", "scale", scale, positive=True)
    if rope is not None:
        check_choice("attention", "rope", rope, ROPE_LAYOUTS)
        q_positions = torch.arange(offset, offset + T, device=q.device)          # (T,)
        q, k = apply_rope(q, q_positions, layout=rope), apply_rope(k, layout=rope)
    dtype = compute_dtype(q)
    scores = q.to(dtype) @ k.to(dtype).transpose(-2, -1)                      # (B, H, T, S)
    scores = scores / math.sqrt(D) if scale is None else scores * scale
    if softcap is not None:
        scores = soft_cap(scores, softcap)                                     # in (-c, c)
    if causal:
        keep = sliding_window_mask(T, S, window, offset, device=q.device)     # (T, S)
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                                    # rows sum to 1
    return (weights @ v.to(dtype)).type_as(q)                                  # (B, H, T, Dv)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat each key/value head n_rep times, as HF's ``repeat_kv``: (B, H_kv, S, D) ->
    (B, H_kv * n_rep, S, D), head j of the output being head j // n_rep of the input."""
    check_tensor("repeat_kv", "x", x)
    check_int("repeat_kv", "n_rep", n_rep, minimum=1)
    if x.dim() != 4:
        raise ValueError(f"repeat_kv: x must have shape (B, H_kv, S, D), got {tuple(x.shape)}")
    if n_rep == 1:
        return x
    B, H_kv, S, D = x.shape
    return x[:, :, None].expand(B, H_kv, n_rep, S, D).reshape(B, H_kv * n_rep, S, D)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with bias-free q_proj, k_proj, v_proj and o_proj (HF's names).

    Args:
        d_model: width C; n_heads: H, divides d_model (head dim D = C / H).
        n_kv_heads: H_kv key/value heads, divides n_heads; None means n_heads (MHA). k_proj and
            v_proj map C to H_kv * D; H_kv = 1 is multi-query attention.
        rope: rotate q and k per head with the "half" layout (HF LLaMA).
        rope_base: RoPE's frequency base (10,000; LLaMA 3: 500,000). The frequencies are a
            non-persistent buffer ``inv_freq`` (D/2,) (HF's name): float32, float64 in a float64
            module, and never rounded to half precision by ``.to(torch.bfloat16)``.
        causal: mask future positions.
        qk_norm: None, "per_head" or "projection": an RMSNorm (``q_norm``, ``k_norm``, HF's names,
            gains of ones) on the queries and keys after their projections and BEFORE RoPE,
            which bounds the logits |q.k| / sqrt(D) by sqrt(D) times the gains (Dehghani et al.
            2023, ViT-22B, arXiv 2302.05442; Wortsman et al. 2023, arXiv 2309.14322 Section 3.1).
            "per_head": over each head's D features, one (D,) gain shared by the heads (Qwen3,
            Gemma 3); "projection": over the whole (H D,) query and (H_kv D,) key projection
            before the split into heads (OLMo 2).
        qk_norm_eps: those norms' eps (1e-6, Qwen3's and Gemma 3's rms_norm_eps).
        sliding_window: W: each query attends to the last W keys only, itself included
            (Mistral, Gemma 3's local layers); decode with a ``RollingKVCache(W)`` to keep only
            W - 1 keys, or with a ``KVCache``. None: full causal attention.
        softcap: c: attention logits soft-capped to c tanh(logits / c) (Gemma 2: 50.0).
        device, dtype: of the parameters, as every torch module's factory kwargs.
    ``forward(x, cache=None, position_embeddings=None)``: x (B, T, C) -> (B, T, C). With a
    ``KVCache`` the T new tokens sit at positions cache.seq_len .. cache.seq_len + T - 1: their
    keys are rotated there, appended to the cache (before ``repeat_kv``, so the cache holds H_kv
    heads), and the queries attend to every cached key up to their own position.
    ``position_embeddings``: the (cos, sin) of those positions, (T, D/2) each, from
    ``rope_cos_sin``; a model computes them once per forward pass for all its layers (as HF's
    LLaMA does); None computes them here.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, *,
                 rope: bool = False, rope_base: float = 10000.0, causal: bool = True,
                 qk_norm: str | None = None, qk_norm_eps: float = 1e-6,
                 sliding_window: int | None = None, softcap: float | None = None,
                 device=None, dtype=None):
        super().__init__()
        fn = "MultiHeadAttention"
        if qk_norm is not None:
            check_choice(fn, "qk_norm", qk_norm, QK_NORMS)
        if sliding_window is not None:
            check_int(fn, "sliding_window", sliding_window, minimum=1)
            if not causal:
                raise ValueError(f"{fn}: sliding_window={sliding_window} is causal and needs "
                                 f"causal=True, got causal=False")
        if softcap is not None:
            check_number(fn, "softcap", softcap, positive=True)
        check_int(fn, "d_model", d_model, minimum=1)
        check_int(fn, "n_heads", n_heads, minimum=1)
        if n_kv_heads is None:
            n_kv_heads = n_heads
        check_int(fn, "n_kv_heads", n_kv_heads, minimum=1)
        if d_model % n_heads:
            raise ValueError(f"{fn}: d_model must be divisible by n_heads, "
                             f"got d_model={d_model}, n_heads={n_heads}")
        if n_heads % n_kv_heads:
            raise ValueError(f"{fn}: n_heads must be divisible by n_kv_heads (each group of "
                             f"query heads shares one key/value head), got n_heads={n_heads}, "
                             f"n_kv_heads={n_kv_heads}")
        head_dim = d_model // n_heads
        if rope and head_dim % 2:
            raise ValueError(f"{fn}: RoPE needs an even head_dim, "
                             f"got d_model // n_heads = {head_dim}")
        check_number(fn, "rope_base", rope_base, positive=True)
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim
        self.rope, self.rope_base, self.causal = rope, float(rope_base), causal
        factory = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.k_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=False, **factory)
        self.v_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=False, **factory)
        self.o_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.qk_norm, self.sliding_window, self.softcap = qk_norm, sliding_window, softcap
        if qk_norm is not None:
            per_head = qk_norm == "per_head"
            self.q_norm = RMSNorm(head_dim if per_head else d_model, eps=qk_norm_eps, **factory)
            self.k_norm = RMSNorm(head_dim if per_head else n_kv_heads * head_dim,
                                  eps=qk_norm_eps, **factory)
        wide = (dtype or torch.get_default_dtype()) == torch.float64
        self.register_buffer("inv_freq", self._frequencies(wide, device) if rope else None,
                             persistent=False)

    def _frequencies(self, wide: bool, device) -> torch.Tensor:
        return rope_frequencies(self.head_dim, self.rope_base, device=device,
                                dtype=torch.float64 if wide else torch.float32)   # (D/2,)

    def _apply(self, fn, recurse=True):
        # inv_freq is a constant, not a weight: after .to / .double() / .half() it is recomputed
        # in float64 for a float64 module and in float32 otherwise, never rounded to half.
        super()._apply(fn, recurse)
        if self.inv_freq is not None:
            self.inv_freq = self._frequencies(self.inv_freq.dtype == torch.float64,
                                              self.inv_freq.device)
        return self

    def rope_cos_sin(self, positions: torch.Tensor,
                     dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) of the RoPE angles at ``positions`` (T,), (T, D/2) each in ``dtype``."""
        return rope_cos_sin(self.inv_freq, positions, dtype)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None,
                position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> torch.Tensor:
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"MultiHeadAttention: cache must be a KVCache or None, "
                            f"got {type(cache).__name__}")
        if isinstance(cache, RollingKVCache) and cache.window != self.sliding_window:
            raise ValueError(f"MultiHeadAttention: a RollingKVCache of window {cache.window} "
                             f"needs sliding_window={cache.window}, got "
                             f"sliding_window={self.sliding_window}")
        if position_embeddings is not None and not self.rope:
            raise ValueError("MultiHeadAttention: position_embeddings (RoPE's cos, sin) need "
                             "rope=True, got them with rope=False")
        B, T, C = x.shape
        H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
        q, k = self.q_proj(x), self.k_proj(x)                                 # (B, T, H*D), ..
        if self.qk_norm == "projection":                                       # OLMo 2
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(B, T, H, D).transpose(1, 2)                                 # (B, H, T, D)
        k = k.view(B, T, H_kv, D).transpose(1, 2)                              # (B, H_kv, T, D)
        if self.qk_norm == "per_head":                                         # Qwen3, Gemma 3
            q, k = self.q_norm(q), self.k_norm(k)
        v = self.v_proj(x).view(B, T, H_kv, D).transpose(1, 2)                # (B, H_kv, T, D)
        offset = 0 if cache is None else cache.seq_len
        if self.rope:       # after QK-norm; rotate at absolute positions, before caching
            if position_embeddings is None:
                positions = torch.arange(offset, offset + T, device=x.device)  # (T,)
                position_embeddings = self.rope_cos_sin(positions, compute_dtype(x))
            cos, sin = position_embeddings                                     # (T, D/2) each
            q, k = rotate(q, cos, sin, "half"), rotate(k, cos, sin, "half")
        if cache is not None:
            k, v = cache.update(k, v)                                          # (B, H_kv, S, D)
        k, v = repeat_kv(k, H // H_kv), repeat_kv(v, H // H_kv)                # (B, H, S, D)
        y = attention(q, k, v, causal=self.causal, offset=k.shape[-2] - T,    # (B, H, T, D)
                      window=self.sliding_window, softcap=self.softcap)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, C))                 # (B, T, C)

    def extra_repr(self) -> str:
        rope = f"rope={self.rope}" + (f", rope_base={self.rope_base:g}" if self.rope else "")
        extra = "".join(f", {name}={value!r}" for name, value in (
            ("qk_norm", self.qk_norm), ("sliding_window", self.sliding_window),
            ("softcap", self.softcap)) if value is not None)
        return (f"n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, {rope}, "
                f"causal={self.causal}{extra}")
