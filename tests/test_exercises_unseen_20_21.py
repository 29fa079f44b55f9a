"""Exercises 20 and 21 (Gemma's GeGLU FFN, RoPE scaling): wrong answers the checkers' mutants never
saw, correct answers in other styles, and garbage (issue 35, as issue 33 item 5 set the bar).

Written from the practice notebooks' task texts alone, the way candidates err under time
pressure: each wrong answer is a learner's class or function with one slip, written out as a
learner writes it (not the checker's mutant tables), and names the diagnosis keys that describe its
mistake correctly. A result is
  - named correctly: its ``mistake`` is one of those keys;
  - cannot tell: the checker names no mistake ("cannot_tell", "wrong values", "NaN", "raised");
  - named wrongly: any other key;
  - passed: the checker missed it.
The target: at least 90% named correctly per exercise, none named wrongly, none passed; every
correct variant passes; every garbage answer gets a clean result (a code, no exception).
``python tests/test_exercises_unseen_20_21.py`` prints the table.
"""

from __future__ import annotations

import math
import sys

import pytest
import torch
import torch.nn.functional as F
import unseen
from torch import nn

import normlib as nl
from normlib import exercises as ex
from normlib.exercises import rope_scaling as rope_checker

CANNOT_TELL = {"cannot_tell", "wrong_values", "nan", "raised", "wrong_grad"}
C = math.sqrt(2 / math.pi)


# --------------------------------------------------------------------------- 20: GeGLU FFN
class GeGLU(nn.Module):
    """A right answer, the way the solution writes it; the wrong answers below change one line."""

    def __init__(self, d_model, hidden_dim):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, hidden_dim, bias=False)
        self.up_proj = nn.Linear(d_model, hidden_dim, bias=False)
        self.down_proj = nn.Linear(hidden_dim, d_model, bias=False)

    @staticmethod
    def gelu(g):
        return 0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))

    def forward(self, x):
        return self.down_proj(self.gelu(self.gate_proj(x)) * self.up_proj(x))


def act(f):
    """GeGLU with another activation on the gate."""
    return type("Learner", (GeGLU,), {"gelu": staticmethod(f)})


def fwd(f):
    """GeGLU with another forward."""
    return type("Learner", (GeGLU,), {"forward": f})


class BiasEverywhere(GeGLU):
    def __init__(self, d_model, hidden_dim):
        nn.Module.__init__(self)
        self.gate_proj = nn.Linear(d_model, hidden_dim)
        self.up_proj = nn.Linear(d_model, hidden_dim)
        self.down_proj = nn.Linear(hidden_dim, d_model)


class DimsSwapped(GeGLU):
    def __init__(self, d_model, hidden_dim):
        nn.Module.__init__(self)
        self.gate_proj = nn.Linear(hidden_dim, d_model, bias=False)
        self.up_proj = nn.Linear(hidden_dim, d_model, bias=False)
        self.down_proj = nn.Linear(d_model, hidden_dim, bias=False)


class ArgsSwapped(GeGLU):
    """__init__(self, hidden_dim, d_model): the arguments in the other order."""

    def __init__(self, hidden_dim, d_model):
        super().__init__(d_model, hidden_dim)


class LlamaNames(GeGLU):
    def __init__(self, d_model, hidden_dim):
        nn.Module.__init__(self)
        self.w1 = nn.Linear(d_model, hidden_dim, bias=False)
        self.w3 = nn.Linear(d_model, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, d_model, bias=False)

    def forward(self, x):
        return self.w2(self.gelu(self.w1(x)) * self.w3(x))


class RolesSwappedInInit(GeGLU):
    """up_proj built first and called 'gate' in forward: the names say one thing, the code another."""

    def forward(self, x):
        gate, up = self.up_proj(x), self.gate_proj(x)
        return self.down_proj(self.gelu(gate) * up)


def exp_tanh(g):
    z = C * (g + 0.044715 * g ** 3)
    return 0.5 * g * (1 + (torch.exp(z) - torch.exp(-z)) / (torch.exp(z) + torch.exp(-z)))


