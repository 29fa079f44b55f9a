"""The practice checkers for BatchNorm, DeepNorm, SwiGLU, RoPE and the warmup schedule: correct
answers pass (in either accepted convention), each classic mistake is named."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import normlib as nl
from normlib import exercises as ex


# --------------------------------------------------------------------------- BatchNorm
def batch_norm_class(*, biased_running=False, reversed_momentum=False, eval_batch_stats=False,
                     grad_mode=False, dims_4d=(0, 2, 3), n_is_batch=False, frozen=False,
                     plain_attributes=False, in_place_buffers=True):
    """A learner's BatchNorm with its own buffers; each flag is one classic mistake."""

    class BatchNorm(nn.Module):
        def __init__(self, num_features, eps=1e-5, momentum=0.1):
            super().__init__()
            self.eps, self.momentum = eps, momentum
            self.gamma = nn.Parameter(torch.ones(num_features))
            self.beta = nn.Parameter(torch.zeros(num_features))
            if plain_attributes:
                self.running_mean = torch.zeros(num_features)
                self.running_var = torch.ones(num_features)
            else:
                self.register_buffer("running_mean", torch.zeros(num_features))
                self.register_buffer("running_var", torch.ones(num_features))

        def forward(self, x):
            dims = (0,) if x.dim() == 2 else dims_4d
            shape = (1, -1) + (1,) * (x.dim() - 2)
            training = torch.is_grad_enabled() if grad_mode else self.training
            if training or eval_batch_stats:
                mean = x.mean(dims, keepdim=True)
                var = x.var(dims, unbiased=False, keepdim=True)
            else:
                mean, var = self.running_mean.view(shape), self.running_var.view(shape)
            if training and not frozen:
                n = x.shape[0] if n_is_batch else x.numel() // x.shape[1]
                new_var = var.flatten() if biased_running else var.flatten() * n / (n - 1)
                m = 1 - self.momentum if reversed_momentum else self.momentum
                with torch.no_grad():
                    if in_place_buffers:
                        self.running_mean.mul_(1 - m).add_(m * mean.flatten())
                        self.running_var.mul_(1 - m).add_(m * new_var)
                    else:
                        self.running_mean = (1 - m) * self.running_mean + m * mean.flatten()
                        self.running_var = (1 - m) * self.running_var + m * new_var
            y = (x - mean) / torch.sqrt(var + self.eps)
            return y * self.gamma.view(shape) + self.beta.view(shape)

    return BatchNorm


BATCH_NORM_WRONG = {
    "running_var_biased": dict(biased_running=True),
    "momentum_reversed": dict(reversed_momentum=True),
    "batch_stats_in_eval": dict(eval_batch_stats=True),
    "grad_mode_not_training": dict(grad_mode=True),
    "wrong_dims_4d": dict(dims_4d=(0,)),
    "unbiased_with_batch_size": dict(n_is_batch=True),
    "running_not_updated": dict(frozen=True),
    "not_buffers": dict(plain_attributes=True),
}


def test_batch_norm_correct_answers_pass():
    assert ex.check_batch_norm(batch_norm_class()).passed                 # gamma/beta, own buffers
    assert ex.check_batch_norm(batch_norm_class(in_place_buffers=False)).passed   # re-assigned


@pytest.mark.parametrize("mistake", BATCH_NORM_WRONG)
def test_batch_norm_mistake_is_named(mistake):
    result = ex.check_batch_norm(batch_norm_class(**BATCH_NORM_WRONG[mistake]))
    assert not result.passed and result.mistake == mistake, result


def test_batch_norm_wrong_4d_dims_are_named_however_they_fail():
    result = ex.check_batch_norm(batch_norm_class(dims_4d=(2, 3)))     # instance norm
    assert result.mistake == "wrong_dims_4d", result


def test_batch_norm_refuses_the_builtin():
    class Wrapped(nn.Module):
        def __init__(self, num_features, eps=1e-5, momentum=0.1):
            super().__init__()
            self.bn = nn.BatchNorm1d(num_features, eps, momentum)

        def forward(self, x):
            return self.bn(x)

    assert ex.check_batch_norm(Wrapped).mistake == "shortcut"
    assert ex.check_batch_norm(nl.BatchNorm).mistake == "shortcut"


# --------------------------------------------------------------------------- DeepNorm
def deep_norm_class(alpha=lambda N: (2 * N) ** 0.25, beta=lambda N: (8 * N) ** -0.25,
                    forward=lambda m, x, f: m.norm(m.alpha * x + f(x))):
    class DeepNorm(nn.Module):
        def __init__(self, d_model, n_layers):
            super().__init__()
            self.alpha, self.beta = alpha(n_layers), beta(n_layers)
            self.norm = nn.LayerNorm(d_model)

        def forward(self, x, sublayer):
            return forward(self, x, sublayer)

    return DeepNorm


