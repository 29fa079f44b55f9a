"""The practice checkers (normlib.exercises): correct answers pass, each classic mistake is named.

Every wrong implementation below is written the way a learner would write it (not taken from the
checker's own mutants), and the test expects the checker's diagnosis key for that mistake.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import normlib as nl
from normlib import exercises as ex

HALF = (torch.float16, torch.bfloat16)


def up(x):
    return x.float() if x.dtype in HALF else x


# --------------------------------------------------------------------------- LayerNorm
def ln(x, weight, bias, eps=1e-5, *, dim=-1, unbiased=False, outside=False, keepdim=True,
       use_eps=True, one_pass=False, detach=False):
    h = up(x)
    mu = h.mean(dim, keepdim=keepdim)
    var = (h * h).mean(dim, keepdim=keepdim) - mu * mu if one_pass else \
        h.var(dim, unbiased=unbiased, keepdim=keepdim)
    if detach:
        mu, var = mu.detach(), var.detach()
    e = eps if use_eps else 0.0
    y = (h - mu) / (var.sqrt() + e) if outside else (h - mu) / torch.sqrt(var + e)
    return (y * weight + bias).to(x.dtype)


def ln_std_plus_eps(x, weight, bias, eps=1e-5):          # a common LayerNorm in notes
    return weight * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) + bias


def ln_in_place(x, weight, bias, eps=1e-5):
    mu, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    x -= mu
    return x / torch.sqrt(var + eps) * weight + bias


LAYER_NORM_WRONG = {
    "batch_axis": lambda x, w, b, eps=1e-5: ln(x, w, b, eps, dim=0),
    "all_dims": lambda x, w, b, eps=1e-5: ln(x, w, b, eps, dim=tuple(range(x.dim()))),
    "unbiased_variance": lambda x, w, b, eps=1e-5: ln(x, w, b, eps, unbiased=True),
    "unbiased_and_eps_outside": ln_std_plus_eps,
    "eps_outside_sqrt": lambda x, w, b, eps=1e-5: ln(x, w, b, eps, outside=True),
    "missing_keepdim": lambda x, w, b, eps=1e-5: ln(x, w, b, eps, keepdim=False),
    "no_eps": lambda x, w, b, eps=1e-5: ln(x, w, b, eps, use_eps=False),
    "eps_ignored": lambda x, w, b, eps=1e-5: ln(x, w, b),
    "one_pass_variance": lambda x, w, b, eps=1e-5: ln(x, w, b, eps, one_pass=True),
    "weight_bias_swapped": lambda x, w, b, eps=1e-5: ln(x, b, w, eps),
    "detached_statistics": lambda x, w, b, eps=1e-5: ln(x, w, b, eps, detach=True),
    "in_place": ln_in_place,
}


def test_layer_norm_correct_answers_pass():
    assert ex.check_layer_norm(ln).passed


def test_layer_norm_without_upcast_fails_only_where_float16_overflows():
    naive = lambda x, w, b, eps=1e-5: (x - x.mean(-1, keepdim=True)) * torch.rsqrt(  # noqa: E731
        x.var(-1, unbiased=False, keepdim=True) + eps) * w + b                    # no upcast
    result = ex.check_layer_norm(naive)
    assert result.mistake == "no_upcast", result
    assert [m.split(":")[0] for m in result.failed_messages] == [
        "✗ float16 (2, 8), |x - mean| above 256"], result


def test_std_plus_eps_gets_no_check_mark():
    result = ex.check_layer_norm(ln_std_plus_eps)
    passed = [m for m in result.messages if m.startswith("✓")]
    assert not passed, result


@pytest.mark.parametrize("mistake", LAYER_NORM_WRONG)
def test_layer_norm_mistake_is_named(mistake):
    result = ex.check_layer_norm(LAYER_NORM_WRONG[mistake])
    assert not result.passed and result.mistake == mistake, result


def test_layer_norm_refuses_the_builtin():
    for fn in (lambda x, w, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], w, b, eps),
               lambda x, w, b, eps=1e-5: nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps),
               lambda x, w, b, eps=1e-5: nn.LayerNorm(x.shape[-1], eps)(x) * w + b,
               lambda x, w, b, eps=1e-5: nl.layer_norm(x, x.shape[-1], w, b, eps)):
        result = ex.check_layer_norm(fn)
        assert result.mistake == "shortcut" and len(result.messages) == 1, result


# --------------------------------------------------------------------------- RMSNorm
def rms(x, weight, eps=1e-6, *, upcast=True, centre=False, outside=False, l2=False):
    h = up(x) if upcast else x
    if centre:
        h = h - h.mean(-1, keepdim=True)
    if l2:
        return (h / h.norm(dim=-1, keepdim=True)).type_as(x) * weight
    ms = h.pow(2).mean(-1, keepdim=True)
    h = h / (ms.sqrt() + eps) if outside else h * torch.rsqrt(ms + eps)
    return h.type_as(x) * weight


RMS_WRONG = {
    "mean_subtracted": lambda x, w, eps=1e-6: rms(x, w, eps, centre=True),
    "no_upcast": lambda x, w, eps=1e-6: rms(x, w, eps, upcast=False),
    "eps_outside_sqrt": lambda x, w, eps=1e-6: rms(x, w, eps, outside=True),
    "l2_norm": lambda x, w, eps=1e-6: rms(x, w, eps, l2=True),
    "gemma_one_plus": lambda x, w, eps=1e-6: rms(x, 1 + w, eps),
    "wrong_dtype": lambda x, w, eps=1e-6: up(x) * torch.rsqrt(up(x).pow(2).mean(-1, keepdim=True)
                                                               + eps) * w,
}


def test_rms_norm_correct_answers_pass():
    assert ex.check_rms_norm(rms).passed
    from_notes = lambda x, w, eps=1e-6: (x.float() * torch.rsqrt(  # noqa: E731
        x.float().pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * w
    assert ex.check_rms_norm(from_notes).passed


@pytest.mark.parametrize("mistake", RMS_WRONG)
def test_rms_norm_mistake_is_named(mistake):
    result = ex.check_rms_norm(RMS_WRONG[mistake])
    assert not result.passed and result.mistake == mistake, result


def test_rms_norm_refuses_the_builtin():
    for fn in (lambda x, w, eps=1e-6: F.rms_norm(x, x.shape[-1:], w, eps),
               lambda x, w, eps=1e-6: nn.RMSNorm(x.shape[-1], eps=eps)(x) * w):
        assert ex.check_rms_norm(fn).mistake == "shortcut"


# --------------------------------------------------------------------------- GELU
C = math.sqrt(2 / math.pi)
GELU_WRONG = {
    "exact_erf": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
    "sigmoid_approximation": lambda x: x * torch.sigmoid(1.702 * x),
    "missing_half": lambda x: x * (1 + torch.tanh(C * (x + 0.044715 * x**3))),
    "square_not_cube": lambda x: 0.5 * x * (1 + torch.tanh(C * (x + 0.044715 * x**2))),
    "wrong_sqrt_constant": lambda x: 0.5 * x * (1 + torch.tanh(2 / math.pi * (x + 0.044715 * x**3))),
    "tanh_overflow": lambda x: 0.5 * x * (1 + (torch.exp(2 * C * (x + 0.044715 * x**3)) - 1)
                                          / (torch.exp(2 * C * (x + 0.044715 * x**3)) + 1)),
}


def test_gelu_correct_answer_passes_and_builtin_is_refused():
    assert ex.check_gelu_tanh(lambda x: 0.5 * x * (1 + torch.tanh(C * (x + 0.044715 * x**3)))).passed
    assert ex.check_gelu_tanh(lambda x: F.gelu(x, approximate="tanh")).mistake == "shortcut"
    assert ex.check_gelu_tanh(nn.GELU("tanh")).mistake == "shortcut"


@pytest.mark.parametrize("mistake", GELU_WRONG)
def test_gelu_mistake_is_named(mistake):
    result = ex.check_gelu_tanh(GELU_WRONG[mistake])
    assert not result.passed and result.mistake == mistake, result


# --------------------------------------------------------------------------- attention
def attn(q, k, v, causal=True, *, scale=None, diagonal=0, dim=-1, fill=float("-inf"),
         after=False, naive=False):
    T = q.shape[-2]
    s = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale is None else scale)
    keep = torch.ones(T, T, dtype=torch.bool).tril(diagonal)
    if causal and not after:
        s = s.masked_fill(~keep, fill)
    w = s.exp() / s.exp().sum(-1, keepdim=True) if naive else torch.softmax(s, dim=dim)
    return (w * keep if causal and after else w) @ v


ATTENTION_WRONG = {
    "no_scaling": lambda q, k, v, causal=True: attn(q, k, v, causal, scale=1.0),
    "scaled_by_d": lambda q, k, v, causal=True: attn(q, k, v, causal, scale=q.shape[-1]),
    "mask_excludes_diagonal": lambda q, k, v, causal=True: attn(q, k, v, causal, diagonal=-1),
    "mask_leaks_future": lambda q, k, v, causal=True: attn(q, k, v, causal, diagonal=1),
    "softmax_wrong_dim": lambda q, k, v, causal=True: attn(q, k, v, causal, dim=-2),
    "mask_with_zero": lambda q, k, v, causal=True: attn(q, k, v, causal, fill=0.0),
    "mask_after_softmax": lambda q, k, v, causal=True: attn(q, k, v, causal, after=True),
    "naive_softmax": lambda q, k, v, causal=True: attn(q, k, v, causal, naive=True),
    "causal_ignored": lambda q, k, v, causal=True: attn(q, k, v, True),
    "no_transpose": lambda q, k, v, causal=True: torch.softmax(q @ k / 8, -1) @ v,
}


def test_attention_correct_answers_pass():
    assert ex.check_attention(attn).passed
    fill_min = lambda q, k, v, causal=True: attn(  # noqa: E731
        q, k, v, causal, fill=torch.finfo(q.dtype).min)
    assert ex.check_attention(fill_min).passed


@pytest.mark.parametrize("mistake", ATTENTION_WRONG)
def test_attention_mistake_is_named(mistake):
    result = ex.check_attention(ATTENTION_WRONG[mistake])
    assert not result.passed and result.mistake == mistake, result


def test_attention_refuses_sdpa():
    sdpa = lambda q, k, v, causal=True: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    assert ex.check_attention(sdpa).mistake == "shortcut"
