"""The LayerNorm backward checker (手推 LayerNorm 反向传播), and the mistakes it can name.

The learner writes ``layer_norm_backward(dy, x, weight, eps=1e-5) -> (dx, dweight, dbias)`` by
hand, without autograd, for y = x_hat * weight + bias over the last dim (N = x.shape[-1]):

    x_hat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps)   (biased var),  g = dy * weight
    dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))      (means over the last dim)
    dweight = sum(dy * x_hat),  dbias = sum(dy)               (sums over every dim but the last)

The reference is autograd through ``nl.layer_norm`` (equal to F.layer_norm), in float64.
"""

from __future__ import annotations

import torch

import normlib as nl

from ._cases import Case, expect, run_cases
from ._compare import randn
from ._generic import catalogue
from ._probes import fmt, near
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_layer_norm_backward", "LN_BACKWARD_MISTAKES", "LN_BACKWARD_MUTANTS"]

LN_BACKWARD_MISTAKES = catalogue("layer_norm_backward", {
    "missing_mean_term": ("missing the mean term", "dx misses the - mean(g) term (g = dy * weight): "
                          "the mean subtracted in the forward pass depends on every x_j, and its "
                          "gradient is that term. dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)).",
                          "dx 漏掉了 - mean(g) 项（g = dy * weight）：前向传播减去的均值依赖于每个 x_j，"
                          "这一项就是它的梯度。dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))。"),
    "missing_xhat_term": ("missing the x_hat term", "dx misses the - x_hat * mean(g * x_hat) term: "
                          "the variance depends on every x_j, and its gradient is that term. "
                          "dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)).",
                          "dx 漏掉了 - x_hat * mean(g * x_hat) 项：方差依赖于每个 x_j，"
                          "这一项就是它的梯度。dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))。"),
    "wrong_n": ("wrong N", "the correction terms are means over the N = x.shape[-1] features of each "
                "row: divide the sums by N (not N - 1, not the batch size).",
                "dx 里的 N 不对：修正项是对每一行 N = x.shape[-1] 个特征求均值，和要除以 N（不是 N - 1，"
                "也不是批次大小）。"),
    "weight_forgotten": ("weight left out of dx", "dx flows through the weight first: use "
                         "g = dy * weight, not dy, inside dx.",
                         "dx 里漏掉了 weight：先算 g = dy * weight。"),
    "unbiased_variance": ("unbiased variance (n - 1)", "rstd and x_hat use the unbiased variance "
                          "(torch.var's default divides by N - 1); LayerNorm's forward uses the "
                          "biased one: x.var(-1, unbiased=False).",
                          "用了无偏方差（除以 n - 1）：应使用有偏方差（除以 n），x.var(-1, unbiased=False)。"),
    "dx_scale": ("dx wrongly scaled", "dx is scaled by rstd = 1 / sqrt(var + eps), with the biased "
                 "variance (divide by N) and eps inside the square root.",
                 "dx 的缩放不对：应乘以 rstd = 1 / sqrt(方差 + eps)，用有偏方差（除以 N）"
                 "，eps 在开方之内。"),
    "dx_form": ("dx not of LayerNorm's form", "dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)), "
                "g = dy * weight, means over the last dim.",
                "dx 不符合层归一化反向传播的形式。"),
    "dweight_with_x": ("dweight uses x, not x_hat", "dweight = sum(dy * x_hat) over every dim but "
                       "the last: the weight multiplies the normalized x.",
                       "dweight 用了 x：应为 (dy * x_hat) 对最后一维以外的所有维度求和，"
                       "weight 乘的是归一化之后的 x。"),
    "dweight": ("wrong dweight", "dweight = sum(dy * x_hat) over every dim but the last.",
                "dweight 不对：(dy * x_hat) 对最后一维以外的维度求和。"),
    "dbias": ("wrong dbias", "dbias = sum(dy) over every dim but the last.",
              "dbias 不对：dy 对最后一维以外的维度求和。"),
    "grads_not_summed": ("dweight or dbias not summed", "weight and bias are shared by every row: "
                         "their gradients sum over every dim but the last, shape (N,).",
                         "weight 和 bias 由每一行共享：dweight 和 dbias 要对最后一维以外的所有维度求和（结果形状为 (N,)）"
                         "。"),
    "not_a_triple": ("not (dx, dweight, dbias)", "return a tuple (dx, dweight, dbias) of tensors.",
                     "返回的不是 (dx, dweight, dbias)。"),
})


def _parts(x, eps, unbiased=False):
    """(x_hat, rstd) of LayerNorm over the last dim (biased variance unless told)."""
    mu = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, unbiased=unbiased, keepdim=True) + eps)
    return (x - mu) * rstd, rstd


