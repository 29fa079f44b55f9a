"""z-loss: a penalty on the log of the softmax's normalizer, so output logits do not drift.

Notation: B batch, T sequence, V vocabulary. For logits z (..., V), Z = sum_j exp(z_j) and

    z_loss(z) = coefficient * mean over tokens of (log Z)^2

The softmax is unchanged by adding a constant to every logit, so cross-entropy alone leaves log Z
free to drift; the penalty pulls it towards 0, i.e. the softmax towards self-normalized logits.
PaLM adds "z_loss = 10^-4 * log^2 Z to encourage the softmax normalizer log(Z) to be close to 0,
which we found increases the stability of training" (Chowdhery et al. 2022, arXiv 2204.02311,
Section 5, Training Setup, "Loss function"); OLMo 2 trains with it too (arXiv 2501.00656). The mean
over tokens (not the sum) matches a mean cross-entropy, so the coefficient means the same at any
batch size.
"""

from __future__ import annotations

import torch

from ._checks import check_number, check_tensor

__all__ = ["z_loss"]


def z_loss(logits: torch.Tensor, coefficient: float = 1e-4) -> torch.Tensor:
    """PaLM's auxiliary loss ``coefficient * mean(logsumexp(logits, -1) ** 2)``.

    Args:
        logits: (..., V) unnormalized scores, e.g. (B, T, V) from a language model.
        coefficient: the weight (1e-4 in PaLM, Section 5); 0 turns the loss off.
    Returns:
        A 0-dim tensor in float32 for fp16/bf16 logits (log Z of a 50k vocabulary in bf16 would
        keep only about 3 significant digits), in the logits' dtype otherwise.
    """
    check_tensor("z_loss", "logits", logits)
    check_number("z_loss", "coefficient", coefficient)
    if logits.dim() < 1 or logits.shape[-1] < 1:
        raise ValueError(f"z_loss: logits must have shape (..., V) with V >= 1, "
                         f"got {tuple(logits.shape)}")
    log_z = torch.logsumexp(logits.float() if logits.dtype.itemsize < 4 else logits, dim=-1)
    return coefficient * log_z.pow(2).mean()                    # mean over the (...) tokens
