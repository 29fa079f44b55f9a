"""Checks as data: a table of cases and one runner, for every checker of a function.

A ``Case`` is one check line: its label note, how to build its inputs (seeded), the keyword
arguments of the exercise (those in ``defaults`` are not passed: the learner's defaults must be
right) and a tolerance factor. ``run_cases`` runs each case: the learner's output
(``s.call(fn, *inputs, **passed)``) against ``reference(*inputs, *kwargs.values())`` and, on a
mismatch, against every mutant of the exercise's table ([(key, f)], each called like the
reference; see ``Session.expect_close``). A checker whose comparison the table cannot say (RoPE's
two layouts, the schedule's steps, a decode through a cache) passes a ``call`` or ``judge`` hook.
``run_backward`` is the same for the gradients. A checker of a class runs its forward cases the
same way: the inputs are x and the reference's weights, and its ``call`` hook builds the learner's
module (``new_module``), copies the weights in (``load_weights``) and calls it on x.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce

import torch
from torch import nn

from ._compare import bind, bind_last, grad_output, label, randn, tolerance
from ._session import Fail

__all__ = ["Case", "DoesNotApply", "run_cases", "run_backward", "expect", "expect_weight_grads",
           "norm_inputs", "new_module", "load_weights"]


class DoesNotApply(Exception):
    """Raised by a mutant that means nothing for this input: the session skips it."""


@dataclass(frozen=True)
class Case:
    """One check: ``inputs()`` builds the positional arguments (seeded, fresh on every call);
    ``kwargs`` are the keyword arguments, of which ``defaults`` are left to the learner's
    defaults. The label is 'dtype shape, note' of the first input (a tensor), else the note."""

    note: str
    inputs: Callable[[], tuple]
    kwargs: dict = field(default_factory=dict)
    defaults: tuple[str, ...] = ()
    tol_factor: float = 1.0

    def label(self, args: tuple) -> str:
        x = args[0] if args else None
        return label(x.dtype, x.shape, self.note) if isinstance(x, torch.Tensor) else self.note

    def learner_kwargs(self) -> dict:
        return {k: v for k, v in self.kwargs.items() if k not in self.defaults}


def expect(s, got, args: tuple, *, reference, mutants, tol_factor: float = 1.0,
           what: str = "output") -> None:
    """``got`` against ``reference(*args)`` (tolerance of its dtype and magnitude), naming the
    mutant of the table it matches."""
    want = reference(*args)
    s.expect_close(got, want, what=what, mutants=bind(mutants, *args),
                   tol=tolerance(want.dtype, float(want.abs().max()), tol_factor))


def run_cases(s, fn, cases, *, reference=None, mutants=(), call=None, judge=None,
              prefix: str = "") -> None:
    """Run each case as one check line (its label after ``prefix``). ``call(fn, *inputs,
    **passed)`` calls the learner (default ``s.call``); ``judge(got, args, case)`` compares, args
    being the inputs then the kwargs' values (default: ``expect`` against ``reference`` with
    ``mutants``); a string it returns is added to the ✓ line."""
    for case in cases:
        args = case.inputs()
        s.run(prefix + case.label(args), lambda case=case, args=args: _check(
            s, fn, case, args, reference, mutants, call or s.call, judge))


def _check(s, fn, case: Case, args: tuple, reference, mutants, call, judge):
    got = call(fn, *args, **case.learner_kwargs())
    full = (*args, *case.kwargs.values())
    if judge is not None:
        return judge(got, full, case)
    return expect(s, got, full, reference=reference, mutants=mutants, tol_factor=case.tol_factor)


def run_backward(s, fn, case: Case, names: tuple[str, ...], *, reference, mutants) -> None:
    """The gradients of sum(out * g) w.r.t. the inputs (named ``names``), against the
    reference's, naming the mutant they match."""
    args, rest, passed = case.inputs(), tuple(case.kwargs.values()), case.learner_kwargs()
    s.run(case.label(args), lambda: s.expect_grads(
        lambda *a: fn(*a, **passed), lambda *a: reference(*a, *rest),
        dict(zip(names, args, strict=True)),
        mutants=bind_last(mutants, *rest)))


def expect_weight_grads(m: nn.Module, reference, x: torch.Tensor, weights: dict) -> None:
    """After a backward of sum(m(x) * g) through the learner's module ``m``: the gradient of each
    named linear layer's weight against the reference's, ``reference(x, *weights.values())``
    with that one weight a leaf (Fail "wrong_grad" naming the layer otherwise)."""
    for name, W in weights.items():
        leaf = W.clone().requires_grad_(True)
        out = reference(x, *[leaf if n == name else w for n, w in weights.items()])
        (out * grad_output(out.shape, out.dtype)).sum().backward()
        got = getattr(m, name).weight.grad
        if got is None or not torch.allclose(got, leaf.grad, rtol=1e-4, atol=1e-6):
            raise Fail(f"gradient w.r.t. {name}.weight: wrong or missing", "wrong_grad")


def norm_inputs(shape: tuple[int, ...], seed: int, dtype=torch.float32, *, n_params: int,
                scale: float, offset: float, rows: dict[int, float] | None = None):
    """The inputs of a norm: x ~ offset + scale N(0, 1) of ``shape`` (``rows``: row index -> a
    constant row), then ``n_params`` vectors of size shape[-1]: weight ~ 1 + 0.3 N(0, 1), bias
    ~ N(0, 1)."""
    def build():
        x = randn(*shape, seed=seed, dtype=dtype, scale=scale, offset=offset)
        for row, value in (rows or {}).items():
            x[row] = value
        C = shape[-1]
        params = [randn(C, seed=seed + 1, dtype=dtype, scale=0.3, offset=1.0),
                  randn(C, seed=seed + 2, dtype=dtype)][:n_params]
        return (x, *params)
    return build


def new_module(s, cls, *args, what: str, **kwargs) -> nn.Module:
    """``cls(*args, **kwargs)``, called safely; a ✗ unless it is an nn.Module (``what``: the call
    as the line shows it, e.g. 'SwiGLUFFN(8, 16)')."""
    m = s.call(cls, *args, **kwargs)
    if not isinstance(m, nn.Module):
        raise Fail(f"{what} built a {type(m).__name__}, expected an nn.Module", "raised")
    return m


def load_weights(s, m: nn.Module, weights: dict, dtype: torch.dtype) -> nn.Module:
    """The learner's module moved to ``dtype`` (``m.to``, called safely) with the reference's
    ``weights`` ({dotted name: tensor}, e.g. 'w1.weight') copied in."""
    m = s.call(m.to, dtype)
    with torch.no_grad():
        for name, w in weights.items():
            reduce(getattr, name.split("."), m).copy_(w)
    return m
