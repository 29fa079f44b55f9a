"""FlashAttention's idea on the CPU: exact attention over tiles, with the online softmax.

Notation: B batch, H heads, T queries, S keys, D head dim, Dv value dim; a query block of Br
rows and a key block of Bc columns.

The softmax of a row needs its maximum and its sum, which seem to need the whole row. The online
softmax (Milakov & Gimelshein 2018, arXiv 1805.02867, Algorithm 3) keeps, per query row, a running
maximum m, a running sum l of exp(s - m) and a running output o = sum exp(s - m) v. When a block
of keys raises the maximum from m to m', the old sums are rescaled by exp(m - m'), so after the
last block o / l is exactly softmax(s) v, and the (T, S) matrix of scores never exists. FlashAttention
(Dao et al. 2022, arXiv 2205.14135, Algorithm 1; FlashAttention-2, arXiv 2307.08691, Algorithm 1,
whose loop order this follows: query blocks outside, key blocks inside) runs this in on-chip SRAM,
reading Q once and K, V once per query block, and writing only O (and, for the backward pass, the
row statistics m + log l).
"""

from __future__ import annotations

import math

import torch

from ._checks import check_int, check_number, check_tensor, compute_dtype

__all__ = ["online_softmax_attention"]


def online_softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                             causal: bool = True, block_q: int = 64, block_k: int = 64,
                             scale: float | None = None) -> torch.Tensor:
    """Attention computed tile by tile with the online softmax; equals
    ``F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)``.

    Args:
        q: (B, H, T, D); k: (B, H, S, D); v: (B, H, S, Dv).
        causal: row t attends to keys 0..t (top-left aligned, as ``is_causal``); key blocks
            entirely after a query block are skipped, as FlashAttention does.
        block_q, block_k: Br and Bc, the tile sizes (the last tile may be smaller).
        scale: the factor on q k^T, default 1 / sqrt(D).
    Returns:
        (B, H, T, Dv) in q's dtype; tiles are computed in float32 for fp16/bf16 inputs.
    """
    fn = "online_softmax_attention"
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(fn, name, t)
        if t.dim() != 4:
            raise ValueError(f"{fn}: {name} must have shape (B, H, n, d), got {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] \
            or not q.shape[:2] == k.shape[:2] == v.shape[:2]:
        raise ValueError(f"{fn}: q (B, H, T, D), k (B, H, S, D) and v (B, H, S, Dv) must share "
                         f"B, H, D and S; got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    check_int(fn, "block_q", block_q, minimum=1)
    check_int(fn, "block_k", block_k, minimum=1)
    if scale is not None:
        check_number(fn, "scale", scale, positive=True)
    T, S, D = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(D) if scale is None else scale
    dtype = compute_dtype(q)
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=dtype, device=q.device)  # (B, H, T, Dv)
    for i in range(0, T, block_q):
        q_i = q[..., i:i + block_q, :].to(dtype) * scale                         # (B, H, Br, D)
        rows = torch.arange(i, i + q_i.shape[-2], device=q.device)[:, None]       # (Br, 1)
        m = torch.full(q_i.shape[:-1], float("-inf"), dtype=dtype, device=q.device)  # (B, H, Br)
        row_sum = torch.zeros_like(m)                                                # (B, H, Br)
        o = torch.zeros(*q_i.shape[:-1], v.shape[-1], dtype=dtype, device=q.device)
        for j in range(0, min(S, i + q_i.shape[-2]) if causal else S, block_k):
            k_j = k[..., j:j + block_k, :].to(dtype)                             # (B, H, Bc, D)
            s = q_i @ k_j.transpose(-2, -1)                                      # (B, H, Br, Bc)
            if causal:
                cols = torch.arange(j, j + k_j.shape[-2], device=q.device)[None, :]
                s = s.masked_fill(cols > rows, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))                                 # (B, H, Br)
            m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)   # a row with no key yet
            p = torch.exp(s - m_safe[..., None])                                 # (B, H, Br, Bc)
            rescale = torch.exp(m - m_safe)                                      # old sums' factor
            row_sum = row_sum * rescale + p.sum(-1)
            o = o * rescale[..., None] + p @ v[..., j:j + block_k, :].to(dtype)
            m = m_new
        out[..., i:i + block_q, :] = o / row_sum[..., None]                 # a row with no key: NaN
    return out.to(q.dtype)
