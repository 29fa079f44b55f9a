"""The RMSNorm checker, and the mistakes it can name.

The learner writes ``rms_norm(x, weight, eps=1e-6)`` over the last dim of x, computing in float32
for fp16/bf16 inputs and returning the input's dtype (HF ``LlamaRMSNorm``). The reference is
``nl.rms_norm`` (equal to ``F.rms_norm``): y = x / sqrt(mean(x^2) + eps) * weight.
"""

from __future__ import annotations

import torch

import normlib as nl

from ._compare import BROADCAST_ERROR, bind, label, randn, tolerance
from ._probes import norm_probes, output
from ._session import Session
from .result import CheckResult

__all__ = ["check_rms_norm", "RMS_NORM_MISTAKES", "RMS_NORM_MUTANTS"]

RMS_NORM_MISTAKES = {
    "mean_subtracted": ("mean subtracted", "you subtract the mean: that is LayerNorm. RMSNorm only "
                        "re-scales, y = x / sqrt(mean(x^2) + eps) * weight, with no centring "
                        "(Zhang & Sennrich 2019)."),
    "no_upcast": ("no float32 upcast", "you compute in float16: x^2 overflows (float16 stops at "
                  "65504, so |x| > 256 gives inf) and the output collapses. Compute in float32 "
                  "(x.float()), then cast back with .type_as(x), as LLaMA does."),
    "eps_outside_sqrt": ("eps outside the sqrt", "eps sits outside the square root: "
                         "x / (rms + eps). torch, LLaMA and HF add it inside: "
                         "x * rsqrt(mean(x^2) + eps)."),
    "no_eps": ("no eps", "you leave out eps, so an all-zero row divides 0 by 0 (NaN)."),
    "eps_ignored": ("eps argument ignored", "your function ignores its eps argument (a fixed "
                    "value?): use the eps passed in."),
    "l2_norm": ("divided by the L2 norm", "you divide by the L2 norm ||x||, not by the root *mean* "
                "square: the output is too small by sqrt(d). Use x.pow(2).mean(-1, keepdim=True)."),
    "divides_by_mean_square": ("no sqrt", "you divide by mean(x^2) itself; RMSNorm divides by its "
                               "square root."),
    "batch_axis": ("normalized over the batch (dim 0)", "you average over the batch (dim 0); "
                   "RMSNorm averages each row over its last dim."),
    "all_dims": ("one RMS for the whole tensor", "you take one RMS over all dims; RMSNorm takes one "
                 "per row, over the last dim."),
    "missing_keepdim": ("missing keepdim=True", "the mean of squares lost its last dim: without "
                        "keepdim=True it broadcasts along the wrong axis (or fails). Use "
                        "x.pow(2).mean(-1, keepdim=True)."),
    "gemma_one_plus": ("(1 + weight) as in Gemma", "you scale by (1 + weight), Gemma's variant; "
                       "this exercise (LLaMA, torch) scales by weight itself."),
    "no_weight": ("weight unused", "you return the normalized x without multiplying by weight."),
    "not_scaled": ("not divided by the RMS", "RMSNorm divides by sqrt(mean(x^2) + eps)."),
    "not_rms": ("divided by something other than the RMS", "RMSNorm divides by "
                "sqrt(mean(x^2) + eps), the mean over the d features."),
    "weight_not_scaling": ("weight not a scale", "multiply by the weight: x_hat * weight."),
    "axis": ("RMS over more than the last dim", "RMSNorm takes one RMS per row."),
    "detached_statistics": ("RMS detached", "the RMS is detached from autograd (.detach(), .item() "
                            "or .data): the backward pass must flow through it too."),
    "eps_wrong": ("not the eps passed", "add the eps argument itself inside the square root: "
                  "sqrt(mean(x^2) + eps)."),
}


def _rms(x, w, eps, dims=-1, keepdim=True, outside=False, upcast=True):
    xf = x.float() if upcast and x.dtype in (torch.float16, torch.bfloat16) else x
    ms = xf.pow(2).mean(dims, keepdim=keepdim)
    y = xf / (ms.sqrt() + eps) if outside else xf * torch.rsqrt(ms + eps)
    return y.type_as(x) * w


def _centred(x, w, eps):
    return nl.layer_norm(x, x.shape[-1], eps=eps) * w


