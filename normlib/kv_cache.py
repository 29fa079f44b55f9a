"""A KV cache for step-by-step decoding, and the memory it takes.

Notation: B batch, H_kv key/value heads, S tokens seen so far, T new tokens, D head dim.
A decoder generates one token at a time. Its new query attends to the keys and values of every
earlier token, and those do not change (causal mask), so each layer keeps them in a cache instead
of recomputing them: per layer, K and V of shape (B, H_kv, S, D), growing by T along S each step.
Keys are cached *after* RoPE has rotated them at their absolute positions, so a later step only
rotates its own new keys. Grouped-query attention shrinks the cache by caching H_kv < H heads
(Ainslie et al. 2023, GQA; multi-query attention, Shazeer 2019, caches one).
"""

from __future__ import annotations

import torch

from ._checks import check_int, check_tensor

__all__ = ["KVCache", "kv_cache_bytes"]


class KVCache:
    """One layer's cache: ``k`` and ``v`` of shape (B, H_kv, S, D), ``None`` before the first step.

    ``update(k, v)`` appends the new (B, H_kv, T, D) keys and values along S and returns the whole
    cache. It concatenates (a new tensor per step, simple to read); production code preallocates
    the maximum length instead (HF ``StaticCache``).
    """

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    @property
    def seq_len(self) -> int:
        """S, the number of tokens cached so far (the position of the next token)."""
        return 0 if self.k is None else self.k.shape[-2]

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k, v (B, H_kv, T, D) and return the cached (B, H_kv, S + T, D) keys and values."""
        for name, t in (("k", k), ("v", v)):
            check_tensor("KVCache.update", name, t)
            if t.dim() != 4:
                raise ValueError(f"KVCache.update: {name} must have shape (B, H_kv, T, D), "
                                 f"got {tuple(t.shape)}")
        if k.shape[:3] != v.shape[:3]:
            raise ValueError(f"KVCache.update: k and v must share (B, H_kv, T), got k "
                             f"{tuple(k.shape)} and v {tuple(v.shape)}")
        if self.k is not None and (k.shape[:2] != self.k.shape[:2] or k.shape[3] != self.k.shape[3]
                                   or v.shape[3] != self.v.shape[3]):
            raise ValueError(f"KVCache.update: new keys {tuple(k.shape)} and values "
                             f"{tuple(v.shape)} must match the cached (B, H_kv, S, D) = "
                             f"{tuple(self.k.shape)} and {tuple(self.v.shape)} except along S")
        self.k = k if self.k is None else torch.cat((self.k, k), dim=-2)    # (B, H_kv, S + T, D)
        self.v = v if self.v is None else torch.cat((self.v, v), dim=-2)
        return self.k, self.v

    def __repr__(self) -> str:
        shape = None if self.k is None else tuple(self.k.shape)
        return f"KVCache(seq_len={self.seq_len}, k_shape={shape})"


def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int, seq_len: int,
                   batch_size: int = 1, bytes_per_element: int = 2) -> int:
    """Bytes a full KV cache takes: 2 (K and V) x n_layers x B x H_kv x S x D x bytes per element.

    Args:
        n_layers, n_kv_heads, head_dim: the model's; with multi-head attention n_kv_heads = n_heads.
        seq_len: S, tokens cached per sequence; batch_size: B sequences.
        bytes_per_element: 2 for fp16/bf16 (default), 4 for fp32, 1 for an 8-bit cache.
    Example: LLaMA 3 8B (32 layers, 8 KV heads of dim 128; Llama 3 paper, Table 3) at its
    8,192-token context (max_position_embeddings in its config.json) in bf16:
    ``kv_cache_bytes(32, 8, 128, 8192)`` = 2^30 bytes, 1 GiB per sequence.
    """
    fn = "kv_cache_bytes"
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads),
                        ("head_dim", head_dim), ("seq_len", seq_len), ("batch_size", batch_size),
                        ("bytes_per_element", bytes_per_element)):
        check_int(fn, name, value, minimum=1 if name != "seq_len" else 0)
    return 2 * n_layers * batch_size * n_kv_heads * seq_len * head_dim * bytes_per_element
