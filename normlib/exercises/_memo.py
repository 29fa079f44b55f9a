"""Mutants computed once per input: a wrong answer's failing check compares it with every mutant of
the exercise, on inputs that are the same (seeded) every time the check runs, so a mutant's output
on those inputs is kept and reused (in the unseen-answer tests, mutants took about 80% of the
time). Inputs are keyed by content (dtype, shape and a hash of the bytes of each tensor; plain
numbers and strings by value), so an input changed in place is a new key; an input that is neither
(a module, a function, a tensor that needs a gradient) makes the mutant run every time."""

from __future__ import annotations

import hashlib

import torch

__all__ = ["memoized"]

_KEPT: dict = {}
_MOST = 20_000          # entries kept before the memo starts again (each a small tensor)


class _NoKey(Exception):
    """An input that cannot be keyed by its content."""


def _key(value):
    if isinstance(value, torch.Tensor):
        if value.requires_grad or value.is_sparse or value.device.type != "cpu":
            raise _NoKey
        data = value.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
        return ("tensor", str(value.dtype), tuple(value.shape),
                hashlib.blake2b(data, digest_size=16).digest())
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
        return (type(value).__name__, value)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_key(v) for v in value))
    raise _NoKey


def memoized(f, args: tuple):
    """A thunk computing ``f(*args)`` once for these inputs' contents (an exception it raises is
    kept and raised again), or every time when the inputs cannot be keyed."""
    try:
        key = (f, _key(args))
    except _NoKey:
        return lambda: f(*args)

    def thunk():
        kept = _KEPT.get(key)
        if kept is None:
            try:
                kept = (True, f(*args))
            except Exception as error:          # a mutant that does not apply to this input
                kept = (False, error)
            if len(_KEPT) >= _MOST:
                _KEPT.clear()
            _KEPT[key] = kept
        done, value = kept
        if not done:
            raise value
        return value
    return thunk