def _by_hand(dy, x, w, eps, *, a=1.0, b=1.0, use_weight=True, unbiased=False, with_x=False):
    """The formula with the mistakes as options: a and b scale the mean and x_hat terms."""
    x_hat, rstd = _parts(x, eps, unbiased)
    g = dy * w if use_weight else dy
    dx = rstd * (g - a * g.mean(-1, keepdim=True) - b * x_hat * (g * x_hat).mean(-1, keepdim=True))
    lead = tuple(range(x.dim() - 1))
    dw = (dy * (x if with_x else x_hat)).sum(lead)
    return dx, dw, dy.sum(lead)


def _n_ratio(x):
    return x.shape[-1] / (x.shape[-1] - 1)


LN_BACKWARD_MUTANTS = [
    ("missing_mean_term", lambda dy, x, w, e: _by_hand(dy, x, w, e, a=0.0)),
    ("missing_xhat_term", lambda dy, x, w, e: _by_hand(dy, x, w, e, b=0.0)),
    ("wrong_n", lambda dy, x, w, e: _by_hand(dy, x, w, e, a=_n_ratio(x), b=_n_ratio(x))),
    ("weight_forgotten", lambda dy, x, w, e: _by_hand(dy, x, w, e, use_weight=False)),
    ("unbiased_variance", lambda dy, x, w, e: _by_hand(dy, x, w, e, unbiased=True)),
    ("dweight_with_x", lambda dy, x, w, e: _by_hand(dy, x, w, e, with_x=True)),
]


def _reference(dy, x, w, eps):
    """dx, dweight, dbias by autograd through nl.layer_norm."""
    xl, wl = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    bl = torch.zeros_like(wl, requires_grad=True)
    with torch.enable_grad():
        nl.layer_norm(xl, x.shape[-1], wl, bl, eps).backward(dy)
    return xl.grad, wl.grad, bl.grad


_NO_AUTOGRAD = {torch.autograd.grad: "torch.autograd.grad", torch.Tensor.backward: ".backward()",
                torch.autograd.backward: "torch.autograd.backward",
                torch.func.vjp: "torch.func.vjp", torch.func.grad: "torch.func.grad"}


def _inputs(*shape, seed, dtype=torch.float64, scale=2.0, constant_row=None):
    """dy ~ N(0, 1), x ~ 0.5 + scale N(0, 1) (row ``constant_row`` set to 2), weight ~ 1 + 0.3
    N(0, 1)."""
    def build():
        x = randn(*shape, seed=seed, dtype=dtype, scale=scale, offset=0.5)
        if constant_row is not None:
            x[constant_row] = 2.0
        w = randn(shape[-1], seed=seed + 1, dtype=dtype, scale=0.3, offset=1.0)
        return randn(*shape, seed=seed + 2, dtype=dtype), x, w
    return build


_EPS = {"eps": 1e-5}
CASES = [
    Case("default eps", _inputs(4, 8, seed=10), _EPS, defaults=("eps",), tol_factor=2),
    Case("odd N, a batch of 2", _inputs(2, 3, 5, seed=20), _EPS, tol_factor=2),
    Case("rows of std 0.05, eps=0.1", _inputs(3, 16, seed=30, scale=0.05), {"eps": 0.1},
         tol_factor=2),
    Case("a constant row", _inputs(3, 6, seed=40, constant_row=1), _EPS, tol_factor=2),
    Case("", _inputs(2, 5, 8, seed=50, dtype=torch.float32), _EPS, tol_factor=2),
]


