"""The GELU (tanh approximation) checker, and the mistakes it can name.

The learner writes ``gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, GPT-2's
form and ``F.gelu(x, approximate="tanh")``. The reference is ``nl.gelu(x, approximate="tanh")``.
"""

from __future__ import annotations

import math

import torch

import normlib as nl

from ._cases import Case, run_backward, run_cases
from ._compare import randn
from ._generic import catalogue
from ._probes import fmt, near, output
from ._session import Session
from .result import CheckResult

__all__ = ["check_gelu_tanh", "GELU_MISTAKES", "GELU_MUTANTS"]

GELU_MISTAKES = catalogue("gelu_tanh", {
    "exact_erf": ("exact erf GELU", "that is the exact GELU, 0.5 x (1 + erf(x / sqrt 2)); the "
                  "exercise asks for the tanh approximation (they differ by up to about 4.7e-4).",
                  "用了精确的 erf 形式 GELU：本练习要求 tanh 近似。"),
    "sigmoid_approximation": ("x * sigmoid(1.702 x)", "that is the sigmoid approximation "
                              "x * sigmoid(1.702 x), off by up to 0.02; write the tanh form.",
                              "用了 x * sigmoid(1.702 x) 近似：本练习要求 tanh 近似。"),
    "silu_instead": ("SiLU", "that is SiLU, x * sigmoid(x), a different activation.",
                     "写成了 SiLU：GELU 的 tanh 近似是 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))。"),
    "missing_half": ("missing 0.5", "the factor 0.5 is missing: 0.5 x (1 + tanh(...)).",
                     "漏掉了系数 0.5。"),
    "square_not_cube": ("x^2 instead of x^3", "the inner term is x + 0.044715 x^3 (a cube).",
                        "写成了 x^2：应为 x^3 项。"),
    "no_cubic_term": ("no 0.044715 x^3 term", "the inner term is sqrt(2/pi) (x + 0.044715 x^3); "
                      "the cubic correction is missing.",
                      "漏掉了 0.044715 x^3 项。"),
    "wrong_sqrt_constant": ("wrong sqrt(2/pi)", "the constant is sqrt(2 / pi) = 0.7979; check "
                            "for 2 / pi, sqrt(pi / 2) or a missing sqrt.",
                            "常数 sqrt(2/pi) = 0.7979 写错了：检查是否写成了 2 / pi、sqrt(pi / 2)，"
                            "或漏了开方。"),
    "tanh_overflow": ("tanh from exp overflows", "tanh written with exp, (e^2z - 1) / (e^2z + 1), "
                      "gives inf / inf = NaN for large |x|; use torch.tanh.",
                      "用 exp 手写的 tanh 在大输入下溢出：用 torch.tanh，或数值稳定的写法。"),
    "cubic_coefficient": ("wrong cubic coefficient", "the cubic term is 0.044715 x^3: 0.5 x (1 + "
                          "tanh(sqrt(2/pi) (x + 0.044715 x^3))).",
                          "三次项系数不对：应为 0.044715 x^3。"),
    "missing_one": ("the 1 + is missing", "0.5 x (1 + tanh(...)): without the 1, large negative x "
                    "does not give 0.",
                    "漏掉了 1 +：应为 0.5 x (1 + tanh(...))，否则大的负 x 不会趋于 0。"),
    "negative_tail": ("wrong negative tail", "for large negative x GELU goes to 0.",
                      "负半轴的尾部不对：x 取很大的负值时，GELU 趋于 0。"),
    "not_times_x": ("not multiplied by x", "GELU is x times a weight between 0 and 1: 0.5 x (1 + "
                    "tanh(...)).",
                    "没有乘以 x：GELU 是 x 乘以一个 0 到 1 之间的权重。"),
    "tails": ("wrong tails", "GELU is about x for large x and about 0 for large negative x.",
              "两端的渐近行为不对：x 很大时 GELU 约等于 x，x 很负时约等于 0。"),
})


_C = math.sqrt(2 / math.pi)


def _tanh_form(x, c=_C, k=0.044715, power=3, half=0.5):
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = half * xf * (1 + torch.tanh(c * (xf + k * xf.pow(power))))
    return y.type_as(x)


def _exp_tanh(x):
    z = math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3))
    e = torch.exp(2 * z)
    return 0.5 * x * (1 + (e - 1) / (e + 1))


GELU_MUTANTS = [
    ("exact_erf", lambda x: nl.gelu(x)),
    ("sigmoid_approximation", lambda x: x * torch.sigmoid(1.702 * x)),
    ("silu_instead", lambda x: x * torch.sigmoid(x)),
    ("missing_half", lambda x: _tanh_form(x, half=1.0)),
    ("square_not_cube", lambda x: _tanh_form(x, power=2)),
    ("no_cubic_term", lambda x: _tanh_form(x, k=0.0)),
    ("wrong_sqrt_constant", lambda x: _tanh_form(x, c=2 / math.pi)),
    ("wrong_sqrt_constant", lambda x: _tanh_form(x, c=math.sqrt(math.pi / 2))),
    ("wrong_sqrt_constant", lambda x: _tanh_form(x, c=math.sqrt(2 * math.pi))),
    ("tanh_overflow", _exp_tanh),
]


def _reference(x):
    return nl.gelu(x, approximate="tanh")


