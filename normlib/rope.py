"""Rotary position embedding, RoPE (Su et al., RoFormer, arXiv 2104.09864).

Notation: T sequence, D head dim (even), i = 0 .. D/2 - 1 the pair index, m a position.
theta_i = base^(-2i/D). At position m, pair i of a query or key is rotated by the angle m * theta_i:

    [y0]   [cos(m theta_i)  -sin(m theta_i)] [x0]
    [y1] = [sin(m theta_i)   cos(m theta_i)] [x1]

so q_m . k_n = Re(sum_i q_i conj(k_i) e^{i (m - n) theta_i}) depends on m - n only.

Two layouts put the pairs in different places; both are valid RoPE:
- "interleaved": pairs (2i, 2i+1), Meta's LLaMA (complex numbers, ``apply_rope_complex``).
- "half": pairs (i, i + D/2), HF's ``rotate_half``: x * cos + rotate_half(x) * sin.
``half_to_interleaved`` gives the permutation between them. This module rotates by +theta
(counter-clockwise, multiplication by e^{+i m theta}), as both reference codes do.
"""

from __future__ import annotations

import torch

from ._checks import check_choice, check_int, check_number, check_tensor, compute_dtype

__all__ = ["rope_frequencies", "rope_cos_sin", "rotate", "apply_rope", "apply_rope_complex", "half_to_interleaved",
           "rope_decay_bound", "ROPE_LAYOUTS"]

ROPE_LAYOUTS = ("interleaved", "half")


def rope_frequencies(head_dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32,
                     device=None) -> torch.Tensor:
    """theta_i = base^(-2i / head_dim) for i = 0 .. head_dim/2 - 1: shape (D/2,), falling from 1.

    Computed in float64 on the CPU and rounded once to ``dtype`` on ``device`` (a float32 result
    is within half an ulp of the exact value; HF's ``inv_freq``, a float32 pow, is within a few)."""
    check_int("rope_frequencies", "head_dim", head_dim, minimum=2)
    if head_dim % 2:
        raise ValueError(f"rope_frequencies: RoPE needs an even head_dim, got {head_dim}")
    check_number("rope_frequencies", "base", base, positive=True)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (base ** (-2 * i / head_dim)).to(device=device, dtype=dtype)


