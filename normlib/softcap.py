"""Logit soft-capping: squash logits smoothly into (-cap, cap) instead of letting them grow.

    softcap(z) = cap * tanh(z / cap)

Near zero it is the identity (slope 1 at z = 0, tanh(u) = u - u^3/3 + ...); for |z| >> cap it
saturates at +-cap, so no attention logit or output logit can exceed cap in magnitude. Gemma 2
caps the attention logits at 50 (before the mask and the softmax) and the final output logits at
30 (Gemma 2 report, arXiv 2408.00118, Section 2, "Logit soft-capping"); Gemma 3 drops the
attention cap in favour of QK-norm (arXiv 2503.19786, Section 2). FlashAttention calls the same
argument ``softcap``; HF's configs call it ``attn_logit_softcapping`` / ``final_logit_softcapping``.
"""

from __future__ import annotations

import torch

from ._checks import check_number, check_tensor, compute_dtype

__all__ = ["softcap"]


def softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Soft-cap x: ``cap * tanh(x / cap)``, elementwise, in (-cap, cap).

    Args:
        x: logits of any shape (attention scores (B, H, T, S) or output logits (B, T, V)).
        cap: the bound c > 0 (Gemma 2: 50.0 on attention logits, 30.0 on output logits).
    Returns:
        A tensor of x's shape and dtype; computed in float32 for fp16/bf16 inputs, as the
        scores in ``attention`` are.
    """
    check_tensor("softcap", "x", x)
    check_number("softcap", "cap", cap, positive=True)
    xf = x.to(compute_dtype(x))
    return (cap * torch.tanh(xf / cap)).type_as(x)