GEGLU = [
    ("exact GELU with torch.erf", act(lambda g: 0.5 * g * (1 + torch.erf(g / math.sqrt(2)))),
     {"exact_gelu"}),
    ("exact GELU as x * Phi(x) from the normal CDF",
     act(lambda g: g * torch.distributions.Normal(0.0, 1.0).cdf(g)), {"exact_gelu"}),
    ("SiLU by hand (SwiGLU)", act(lambda g: g * torch.sigmoid(g)), {"silu_gate"}),
    ("F.silu (SwiGLU)", act(F.silu), {"silu_gate"}),
    ("sigmoid approximation 1.702", act(lambda g: g * torch.sigmoid(1.702 * g)),
     {"gate_activation"}),
    ("ReLU on the gate", act(torch.relu), {"gate_activation"}),
    ("GELU on the up projection",
     fwd(lambda self, x: self.down_proj(self.gate_proj(x) * self.gelu(self.up_proj(x)))),
     {"gate_up_swapped"}),
    ("gate and up read from each other's layers", RolesSwappedInInit, {"gate_up_swapped"}),
    ("GELU after the product",
     fwd(lambda self, x: self.down_proj(self.gelu(self.gate_proj(x) * self.up_proj(x)))),
     {"gelu_on_product"}),
    ("GELU on both branches",
     fwd(lambda self, x: self.down_proj(self.gelu(self.gate_proj(x)) * self.gelu(self.up_proj(x)))),
     {"up_activated"}),
    ("branches added",
     fwd(lambda self, x: self.down_proj(self.gelu(self.gate_proj(x)) + self.up_proj(x))),
     {"gate_not_product"}),
    ("up projection forgotten", fwd(lambda self, x: self.down_proj(self.gelu(self.gate_proj(x)))),
     {"no_up_projection"}),
    ("down projection forgotten", fwd(lambda self, x: self.gelu(self.gate_proj(x)) * self.up_proj(x)),
     {"missing_down_projection"}),
    ("residual added inside",
     fwd(lambda self, x: x + self.down_proj(self.gelu(self.gate_proj(x)) * self.up_proj(x))),
     {"residual_inside"}),
    ("nn.Linear with its default bias", BiasEverywhere, {"has_bias"}),
    ("d_model and hidden_dim swapped in the layers", DimsSwapped, {"dims_swapped"}),
    ("__init__ arguments in the other order", ArgsSwapped, {"dims_swapped"}),
    ("LLaMA's names w1, w2, w3", LlamaNames, {"missing_projection"}),
    ("the 0.5 forgotten",
     act(lambda g: g * (1 + torch.tanh(C * (g + 0.044715 * g ** 3)))), {"missing_half"}),
    ("the 1 + forgotten", act(lambda g: 0.5 * g * torch.tanh(C * (g + 0.044715 * g ** 3))),
     {"missing_one"}),
    ("sqrt(pi / 2) for sqrt(2 / pi)",
     act(lambda g: 0.5 * g * (1 + torch.tanh(math.sqrt(math.pi / 2) * (g + 0.044715 * g ** 3)))),
     {"wrong_sqrt_constant"}),
    ("2 / pi, the sqrt forgotten",
     act(lambda g: 0.5 * g * (1 + torch.tanh(2 / math.pi * (g + 0.044715 * g ** 3)))),
     {"wrong_sqrt_constant"}),
    ("x^2 for x^3", act(lambda g: 0.5 * g * (1 + torch.tanh(C * (g + 0.044715 * g * g)))),
     {"square_not_cube"}),
    ("0.044715 x^3 outside the bracket",
     act(lambda g: 0.5 * g * (1 + torch.tanh(C * g + 0.044715 * g ** 3))), {"cubic_coefficient"}),
    ("0.0447 typed for 0.044715",
     act(lambda g: 0.5 * g * (1 + torch.tanh(C * (g + 0.0447 * g ** 3)))), {"cubic_coefficient"}),
    ("the cubic term forgotten", act(lambda g: 0.5 * g * (1 + torch.tanh(C * g))),
     {"no_cubic_term"}),
    ("tanh from exp", act(exp_tanh), {"tanh_overflow"}),
    ("F.gelu with approximate='tanh'", act(lambda g: F.gelu(g, approximate="tanh")),
     {"shortcut"}),
    ("nn.GELU('tanh')", act(lambda g: nn.GELU(approximate="tanh")(g)), {"shortcut"}),
]


class Float32Gelu(GeGLU):
    """Correct: the activation in float32 for any input dtype, cast back before the product."""

    def forward(self, x):
        g = self.gate_proj(x)
        a = self.gelu(g.float()).to(g.dtype)
        return self.down_proj(a * self.up_proj(x))