DEEP_NORM_WRONG = {
    "alpha_on_sublayer": dict(forward=lambda m, x, f: m.norm(x + m.alpha * f(x))),
    "beta_at_run_time": dict(forward=lambda m, x, f: m.norm(m.alpha * x + f(x * m.beta))),
    "wrong_exponents": dict(alpha=lambda N: (2 * N) ** 0.5, beta=lambda N: (8 * N) ** -0.5),
    "operator_precedence": dict(alpha=lambda N: 2 * N**0.25, beta=lambda N: 8 * N**-0.25),
    "constants_swapped": dict(alpha=lambda N: (8 * N) ** 0.25, beta=lambda N: (2 * N) ** -0.25),
    "no_alpha": dict(forward=lambda m, x, f: m.norm(x + f(x))),
    "no_layer_norm": dict(forward=lambda m, x, f: m.alpha * x + f(x)),
    "sublayer_calls": dict(forward=lambda m, x, f: m.norm(m.alpha * x + f(x)) + 0 * f(x)),
}


def test_deep_norm_correct_answer_passes():
    assert ex.check_deep_norm(deep_norm_class()).passed
    assert ex.check_deep_norm(deep_norm_class(alpha=lambda N: torch.tensor(2.0 * N) ** 0.25)).passed


def test_deep_norm_that_is_a_plain_mlp_is_caught():
    class MLPCalledDeepNorm(nn.Module):          # a plain MLP under that name
        def __init__(self, d_model, n_layers):
            super().__init__()
            self.layer, self.norm = nn.Linear(d_model, d_model), nn.LayerNorm(d_model)

        def forward(self, x, sublayer):
            return torch.relu(self.norm(self.layer(x)))

    result = ex.check_deep_norm(MLPCalledDeepNorm)
    assert result.mistake == "missing_constants" and "alpha" in result.diagnosis, result


@pytest.mark.parametrize("mistake", DEEP_NORM_WRONG)
def test_deep_norm_mistake_is_named(mistake):
    result = ex.check_deep_norm(deep_norm_class(**DEEP_NORM_WRONG[mistake]))
    assert not result.passed and result.mistake == mistake, result


# --------------------------------------------------------------------------- SwiGLU
def swiglu_class(forward=lambda m, x: m.w2(F.silu(m.w1(x)) * m.w3(x)), bias=False):
    class SwiGLUFFN(nn.Module):
        def __init__(self, dim, hidden_dim):
            super().__init__()
            self.w1 = nn.Linear(dim, hidden_dim, bias=bias)
            self.w3 = nn.Linear(dim, hidden_dim, bias=bias)
            self.w2 = nn.Linear(hidden_dim, dim, bias=bias)

        def forward(self, x):
            return forward(self, x)

    return SwiGLUFFN


SWIGLU_WRONG = {
    "sigmoid_gate": dict(forward=lambda m, x: m.w2(torch.sigmoid(m.w1(x)) * m.w3(x))),
    "gelu_gate": dict(forward=lambda m, x: m.w2(F.gelu(m.w1(x)) * m.w3(x))),
    "gate_up_swapped": dict(forward=lambda m, x: m.w2(F.silu(m.w3(x)) * m.w1(x))),
    "missing_down_projection": dict(forward=lambda m, x: F.silu(m.w1(x)) * m.w3(x)),
    "silu_on_product": dict(forward=lambda m, x: m.w2(F.silu(m.w1(x) * m.w3(x)))),
    "has_bias": dict(bias=True),
}


def test_swiglu_correct_answer_passes_with_silu_allowed():
    assert ex.check_swiglu_ffn(swiglu_class()).passed
    by_hand = swiglu_class(lambda m, x: m.w2(m.w1(x) * torch.sigmoid(m.w1(x)) * m.w3(x)))
    assert ex.check_swiglu_ffn(by_hand).passed


@pytest.mark.parametrize("mistake", SWIGLU_WRONG)
def test_swiglu_mistake_is_named(mistake):
    result = ex.check_swiglu_ffn(swiglu_class(**SWIGLU_WRONG[mistake]))
    assert not result.passed and result.mistake == mistake, result


