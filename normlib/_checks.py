"""Argument checks shared by every public function: fail early, name the argument and the value.

Each helper raises ``TypeError`` (wrong kind of thing) or ``ValueError`` (right kind, bad value)
with a message of the form "<function>: <argument> must be <expected>, got <value>".
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import torch

HALF_DTYPES = (torch.float16, torch.bfloat16)


def check_tensor(fn: str, name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{fn}: {name} must be a floating-point tensor, got dtype {x.dtype}")


def check_choice(fn: str, name: str, value, choices: Iterable[str]) -> None:
    choices = tuple(choices)
    if value not in choices:
        valid = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{fn}: unknown {name} {value!r}; expected one of {valid}")


def check_int(fn: str, name: str, value, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{fn}: {name} must be >= {minimum}, got {value}")


def check_number(fn: str, name: str, value, *, positive: bool = False) -> None:
    """Check a real number; ``positive`` asks for > 0, otherwise >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a number, got {type(value).__name__} {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{fn}: {name} must be > 0, got {value}")
    if not positive and not value >= 0:
        raise ValueError(f"{fn}: {name} must be >= 0, got {value}")


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """Statistics of half-precision inputs are computed in float32 (as torch and HF LLaMA do)."""
    return torch.float32 if x.dtype in HALF_DTYPES else x.dtype
