"""The LayerNorm checker, and the mistakes it can name.

The learner writes ``layer_norm(x, weight, bias, eps=1e-5)`` over the last dim of x; the reference
is ``nl.layer_norm`` (equal to ``F.layer_norm``). Each mutant below is one classic mistake, written
out; a learner's output that matches a mutant (and not the reference) gets that mistake's
explanation.
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

__all__ = ["check_layer_norm", "LAYER_NORM_MISTAKES", "LAYER_NORM_MUTANTS"]

_NORM_MISTAKES = norm_mistakes(
    "LayerNorm", stat="std", stats="mean and variance", reduce="x.mean(-1, keepdim=True)",
    wrong="(x - mu) / (sigma + eps)", right="sqrt(var + eps)", small="small spread", zero_row="a constant row",
    overflow="the variance of values more than 256 from their mean",
    zh={"name": "层归一化", "stat": "标准差", "stats": "均值和方差", "right": "sqrt(方差 + eps)",
        "small": "离散程度小", "zero_row": "常数行", "overflow": "偏离均值超过 256 的值的方差"})


LAYER_NORM_MISTAKES = catalogue("layer_norm", {
    **_NORM_MISTAKES,
    "wrong_axis": ("normalized over the wrong dim", "you normalize over a dim other than the last "
                   "(dim -2?); LayerNorm reduces over dim -1, the features of each token.",
                   "在最后一维以外的维度上做了归一化：应在 dim -1 上求统计量。"),
    "unbiased_and_eps_outside": ("x.std(-1) + eps", "you divide by x.std(-1) + eps: torch.std is "
                                 "unbiased (n - 1) by default and eps sits outside the sqrt. "
                                 "nn.LayerNorm uses the biased variance and eps inside: "
                                 "(x - mu) / sqrt(var + eps), var = x.var(-1, unbiased=False).",
                                 "除以了 x.std(-1) + eps：torch.std 默认是无偏方差（n - 1）"
                                 "，且 eps 在开方之外。"),
    "unbiased_variance": ("unbiased variance (n - 1)", "you divide by the unbiased standard "
                          "deviation (n - 1); LayerNorm uses the biased variance (divide by n): "
                          "x.var(-1, unbiased=False, keepdim=True).",
                          "用了无偏方差（除以 n - 1）：应使用有偏方差（除以 n），x.var(-1, unbiased=False)。"),
    "one_pass_variance": ("var = E[x²] - E[x]²", "you compute the variance as E[x^2] - E[x]^2, "
                          "which cancels catastrophically when the mean is large compared with the "
                          "spread; subtract the mean first: ((x - mu) ** 2).mean(-1).",
                          "用 E[x^2] - E[x]^2 计算方差：均值远大于离散程度时会严重抵消，应先减去均值。"),
    "divides_by_variance": ("divided by the variance", "you divide by the variance, not by its "
                            "square root (the standard deviation).",
                            "除以了方差本身，而不是它的平方根（标准差）。"),
    "weight_bias_swapped": ("weight and bias swapped", "weight (gamma) must scale and bias (beta) "
                            "must shift: y = x_hat * weight + bias.",
                            "weight 和 bias 用反了：y = x_hat * weight + bias。"),
    "no_affine": ("weight and bias unused", "you return the normalized x without applying weight "
                  "and bias: y = x_hat * weight + bias.",
                  "没有应用 weight 和 bias：y = x_hat * weight + bias。"),
    "not_centred": ("mean not subtracted", "LayerNorm subtracts each row's mean.",
                    "没有减去每一行的均值（去均值）。"),
    "not_std": ("divided by something other than the std", "LayerNorm divides by sqrt(var + eps).",
                "除以的不是 sqrt(方差 + eps)。"),
    "bias_unused": ("bias unused", "add the bias last: y = x_hat * weight + bias.",
                    "没有用到 bias：最后加上它，y = x_hat * weight + bias。"),
    "weight_unused": ("weight unused", "multiply by the weight: y = x_hat * weight + bias.",
                      "没有用到 weight：乘上它，y = x_hat * weight + bias。"),
    "affine_order": ("bias added before the weight", "y = x_hat * weight + bias, not "
                     "(x_hat + bias) * weight.",
                     "先加 bias 再乘 weight：应为 x_hat * weight + bias，而不是 (x_hat + bias) * weight。"),
    "affine": ("weight and bias misapplied", "y = x_hat * weight + bias.",
               "weight 和 bias 用错了：y = x_hat * weight + bias。"),
})


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


def _reference(x, w, b, eps):
    return nl.layer_norm(x, x.shape[-1], w, b, eps)


def _x(shape, seed, dtype=torch.float32, scale=2.0, offset=0.5, rows=None):
    """x ~ 0.5 + 2 N(0, 1) unless a case says otherwise, weight and bias."""
    return norm_inputs(shape, seed, dtype, n_params=2, scale=scale, offset=offset, rows=rows)


_EPS = {"eps": 1e-5}
CASES = [
    Case("default eps", _x((2, 5, 8), 10), _EPS, defaults=("eps",)),
    Case("odd size", _x((3, 7), 20, torch.float64), _EPS),
    Case("square", _x((4, 4), 30), _EPS),
    Case("a batch of 2", _x((2, 3, 6), 40, torch.float64), _EPS),
    Case("constant rows", _x((3, 6), 50, torch.float64, rows={0: 3.0, 2: -1.0}), _EPS),
    Case("rows with std 1e-3", _x((3, 16), 60, torch.float64, scale=1e-3, offset=0.2), _EPS),
    Case("eps=0.1", _x((3, 8), 70, torch.float64, scale=0.3), {"eps": 0.1}),
    Case("mean 3000, std 1", _x((2, 64), 80, scale=1.0, offset=3000.0), _EPS, tol_factor=100),
    Case("large magnitudes", _x((2, 16), 90, scale=1e4, offset=0.0), _EPS),
    # half precision: a correct LayerNorm computed in the input's dtype errs by <= 0.7% of the
    # output's scale (bfloat16, measured), x.std(-1) + eps by >= 3.7%: the tolerances sit between
    Case("", _x((2, 5, 8), 100, torch.float16), _EPS, tol_factor=4),
    Case("", _x((2, 5, 8), 110, torch.bfloat16), _EPS),
    Case("|x - mean| above 256", _x((2, 8), 115, torch.float16, scale=400.0, offset=100.0), _EPS,
         tol_factor=4),
]
BACKWARD = Case("backward (x, weight, bias)", _x((3, 6), 120, torch.float64), _EPS)


def check_layer_norm(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(x, weight, bias, eps=1e-5)``, LayerNorm over the last dim, against nl.layer_norm."""
    s = Session("LayerNorm", LAYER_NORM_MISTAKES, exercise="layer_norm",
                time_limit=time_limit, forbidden=_LN_FORBIDDEN,
                references={nl.layer_norm: "nl.layer_norm", nl.LayerNorm.forward: "nl.LayerNorm"},
                error_hints=((BROADCAST_ERROR, "missing_keepdim"),))
    if not s.require_callable(fn):
        return s.result()

    run_cases(s, fn, CASES, reference=_reference, mutants=LAYER_NORM_MUTANTS)
    run_backward(s, fn, BACKWARD, ("x", "weight", "bias"), reference=_reference,
                 mutants=LAYER_NORM_MUTANTS)
    s.probe(*norm_probes(s, lambda x, w, b, eps: output(s, fn, x, w, b, eps=eps, like=x),
                         centred=True))
    return s.result()
