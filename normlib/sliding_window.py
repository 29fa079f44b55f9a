"""Sliding-window attention: each query sees only the last W keys, and the cache keeps no more.

Notation: B batch, H_kv key/value heads, T new tokens, S keys, D head dim, W the window.
Query at position p attends to keys at positions p - W + 1 .. p (itself and the W - 1 before it),
the mask ``kv_idx > q_idx - W`` of Mistral 7B (arXiv 2310.06825, Section 2, W = 4096) and of HF's
sliding-window layers (Gemma 3: W = 1024 on five local layers per global one, arXiv 2503.19786,
Section 2). One layer sees W tokens back; L stacked layers see up to L (W - 1) back.

Decoding never needs a key older than W - 1 tokens before the newest query, so a rolling cache
keeps only the last W - 1 keys and values (as HF's ``DynamicSlidingWindowLayer``): a fixed
(B, H_kv, W - 1, D) per layer however long the text, instead of one growing with it.
"""

from __future__ import annotations

import torch

from ._checks import check_int
from .kv_cache import KVCache

__all__ = ["sliding_window_mask", "RollingKVCache"]


def sliding_window_mask(T: int, S: int, window: int | None, offset: int | None = None, *,
                        device=None) -> torch.Tensor:
    """Boolean (T, S) mask, True where a query may attend (``F.scaled_dot_product_attention``'s
    convention): causal, and with ``window`` W only the last W keys, itself included.

    Query row t sits at position offset + t, key column s at position s; ``offset`` defaults to
    S - T (the queries are the last T of the S tokens, as in decoding with a cache).
    Row t keeps columns s with offset + t - W < s <= offset + t; ``window=None`` is plain causal.
    """
    check_int("sliding_window_mask", "T", T, minimum=0)
    check_int("sliding_window_mask", "S", S, minimum=0)
    if offset is None:
        offset = S - T
    check_int("sliding_window_mask", "offset", offset, minimum=0)
    keep = torch.ones(T, S, dtype=torch.bool, device=device).tril(offset)          # causal
    if window is not None:
        check_int("sliding_window_mask", "window", window, minimum=1)
        keep = keep & ~torch.ones(T, S, dtype=torch.bool, device=device).tril(offset - window)
    return keep                                                                     # (T, S)


class RollingKVCache(KVCache):
    """A KV cache for a sliding-window layer: ``update`` returns the kept keys followed by the new
    ones (what the new queries may need) and then keeps only the last ``window - 1``.

    ``seq_len`` counts every token seen (the position of the next token, for RoPE), not the kept
    ones; ``k``/``v`` hold at most (B, H_kv, window - 1, D). Decoding through it equals the full
    sliding-window pass (tests/test_sliding_window.py).

    Args:
        window: W, the attention window of the layer it serves (>= 1).
    """

    def __init__(self, window: int) -> None:
        super().__init__()
        check_int("RollingKVCache", "window", window, minimum=1)
        self.window = window
        self._seen = 0

    @property
    def seq_len(self) -> int:
        """Tokens seen so far (the next token's position); at most window - 1 of them are kept."""
        return self._seen

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k, v (B, H_kv, T, D); return the (B, H_kv, kept + T, D) keys and values, then
        drop all but the last window - 1."""
        k_all, v_all = super().update(k, v)                   # (B, H_kv, kept + T, D), checked
        self._seen += k.shape[-2]
        start = max(0, k_all.shape[-2] - (self.window - 1))     # the last window - 1 stay
        self.k, self.v = k_all[..., start:, :], v_all[..., start:, :]
        return k_all, v_all

    def __repr__(self) -> str:
        return (f"RollingKVCache(window={self.window}, seq_len={self.seq_len}, "
                f"kept={self.k.shape[-2] if self.k is not None else 0})")