def check_layer_norm_backward(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(dy, x, weight, eps=1e-5) -> (dx, dweight, dbias)`` against autograd."""
    s = Session("LayerNorm backward", LN_BACKWARD_MISTAKES, exercise="layer_norm_backward",
                time_limit=time_limit,
                forbidden={"native_layer_norm_backward": "torch's LayerNorm backward"},
                references=_NO_AUTOGRAD,
                vague=("dx_form",))
    if not s.require_callable(fn):
        return s.result()

    def judge(out, args, case):
        dy, x, w, eps = args
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            raise Fail(f"returned {type(out).__name__}, expected a tuple (dx, dweight, dbias)",
                       "returned_none" if out is None else "not_a_triple")
        N = x.shape[-1]
        for name, t, shape in zip(("dx", "dweight", "dbias"), out, (x.shape, (N,), (N,)),
                                  strict=True):
            if isinstance(t, torch.Tensor) and t.shape == x.shape and shape == (N,) != x.shape:
                raise Fail(f"{name} has shape {tuple(t.shape)}, expected ({N},): not summed over "
                           "the rows", "grads_not_summed")
        for i, name in enumerate(("dx", "dweight", "dbias")):
            expect(s, out[i], args, reference=lambda *a, i=i: _reference(*a)[i],
                   mutants=[(k, (lambda *a, f=f, i=i: f(*a)[i])) for k, f in LN_BACKWARD_MUTANTS],
                   tol_factor=case.tol_factor, what=name)

    run_cases(s, fn, CASES, judge=judge)
    s.probe(*_probes(s, fn))
    return s.result()


def _probes(s: Session, fn) -> list:
    """dbias and dweight against their sums; then dx fitted per row as
    c * rstd * (g - a * mean(g) - b * x_hat * mean(g * x_hat)): c, a and b must all be 1; and dx
    must double when the weight doubles."""
    N = 8
    x = randn(5, N, seed=1000, dtype=torch.float64, scale=2.0, offset=0.5)
    dy = randn(5, N, seed=1001, dtype=torch.float64)
    w = torch.ones(N, dtype=torch.float64)
    x_hat, rstd = _parts(x, 1e-5)

    def call(weight):
        out = s.call(fn, dy, x, weight, eps=1e-5)
        if not isinstance(out, (tuple, list)) or len(out) != 3 or not all(
                isinstance(t, torch.Tensor) and bool(t.isfinite().all()) for t in out):
            raise Fail("unusable output")
        return [t.detach().double() for t in out]

    def dbias():
        got = call(w)[2]
        if near(got, dy.sum(0), 1e-6, 1e-9):
            return None
        return ("dbias", f"dbias = {fmt(float(got[0]))}, ... but dy summed over the rows is "
                f"{fmt(float(dy.sum(0)[0]))}, ...: dbias = dy.sum over every dim but the last.")

    def dweight():
        got = call(w)[1]
        if near(got, (dy * x_hat).sum(0), 1e-6, 1e-9):
            return None
        if near(got, (dy * _parts(x, 1e-5, unbiased=True)[0]).sum(0), 1e-6, 1e-9):
            return ("unbiased_variance", "Your dweight is sum(dy * x_hat) with x_hat from the "
                    "unbiased variance (N - 1): LayerNorm divides by N, x.var(-1, unbiased=False).")
        if near(got, (dy * x).sum(0), 1e-6, 1e-9):
            return ("dweight_with_x", "Your dweight is sum(dy * x): the weight multiplies the "
                    "normalized x, so dweight = sum(dy * x_hat).")
        return ("dweight", "Your dweight is not sum(dy * x_hat) over the rows.")

    def dx():
        got = call(w)[0]
        g = dy * w
        basis = torch.stack((rstd * g, -rstd * g.mean(-1, keepdim=True).expand_as(g),
                             -rstd * x_hat * (g * x_hat).mean(-1, keepdim=True)), -1)  # (5, N, 3)
        coef = torch.linalg.lstsq(basis, got.unsqueeze(-1)).solution.squeeze(-1)    # (5, 3)
        if not near(basis @ coef.unsqueeze(-1), got.unsqueeze(-1), 1e-5, 1e-8) or not near(
                coef, coef.mean(0).expand_as(coef), 1e-5, 1e-8):
            return ("dx_form", "Your dx is not of the form c * rstd * (g - a * mean(g) - b * x_hat * "
                    "mean(g * x_hat)) with fixed c, a, b: start from dx = rstd * (g - mean(g) - "
                    "x_hat * mean(g * x_hat)), g = dy * weight.")
        c, a, b = (float(v) for v in coef.mean(0))
        a, b = a / c, b / c
        measured = f"(fitted: scale {fmt(c)}, mean term {fmt(a)}, x_hat term {fmt(b)})"
        if all(abs(v - 1) < 1e-5 for v in (c, a, b)):
            return None
        if abs(a) < 1e-5 and abs(b - 1) < 1e-5:
            return ("missing_mean_term", "Your dx does not sum to 0 over a row: the - mean(g) term "
                    "is missing. LayerNorm's output does not change when a constant is added to a "
                    f"row, so dx must be orthogonal to (1, ..., 1) {measured}.")
        if abs(b) < 1e-5 and abs(a - 1) < 1e-5:
            return ("missing_xhat_term", "Your dx is not orthogonal to x_hat: the - x_hat * "
                    "mean(g * x_hat) term, the gradient through the variance, is missing. "
                    f"LayerNorm's output does not change when a row is scaled {measured}.")
        if abs(a - b) < 1e-5:
            return ("wrong_n", f"Both correction terms are {fmt(a)} times too large "
                    f"(N / (N - 1) = {fmt(N / (N - 1))} with N = {N}): they are means over the N "
                    f"features, divide by N {measured}.")
        if abs(a - 1) < 1e-5 and abs(b - 1) < 1e-5:
            return ("dx_scale", f"Your dx has the right shape but is {fmt(c)} times too large: "
                    "scale it by rstd = 1 / sqrt(var + eps), biased variance, eps inside "
                    f"{measured}.")
        return ("dx_form", f"Your dx has the terms of LayerNorm's backward with wrong weights "
                f"{measured}; all three must be 1.")

    def weight():
        d1, d2 = call(w)[0], call(2 * w)[0]
        if near(d2, 2 * d1, 1e-6, 1e-9) or near(d1, torch.zeros_like(d1), 0, 1e-12):
            return None
        if near(d2, d1, 1e-6, 1e-9):
            return ("weight_forgotten", "Doubling the weight leaves your dx unchanged: dx flows "
                    "through the weight, use g = dy * weight.")
        return None

    return [dbias, dweight, weight, dx]