RMS_NORM_MUTANTS = [
    ("mean_subtracted", _centred),
    ("mean_subtracted", lambda x, w, e: _rms(x - x.mean(-1, keepdim=True), w, e)),
    ("no_upcast", lambda x, w, e: _rms(x, w, e, upcast=False)),
    ("eps_outside_sqrt", lambda x, w, e: _rms(x, w, e, outside=True)),
    ("eps_ignored", lambda x, w, e: _rms(x, w, 1e-6)),
    ("eps_ignored", lambda x, w, e: _rms(x, w, 1e-5)),
    ("no_eps", lambda x, w, e: _rms(x, w, 0.0)),
    ("l2_norm", lambda x, w, e: x / x.norm(dim=-1, keepdim=True) * w),
    ("divides_by_mean_square", lambda x, w, e: x / (x.pow(2).mean(-1, keepdim=True) + e) * w),
    ("batch_axis", lambda x, w, e: _rms(x, w, e, dims=0)),
    ("all_dims", lambda x, w, e: _rms(x, w, e, dims=tuple(range(x.dim())))),
    ("missing_keepdim", lambda x, w, e: _rms(x, w, e, keepdim=False)),
    ("gemma_one_plus", lambda x, w, e: _rms(x, 1 + w, e)),
    ("no_weight", lambda x, w, e: _rms(x, torch.ones_like(w), e)),
    ("detached_statistics", lambda x, w, e: x * torch.rsqrt(
        x.pow(2).mean(-1, keepdim=True) + e).detach() * w),
]

_RMS_FORBIDDEN = {"rms_norm": "F.rms_norm (or nn.RMSNorm)", "_fused_rms_norm": "torch's fused RMSNorm"}


def check_rms_norm(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(x, weight, eps=1e-6)``, RMSNorm over the last dim, against nl.rms_norm."""
    s = Session("RMSNorm", RMS_NORM_MISTAKES, exercise="rms_norm",
                time_limit=time_limit, forbidden=_RMS_FORBIDDEN,
                references={nl.rms_norm: "nl.rms_norm", nl.RMSNorm.forward: "nl.RMSNorm"},
                error_hints=((BROADCAST_ERROR, "missing_keepdim"),))
    if not s.require_callable(fn):
        return s.result()

    def forward(x, w, eps, tol_factor=1.0, pass_eps=True):
        def check():
            got = s.call(fn, x, w, eps=eps) if pass_eps else s.call(fn, x, w)
            want = nl.rms_norm(x, x.shape[-1], w, eps)
            s.expect_close(got, want, tol=tolerance(x.dtype, float(want.abs().max()), tol_factor),
                           mutants=bind(RMS_NORM_MUTANTS, x, w, eps))
        return check

    def inputs(*shape, seed, dtype=torch.float32, scale=1.0, offset=1.0):
        return (randn(*shape, seed=seed, dtype=dtype, scale=scale, offset=offset),
                randn(shape[-1], seed=seed + 1, dtype=dtype, scale=0.3, offset=1.0))

    x, w = inputs(2, 5, 8, seed=10)
    s.run(label(x.dtype, x.shape) + ", default eps", forward(x, w, 1e-6, pass_eps=False))
    x, w = inputs(3, 7, seed=20, dtype=torch.float64)
    s.run(label(x.dtype, x.shape, "odd size"), forward(x, w, 1e-6))
    x, w = inputs(4, 4, seed=30)
    s.run(label(x.dtype, x.shape, "square"), forward(x, w, 1e-6))
    x, w = inputs(2, 3, 6, seed=40, dtype=torch.float64)
    s.run(label(x.dtype, x.shape, "a batch of 2"), forward(x, w, 1e-6))
    x, w = inputs(3, 6, seed=50, dtype=torch.float64)
    x[1] = 0.0
    s.run(label(x.dtype, x.shape, "an all-zero row"), forward(x, w, 1e-6))
    x, w = inputs(3, 16, seed=60, dtype=torch.float64, scale=1e-3, offset=0.0)
    s.run(label(x.dtype, x.shape, "rms 1e-3"), forward(x, w, 1e-6))
    x, w = inputs(3, 8, seed=70, dtype=torch.float64, scale=0.3)
    s.run(label(x.dtype, x.shape, "eps=0.1"), forward(x, w, 0.1))
    x, w = inputs(2, 5, 8, seed=80, dtype=torch.float16)
    s.run(label(x.dtype, x.shape), forward(x, w, 1e-6, tol_factor=2))
    x, w = inputs(2, 5, 8, seed=90, dtype=torch.float16, scale=150.0, offset=400.0)
    s.run(label(x.dtype, x.shape, "|x| up to 1000"), forward(x, w, 1e-6, tol_factor=2))
    x, w = inputs(2, 5, 8, seed=100, dtype=torch.bfloat16)
    s.run(label(x.dtype, x.shape), forward(x, w, 1e-6, tol_factor=2))
    x, w = inputs(3, 6, seed=110, dtype=torch.float64)
    s.run(label(x.dtype, x.shape, "backward (x, weight)"), lambda: s.expect_grads(
        lambda x, w: fn(x, w, eps=1e-6), lambda x, w: nl.rms_norm(x, 6, w, 1e-6),
        {"x": x, "weight": w},
        mutants=[(k, (lambda *a, f=f: f(*a, 1e-6))) for k, f in RMS_NORM_MUTANTS]))
    s.probe(*norm_probes(s, lambda x, w, b, eps: output(s, fn, x, w, eps=eps, like=x),
                         centred=False))
    return s.result()
