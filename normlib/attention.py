"""Scaled dot-product attention and multi-head attention, with optional RoPE on q and k.

Notation: B batch, T sequence, C = d_model, H heads, D = C / H head dim.
    attention(q, k, v) = softmax(q k^T / sqrt(D) + mask) v
The causal mask lets row t attend to columns 0..t (the top-left aligned lower triangle, as
``F.scaled_dot_product_attention(is_causal=True)``). Scores and softmax are computed in float32
for fp16/bf16 inputs.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_choice, check_int, check_tensor, compute_dtype
from .rope import ROPE_LAYOUTS, apply_rope

__all__ = ["attention", "MultiHeadAttention"]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True,
              rope: str | None = None) -> torch.Tensor:
    """Scaled dot-product attention; equals ``F.scaled_dot_product_attention`` when rope is None.

    Args:
        q: (B, H, T, D) queries; k: (B, H, S, D) keys; v: (B, H, S, Dv) values.
        causal: mask out keys after the query's position.
        rope: None, or a RoPE layout ("interleaved" | "half") applied to q and k (never to v)
            at positions 0 .. T-1 before the scores are taken.
    Returns:
        (B, H, T, Dv) in q's dtype.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor("attention", name, t)
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(f"attention: q, k and v must have shape (..., T, D), got q {tuple(q.shape)},"
                         f" k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: q (.., T, D) and k (.., S, D) must share D, and k and v "
                         f"must share S; got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    if rope is not None:
        check_choice("attention", "rope", rope, ROPE_LAYOUTS)
        q, k = apply_rope(q, layout=rope), apply_rope(k, layout=rope)
    dtype = compute_dtype(q)
    T, S, D = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = q.to(dtype) @ k.to(dtype).transpose(-2, -1) / math.sqrt(D)       # (B, H, T, S)
    if causal:
        keep = torch.ones(T, S, dtype=torch.bool, device=q.device).tril()      # (T, S)
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                                    # rows sum to 1
    return (weights @ v.to(dtype)).type_as(q)                                  # (B, H, T, Dv)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with bias-free q_proj, k_proj, v_proj and out_proj.

    rope=True rotates q and k per head with the "half" layout (HF LLaMA), base 10,000.
    """

    def __init__(self, d_model: int, n_heads: int, *, rope: bool = False, causal: bool = True):
        super().__init__()
        check_int("MultiHeadAttention", "d_model", d_model, minimum=1)
        check_int("MultiHeadAttention", "n_heads", n_heads, minimum=1)
        if d_model % n_heads:
            raise ValueError(f"MultiHeadAttention: d_model must be divisible by n_heads, "
                             f"got d_model={d_model}, n_heads={n_heads}")
        if rope and (d_model // n_heads) % 2:
            raise ValueError(f"MultiHeadAttention: RoPE needs an even head_dim, "
                             f"got d_model // n_heads = {d_model // n_heads}")
        self.n_heads, self.rope, self.causal = n_heads, rope, causal
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        H = self.n_heads
        # (B, T, C) -> (B, T, H, D) -> (B, H, T, D)
        q, k, v = (proj(x).view(B, T, H, C // H).transpose(1, 2)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        y = attention(q, k, v, causal=self.causal, rope="half" if self.rope else None)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, C))                # (B, T, C)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, rope={self.rope}, causal={self.causal}"