class SigmoidForm(GeGLU):
    """Correct: 0.5 (1 + tanh(z)) = sigmoid(2 z), so GELU's tanh form is g * sigmoid(2 z)."""

    @staticmethod
    def gelu(g):
        return g * torch.sigmoid(2 * C * (g + 0.044715 * torch.pow(g, 3)))


class FunctionalLinear(GeGLU):
    """Correct: F.linear with the layers' weights, the constant as a Python float."""

    def forward(self, x):
        g = F.linear(x, self.gate_proj.weight)
        h = 0.5 * g * (1.0 + torch.tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)))
        return F.linear(h * F.linear(x, self.up_proj.weight), self.down_proj.weight)


class GeluTanh(nn.Module):
    def forward(self, g):
        inner = math.sqrt(2.0 / math.pi) * (g + 0.044715 * torch.pow(g, 3.0))
        return 0.5 * g * (1.0 + inner.tanh())


class ActAsModule(nn.Module):
    """Correct: the activation as a submodule, as HF's ACT2FN; the layers built in another order."""

    def __init__(self, d_model, hidden_dim):
        super().__init__()
        self.down_proj = nn.Linear(hidden_dim, d_model, bias=False)
        self.up_proj = nn.Linear(d_model, hidden_dim, bias=False)
        self.gate_proj = nn.Linear(d_model, hidden_dim, bias=False)
        self.act_fn = GeluTanh()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


GEGLU_CORRECT = [("as the solution", GeGLU), ("float32 activation", Float32Gelu),
                 ("sigmoid(2 z) form", SigmoidForm), ("F.linear", FunctionalLinear),
                 ("activation as a submodule", ActAsModule)]


# --------------------------------------------------------------------------- garbage
def _raises(*a, **k):
    raise ValueError("not done yet")


def _exits(*a, **k):
    sys.exit(3)


class NotAModule:
    def __init__(self, *a, **k):
        pass


class BrokenInit(nn.Module):
    def __init__(self, d_model, hidden_dim):
        super().__init__()
        raise RuntimeError("typo in __init__")


GEGLU_GARBAGE = [
    None, 42, "GeGLUFFN", NotAModule, BrokenInit, nn.Linear, _raises,
    lambda d, h: nn.Identity(),
    fwd(lambda self, x: None),
    fwd(lambda self, x: (self.down_proj(self.gelu(self.gate_proj(x)) * self.up_proj(x)), None)),
    fwd(lambda self, x: torch.full_like(x, float("nan"))),
    fwd(lambda self, x: "output"),
    fwd(lambda self, x: x.sum()),
    fwd(_raises),
    fwd(_exits),
]