# --------------------------------------------------------------------------- RoPE
def rope(x, base=10000.0, *, layout="half", exponent=2.0, start=0, sign=1.0, freq_layout=None,
         only_half=False, angle_dtype=torch.float32):
    """A learner's RoPE; the keywords are the classic mistakes."""
    T, D = x.shape[-2], x.shape[-1]
    i = torch.arange(D // 2, dtype=angle_dtype)
    theta = 1.0 / base ** (exponent * i / D)
    pos = torch.arange(start, start + T, dtype=angle_dtype)
    angle = (sign * pos[:, None] * theta).float()                          # (T, D/2)
    freq_layout = freq_layout or layout
    a = torch.cat((angle, angle), -1) if freq_layout == "half" else angle.repeat_interleave(2, -1)
    xf = x.float()
    if layout == "half":
        rot = torch.cat((-xf[..., D // 2:], xf[..., : D // 2]), -1)
    else:
        rot = torch.stack((-xf[..., 1::2], xf[..., 0::2]), -1).flatten(-2)
    y = xf * a.cos() + rot * a.sin()
    if only_half:                                   # the second of each pair is never updated
        if layout == "half":
            y = torch.cat((y[..., : D // 2], xf[..., D // 2:]), -1)
        else:
            y = torch.stack((y[..., 0::2], xf[..., 1::2]), -1).flatten(-2)
    return y.to(x.dtype)


def rope_complex(x, base=10000.0):                 # Meta's LLaMA, interleaved pairs
    T, D = x.shape[-2], x.shape[-1]
    freqs = 1.0 / base ** (torch.arange(0, D, 2)[: D // 2].float() / D)
    angle = torch.outer(torch.arange(T).float(), freqs)
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * torch.polar(torch.ones_like(angle), angle)).flatten(-2).type_as(x)


ROPE_WRONG = {
    "frequency_exponent": dict(exponent=1.0),
    "positions_from_one": dict(start=1),
    "pairs_mixed": dict(layout="half", freq_layout="interleaved"),
    "half_rotated": dict(only_half=True),
    "minus_theta": dict(sign=-1.0),
    "angles_low_precision": dict(angle_dtype=torch.bfloat16),
}


@pytest.mark.parametrize("fn, layout", [(rope, "split halves"), (rope_complex, "interleaved"),
                                        (lambda x, base=1e4: rope(x, base, layout="interleaved"),
                                         "interleaved")])
def test_rope_both_layouts_pass_and_are_named(fn, layout):
    result = ex.check_rope(fn)
    assert result.passed, result
    assert f"found the {layout}" in result.messages[0]


@pytest.mark.parametrize("mistake", ROPE_WRONG)
def test_rope_mistake_is_named(mistake):
    result = ex.check_rope(lambda x, base=10000.0: rope(x, base, **ROPE_WRONG[mistake]))
    assert not result.passed and result.mistake == mistake, result


def test_rope_mixed_pairs_in_the_other_layout_and_positions_from_heads():
    mixed = lambda x, base=1e4: rope(x, base, layout="interleaved", freq_layout="half")  # noqa: E731
    assert ex.check_rope(mixed).mistake == "pairs_mixed"
    heads = lambda x, base=1e4: rope(x.transpose(-2, -3), base).transpose(-2, -3) \
        if x.dim() == 4 else rope(x, base)  # noqa: E731
    assert ex.check_rope(heads).mistake == "positions_wrong_dim"


# --------------------------------------------------------------------------- warmup + cosine
def schedule(step, warmup_steps, total_steps, min_ratio=0.0, *, ramp_from_one=False,
             floor=True, clamp=False, ahead=0):
    if step < warmup_steps:
        return (step + 1) / warmup_steps if ramp_from_one else step / warmup_steps
    p = (step - warmup_steps + ahead) / max(1, total_steps - warmup_steps)
    p = min(1.0, p) if floor else p
    c = 0.5 * (1 + math.cos(math.pi * p))
    return max(min_ratio, c) if clamp else min_ratio + (1 - min_ratio) * c


WARMUP_WRONG = {
    "off_by_one": dict(ramp_from_one=True),               # LambdaLR steps counted from 1
    "off_by_one (cosine one step ahead)": dict(ahead=1),  # below 1 at step == warmup_steps
    "no_floor": dict(floor=False),
    "min_ratio_as_clamp": dict(clamp=True),
}


def test_warmup_correct_answers_pass():
    assert ex.check_warmup_cosine(schedule).passed
    as_tensor = lambda *a: torch.tensor(schedule(*a))  # noqa: E731
    assert ex.check_warmup_cosine(as_tensor).passed


@pytest.mark.parametrize("mistake", WARMUP_WRONG)
def test_warmup_mistake_is_named(mistake):
    result = ex.check_warmup_cosine(lambda *a: schedule(*a, **WARMUP_WRONG[mistake]))
    assert not result.passed and result.mistake == mistake.split(" ")[0], result


def test_warmup_dividing_by_zero_warmup_is_named():
    ramp = lambda s, w, t, r=0.0: min(1.0, s / w) if s <= w else schedule(s, w, t, r)  # noqa: E731
    result = ex.check_warmup_cosine(ramp)
    assert result.mistake == "zero_warmup" and "ZeroDivisionError" in str(result), result
