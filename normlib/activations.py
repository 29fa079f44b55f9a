"""Activations, the GLU family (Shazeer 2020) and the two feed-forward networks (FFN).

Notation: B batch, T sequence, C = d_model, F = d_ff (hidden width of the FFN).
Each activation is written from its formula (ReLU and Leaky ReLU as the one torch op that computes
theirs: ``torch.where`` is slow on CPU) and tested against torch's own; fp16/bf16 inputs are
evaluated in float32 and cast back, as torch's kernels do.

Linear layers are named as in Meta's LLaMA: ``w1`` (gate / first projection), ``w3`` (up),
``w2`` (down). HF's LlamaMLP calls the same three gate_proj, up_proj and down_proj.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_choice, check_int, check_number, check_tensor, compute_dtype

__all__ = [
    "relu", "leaky_relu", "gelu", "swish", "silu", "ACTIVATIONS", "activation",
    "GLU_VARIANTS", "glu_variant", "FeedForward", "GLUFeedForward", "llama_ffn_hidden_dim",
]


def relu(x: torch.Tensor) -> torch.Tensor:
    """ReLU: max(0, x). At x = 0 the gradient is 0, as torch's; NaN stays NaN, as torch's (written
    ``x > 0``, a NaN would become 0 and hide a diverged run).

    ``F.threshold(x, 0.0, 0.0)`` is ``torch.where(x <= 0, 0.0, x)`` in one op: the same values and
    gradients, bit for bit, and on CPU about ten times faster, forward and backward (torch's
    ``where`` kernel is slow there: 1.6 ms against 0.17 ms for 147,456 floats, torch 2.13)."""
    check_tensor("relu", "x", x)
    return F.threshold(x, 0.0, 0.0)                 # x where x > 0, else 0


def leaky_relu(x: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    """Leaky ReLU: x for x > 0, negative_slope * x otherwise; the gradient at x = 0 is
    negative_slope, as torch's. Any real slope is accepted, as ``F.leaky_relu`` (a negative one
    makes the function non-monotonic).

    ``F.leaky_relu`` is ``torch.where(x > 0, x, x * negative_slope)`` in one op, bit for bit and
    about ten times faster on CPU, as ``relu``'s threshold."""
    check_tensor("leaky_relu", "x", x)
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, numbers.Real):
        raise TypeError(f"leaky_relu: negative_slope must be a number, "
                        f"got {type(negative_slope).__name__} {negative_slope!r}")
    return F.leaky_relu(x, negative_slope)          # x where x > 0, else negative_slope * x


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """GELU, x * Phi(x) with Phi the standard normal CDF, as ``F.gelu``.

    approximate="none": 0.5 x (1 + erf(x / sqrt(2)))                       (exact; HF BERT)
    approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))    (GPT-2; Google's BERT code)
    """
    check_tensor("gelu", "x", x)
    check_choice("gelu", "approximate", approximate, ("none", "tanh"))
    xf = x.to(compute_dtype(x))
    if approximate == "tanh":
        y = 0.5 * xf * (1 + torch.tanh(math.sqrt(2 / math.pi) * (xf + 0.044715 * xf.pow(3))))
    else:
        y = 0.5 * xf * (1 + torch.erf(xf / math.sqrt(2)))
    return y.type_as(x)