# --------------------------------------------------------------------------- 21: RoPE scaling
def hf_style(*, theta="ok", linear="ok", length="ok", scale="ok", exponent="ok", turns=(32, 1),
             two_pi=True, log=math.log, rounding="ok", index="pairs", clamp=True, blend="ok",
             attention="ok", attention_everywhere=False, dtype=torch.float32, returns="pair"):
    """A learner's answer written as HF's code reads (float32 arange, a nested find_correction_dim);
    each keyword other than its default is one slip."""
    def scaled_inv_freq(head_dim, base, factor, kind, original_max_position_embeddings=4096,
                        seq_len=None):
        dim, L = head_dim, original_max_position_embeddings

        def inv_freq_for(b):
            if theta == "half_exponent":
                return 1.0 / (b ** (torch.arange(0, dim // 2).float() / dim))
            if theta == "odd":
                return 1.0 / (b ** (torch.arange(1, dim, 2).float() / dim))
            return 1.0 / (b ** (torch.arange(0, dim, 2).float() / dim))

        attention_factor = 1.0
        if kind == "linear":
            inv_freq = inv_freq_for(base)
            inv_freq = inv_freq * factor if linear == "times" else inv_freq / factor
            if linear == "base":
                inv_freq = inv_freq_for(base * factor)
        elif kind == "dynamic":
            if length == "none_crashes":
                n = max(seq_len, L)
            else:
                n = max(seq_len or L, L) if length == "ok" else seq_len or L
            s = {"ok": factor * n / L - (factor - 1), "static": factor, "ratio": n / L}[scale]
            e = {"ok": dim / (dim - 2), "none": 1, "inverted": (dim - 2) / dim,
                 "d_minus_1": dim / (dim - 1)}[exponent]
            inv_freq = inv_freq_for(base * s ** e)
        else:
            def find_correction_dim(num_rotations):
                two = 2 * math.pi if two_pi else 1.0
                return (dim * math.log(L / (num_rotations * two))) / (2 * log(base))

            low, high = find_correction_dim(turns[0]), find_correction_dim(turns[1])
            if rounding == "ok":
                low, high = math.floor(low), math.ceil(high)
            low, high = max(low, 0), min(high, dim - 1)
            if low == high:
                high += 0.001
            i = torch.arange(dim // 2, dtype=torch.float32) if index == "pairs" else \
                torch.arange(0, dim, 2, dtype=torch.float32)
            ramp = (i - low) / (high - low)
            if clamp:
                ramp = torch.clamp(ramp, 0, 1)
            extrapolation_factor = 1 - ramp
            pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
            extra, inter = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
            if blend == "times":
                inter = factor / pos_freqs
            if blend == "swapped":
                inv_freq = inter * extrapolation_factor + extra * (1 - extrapolation_factor)
            else:
                inv_freq = inter * (1 - extrapolation_factor) + extra * extrapolation_factor
            attention_factor = {"ok": 0.1 * math.log(factor) + 1, "none": 1.0,
                                "log10": 0.1 * math.log10(factor) + 1,
                                "sqrt": math.sqrt(0.1 * math.log(factor) + 1),
                                "log2": 0.1 * math.log2(factor) + 1,
                                "inverse": 1 / (0.1 * math.log(factor) + 1)}[attention]
        if attention_everywhere:
            attention_factor = 0.1 * math.log(factor) + 1
        inv_freq = inv_freq.to(dtype)
        if returns == "freq":
            return inv_freq
        if returns == "dict":
            return {"inv_freq": inv_freq, "attention_factor": attention_factor}
        return inv_freq, attention_factor
    return scaled_inv_freq


def by_pairs(head_dim, base, factor, kind, original_max_position_embeddings=4096, seq_len=None):
    """Correct: one pair at a time with Python floats, a tensor at the end."""
    D, L = head_dim, original_max_position_embeddings
    if kind == "dynamic":
        n = L if seq_len is None or seq_len <= L else seq_len
        base = base * (factor * n / L - factor + 1) ** (D / (D - 2))
    lo = D * math.log(L / (2 * math.pi * 32)) / (2 * math.log(base))
    hi = D * math.log(L / (2 * math.pi)) / (2 * math.log(base))
    lo, hi = max(math.floor(lo), 0), min(math.ceil(hi), D - 1)
    out = []
    for i in range(D // 2):
        th = base ** (-2 * i / D)
        if kind == "linear":
            out.append(th / factor)
        elif kind == "dynamic":
            out.append(th)
        else:
            keep = 1 - min(max((i - lo) / ((hi - lo) or 0.001), 0.0), 1.0)
            out.append(keep * th + (1 - keep) * th / factor)
    a = 0.1 * math.log(factor) + 1 if kind == "yarn" and factor > 1 else 1.0
    return torch.tensor(out, dtype=torch.float32), a


def float64_then_tensor_factor(head_dim, base, factor, kind,
                               original_max_position_embeddings=4096, seq_len=None):
    """Correct: float64 throughout, a list returned, the attention factor as a 0-d tensor."""
    inv, a = hf_style()(head_dim, float(base), factor, kind, original_max_position_embeddings,
                        seq_len)
    return [inv, torch.tensor(a)]


ROPE = [
    ("linear: multiplied by the factor", hf_style(linear="times"), {"linear_multiplied"}),
    ("linear: base times the factor", hf_style(linear="base"), {"linear_scaling"}),
    ("theta from arange(D // 2) / D", hf_style(theta="half_exponent"), {"base_frequencies"}),
    ("theta from arange(1, D, 2)", hf_style(theta="odd"), {"base_frequencies"}),
    ("dynamic: the factor used as it is", hf_style(scale="static"), {"dynamic_static"}),
    ("dynamic: s = seq_len / L", hf_style(scale="ratio"), {"dynamic_scale"}),
    ("dynamic: no max with L", hf_style(length="no_max"), {"dynamic_short_scaled"}),
    ("dynamic: max(seq_len, L) with seq_len None", hf_style(length="none_crashes"),
     {"seq_len_none"}),
    ("dynamic: base * s", hf_style(exponent="none"), {"ntk_exponent_missing"}),
    ("dynamic: exponent (D - 2) / D", hf_style(exponent="inverted"), {"ntk_exponent_inverted"}),
    ("dynamic: exponent D / (D - 1)", hf_style(exponent="d_minus_1"), {"ntk_base"}),
    ("yarn: betas swapped", hf_style(turns=(1, 32)), {"ramp_reversed"}),
    ("yarn: blend swapped", hf_style(blend="swapped"), {"ramp_reversed"}),
    ("yarn: ramp over arange(0, D, 2)", hf_style(index="dims"), {"ramp_on_dims"}),
    ("yarn: bounds not floored / ceiled", hf_style(rounding="none"), {"ramp_not_rounded"}),
    ("yarn: 2 pi forgotten in the bounds", hf_style(two_pi=False), {"ramp_bounds"}),
    ("yarn: log10(base) in the bounds", hf_style(log=math.log10), {"ramp_bounds"}),
    ("yarn: ramp not clamped", hf_style(clamp=False), {"yarn_blend"}),
    ("yarn: interpolation multiplies by s", hf_style(blend="times"), {"yarn_blend"}),
    ("yarn: attention factor forgotten", hf_style(attention="none"), {"attention_factor_missing"}),
    ("yarn: log10 in the attention factor", hf_style(attention="log10"),
     {"attention_factor_log10"}),
    ("yarn: sqrt of the attention factor", hf_style(attention="sqrt"), {"attention_factor"}),
    ("yarn: log2 in the attention factor", hf_style(attention="log2"), {"attention_factor"}),
    ("yarn: 1 / attention factor", hf_style(attention="inverse"), {"attention_factor"}),
    ("attention factor for every kind", hf_style(attention_everywhere=True),
     {"attention_factor_other_kinds"}),
    ("float64 returned", hf_style(dtype=torch.float64), {"not_float32"}),
    ("inv_freq alone returned", hf_style(returns="freq"), {"not_a_pair"}),
    ("a dict returned", hf_style(returns="dict"), {"not_a_pair"}),
]

ROPE_CORRECT = [("as HF's code reads", hf_style()), ("one pair at a time", by_pairs),
                ("float64, a list, a 0-d tensor factor", float64_then_tensor_factor)]

ROPE_GARBAGE = [
    None, 42, "scaled_inv_freq", _raises, _exits,
    lambda *a, **k: None,
    lambda *a, **k: (None, 1.0),
    lambda *a, **k: (torch.ones(3), 1.0),
    lambda *a, **k: (torch.full((a[0] // 2,), float("nan")), 1.0),
    lambda *a, **k: ("inv_freq", "1.0"),
    lambda *a, **k: (torch.ones(a[0] // 2), None),
    lambda *a, **k: (torch.ones(a[0] // 2), float("nan")),
    lambda *a, **k: (torch.ones(a[0] // 2, 2), 1.0),
    lambda *a, **k: (torch.ones(a[0] // 2, dtype=torch.int64), 1),
]

CHECKERS = {"geglu_ffn": (ex.check_geglu_ffn, GEGLU, GEGLU_CORRECT),
            "rope_scaling": (ex.check_rope_scaling, ROPE, ROPE_CORRECT)}
GARBAGE = {"geglu_ffn": GEGLU_GARBAGE, "rope_scaling": ROPE_GARBAGE}


def test_each_exercise_has_at_least_12_unseen_wrong_answers():
    assert all(len(wrong) >= 12 for _, wrong, _ in CHECKERS.values())



# --------------------------------------------------------------------------- the checkers' own tables
def test_geglu_reference_equals_hf_gemma_mlp():
    """normlib's reference, nl.GLUFeedForward(variant="geglu_tanh"), equals HF's GemmaMLP built from
    a tiny GemmaConfig (nothing downloaded; hidden_act "gelu_pytorch_tanh", Gemma's default), and
    so does the solution's class with GemmaMLP's weights loaded by name."""
    from transformers.models.gemma import configuration_gemma, modeling_gemma
    config = configuration_gemma.GemmaConfig(hidden_size=8, intermediate_size=24)
    assert config.hidden_act == "gelu_pytorch_tanh"
    hf = modeling_gemma.GemmaMLP(config).double()
    mine = GeGLU(8, 24).double()
    mine.load_state_dict(hf.state_dict())                # the same names: gate/up/down_proj
    ref = nl.GLUFeedForward(8, 24, variant="geglu_tanh").double()
    ref.load_state_dict({"w1.weight": hf.gate_proj.weight, "w3.weight": hf.up_proj.weight,
                         "w2.weight": hf.down_proj.weight})
    x = torch.randn(2, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3
    with torch.no_grad():
        torch.testing.assert_close(ref(x), hf(x), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(mine(x), hf(x), rtol=1e-12, atol=1e-12)
    # GemmaMLP itself calls F.gelu: the checker refuses it as the built-in being practised
    wrapped = type("Hf", (nn.Module,), {
        "__init__": lambda self, d, h: (nn.Module.__init__(self), setattr(
            self, "m", modeling_gemma.GemmaMLP(configuration_gemma.GemmaConfig(
                hidden_size=d, intermediate_size=h))))[0],
        "forward": lambda self, x: self.m(x)})
    assert ex.check_geglu_ffn(wrapped).mistake == "missing_projection"


@pytest.mark.parametrize("i", range(len(__import__("normlib.exercises.geglu").exercises.geglu
                                        .GEGLU_MUTANTS)))
def test_each_geglu_mutant_in_a_module_gets_its_key(i):
    from normlib.exercises.geglu import GEGLU_MUTANTS
    key, f = GEGLU_MUTANTS[i]

    class Mutant(GeGLU):
        def forward(self, x):
            return f(x, self.gate_proj.weight, self.down_proj.weight, self.up_proj.weight)

    result = ex.check_geglu_ffn(Mutant)
    assert not result.passed and result.mistake == key, result


def _hf_inv_freq(D, base, factor, kind, L, seq_len):
    """HF's ROPE_INIT_FUNCTIONS[kind] on a LlamaConfig built offline: for "dynamic" L is the
    config's max_position_embeddings, for "yarn" original_max_position_embeddings."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama import LlamaConfig
    parameters = dict(rope_type=kind, rope_theta=base, factor=factor)
    if kind == "yarn":
        parameters["original_max_position_embeddings"] = L
    config = LlamaConfig(hidden_size=4 * D, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=int(L * factor) if kind == "yarn" else L,
                         rope_parameters=parameters)
    return ROPE_INIT_FUNCTIONS[kind](config, "cpu", seq_len=seq_len)


@pytest.mark.parametrize("i", range(len(rope_checker.CASES)))
def test_rope_scaling_reference_equals_hf_on_every_case(i):
    """The checker's reference (normlib's functions) equals HF's on each of its cases, within HF's
    own float32 rounding (relative 2e-6, as tests/test_hf_parity.py), and a solution written as
    HF's code reads passes."""
    args = tuple(rope_checker.CASES[i].kwargs.values())
    mine, mine_factor = rope_checker._reference(*args)
    theirs, their_factor = _hf_inv_freq(*args)
    assert mine.dtype == theirs.dtype == torch.float32
    torch.testing.assert_close(mine.double(), theirs.double(), rtol=2e-6, atol=0)
    assert mine_factor == pytest.approx(their_factor, rel=1e-12)


@pytest.mark.parametrize("i", range(len(rope_checker.ROPE_SCALING_MUTANTS)))
def test_each_rope_scaling_mutant_gets_its_key(i):
    key, mutant = rope_checker.ROPE_SCALING_MUTANTS[i]

    def answer(head_dim, base, factor, kind, original_max_position_embeddings=4096, seq_len=None):
        return mutant(head_dim, base, factor, kind, original_max_position_embeddings, seq_len)

    result = ex.check_rope_scaling(answer)
    assert not result.passed and result.mistake == key, result


def test_rope_scaling_refuses_the_library_functions():
    def answer(head_dim, base, factor, kind, original_max_position_embeddings=4096, seq_len=None):
        return nl.yarn_frequencies(head_dim, base, factor,
                                   original_max_position_embeddings=original_max_position_embeddings), 1.0

    assert ex.check_rope_scaling(answer).mistake == "shortcut"


if __name__ == "__main__":
    unseen.print_table(CHECKERS, CANNOT_TELL)
