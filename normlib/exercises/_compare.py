"""Comparing outputs: tolerances per dtype, closeness with NaN = NaN, seeded inputs, labels."""

from __future__ import annotations

import torch

from ._memo import memoized

__all__ = ["tolerance", "close", "max_error", "grad_output", "randn", "label", "bind",
           "bind_last", "BROADCAST_ERROR"]

# torch's messages when shapes do not broadcast: the usual sign of a statistic without keepdim.
BROADCAST_ERROR = r"must match the size of tensor|cannot be broadcast|not broadcastable"


def tolerance(dtype: torch.dtype, scale: float = 1.0, factor: float = 1.0) -> tuple[float, float]:
    """(rtol, atol) for comparing outputs of ``dtype``; atol grows with the output's magnitude.

    float64 is held to float32's tolerance: computing in float32 (``x.float()``, as LLaMA's
    RMSNorm does) and casting back is accepted. Half types allow a few units in the last place.
    """
    rtol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}.get(dtype, 2e-5)
    return rtol * factor, rtol * factor * max(1.0, scale)


def close(a, b, tol: tuple[float, float]) -> bool:
    """|a - b| <= atol + rtol |b| everywhere, NaN equal to NaN and inf to inf of the same sign."""
    a = torch.as_tensor(a).detach().to(torch.float64)
    b = torch.as_tensor(b).detach().to(torch.float64)
    if a.shape != b.shape:
        return False
    rtol, atol = tol
    same = (a == b) | (a.isnan() & b.isnan())
    ok = same | ((a - b).abs() <= atol + rtol * b.abs())
    return bool(ok.all())


def max_error(a, b) -> float:
    """max |a - b|, where NaN against NaN (or inf against the same inf) counts as 0."""
    a = torch.as_tensor(a).detach().to(torch.float64)
    b = torch.as_tensor(b).detach().to(torch.float64)
    same = (a == b) | (a.isnan() & b.isnan())
    diff = torch.where(same, 0.0, (a - b).abs()).nan_to_num(float("inf"))
    return float(diff.max()) if diff.numel() else 0.0


def grad_output(shape, dtype) -> torch.Tensor:
    """The fixed random weights g of the backward checks: gradients are those of sum(out * g)."""
    g = torch.Generator().manual_seed(1)
    return torch.randn(tuple(shape), dtype=torch.float64, generator=g).to(dtype)


def randn(*shape: int, seed: int, dtype=torch.float32, scale: float = 1.0, offset: float = 0.0):
    """Seeded normal samples (drawn in float64, then cast), independent of the global RNG."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, dtype=torch.float64, generator=g) * scale + offset).to(dtype)


def label(dtype: torch.dtype, shape, note: str = "") -> str:
    """'float32 (2, 5, 8)' or 'float32 (2, 5, 8), constant rows'."""
    text = f"{str(dtype).replace('torch.', '')} {tuple(shape)}"
    return f"{text}, {note}" if note else text


def bind(mutants, *args) -> list:
    """Bind a table of mutants [(key, f), ...] to one set of inputs: [(key, thunk), ...], each
    thunk computing its mutant once for inputs of the same contents (``_memo``)."""
    return memoized(mutants, args)


def bind_last(mutants, *rest) -> list:
    """Fix the trailing arguments of a table of mutants: [(key, f(*a, *rest))], for the gradient
    check, which calls each mutant on fresh leaves ``a``."""
    return [(key, (lambda *a, f=f: f(*a, *rest))) for key, f in mutants]
