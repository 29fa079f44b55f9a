"""The GELU (tanh approximation) checker, and the mistakes it can name.

The learner writes ``gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, GPT-2's
form and ``F.gelu(x, approximate="tanh")``. The reference is ``nl.gelu(x, approximate="tanh")``.
"""

from __future__ import annotations

import math

import torch

import normlib as nl

from ._compare import bind, label, randn, tolerance
from ._session import Session
from .result import CheckResult

__all__ = ["check_gelu_tanh", "GELU_MISTAKES", "GELU_MUTANTS"]

GELU_MISTAKES = {
    "exact_erf": ("exact erf GELU", "that is the exact GELU, 0.5 x (1 + erf(x / sqrt 2)); the "
                  "exercise asks for the tanh approximation (they differ by up to about 4.7e-4)."),
    "sigmoid_approximation": ("x * sigmoid(1.702 x)", "that is the sigmoid approximation "
                              "x * sigmoid(1.702 x), off by up to 0.02; write the tanh form."),
    "silu_instead": ("SiLU", "that is SiLU, x * sigmoid(x), a different activation."),
    "missing_half": ("missing 0.5", "the factor 0.5 is missing: 0.5 x (1 + tanh(...))."),
    "square_not_cube": ("x^2 instead of x^3", "the inner term is x + 0.044715 x^3 (a cube)."),
    "no_cubic_term": ("no 0.044715 x^3 term", "the inner term is sqrt(2/pi) (x + 0.044715 x^3); "
                      "the cubic correction is missing."),
    "wrong_sqrt_constant": ("wrong sqrt(2/pi)", "the constant is sqrt(2 / pi) = 0.7979; check "
                            "for 2 / pi, sqrt(pi / 2) or a missing sqrt."),
    "tanh_overflow": ("tanh from exp overflows", "tanh written with exp, (e^2z - 1) / (e^2z + 1), "
                      "gives inf / inf = NaN for large |x|; use torch.tanh."),
}


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


def check_gelu_tanh(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(x)``, GELU's tanh approximation, against nl.gelu(x, approximate="tanh")."""
    s = Session("GELU (tanh)", GELU_MISTAKES, time_limit=time_limit,
                forbidden={"gelu": "F.gelu (or nn.GELU)"}, references={nl.gelu: "nl.gelu"})
    if not s.require_callable(fn):
        return s.result()

    def forward(x, note="", factor=1.0):
        def check():
            got = s.call(fn, x)
            want = nl.gelu(x, approximate="tanh")
            s.expect_close(got, want, tol=tolerance(x.dtype, float(want.abs().max()), factor),
                           mutants=bind(GELU_MUTANTS, x))
        s.run(label(x.dtype, x.shape, note), check)

    forward(torch.linspace(-6, 6, 121), "x from -6 to 6")
    forward(randn(3, 7, seed=10, dtype=torch.float64, scale=3.0), "odd size")
    forward(torch.tensor([-1e4, -100.0, -30.0, -10.0, 10.0, 30.0, 100.0, 1e4]),
            "large magnitudes")
    forward(randn(2, 4, 8, seed=20, dtype=torch.float16, scale=3.0), factor=2)
    forward(randn(2, 4, 8, seed=30, dtype=torch.bfloat16, scale=3.0), factor=2)
    x = randn(3, 5, seed=40, dtype=torch.float64, scale=2.0)
    s.run(label(x.dtype, x.shape, "backward"), lambda: s.expect_grads(
        fn, lambda x: nl.gelu(x, approximate="tanh"), {"x": x}, mutants=GELU_MUTANTS))
    return s.result()