CASES = [
    Case("x from -6 to 6", lambda: (torch.linspace(-6, 6, 121),)),
    Case("odd size", lambda: (randn(3, 7, seed=10, dtype=torch.float64, scale=3.0),)),
    Case("large magnitudes", lambda: (torch.tensor(
        [-1e4, -100.0, -30.0, -10.0, 10.0, 30.0, 100.0, 1e4]),)),
    Case("", lambda: (randn(2, 4, 8, seed=20, dtype=torch.float16, scale=3.0),), tol_factor=2),
    Case("", lambda: (randn(2, 4, 8, seed=30, dtype=torch.bfloat16, scale=3.0),), tol_factor=2),
]
BACKWARD = Case("backward", lambda: (randn(3, 5, seed=40, dtype=torch.float64, scale=2.0),))


def check_gelu_tanh(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(x)``, GELU's tanh approximation, against nl.gelu(x, approximate="tanh")."""
    s = Session("GELU (tanh)", GELU_MISTAKES, exercise="gelu_tanh",
                time_limit=time_limit,
                forbidden={"gelu": "F.gelu (or nn.GELU)"}, references={nl.gelu: "nl.gelu"})
    if not s.require_callable(fn):
        return s.result()

    run_cases(s, fn, CASES, reference=_reference, mutants=GELU_MUTANTS)
    run_backward(s, fn, BACKWARD, ("x",), reference=_reference, mutants=GELU_MUTANTS)
    s.probe(*_probes(s, fn))
    return s.result()


def _probes(s: Session, fn) -> list:
    """GELU at chosen points, float64: the tails (x = +-10, +-30: x and 0), then the inner term
    u(x) = atanh(2 f(x) / x - 1) at x = 0.5, 1, 1.5, which for the tanh form is
    c x + c k x^3: fitted c and k against sqrt(2/pi) = 0.797885 and 0.044715."""

    def f(*points):
        x = torch.tensor(points, dtype=torch.float64)
        return output(s, fn, x, like=x)

    def tails():
        y = f(10.0, 30.0, -10.0, -30.0)
        want = torch.tensor([10.0, 30.0, 0.0, 0.0], dtype=torch.float64)
        if near(y, want, 1e-6, 1e-6):
            return None
        shown = f"f(10) = {fmt(float(y[0]))}, f(-10) = {fmt(float(y[2]))}"
        if near(y, torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=torch.float64), 1e-6, 1e-6):
            return ("not_times_x", f"{shown}: your values stay between 0 and 1, the weight "
                    "Phi(x) alone. GELU multiplies it by x: 0.5 x (1 + tanh(...)).")
        if near(y, 2 * want, 1e-6, 1e-6):
            return ("missing_half", f"{shown}: twice GELU's (x for large x). The factor 0.5 "
                    "is missing: 0.5 x (1 + tanh(...)).")
        if near(y, torch.tensor([5.0, 15.0, 5.0, 15.0], dtype=torch.float64), 1e-6, 1e-6):
            return ("missing_one", f"{shown}: 0.5 |x| on both sides. The 1 + is missing: "
                    "0.5 x (1 + tanh(...)), so that large negative x gives 0.")
        if near(y[:2], want[:2], 1e-6, 1e-6):
            return ("negative_tail", f"{shown}: for large negative x GELU goes to 0 (x times "
                    "a weight that goes to 0, 1 + tanh(-large) = 0); yours does not. Check the "
                    "function inside: tanh, not sigmoid, in 0.5 x (1 + tanh(...)).")
        return ("tails", f"{shown}: GELU is about x for large x and about 0 for large negative x.")

    def inner():
        pts = (0.5, 1.0, 1.5)
        x = torch.tensor(pts, dtype=torch.float64)
        a = 2 * f(*pts) / x - 1
        if not bool((a.abs() < 1).all()):
            return None
        u = torch.atanh(a) / x                           # c + c k x^2 for the tanh form
        ck = float((u[1] - u[0]) / (x[1] ** 2 - x[0] ** 2))
        c = float(u[0] - ck * x[0] ** 2)
        if abs(float(u[2]) - (c + ck * float(x[2]) ** 2)) > 1e-6:
            return None                                  # not of the tanh form: the catalogue
        k = ck / c
        if abs(c - _C) > 1e-6:
            return ("wrong_sqrt_constant", f"Fitting your function to 0.5 x (1 + tanh(c (x + k "
                    f"x^3))) gives c = {fmt(c)}: the constant is sqrt(2 / pi) = {fmt(_C)} (check "
                    "for sqrt(2) / pi, 2 / pi or sqrt(pi / 2)).")
        if abs(k - 0.044715) > 1e-6:
            if abs(k) < 1e-9:
                return ("no_cubic_term", "Fitting your function to 0.5 x (1 + tanh(c (x + k x^3))) "
                        "gives k = 0: the cubic correction 0.044715 x^3 is missing.")
            where = " (0.044715 sits outside the bracket: it must be multiplied by sqrt(2/pi) " \
                "too)" if abs(ck - 0.044715) < 1e-6 else ""
            return ("cubic_coefficient", f"Fitting your function to 0.5 x (1 + tanh(c (x + k "
                    f"x^3))) gives c = {fmt(c)} (right) and k = {fmt(k)}: the cubic coefficient "
                    f"is 0.044715{where}.")
        return None

    return [tails, inner]