def swish(x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """Swish (Ramachandran et al. 2017): x * sigmoid(beta x).

    beta = 0 gives x / 2 (linear); beta -> infinity approaches ReLU; beta = 1 is SiLU.
    """
    check_tensor("swish", "x", x)
    check_number("swish", "beta", beta)
    xf = x.to(compute_dtype(x))
    return (xf * torch.sigmoid(beta * xf)).type_as(x)


def silu(x: torch.Tensor) -> torch.Tensor:
    """SiLU = Swish with beta = 1: x * sigmoid(x), as ``F.silu``."""
    return swish(x, 1.0)


# name -> function, used by the FFN and the GLU variants
ACTIVATIONS = {
    "relu": relu,
    "leaky_relu": leaky_relu,
    "gelu": gelu,
    "gelu_tanh": lambda x: gelu(x, approximate="tanh"),
    "swish": silu,
    "silu": silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def activation(name: str):
    """Look up an activation function by name (valid names: the keys of ``ACTIVATIONS``)."""
    check_choice("activation", "activation", name, ACTIVATIONS)
    return ACTIVATIONS[name]


# GLU variant -> the function applied to the gate, Shazeer 2020 eq. (4) (GLU, Bilinear) and (5)
_GATES = {
    "glu": torch.sigmoid,          # GLU      = sigmoid(xW) * xV     (Dauphin et al. 2017)
    "bilinear": lambda g: g,       # Bilinear = xW * xV
    "reglu": relu,                 # ReGLU    = max(0, xW) * xV
    "geglu": gelu,                 # GEGLU    = GELU(xW) * xV
    "swiglu": silu,                # SwiGLU   = Swish_1(xW) * xV
}
GLU_VARIANTS = tuple(_GATES)       # Shazeer 2020's five, the ones lesson 07 compares
# GEGLU with GELU's tanh form: Gemma's FFN (HF's activation "gelu_pytorch_tanh")
_GATES["geglu_tanh"] = lambda g: gelu(g, approximate="tanh")


def glu_variant(gate: torch.Tensor, up: torch.Tensor, variant: str) -> torch.Tensor:
    """Gated linear unit: act(gate) * up, with act chosen by ``variant`` (see ``GLU_VARIANTS``).

    Args:
        gate: (..., F), the projection xW that passes through the activation.
        up:   (..., F), the projection xV that it multiplies.
        variant: "glu" | "bilinear" | "reglu" | "geglu" | "swiglu" (``GLU_VARIANTS``), or
            "geglu_tanh" (GEGLU with ``gelu(approximate="tanh")``, as Gemma).
    Returns:
        (..., F).
    """
    check_tensor("glu_variant", "gate", gate)
    check_tensor("glu_variant", "up", up)
    check_choice("glu_variant", "variant", variant, _GATES)
    if gate.shape != up.shape:
        raise ValueError(f"glu_variant: gate and up must have the same shape, "
                         f"got {tuple(gate.shape)} and {tuple(up.shape)}")
    return _GATES[variant](gate) * up


class FeedForward(nn.Module):
    """The Transformer's position-wise FFN: w2(act(w1 x)), hidden width d_ff (usually 4 d_model).

    ``bias=False`` gives T5's bias-free FFN. activation: a name from ``ACTIVATIONS``.
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        check_int("FeedForward", "d_model", d_model, minimum=1)
        check_int("FeedForward", "d_ff", d_ff, minimum=1)
        check_choice("FeedForward", "activation", activation, ACTIVATIONS)
        self.activation = activation
        factory = {"device": device, "dtype": dtype}
        self.w1 = nn.Linear(d_model, d_ff, bias=bias, **factory)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias, **factory)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, T, C)
        return self.w2(ACTIVATIONS[self.activation](self.w1(x)))

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


class GLUFeedForward(nn.Module):
    """GLU-variant FFN (Shazeer 2020): w2(act(w1 x) * w3 x). SwiGLU is LLaMA's FFN.

    Three matrices instead of two, so d_ff is usually 2/3 of the plain FFN's to keep the
    parameter count (see ``llama_ffn_hidden_dim``). Biases are omitted by default, as in the paper.
    variant: a name of ``GLU_VARIANTS``, or "geglu_tanh" (Gemma's; see ``glu_variant``).
    """

    def __init__(self, d_model: int, d_ff: int, variant: str = "swiglu", bias: bool = False,
                 device=None, dtype=None):
        super().__init__()
        check_int("GLUFeedForward", "d_model", d_model, minimum=1)
        check_int("GLUFeedForward", "d_ff", d_ff, minimum=1)
        check_choice("GLUFeedForward", "variant", variant, _GATES)
        self.variant = variant
        factory = {"device": device, "dtype": dtype}
        self.w1 = nn.Linear(d_model, d_ff, bias=bias, **factory)   # gate  (HF gate_proj)
        self.w3 = nn.Linear(d_model, d_ff, bias=bias, **factory)   # up    (HF up_proj)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias, **factory)   # down  (HF down_proj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, T, C)
        return self.w2(glu_variant(self.w1(x), self.w3(x), self.variant))

    def extra_repr(self) -> str:
        return f"variant={self.variant!r}"


def llama_ffn_hidden_dim(dim: int, multiple_of: int = 256,
                         ffn_dim_multiplier: float | None = None) -> int:
    """LLaMA's FFN width (meta-llama model.py): 4 dim, times 2/3, times the multiplier,
    rounded *up* to a multiple of ``multiple_of``.

    >>> llama_ffn_hidden_dim(4096)                    # LLaMA 7B
    11008
    >>> llama_ffn_hidden_dim(4096, 1024, 1.3)         # LLaMA-3 8B
    14336
    """
    check_int("llama_ffn_hidden_dim", "dim", dim, minimum=1)
    check_int("llama_ffn_hidden_dim", "multiple_of", multiple_of, minimum=1)
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        check_number("llama_ffn_hidden_dim", "ffn_dim_multiplier", ffn_dim_multiplier,
                     positive=True)
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)
