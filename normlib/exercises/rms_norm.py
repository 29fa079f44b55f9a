"""The RMSNorm checker, and the mistakes it can name.

The learner writes ``rms_norm(x, weight, eps=1e-6)`` over the last dim of x, computing in float32
for fp16/bf16 inputs and returning the input's dtype (HF ``LlamaRMSNorm``). The reference is
``nl.rms_norm`` (equal to ``F.rms_norm``): y = x / sqrt(mean(x^2) + eps) * weight.
"""

from __future__ import annotations

import torch

import normlib as nl

from ._cases import Case, norm_inputs, run_backward, run_cases
from ._compare import BROADCAST_ERROR
from ._generic import catalogue
from ._probes import norm_probes, output
from ._session import Session
from ._shared import norm_mistakes
from .result import CheckResult

__all__ = ["check_rms_norm", "RMS_NORM_MISTAKES", "RMS_NORM_MUTANTS"]

_NORM_MISTAKES = norm_mistakes(
    "RMSNorm", stat="RMS", stats="mean square", reduce="x.pow(2).mean(-1, keepdim=True)",
    wrong="x / (rms + eps)", right="sqrt(mean(x^2) + eps)", small="small magnitude",
    zero_row="an all-zero row",
    overflow="x^2 for |x| > 256",
    zh={"name": "均方根归一化", "stat": "均方根", "stats": "均方值 mean(x^2)",
        "right": "sqrt(mean(x^2) + eps)", "small": "幅度小", "zero_row": "全零行",
        "overflow": " |x| > 256 时 x^2 "})

RMS_NORM_MISTAKES = catalogue("rms_norm", {
    **_NORM_MISTAKES,
    "mean_subtracted": ("mean subtracted", "you subtract the mean: that is LayerNorm. RMSNorm only "
                        "re-scales, y = x / sqrt(mean(x^2) + eps) * weight, with no centring "
                        "(Zhang & Sennrich 2019).",
                        "减去了均值，那是层归一化：均方根归一化只做重缩放，y = x / sqrt(mean(x^2) + eps) * weight，"
                        "不去均值（Zhang & Sennrich 2019）。"),
    "l2_norm": ("divided by the L2 norm", "you divide by the L2 norm ||x||, not by the root *mean* "
                "square: the output is too small by sqrt(d). Use x.pow(2).mean(-1, keepdim=True).",
                "除以了 L2 范数：均方根归一化除以 sqrt(mean(x^2) + eps)，两者差 sqrt(n) 倍。"),
    "divides_by_mean_square": ("no sqrt", "you divide by mean(x^2) itself; RMSNorm divides by its "
                               "square root.",
                               "没有开方：除以的是 mean(x^2) 本身，均方根归一化除以它的平方根 sqrt(mean(x^2) + eps)。"),
    "gemma_one_plus": ("(1 + weight) as in Gemma", "you scale by (1 + weight), Gemma's variant; "
                       "this exercise (LLaMA, torch) scales by weight itself.",
                       "乘的是 (1 + weight)，那是 Gemma 的变体：这里是 x_hat * weight。"),
    "no_weight": ("weight unused", "you return the normalized x without multiplying by weight.",
                  "没有用到 weight：把归一化后的 x 乘以 weight。"),
    "not_rms": ("divided by something other than the RMS", "RMSNorm divides by "
                "sqrt(mean(x^2) + eps), the mean over the d features.",
                "除以的不是均方根 sqrt(mean(x^2) + eps)。"),
    "weight_not_scaling": ("weight not a scale", "multiply by the weight: x_hat * weight.",
                           "weight 没有作为缩放系数：应乘以 weight，x_hat * weight。"),
})


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


def _reference(x, w, eps):
    return nl.rms_norm(x, x.shape[-1], w, eps)


def _x(shape, seed, dtype=torch.float32, scale=1.0, offset=1.0, rows=None):
    """x ~ 1 + N(0, 1) unless a case says otherwise, and a weight."""
    return norm_inputs(shape, seed, dtype, n_params=1, scale=scale, offset=offset, rows=rows)


_EPS = {"eps": 1e-6}
CASES = [
    Case("default eps", _x((2, 5, 8), 10), _EPS, defaults=("eps",)),
    Case("odd size", _x((3, 7), 20, torch.float64), _EPS),
    Case("square", _x((4, 4), 30), _EPS),
    Case("a batch of 2", _x((2, 3, 6), 40, torch.float64), _EPS),
    Case("an all-zero row", _x((3, 6), 50, torch.float64, rows={1: 0.0}), _EPS),
    Case("rms 1e-3", _x((3, 16), 60, torch.float64, scale=1e-3, offset=0.0), _EPS),
    Case("eps=0.1", _x((3, 8), 70, torch.float64, scale=0.3), {"eps": 0.1}),
    Case("", _x((2, 5, 8), 80, torch.float16), _EPS, tol_factor=2),
    Case("|x| up to 1000", _x((2, 5, 8), 90, torch.float16, scale=150.0, offset=400.0), _EPS,
         tol_factor=2),
    Case("", _x((2, 5, 8), 100, torch.bfloat16), _EPS, tol_factor=2),
]
BACKWARD = Case("backward (x, weight)", _x((3, 6), 110, torch.float64), _EPS)


def check_rms_norm(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(x, weight, eps=1e-6)``, RMSNorm over the last dim, against nl.rms_norm."""
    s = Session("RMSNorm", RMS_NORM_MISTAKES, exercise="rms_norm",
                time_limit=time_limit, forbidden=_RMS_FORBIDDEN,
                references={nl.rms_norm: "nl.rms_norm", nl.RMSNorm.forward: "nl.RMSNorm"},
                error_hints=((BROADCAST_ERROR, "missing_keepdim"),))
    if not s.require_callable(fn):
        return s.result()

    run_cases(s, fn, CASES, reference=_reference, mutants=RMS_NORM_MUTANTS)
    run_backward(s, fn, BACKWARD, ("x", "weight"), reference=_reference,
                 mutants=RMS_NORM_MUTANTS)
    s.probe(*norm_probes(s, lambda x, w, b, eps: output(s, fn, x, w, eps=eps, like=x),
                         centred=False))
    return s.result()
