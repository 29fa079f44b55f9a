"""The LayerNorm checker, and the mistakes it can name.

The learner writes ``layer_norm(x, weight, bias, eps=1e-5)`` over the last dim of x; the reference
is ``nl.layer_norm`` (equal to ``F.layer_norm``). Each mutant below is one classic mistake, written
out; a learner's output that matches a mutant (and not the reference) gets that mistake's
explanation.
"""

from __future__ import annotations

import torch

import normlib as nl

from ._compare import BROADCAST_ERROR, bind, label, randn, tolerance
from ._probes import norm_probes, output
from ._session import Session
from .result import CheckResult

__all__ = ["check_layer_norm", "LAYER_NORM_MISTAKES", "LAYER_NORM_MUTANTS"]


LAYER_NORM_MISTAKES = {
    "batch_axis": ("normalized over the batch (dim 0)", "you normalize over the batch dimension "
                   "(dim 0): that is BatchNorm's axis. LayerNorm takes one mean and variance per "
                   "sample (per token), over the last dim: x.mean(-1, keepdim=True)."),
    "all_dims": ("one mean for the whole tensor", "you take one mean and variance over all dims; "
                 "LayerNorm takes them over the last dim only, separately for every row."),
    "wrong_axis": ("normalized over the wrong dim", "you normalize over a dim other than the last "
                   "(dim -2?); LayerNorm reduces over dim -1, the features of each token."),
    "unbiased_and_eps_outside": ("x.std(-1) + eps", "you divide by x.std(-1) + eps: torch.std is "
                                 "unbiased (n - 1) by default and eps sits outside the sqrt. "
                                 "nn.LayerNorm uses the biased variance and eps inside: "
                                 "(x - mu) / sqrt(var + eps), var = x.var(-1, unbiased=False)."),
    "unbiased_variance": ("unbiased variance (n - 1)", "you divide by the unbiased standard "
                          "deviation (n - 1); LayerNorm uses the biased variance (divide by n): "
                          "x.var(-1, unbiased=False, keepdim=True)."),
    "eps_outside_sqrt": ("eps outside the sqrt", "eps sits outside the square root: "
                         "(x - mu) / (sigma + eps). nn.LayerNorm adds eps to the variance: "
                         "(x - mu) / sqrt(var + eps); the two differ a lot on low-variance rows."),
    "no_eps": ("no eps", "you leave out eps, so a constant row divides 0 by 0 (NaN)."),
    "eps_ignored": ("eps argument ignored", "your function ignores its eps argument (a fixed "
                    "value?): use the eps passed in."),
    "missing_keepdim": ("missing keepdim=True", "the mean (or variance) lost its last dim: without "
                        "keepdim=True, x - x.mean(-1) broadcasts the (..., T) means along the wrong "
                        "axis (or fails). Use x.mean(-1, keepdim=True)."),
    "one_pass_variance": ("var = E[x²] - E[x]²", "you compute the variance as E[x^2] - E[x]^2, "
                          "which cancels catastrophically when the mean is large compared with the "
                          "spread; subtract the mean first: ((x - mu) ** 2).mean(-1)."),
    "no_upcast": ("no float32 upcast", "you compute in float16: the variance of values that "
                  "differ from their mean by more than 256 exceeds float16's maximum (65504) and "
                  "becomes inf, so the output collapses to the bias. Compute in float32 "
                  "(x.float()), then cast back with .to(x.dtype)."),
    "divides_by_variance": ("divided by the variance", "you divide by the variance, not by its "
                            "square root (the standard deviation)."),
    "weight_bias_swapped": ("weight and bias swapped", "weight (gamma) must scale and bias (beta) "
                            "must shift: y = x_hat * weight + bias."),
    "no_affine": ("weight and bias unused", "you return the normalized x without applying weight "
                  "and bias: y = x_hat * weight + bias."),
    "not_centred": ("mean not subtracted", "LayerNorm subtracts each row's mean."),
    "not_scaled": ("not divided by the std", "LayerNorm divides by sqrt(var + eps)."),
    "not_std": ("divided by something other than the std", "LayerNorm divides by sqrt(var + eps)."),
    "bias_unused": ("bias unused", "add the bias last: y = x_hat * weight + bias."),
    "weight_unused": ("weight unused", "multiply by the weight: y = x_hat * weight + bias."),
    "affine_order": ("bias added before the weight", "y = x_hat * weight + bias, not "
                     "(x_hat + bias) * weight."),
    "affine": ("weight and bias misapplied", "y = x_hat * weight + bias."),
    "axis": ("statistics over more than the last dim", "LayerNorm's statistics are per row."),
    "detached_statistics": ("statistics detached", "the mean or variance is detached from "
                            "autograd (.detach(), .item() or .data): the backward pass must flow "
                            "through them too."),
    "eps_wrong": ("not the eps passed", "add the eps argument itself inside the square root: "
                  "sqrt(var + eps)."),
}


