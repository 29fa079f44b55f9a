"""A mistake's stable code, ``<exercise>.<key>``."""

from __future__ import annotations

__all__ = ["code_of"]


def code_of(exercise: str, key: str) -> str:
    """The code of mistake ``key`` in ``exercise``: "layer_norm.unbiased_variance"."""
    return f"{exercise}.{key}"
