"""Checks as data: a table of cases and one runner, for the checkers of a function of (x, params,
eps) against a reference (LayerNorm, RMSNorm).

A ``Case`` says what input to build (shape, seed, dtype, scale, offset, rows set to a constant),
which eps to pass (or none: the default) and how loose the tolerance is; ``run_cases`` runs each
case as one check line: the learner's output against the reference, and, on a mismatch, against
every mutant of the exercise's table (see ``Session.expect_close``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ._compare import label, randn, tolerance

__all__ = ["Case", "run_cases", "run_backward"]


@dataclass(frozen=True)
class Case:
    """One forward check: x of ``shape`` (seeded), parameters of size shape[-1]."""

    shape: tuple[int, ...]
    seed: int
    dtype: torch.dtype = torch.float32
    note: str = ""
    eps: float | None = None            # None: pass the exercise's default explicitly
    pass_eps: bool = True               # False: call fn without eps (its default must be right)
    scale: float | None = None          # None: the checker's default scale and offset of x
    offset: float | None = None
    tol_factor: float = 1.0
    rows: dict[int, float] = field(default_factory=dict)    # row index -> a constant row


def inputs(case: Case, n_params: int, *, scale: float, offset: float) -> tuple[torch.Tensor, ...]:
    """x, then ``n_params`` parameter vectors: weight ~ 1 + 0.3 N(0, 1), then N(0, 1) (bias)."""
    x = randn(*case.shape, seed=case.seed, dtype=case.dtype,
              scale=scale if case.scale is None else case.scale,
              offset=offset if case.offset is None else case.offset)
    for row, value in case.rows.items():
        x[row] = value
    C = case.shape[-1]
    params = [randn(C, seed=case.seed + 1, dtype=case.dtype, scale=0.3, offset=1.0),
              randn(C, seed=case.seed + 2, dtype=case.dtype)][:n_params]
    return (x, *params)


def run_cases(s, fn, cases, *, reference, mutants, n_params: int, eps: float, scale: float,
              offset: float) -> None:
    """Run each case as one check: ``fn(x, *params, eps=...)`` against ``reference(x, *params,
    eps)``, naming the mutant ((key, f(x, *params, eps)) pairs) the output matches."""
    for case in cases:
        args = inputs(case, n_params, scale=scale, offset=offset)
        e = eps if case.eps is None else case.eps

        def check(args=args, e=e, case=case):
            x = args[0]
            got = s.call(fn, *args, eps=e) if case.pass_eps else s.call(fn, *args)
            want = reference(*args, e)
            s.expect_close(got, want, tol=tolerance(x.dtype, float(want.abs().max()),
                                                    case.tol_factor),
                           mutants=[(k, (lambda f=f: f(*args, e))) for k, f in mutants])

        x = args[0]
        s.run(label(x.dtype, x.shape, case.note) + ("" if case.pass_eps else ", default eps"),
              check)


def run_backward(s, fn, case: Case, names: tuple[str, ...], *, reference, mutants, eps: float,
                 scale: float, offset: float) -> None:
    """The gradients of sum(out * g) w.r.t. x and the parameters (``names``), against the
    reference's, naming the mutant they match."""
    args = inputs(case, len(names) - 1, scale=scale, offset=offset)
    s.run(label(args[0].dtype, args[0].shape, case.note), lambda: s.expect_grads(
        lambda *a: fn(*a, eps=eps), lambda *a: reference(*a, eps), dict(zip(names, args,
                                                                            strict=True)),
        mutants=[(k, (lambda *a, f=f: f(*a, eps))) for k, f in mutants]))