def _ln(x, w, b, eps, dims=-1, unbiased=False, outside=False, keepdim=True):
    """LayerNorm in x's own dtype (no upcast), with the mistakes as options."""
    mu = x.mean(dims, keepdim=keepdim)
    var = x.var(dims, unbiased=unbiased, keepdim=keepdim)
    den = var.sqrt() + eps if outside else (var + eps).sqrt()
    return (x - mu) / den * w + b


def _ln_one_pass(x, w, b, eps):
    var = x.pow(2).mean(-1, keepdim=True) - x.mean(-1, keepdim=True).pow(2)
    return (x - x.mean(-1, keepdim=True)) / (var + eps).sqrt() * w + b


def _ln_detached(x, w, b, eps):
    mu = x.mean(-1, keepdim=True).detach()
    var = x.var(-1, unbiased=False, keepdim=True).detach()
    return (x - mu) / (var + eps).sqrt() * w + b


def _x_hat(x, eps):
    return nl.layer_norm(x, x.shape[-1], eps=eps)


def _upcast(f):
    """The mutant computed in float32 for float16/bfloat16 input, as a careful learner would."""
    def g(x, w, b, e):
        if x.dtype in (torch.float16, torch.bfloat16):
            return f(x.float(), w.float(), b.float(), e).to(x.dtype)
        return f(x, w, b, e)
    return g


LAYER_NORM_MUTANTS = [(key, _upcast(f)) for key, f in [
    ("unbiased_and_eps_outside", lambda x, w, b, e: _ln(x, w, b, e, unbiased=True, outside=True)),
    ("unbiased_variance", lambda x, w, b, e: _ln(x, w, b, e, unbiased=True)),
    ("eps_outside_sqrt", lambda x, w, b, e: _ln(x, w, b, e, outside=True)),
    ("eps_ignored", lambda x, w, b, e: _ln(x, w, b, 1e-5)),
    ("eps_ignored", lambda x, w, b, e: _ln(x, w, b, 1e-6)),
    ("no_eps", lambda x, w, b, e: _ln(x, w, b, 0.0)),
    ("batch_axis", lambda x, w, b, e: _ln(x, w, b, e, dims=0)),
    ("all_dims", lambda x, w, b, e: _ln(x, w, b, e, dims=tuple(range(x.dim())))),
    ("wrong_axis", lambda x, w, b, e: _ln(x, w, b, e, dims=-2)),
    ("missing_keepdim", lambda x, w, b, e: _ln(x, w, b, e, keepdim=False)),
    ("one_pass_variance", _ln_one_pass),
    ("divides_by_variance", lambda x, w, b, e: (x - x.mean(-1, keepdim=True))
     / (x.var(-1, unbiased=False, keepdim=True) + e) * w + b),
    ("weight_bias_swapped", lambda x, w, b, e: _x_hat(x, e) * b + w),
    ("no_affine", lambda x, w, b, e: _x_hat(x, e)),
    ("detached_statistics", _ln_detached),
]] + [("no_upcast", lambda x, w, b, e: _ln(x, w, b, e))]


_LN_FORBIDDEN = {"layer_norm": "F.layer_norm (or nn.LayerNorm)",
                 "native_layer_norm": "torch.native_layer_norm",
                 "group_norm": "F.group_norm"}


