"""A mistake's stable code, ``<exercise>.<key>``, and its Chinese one-line message.

The low layer that ``Session`` needs to label a result; ``codes`` builds the whole list of codes
from the checkers' catalogues on top of it (Session never imports ``codes``, which imports every
checker).
"""

from __future__ import annotations

from ._zh import ZH, ZH_BY_CODE

__all__ = ["code_of", "message_zh"]


def code_of(exercise: str, key: str) -> str:
    """The code of mistake ``key`` in ``exercise``: "layer_norm.unbiased_variance"."""
    return f"{exercise}.{key}"


def message_zh(exercise: str, key: str) -> str:
    """The Chinese one-line message of ``<exercise>.<key>``."""
    return ZH_BY_CODE.get(code_of(exercise, key)) or ZH[key]
