"""The SwiGLU feed-forward checker (Shazeer 2020; LLaMA's FFN), and the mistakes it can name.

The learner writes ``SwiGLUFFN(dim, hidden_dim)`` with bias-free ``w1`` (gate, dim -> hidden),
``w3`` (up, dim -> hidden) and ``w2`` (down, hidden -> dim), and
``forward(x) = w2(silu(w1 x) * w3 x)``. F.silu is allowed: the exercise is the gated FFN.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import normlib as nl

from ._cases import Case, expect_weight_grads, load_weights, new_module, run_cases
from ._compare import bind_last, randn
from ._generic import catalogue
from ._probes import near, output
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_swiglu_ffn", "SWIGLU_MISTAKES", "SWIGLU_MUTANTS"]

SWIGLU_MISTAKES = catalogue("swiglu_ffn", {
    "missing_projection": ("w1, w2 or w3 missing", "the module needs three bias-free linear layers: "
                           "w1 (gate) and w3 (up), dim -> hidden_dim, and w2 (down), "
                           "hidden_dim -> dim.",
                           "缺少 w1、w2 或 w3（名字不对或没有定义）。"),
    "has_bias": ("linear layers with bias", "LLaMA's SwiGLU FFN is bias-free (Shazeer 2020 omits "
                 "biases): nn.Linear(..., bias=False).",
                 "线性层带了 bias：应为 nn.Linear(..., bias=False)。"),
    "wrong_weight_shape": ("wrong weight shapes", "w1 and w3 map dim -> hidden_dim (weight shape "
                           "(hidden_dim, dim)); w2 maps hidden_dim -> dim (weight (dim, hidden_dim)).",
                           "权重形状不对：w1、w3 为 (hidden_dim, dim)，w2 为 (dim, hidden_dim)。"),
    "sigmoid_gate": ("sigmoid gate (GLU)", "the gate uses sigmoid: that is the original GLU "
                     "(Dauphin et al. 2017). SwiGLU gates with SiLU = Swish_1: x * sigmoid(x).",
                     "门控用了 sigmoid（GLU）：SwiGLU 用 SiLU。"),
    "gelu_gate": ("GELU gate (GEGLU)", "the gate uses GELU: that is GEGLU. SwiGLU gates with "
                  "SiLU: F.silu(w1(x)).",
                  "门控用了 GELU（GEGLU）：SwiGLU 用 SiLU。"),
    "relu_gate": ("ReLU gate (ReGLU)", "the gate uses ReLU: that is ReGLU. SwiGLU gates with SiLU.",
                  "门控用了 ReLU（ReGLU）：SwiGLU 用 SiLU。"),
    "no_gate_activation": ("no activation (bilinear)", "no activation on the gate: that is the "
                           "Bilinear variant. SwiGLU applies SiLU to w1(x).",
                           "门控没有激活函数（双线性）：SwiGLU 对 w1(x) 用 SiLU。"),
    "gate_up_swapped": ("gate and up swapped", "SiLU goes on w1 (the gate), not on w3 (the up "
                        "projection): w2(silu(w1(x)) * w3(x)). The weights are not "
                        "interchangeable once a checkpoint is loaded.",
                        "门控投影和上投影用反了：SiLU 作用在 w1（门控）上，w2(silu(w1(x)) * w3(x))。"),
    "silu_on_product": ("SiLU on the product", "SiLU applies to the gate alone, before the "
                        "product: silu(w1(x)) * w3(x), not silu(w1(x) * w3(x)).",
                        "SiLU 作用在了乘积上：应为 silu(w1(x)) * w3(x)。"),
    "no_up_projection": ("w3 unused (plain FFN)", "without the w3 branch this is a plain FFN, "
                         "w2(silu(w1 x)); SwiGLU multiplies by the up projection w3(x).",
                         "没有用到 w3（退化成普通前馈网络）：w2(silu(w1(x)) * w3(x))。"),
    "missing_down_projection": ("missing down projection w2", "the output has hidden_dim features: "
                                "apply the down projection w2 to bring it back to dim.",
                                "缺少下投影 w2：w2(silu(w1(x)) * w3(x))。"),
    "gate_activation": ("the gate's activation is not SiLU", "SwiGLU gates with SiLU: "
                        "w2(silu(w1 x) * w3 x).",
                        "门控的激活函数不是 SiLU：SwiGLU 是 w2(silu(w1(x)) * w3(x))。"),
    "gate_not_product": ("gate and up not multiplied", "the gate and the up projection are "
                         "multiplied element-wise: silu(w1 x) * w3 x.",
                         "门控和上投影没有逐元素相乘：应为 silu(w1(x)) * w3(x)。"),
    "output_not_from_w2": ("output not from w2", "everything the FFN returns goes through the down "
                           "projection w2.",
                           "输出没有全部经过下投影 w2。"),
    "residual_inside": ("residual inside the FFN", "the FFN returns w2(...) only: the block around "
                        "it adds the residual.",
                        "前馈网络内部加了残差：残差连接在块里，前馈网络只返回 w2(...)。"),
    "up_activated": ("SiLU on both branches", "only the gate w1 goes through SiLU; the up "
                     "projection w3 enters linearly.",
                     "两个分支都加了激活：只有门控分支 w1 用 SiLU，上投影 w3 是线性的。"),
})


def _ffn(x, W1, W2, W3, gate=F.silu, where="gate"):
    a, u = x @ W1.T, x @ W3.T
    if where == "swap":
        a, u = u, a
    h = gate(a * u) if where == "product" else gate(a) * (1 if where == "no_up" else u)
    return h @ W2.T


SWIGLU_MUTANTS = [
    ("sigmoid_gate", lambda x, W1, W2, W3: _ffn(x, W1, W2, W3, torch.sigmoid)),
    ("gelu_gate", lambda x, W1, W2, W3: _ffn(x, W1, W2, W3, F.gelu)),
    ("gelu_gate", lambda x, W1, W2, W3: _ffn(x, W1, W2, W3,
                                             lambda t: F.gelu(t, approximate="tanh"))),
    ("relu_gate", lambda x, W1, W2, W3: _ffn(x, W1, W2, W3, torch.relu)),
    ("no_gate_activation", lambda x, W1, W2, W3: _ffn(x, W1, W2, W3, lambda t: t)),
    ("gate_up_swapped", lambda x, W1, W2, W3: _ffn(x, W1, W2, W3, where="swap")),
    ("silu_on_product", lambda x, W1, W2, W3: _ffn(x, W1, W2, W3, where="product")),
    ("no_up_projection", lambda x, W1, W2, W3: _ffn(x, W1, W2, W3, where="no_up")),
    ("missing_down_projection", lambda x, W1, W2, W3: F.silu(x @ W1.T) * (x @ W3.T)),
]


def _weights(dim, hidden, seed, dtype):
    """W1, W2, W3 ~ N(0, 1 / fan_in)."""
    return [randn(*shape, seed=seed + i, dtype=dtype, scale=shape[1] ** -0.5)
            for i, shape in enumerate(((hidden, dim), (dim, hidden), (hidden, dim)))]


def _reference(x, W1, W2, W3):
    ffn = nl.GLUFeedForward(x.shape[-1], W1.shape[0]).to(x.dtype)
    with torch.no_grad():
        for layer, W in ((ffn.w1, W1), (ffn.w2, W2), (ffn.w3, W3)):
            layer.weight.copy_(W)
    return ffn(x).detach()


def _case(shape, hidden, seed, dtype=torch.float32, note=""):
    """x ~ 1.5 N(0, 1) of ``shape`` and the weights of a (shape[-1], hidden) FFN."""
    return Case(note + f"hidden {hidden}", lambda: (
        randn(*shape, seed=seed + 9, dtype=dtype, scale=1.5),
        *_weights(shape[-1], hidden, seed, dtype)))


CASES = [
    _case((2, 5, 8), 16, 10),
    _case((3, 5), 7, 20, torch.float64, "odd sizes, "),
    _case((2, 1, 6), 6, 30, note="a batch of 2, "),
    _case((2, 4, 8), 12, 40, torch.bfloat16),
]


def check_swiglu_ffn(cls, *, time_limit: float = 3.0) -> CheckResult:
    """Check the class ``cls(dim, hidden_dim)`` (w1, w2, w3; forward) against a SwiGLU FFN."""
    s = Session("SwiGLU FFN", SWIGLU_MISTAKES, exercise="swiglu_ffn",
                time_limit=time_limit,
                references={nl.GLUFeedForward.forward: "nl.GLUFeedForward",
                            nl.glu_variant: "nl.glu_variant"})
    if not s.require_callable(cls, "your class"):
        return s.result()

    def build(dim, hidden, dtype=torch.float32, seed=0, weights=None):
        m = new_module(s, cls, dim, hidden, what=f"SwiGLUFFN({dim}, {hidden})")
        for name, shape in (("w1", (hidden, dim)), ("w3", (hidden, dim)), ("w2", (dim, hidden))):
            layer = getattr(m, name, None)
            weight = getattr(layer, "weight", None)
            if not isinstance(weight, torch.Tensor):
                raise Fail(f"no linear layer {name}", "missing_projection")
            if tuple(weight.shape) != shape:
                raise Fail(f"{name}.weight has shape {tuple(weight.shape)}, expected {shape}",
                           "wrong_weight_shape")
            if getattr(layer, "bias", None) is not None:
                raise Fail(f"{name} has a bias", "has_bias")
        W1, W2, W3 = weights or _weights(dim, hidden, seed, dtype)
        m = load_weights(s, m, {"w1.weight": W1, "w2.weight": W2, "w3.weight": W3}, dtype)
        return m, W1, W2, W3

    def forward(cls, x, W1, W2, W3):
        m, *_ = build(x.shape[-1], W1.shape[0], x.dtype, weights=(W1, W2, W3))
        return s.call(m, x)

    def backward():
        m, W1, W2, W3 = build(5, 7, torch.float64, 50)
        x = randn(2, 3, 5, seed=59, dtype=torch.float64)
        s.expect_grads(lambda x: m(x), lambda x: _ffn(x, W1, W2, W3), {"x": x},
                       mutants=bind_last(SWIGLU_MUTANTS, W1, W2, W3))
        expect_weight_grads(m, _ffn, x, {"w1": W1, "w2": W2, "w3": W3})

    s.run("__init__(8, 16): bias-free w1, w3 (8 -> 16) and w2 (16 -> 8)",
          lambda: build(8, 16))
    run_cases(s, cls, CASES, reference=_reference, mutants=SWIGLU_MUTANTS, call=forward,
              prefix="forward ")
    s.run("backward float64: x, w1, w2, w3", backward)
    s.probe(*_probes(s, cls))
    return s.result()



def _probes(s: Session, cls) -> list:
    """Property probes with chosen weights (dim = hidden = 6): w2 = 0 (the output must vanish),
    then w1 = I, w3 = 2 I, w2 = I, where SwiGLU gives silu(x) * 2x: which activation gates, on
    which branch, and how the branches combine."""
    d = 6
    x = randn(5, d, seed=800, dtype=torch.float64, scale=2.0)
    eye = torch.eye(d, dtype=torch.float64)

    def run(W1, W2, W3):
        m = load_weights(s, s.call(cls, d, d), {"w1.weight": W1, "w2.weight": W2,
                                                "w3.weight": W3}, torch.float64)
        return output(s, m, x, like=x)

    def zero_down():
        y = run(eye, 0 * eye, 2 * eye)
        if near(y, torch.zeros_like(y), 0, 1e-9):
            return None
        if near(y, x, 1e-6, 1e-9):
            return ("residual_inside", "With w2 = 0 your output is x itself: you add the input "
                    "(a residual connection) inside the FFN. The block around it adds the "
                    "residual; the FFN returns w2(silu(w1(x)) * w3(x)) alone.")
        return ("output_not_from_w2", "With w2 = 0 your output is not 0: everything the FFN "
                "returns must go through the down projection w2.")

    def structure():
        y = run(eye, eye, 2 * eye)
        u = 2 * x
        known = [
            ("up_activated", F.silu(x) * F.silu(u), "SiLU on both branches, silu(w1 x) * "
             "silu(w3 x): only the gate w1 goes through SiLU"),
            ("gate_not_product", F.silu(x) + u, "the branches added, silu(w1 x) + w3 x: they are "
             "multiplied"),
            ("gate_up_swapped", F.silu(u) * x, "SiLU on w3 and the product with w1: the gate is "
             "w1, silu(w1(x)) * w3(x)"),
            ("silu_on_product", F.silu(x * u), "SiLU on the product, silu(w1 x * w3 x): SiLU applies "
             "to the gate alone"),
            ("no_up_projection", F.silu(x), "no w3 branch, silu(w1 x): SwiGLU multiplies by w3 x"),
        ]
        for key, want, text in known:
            if near(y, want, 1e-5, 1e-7):
                return (key, f"With w1 = I, w3 = 2 I and w2 = I your output is {text}.")
        gate = y / u                                    # the activation of w1 x, if y = g(w1 x) * u
        acts = [("sigmoid_gate", "sigmoid (GLU)", torch.sigmoid(x)),
                ("gelu_gate", "GELU (GEGLU)", F.gelu(x)),
                ("gelu_gate", "GELU, tanh form (GEGLU)", F.gelu(x, approximate="tanh")),
                ("relu_gate", "ReLU (ReGLU)", torch.relu(x)),
                ("no_gate_activation", "no activation (bilinear)", x),
                ("gate_activation", "tanh", torch.tanh(x))]
        if near(gate, F.silu(x), 1e-5, 1e-7):
            return None
        for key, name, g in acts:
            if near(gate, g, 1e-5, 1e-7):
                return (key, f"With w1 = I, w3 = 2 I and w2 = I your output is g(w1 x) * w3 x with "
                        f"g = {name}; SwiGLU's gate is SiLU, x * sigmoid(x) (F.silu).")
        return ("gate_activation", "With w1 = I, w3 = 2 I and w2 = I your output is not "
                "silu(w1 x) * w3 x: check the activation on the gate and how the branches combine.")

    return [zero_down, structure]