def check_layer_norm(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(x, weight, bias, eps=1e-5)``, LayerNorm over the last dim, against nl.layer_norm."""
    s = Session("LayerNorm", LAYER_NORM_MISTAKES, exercise="layer_norm",
                time_limit=time_limit, forbidden=_LN_FORBIDDEN,
                references={nl.layer_norm: "nl.layer_norm", nl.LayerNorm.forward: "nl.LayerNorm"},
                error_hints=((BROADCAST_ERROR, "missing_keepdim"),))
    if not s.require_callable(fn):
        return s.result()

    def forward(x, w, b, eps, tol_factor=1.0, pass_eps=True):
        def check():
            got = s.call(fn, x, w, b, eps=eps) if pass_eps else s.call(fn, x, w, b)
            want = nl.layer_norm(x, x.shape[-1], w, b, eps)
            scale = float(want.abs().max())
            s.expect_close(got, want, tol=tolerance(x.dtype, scale, tol_factor),
                           mutants=bind(LAYER_NORM_MUTANTS, x, w, b, eps))
        return check

    def inputs(*shape, seed, dtype=torch.float32, scale=2.0, offset=0.5):
        C = shape[-1]
        return (randn(*shape, seed=seed, dtype=dtype, scale=scale, offset=offset),
                randn(C, seed=seed + 1, dtype=dtype, scale=0.3, offset=1.0),
                randn(C, seed=seed + 2, dtype=dtype))

    x, w, b = inputs(2, 5, 8, seed=10)
    s.run(label(x.dtype, x.shape) + ", default eps", forward(x, w, b, 1e-5, pass_eps=False))
    x, w, b = inputs(3, 7, seed=20, dtype=torch.float64)
    s.run(label(x.dtype, x.shape, "odd size"), forward(x, w, b, 1e-5))
    x, w, b = inputs(4, 4, seed=30)
    s.run(label(x.dtype, x.shape, "square"), forward(x, w, b, 1e-5))
    x, w, b = inputs(2, 3, 6, seed=40, dtype=torch.float64)
    s.run(label(x.dtype, x.shape, "a batch of 2"), forward(x, w, b, 1e-5))
    x, w, b = inputs(3, 6, seed=50, dtype=torch.float64)
    x[0], x[2] = 3.0, -1.0
    s.run(label(x.dtype, x.shape, "constant rows"), forward(x, w, b, 1e-5))
    x, w, b = inputs(3, 16, seed=60, dtype=torch.float64, scale=1e-3, offset=0.2)
    s.run(label(x.dtype, x.shape, "rows with std 1e-3"), forward(x, w, b, 1e-5))
    x, w, b = inputs(3, 8, seed=70, dtype=torch.float64, scale=0.3)
    s.run(label(x.dtype, x.shape, "eps=0.1"), forward(x, w, b, 0.1))
    x, w, b = inputs(2, 64, seed=80, scale=1.0, offset=3000.0)
    s.run(label(x.dtype, x.shape, "mean 3000, std 1"), forward(x, w, b, 1e-5, tol_factor=100))
    x, w, b = inputs(2, 16, seed=90, scale=1e4, offset=0.0)
    s.run(label(x.dtype, x.shape, "large magnitudes"), forward(x, w, b, 1e-5))
    # half precision: a correct LayerNorm computed in the input's dtype errs by <= 0.7% of the
    # output's scale (bfloat16, measured), x.std(-1) + eps by >= 3.7%: the tolerances sit between
    for seed, dtype, factor in ((100, torch.float16, 4), (110, torch.bfloat16, 1)):
        x, w, b = inputs(2, 5, 8, seed=seed, dtype=dtype)
        s.run(label(dtype, x.shape), forward(x, w, b, 1e-5, tol_factor=factor))
    x, w, b = inputs(2, 8, seed=115, dtype=torch.float16, scale=400.0, offset=100.0)
    s.run(label(x.dtype, x.shape, "|x - mean| above 256"), forward(x, w, b, 1e-5, tol_factor=4))
    x, w, b = inputs(3, 6, seed=120, dtype=torch.float64)
    s.run(label(x.dtype, x.shape, "backward (x, weight, bias)"), lambda: s.expect_grads(
        lambda x, w, b: fn(x, w, b, eps=1e-5), lambda x, w, b: nl.layer_norm(x, 6, w, b, 1e-5),
        {"x": x, "weight": w, "bias": b},
        mutants=[(k, (lambda *a, f=f: f(*a, 1e-5))) for k, f in LAYER_NORM_MUTANTS]))
    s.probe(*norm_probes(s, lambda x, w, b, eps: output(s, fn, x, w, b, eps=eps, like=x),
                         centred=True))
    return s.result()