def rope_cos_sin(theta: torch.Tensor, positions: torch.Tensor,
                 dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles m * theta_i, each (T, D/2) in ``dtype`` on theta's device.

    A model computes them once per forward pass and hands them to every attention layer (HF's
    ``position_embeddings``). The product is taken in ``dtype``: with float32 theta and integer
    positions below 2^24 it is the exact product rounded once, as HF's float32 angles."""
    angle = positions.to(dtype)[:, None] * theta.to(dtype)[None, :]           # (T, D/2)
    return angle.cos(), angle.sin()


def _check_x(fn: str, x: torch.Tensor) -> None:
    check_tensor(fn, "x", x)
    if x.dim() < 2:
        raise ValueError(f"{fn}: x must have shape (..., T, D), got {tuple(x.shape)}")
    if x.shape[-1] % 2:
        raise ValueError(f"{fn}: RoPE needs an even head_dim (last dim of x), got {x.shape[-1]}")


def _cos_sin(fn: str, x: torch.Tensor, positions, base: float, theta=None):
    """cos and sin of m * theta_i for x's rows, (T, D/2) each in x's computation dtype."""
    _check_x(fn, x)
    check_number(fn, "base", base, positive=True)
    T, D = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(T, device=x.device)
    elif not isinstance(positions, torch.Tensor):
        raise TypeError(f"{fn}: positions must be a 1-D tensor of length T={T} or None, "
                        f"got {type(positions).__name__}")
    elif positions.shape != (T,):
        raise ValueError(f"{fn}: positions must have shape ({T},) to match T = x.shape[-2], "
                         f"got {tuple(positions.shape)}")
    dtype = compute_dtype(x)
    if theta is None:
        theta = rope_frequencies(D, base, dtype=dtype, device=x.device)
    else:
        check_tensor(fn, "theta", theta)
        if theta.shape != (D // 2,):
            raise ValueError(f"{fn}: theta must have shape ({D // 2},) = (head_dim / 2,), "
                             f"got {tuple(theta.shape)}")
    return rope_cos_sin(theta, positions.to(x.device), dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
           layout: str = "interleaved") -> torch.Tensor:
    """Rotate each feature pair of x (..., T, D) by the angles whose cos and sin are given, (T, D/2)
    each (from ``rope_cos_sin``); computed in cos's dtype, returned in x's."""
    check_choice("rotate", "layout", layout, ROPE_LAYOUTS)
    _check_x("rotate", x)
    T, D = x.shape[-2], x.shape[-1]
    for name, t in (("cos", cos), ("sin", sin)):
        check_tensor("rotate", name, t)
        if t.shape != (T, D // 2):
            raise ValueError(f"rotate: {name} must have shape (T, D/2) = ({T}, {D // 2}) for x "
                             f"of shape {tuple(x.shape)}, got {tuple(t.shape)}")
    xf = x.to(cos.dtype)
    if layout == "interleaved":
        x0, x1 = xf[..., 0::2], xf[..., 1::2]                                  # (..., T, D/2)
        y = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)   # (..., T, D/2, 2)
        y = y.flatten(-2)                                                       # (..., T, D)
    else:
        x1, x2 = xf[..., :D // 2], xf[..., D // 2:]                            # (..., T, D/2)
        rotate_half = torch.cat((-x2, x1), dim=-1)                             # (..., T, D)
        y = xf * torch.cat((cos, cos), -1) + rotate_half * torch.cat((sin, sin), -1)
    return y.type_as(x)


def apply_rope(x: torch.Tensor, positions: torch.Tensor | None = None, *, base: float = 10000.0,
               layout: str = "interleaved", theta: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate each feature pair of x by position * theta_i.

    Args:
        x: (..., T, D), e.g. queries or keys (B, H, T, D); D even.
        positions: (T,) positions m of the T rows, default 0 .. T-1.
        base: the frequency base (10,000; LLaMA-3 uses 500,000).
        layout: "interleaved" (pairs 2i, 2i+1) or "half" (pairs i, i + D/2).
        theta: (D/2,) frequencies to use instead of base^(-2i/D), e.g. rescaled ones from
            ``normlib.rope_scaling`` (HF's ``inv_freq``); base is then unused.
    Returns:
        (..., T, D) in x's dtype (fp16/bf16 are rotated in float32, float64 in float64). Norms
        are preserved.
    """
    check_choice("apply_rope", "layout", layout, ROPE_LAYOUTS)
    cos, sin = _cos_sin("apply_rope", x, positions, base, theta)               # (T, D/2) each
    return rotate(x, cos, sin, layout)


def apply_rope_complex(x: torch.Tensor, positions: torch.Tensor | None = None, *,
                       base: float = 10000.0) -> torch.Tensor:
    """RoPE as Meta's LLaMA writes it: pairs (2i, 2i+1) as complex numbers times e^{i m theta_i}.

    Same result as ``apply_rope(x, positions, base=base, layout="interleaved")``.
    """
    cos, sin = _cos_sin("apply_rope_complex", x, positions, base)              # (T, D/2) each
    freqs_cis = torch.complex(cos, sin)                                          # e^{i m theta}
    xc = torch.view_as_complex(x.to(cos.dtype).reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * freqs_cis).flatten(-2).type_as(x)           # (..., T, D)


def half_to_interleaved(head_dim: int) -> torch.Tensor:
    """The permutation ``perm`` with x_interleaved = x_half[..., perm].

    perm = [0, D/2, 1, D/2 + 1, ...]: feature i and feature i + D/2 (a pair in the "half" layout)
    become neighbours 2i and 2i + 1 (a pair in the "interleaved" layout). Thus
    ``apply_rope(x[..., perm], layout="interleaved") == apply_rope(x, layout="half")[..., perm]``,
    and permuting the rows of W_q and W_k per head by it moves a checkpoint between the layouts.
    ``torch.argsort(perm)`` maps back.
    """
    check_int("half_to_interleaved", "head_dim", head_dim, minimum=2)
    if head_dim % 2:
        raise ValueError(f"half_to_interleaved: RoPE needs an even head_dim, got {head_dim}")
    half = head_dim // 2
    return torch.stack((torch.arange(half), torch.arange(half) + half), dim=-1).flatten()


def rope_decay_bound(head_dim: int, max_distance: int, base: float = 10000.0) -> torch.Tensor:
    """RoFormer's long-term decay curve (Figure 2): the relative upper bound of q_m . k_n.

    For r = m - n = 0 .. max_distance it returns (1 / (D/2)) * sum_{j=1}^{D/2} |S_j|, with
    S_j = sum_{k=0}^{j-1} e^{i r theta_k}. It bounds the attention score (up to a factor set by
    q and k); it is not itself a score. Returns a float64 tensor of shape (max_distance + 1,).
    """
    check_int("rope_decay_bound", "max_distance", max_distance, minimum=0)
    theta = rope_frequencies(head_dim, base, dtype=torch.float64)                # (D/2,)
    r = torch.arange(max_distance + 1, dtype=torch.float64)                      # (R,)
    angle = r[:, None] * theta[None, :]                                          # (R, D/2)
    S = torch.polar(torch.ones_like(angle), angle).cumsum(dim=-1)                # S_1 .. S_{D/2}
    return S.abs().mean(dim=-1)
