"""Multi-head latent attention (MLA, DeepSeek-V2): cache one small latent per token, not K and V.

Notation: B batch, T new tokens, S cached tokens, C = d_model, H heads, D head dim (d_h),
d_c the KV latent (kv_lora_rank), d_cq the query latent (q_lora_rank), R the RoPE part of a
query/key head (d_h^R). Following DeepSeek-V2 (arXiv 2405.04434, Section 2.1):

    c_KV = W^DKV h                 (B, T, d_c)      the only per-token state besides k^R
    k^C  = W^UK c_KV,  v = W^UV c_KV                (B, H, S, D) each, rebuilt from the latent
    c_Q  = W^DQ h,  q^C = W^UQ c_Q                  (B, H, T, D)
    q^R  = RoPE(W^QR c_Q)  (B, H, T, R);  k^R = RoPE(W^KR h)  (B, 1, S, R), shared by all heads
    score_{t,s} = [q^C; q^R] . [k^C; k^R] / sqrt(D + R),   out = W^O [softmax(score) v]

Per token and layer the cache holds d_c + R numbers (DeepSeek-V2: 512 + 64) instead of 2 H D
(MHA); decoding uses a ``KVCache`` whose k slot holds c_KV and whose v slot holds k^R, each with
one "head".

Absorption (Section 2.1.2): q^C_h . k^C_h = (q^C_h)^T W^UK_h c_KV = (W^UK_h^T q^C_h) . c_KV, so
W^UK folds into the query side and scores are taken against the cached latent directly, never
materializing k^C; likewise W^UV folds into the output side. RoPE prevents the same trick on the
rotated part: RoPE(q)^T RoPE(k) = q^T R_{s-t} k puts a position-dependent rotation between W^UQ
and W^UK, so no fixed matrix can absorb it (Section 2.1.3); hence the decoupled k^R, rotated once
and cached. ``forward(..., absorb=True)`` computes the absorbed form; tests assert it equals the
plain one. Linear names are the paper's matrices (HF's DeepSeek code fuses W^DKV with W^KR as
``kv_a_proj_with_mqa`` and W^UK with W^UV as ``kv_b_proj``, and adds RMSNorms on the latents,
which the paper does not describe and this module leaves out).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_int, check_number
from .attention import attention
from .kv_cache import KVCache
from .rope import apply_rope

__all__ = ["MultiHeadLatentAttention", "mla_cache_elements"]


def mla_cache_elements(kv_lora_rank: int, rope_head_dim: int) -> int:
    """Cached numbers per token and layer: d_c + R (DeepSeek-V2 Table 1: (d_c + d_h^R) l)."""
    check_int("mla_cache_elements", "kv_lora_rank", kv_lora_rank, minimum=1)
    check_int("mla_cache_elements", "rope_head_dim", rope_head_dim, minimum=0)
    return kv_lora_rank + rope_head_dim


class MultiHeadLatentAttention(nn.Module):
    """Causal MLA self-attention with a decoupled RoPE key (DeepSeek-V2, Section 2.1).

    Args:
        d_model: C; n_heads: H; head_dim: D (d_h), the no-RoPE part of q/k and the value dim.
        kv_lora_rank: d_c, the cached latent (DeepSeek-V2: 512 = 4 D).
        q_lora_rank: d_cq, the query latent (DeepSeek-V2: 1536); None projects q straight from
            h (W^DQ is the identity), as DeepSeek-V2-Lite.
        rope_head_dim: R (d_h^R, DeepSeek-V2: 64 = D / 2), even; the keys' R dims are one head
            shared by all H query heads.
        rope_base: RoPE's frequency base; rotated with the "half" layout (normlib's HF LLaMA
            layout; DeepSeek's HF code interleaves).
        device, dtype: of the parameters.
    ``forward(x, cache=None, absorb=False)``: x (B, T, C) -> (B, T, C). With a ``KVCache`` the T
    new tokens sit at positions cache.seq_len .. ; it stores c_KV (B, 1, S, d_c) in its k slot
    and the rotated k^R (B, 1, S, R) in its v slot.
    """

    def __init__(self, d_model: int, n_heads: int, head_dim: int, kv_lora_rank: int, *,
                 q_lora_rank: int | None = None, rope_head_dim: int = 0,
                 rope_base: float = 10000.0, device=None, dtype=None):
        super().__init__()
        fn = "MultiHeadLatentAttention"
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("head_dim", head_dim),
                            ("kv_lora_rank", kv_lora_rank)):
            check_int(fn, name, value, minimum=1)
        check_int(fn, "rope_head_dim", rope_head_dim, minimum=0)
        if rope_head_dim % 2:
            raise ValueError(f"{fn}: RoPE needs an even rope_head_dim, got {rope_head_dim}")
        if q_lora_rank is not None:
            check_int(fn, "q_lora_rank", q_lora_rank, minimum=1)
        check_number(fn, "rope_base", rope_base, positive=True)
        H, D, R = n_heads, head_dim, rope_head_dim
        self.n_heads, self.head_dim, self.rope_head_dim = H, D, R
        self.kv_lora_rank, self.q_lora_rank, self.rope_base = kv_lora_rank, q_lora_rank, rope_base
        factory = {"device": device, "dtype": dtype, "bias": False}
        d_q = d_model if q_lora_rank is None else q_lora_rank
        self.w_dq = None if q_lora_rank is None else nn.Linear(d_model, q_lora_rank, **factory)
        self.w_uq = nn.Linear(d_q, H * D, **factory)
        self.w_dkv = nn.Linear(d_model, kv_lora_rank, **factory)
        self.w_uk = nn.Linear(kv_lora_rank, H * D, **factory)
        self.w_uv = nn.Linear(kv_lora_rank, H * D, **factory)
        self.w_qr = nn.Linear(d_q, H * R, **factory) if R else None
        self.w_kr = nn.Linear(d_model, R, **factory) if R else None
        self.w_o = nn.Linear(H * D, d_model, **factory)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None,
                absorb: bool = False) -> torch.Tensor:
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"MultiHeadLatentAttention: cache must be a KVCache or None, "
                            f"got {type(cache).__name__}")
        B, T, _ = x.shape
        H, D, R = self.n_heads, self.head_dim, self.rope_head_dim
        offset = 0 if cache is None else cache.seq_len
        positions = torch.arange(offset, offset + T, device=x.device)               # (T,)
        c_q = x if self.w_dq is None else self.w_dq(x)                              # (B, T, d_cq)
        q_c = self.w_uq(c_q).view(B, T, H, D).transpose(1, 2)                       # (B, H, T, D)
        c_kv = self.w_dkv(x)[:, None]                                               # (B, 1, T, d_c)
        if R:
            q_r = self.w_qr(c_q).view(B, T, H, R).transpose(1, 2)                   # (B, H, T, R)
            q_r = apply_rope(q_r, positions, base=self.rope_base, layout="half")
            k_r = apply_rope(self.w_kr(x)[:, None], positions, base=self.rope_base,
                             layout="half")                                         # (B, 1, T, R)
        else:
            q_r, k_r = q_c[..., :0], c_kv[..., :0]                                  # empty
        if cache is not None:
            c_kv, k_r = cache.update(c_kv, k_r)                 # (B, 1, S, d_c), (B, 1, S, R)
        S = c_kv.shape[-2]
        scale = 1 / math.sqrt(D + R)                            # the full q/k head dim
        if absorb:
            w_uk = self.w_uk.weight.view(H, D, self.kv_lora_rank)                   # (H, D, d_c)
            w_uv = self.w_uv.weight.view(H, D, self.kv_lora_rank)                   # (H, D, d_c)
            q_lat = torch.einsum("bhtd,hdc->bhtc", q_c, w_uk)                       # (B, H, T, d_c)
            q = torch.cat((q_lat, q_r), dim=-1)                                # (B, H, T, d_c+R)
            k = torch.cat((c_kv, k_r), dim=-1).expand(B, H, S, -1)             # (B, H, S, d_c+R)
            o_lat = attention(q, k, c_kv.expand(B, H, S, -1), scale=scale,
                              offset=S - T)                                         # (B, H, T, d_c)
            o = torch.einsum("bhtc,hdc->bhtd", o_lat, w_uv)                         # (B, H, T, D)
        else:
            k_c = self.w_uk(c_kv[:, 0]).view(B, S, H, D).transpose(1, 2)            # (B, H, S, D)
            v = self.w_uv(c_kv[:, 0]).view(B, S, H, D).transpose(1, 2)              # (B, H, S, D)
            q = torch.cat((q_c, q_r), dim=-1)                                       # (B, H, T, D+R)
            k = torch.cat((k_c, k_r.expand(B, H, S, R)), dim=-1)                    # (B, H, S, D+R)
            o = attention(q, k, v, scale=scale, offset=S - T)                       # (B, H, T, D)
        return self.w_o(o.transpose(1, 2).reshape(B, T, H * D))                    # (B, T, C)

    def extra_repr(self) -> str:
        return (f"n_heads={self.n_heads}, head_dim={self.head_dim}, "
                f"kv_lora_rank={self.kv_lora_rank}, q_lora_rank={self.q_lora_rank}, "
                f"rope_head_dim={self.rope_head_dim}")
