"""Mutants computed once per input: a wrong answer's failing check compares it with every mutant of
the exercise, on inputs that are the same (seeded) every time the check runs, so a mutant's output
on those inputs is kept and reused (in the unseen-answer tests, mutants took about 80% of the
time). Inputs are keyed by content (dtype, shape and a hash of the bytes of each tensor; plain
numbers and strings by value), so an input changed in place is a new key; an input that is neither
(a module, a function, a tensor that needs a gradient) makes the mutant run every time. The key is
computed once per set of inputs, and only when a mutant is first asked for: a check that passes
(and so never looks at its mutants) pays nothing."""

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


def memoized(mutants, args: tuple) -> list:
    """[(key, thunk)] for a table of mutants [(key, f)]: each thunk computes ``f(*args)`` once for
    these inputs' contents (an exception it raises is kept and raised again), or every time when
    the inputs cannot be keyed."""
    keyed: list = []                       # the inputs' key, once asked for (None: cannot be keyed)

    def inputs_key():
        if not keyed:
            try:
                keyed.append(_key(args))
            except _NoKey:
                keyed.append(None)
        return keyed[0]

    def thunk_of(f):
        def thunk():
            key = inputs_key()
            if key is None:
                return f(*args)
            kept = _KEPT.get((f, key))
            if kept is None:
                try:
                    kept = (True, f(*args))
                except Exception as error:          # a mutant that does not apply to this input
                    kept = (False, error)
                if len(_KEPT) >= _MOST:
                    _KEPT.clear()
                _KEPT[(f, key)] = kept
            done, value = kept
            if not done:
                raise value
            return value
        return thunk

    return [(key, thunk_of(f)) for key, f in mutants]
