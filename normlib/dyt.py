"""Dynamic Tanh (DyT): an elementwise replacement for LayerNorm, with no statistics at all.

Notation: C channels. Zhu, Chen, He, LeCun and Liu (arXiv 2503.10622, CVPR 2025) observe that
trained LayerNorms map their inputs along tanh-shaped S-curves, and replace the norm with

    DyT(x) = gamma * tanh(alpha * x) + beta

alpha a learnable scalar (initialized to 0.5, the paper's default), gamma (C,)
ones and beta (C,) zeros, as LayerNorm's affine. No mean, no variance: each element is squashed on
its own. Research, not practice: no production LLM we know of uses it (research notes, part C).
Parameter names follow ``nn.LayerNorm`` (weight = gamma, bias = beta) so a DyT can stand where a
norm stood; alpha keeps the paper's name.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_int, check_number, check_tensor, compute_dtype

__all__ = ["dyt", "DyT"]


def dyt(x: torch.Tensor, alpha: torch.Tensor | float, weight: torch.Tensor | None = None,
        bias: torch.Tensor | None = None) -> torch.Tensor:
    """``weight * tanh(alpha * x) + bias`` over the last dim (DyT, arXiv 2503.10622).

    Args:
        x: (..., C).
        alpha: the scalar alpha (a 0-dim or (1,) tensor, or a float).
        weight: gamma, (C,) or None; bias: beta, (C,) or None.
    Returns:
        x's shape and dtype; computed in float32 for fp16/bf16 inputs.
    """
    check_tensor("dyt", "x", x)
    if isinstance(alpha, torch.Tensor):
        if alpha.numel() != 1:
            raise ValueError(f"dyt: alpha must be a scalar, got shape {tuple(alpha.shape)}")
    else:
        check_number("dyt", "alpha", alpha)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.shape != x.shape[-1:]:
            raise ValueError(f"dyt: {name} must have shape ({x.shape[-1]},) to match x "
                             f"{tuple(x.shape)}, got {tuple(t.shape)}")
    dtype = compute_dtype(x)
    a = alpha.to(dtype) if isinstance(alpha, torch.Tensor) else alpha
    y = torch.tanh(a * x.to(dtype))                                       # (..., C)
    if weight is not None:
        y = y * weight.to(dtype)
    if bias is not None:
        y = y + bias.to(dtype)
    return y.type_as(x)


class DyT(nn.Module):
    """DyT layer: a learnable scalar ``alpha`` (init ``alpha_init``), ``weight`` (C,) ones and
    ``bias`` (C,) zeros. ``forward(x)``: (..., C) -> (..., C).

    Args:
        normalized_shape: C, the last dim (an int: DyT acts elementwise, the name is LayerNorm's).
        alpha_init: alpha's initial value, 0.5 (the paper's default; its LLM runs tune it).
        elementwise_affine: learn gamma and beta (True), as LayerNorm.
        device, dtype: of the parameters.
    """

    def __init__(self, normalized_shape: int, alpha_init: float = 0.5, *,
                 elementwise_affine: bool = True, device=None, dtype=None):
        super().__init__()
        check_int("DyT", "normalized_shape", normalized_shape, minimum=1)
        check_number("DyT", "alpha_init", alpha_init)
        self.normalized_shape, self.alpha_init = (normalized_shape,), float(alpha_init)
        factory = {"device": device, "dtype": dtype}
        self.alpha = nn.Parameter(torch.empty(1, **factory))
        if elementwise_affine:
            self.weight = nn.Parameter(torch.empty(normalized_shape, **factory))
            self.bias = nn.Parameter(torch.empty(normalized_shape, **factory))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """alpha = alpha_init, weight = 1, bias = 0 (the paper's initialization)."""
        nn.init.constant_(self.alpha, self.alpha_init)
        if self.weight is not None:
            nn.init.ones_(self.weight)
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dyt(x, self.alpha, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape[0]}, alpha_init={self.alpha_init}"
