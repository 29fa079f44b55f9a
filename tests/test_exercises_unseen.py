"""Wrong implementations the checkers' catalogues never saw, and the diagnosis each should get.

Written the way learners write them, independently of the mutants in normlib/exercises (several
are mistakes no catalogue lists). Each case names the diagnosis keys that describe its mistake
correctly: a catalogue key, or the key of the property probe that isolates it. A result is
  - named correctly: its ``mistake`` is one of those keys;
  - cannot tell: the checker says so ("cannot_tell", or a generic "wrong values / gradients");
  - named wrongly: any other key (a near neighbour in a catalogue misleads the learner).
The target (issue 12): per exercise, at least 85% named correctly, and no case passed or named
wrongly; tests/unseen.py scores them, one test per exercise (each verdict runs a checker, once);
``python tests/test_exercises_unseen.py`` prints the table.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import unseen
from torch import nn

import normlib as nl
from normlib import exercises as ex
from normlib.exercises._session import Session

CANNOT_TELL = {"cannot_tell", "wrong_values", "wrong_grad", "nan", "running_wrong", "dx_form"}


# --------------------------------------------------------------------------- LayerNorm
def _xhat(x, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)


def ln_bias_before_weight(x, weight, bias, eps=1e-5):
    return (_xhat(x, eps) + bias) * weight


def ln_mean_abs_deviation(x, weight, bias, eps=1e-5):
    d = x - x.mean(-1, keepdim=True)
    return d / (d.abs().mean(-1, keepdim=True) + eps) * weight + bias


def ln_eps_1e12(x, weight, bias, eps=1e-5):
    return _xhat(x, 1e-12) * weight + bias


def ln_last_two_dims(x, weight, bias, eps=1e-5):
    mu = x.mean(dim=(-2, -1), keepdim=True)
    var = ((x - mu) ** 2).mean(dim=(-2, -1), keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * weight + bias


def ln_no_division(x, weight, bias, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) * weight + bias


def ln_no_bias(x, weight, bias, eps=1e-5):
    return _xhat(x, eps) * weight


def ln_torch_var(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias


def ln_global_variance(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(unbiased=False) + eps) * weight + bias


LAYER_NORM = [
    ("bias before weight", ln_bias_before_weight, {"affine_order"}),
    ("mean absolute deviation", ln_mean_abs_deviation, {"not_std"}),
    ("eps fixed at 1e-12", ln_eps_1e12, {"eps_ignored"}),
    ("statistics over the last two dims", ln_last_two_dims, {"axis", "wrong_axis"}),
    ("no division", ln_no_division, {"not_scaled"}),
    ("bias unused", ln_no_bias, {"bias_unused"}),
    ("torch.var default (unbiased)", ln_torch_var, {"unbiased_variance"}),
    ("variance of the whole tensor", ln_global_variance, {"axis"}),
]


# --------------------------------------------------------------------------- RMSNorm
def rms_minus_mean(x, weight, eps=1e-6):
    h = x.float() - x.float().mean(dim=-1, keepdim=True)
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def rms_n_minus_1(x, weight, eps=1e-6):
    h = x.float()
    ms = h.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - 1)
    return (h / torch.sqrt(ms + eps)).type_as(x) * weight


def rms_eps_1e8(x, weight, eps=1e-6):
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-8)).type_as(x) * weight


def rms_weight_added(x, weight, eps=1e-6):
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) + weight


def rms_forgot_cast_back(x, weight, eps=1e-6):
    h = x.float()
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def rms_last_two_dims(x, weight, eps=1e-6):
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean((-2, -1), keepdim=True) + eps)).type_as(x) * weight


def rms_norm_over_sqrt_d(x, weight, eps=1e-6):
    h = x.float()
    rms = h.norm(dim=-1, keepdim=True) / math.sqrt(x.shape[-1])
    return (h / (rms + eps)).type_as(x) * weight


RMS_NORM = [
    ("centred first", rms_minus_mean, {"mean_subtracted"}),
    ("sum / (d - 1)", rms_n_minus_1, {"not_rms"}),
    ("eps fixed at 1e-8", rms_eps_1e8, {"eps_ignored"}),
    ("weight added", rms_weight_added, {"weight_not_scaling"}),
    ("float32 result", rms_forgot_cast_back, {"wrong_dtype"}),
    ("over the last two dims", rms_last_two_dims, {"axis"}),
    ("norm / sqrt(d) + eps", rms_norm_over_sqrt_d, {"eps_outside_sqrt"}),
]


# --------------------------------------------------------------------------- BatchNorm
def batch_norm(*, eval_eps=True, running_var_stat="var", eval_mean="running", flat_4d=False,
               normalize_with_running=False, affine=True, fixed_momentum=None):
    """A learner's BatchNorm; each argument other than its default is one mistake."""

    class BatchNorm(nn.Module):
        def __init__(self, num_features, eps=1e-5, momentum=0.1):
            super().__init__()
            self.eps = eps
            self.momentum = momentum if fixed_momentum is None else fixed_momentum
            self.weight = nn.Parameter(torch.ones(num_features))
            self.bias = nn.Parameter(torch.zeros(num_features))
            self.register_buffer("running_mean", torch.zeros(num_features))
            self.register_buffer("running_var", torch.ones(num_features))

        def forward(self, x):
            C = x.shape[1]
            shape = (1, C) + (1,) * (x.dim() - 2)
            if flat_4d:
                flat = x.reshape(-1, C)                   # not per channel for 4-D input
            else:
                flat = x.transpose(0, 1).reshape(C, -1).T
            if self.training:
                mean, var = flat.mean(0), flat.var(0, unbiased=False)
                n = flat.shape[0]
                stat = {"var": var * n / (n - 1), "std": (var * n / (n - 1)).sqrt()}
                with torch.no_grad():
                    self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                    self.running_var.mul_(1 - self.momentum).add_(
                        self.momentum * stat[running_var_stat])
                if normalize_with_running:
                    mean, var = self.running_mean, self.running_var
            else:
                mean = flat.mean(0) if eval_mean == "batch" else self.running_mean
                var = self.running_var
            eps = self.eps if (self.training or eval_eps) else 0.0
            y = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + eps)
            if affine:
                y = y * self.weight.view(shape) + self.bias.view(shape)
            return y

    return BatchNorm


BATCH_NORM = [
    ("eval without eps", batch_norm(eval_eps=False), {"eval_denominator"}),
    ("running_var stores the std", batch_norm(running_var_stat="std"), {"running_var_stat"}),
    ("eval with the batch mean", batch_norm(eval_mean="batch"),
     {"eval_depends_on_batch", "batch_stats_in_eval"}),
    ("4-D input reshaped to (-1, C)", batch_norm(flat_4d=True), {"wrong_dims_4d"}),
    ("normalizes with the updated running stats", batch_norm(normalize_with_running=True),
     {"running_stats_in_train"}),
    ("weight and bias never applied", batch_norm(affine=False), {"affine_unused"}),
    ("momentum fixed at 0.01", batch_norm(fixed_momentum=0.01), {"momentum_ignored"}),
]


# --------------------------------------------------------------------------- DeepNorm
def deep_norm(*, alpha=lambda N: (2 * N) ** 0.25, beta=lambda N: (8 * N) ** -0.25, forward=None):
    class DeepNorm(nn.Module):
        def __init__(self, d_model, n_layers):
            super().__init__()
            self.alpha, self.beta = alpha(n_layers), beta(n_layers)
            self.norm = nn.LayerNorm(d_model)

        def forward(self, x, sublayer):
            if forward is not None:
                return forward(self, x, sublayer)
            return self.norm(self.alpha * x + sublayer(x))

    return DeepNorm


DEEP_NORM = [
    ("alpha scales the LayerNorm output",
     deep_norm(forward=lambda m, x, f: m.alpha * m.norm(x + f(x))), {"output_not_normalized"}),
    ("(2 * N) ** 1 / 4", deep_norm(alpha=lambda N: (2 * N) ** 1 / 4), {"alpha_growth"}),
    ("beta scales the output",
     deep_norm(forward=lambda m, x, f: m.norm(m.alpha * x + f(x)) * m.beta),
     {"output_not_normalized", "beta_at_run_time"}),
    ("sublayer of the normalized x",
     deep_norm(forward=lambda m, x, f: m.norm(m.alpha * x + f(m.norm(x)))),
     {"sublayer_input", "pre_norm"}),
    ("beta in place of alpha",
     deep_norm(forward=lambda m, x, f: m.norm(m.beta * x + f(x))),
     {"residual_weight", "beta_at_run_time"}),
    ("beta = (8 N) ** 0.25", deep_norm(beta=lambda N: (8 * N) ** 0.25), {"beta_growth"}),
]


# --------------------------------------------------------------------------- SwiGLU
def swiglu(forward):
    class SwiGLUFFN(nn.Module):
        def __init__(self, dim, hidden_dim):
            super().__init__()
            self.w1 = nn.Linear(dim, hidden_dim, bias=False)
            self.w2 = nn.Linear(hidden_dim, dim, bias=False)
            self.w3 = nn.Linear(dim, hidden_dim, bias=False)

        def forward(self, x):
            return forward(self, x)

    return SwiGLUFFN


SWIGLU = [
    ("tanh gate", swiglu(lambda m, x: m.w2(torch.tanh(m.w1(x)) * m.w3(x))), {"gate_activation"}),
    ("both branches activated", swiglu(lambda m, x: m.w2(F.silu(m.w1(x)) * F.silu(m.w3(x)))),
     {"up_activated"}),
    ("sum instead of product", swiglu(lambda m, x: m.w2(F.silu(m.w1(x)) + m.w3(x))),
     {"gate_not_product"}),
    ("residual inside the FFN", swiglu(lambda m, x: x + m.w2(F.silu(m.w1(x)) * m.w3(x))),
     {"residual_inside"}),
    ("GELU-tanh gate", swiglu(lambda m, x: m.w2(F.gelu(m.w1(x), approximate="tanh") * m.w3(x))),
     {"gate_activation", "gelu_gate"}),
    ("SiLU on w3", swiglu(lambda m, x: m.w2(m.w1(x) * F.silu(m.w3(x)))), {"gate_up_swapped"}),
]


# --------------------------------------------------------------------------- RoPE
def rope_halves(x, base=10000.0, *, exponent=lambda i, D: -2 * i / D, positions=None,
                sign=1.0, sin_for_cos=False):
    T, D = x.shape[-2], x.shape[-1]
    i = torch.arange(D // 2, dtype=torch.float64)
    theta = base ** exponent(i, D)
    pos = torch.arange(T, dtype=torch.float64) if positions is None else positions(T)
    ang = torch.outer(pos, theta)
    ang = torch.cat((ang, ang), -1).to(torch.float32)
    cos, sin = ang.cos(), ang.sin() * sign
    if sin_for_cos:
        cos = sin
    h = x.float()
    rot = torch.cat((-h[..., D // 2:], h[..., : D // 2]), -1)
    return (h * cos + rot * sin).to(x.dtype)


def rope_bthd(x, base=10000.0):
    """Positions from dim 1, as if x were (B, T, H, D)."""
    if x.dim() < 4:
        return rope_halves(x, base)
    return rope_halves(x.transpose(1, 2), base).transpose(1, 2)


ROPE = [
    ("theta = base^(-4i/D)", lambda x, base=10000.0: rope_halves(
        x, base, exponent=lambda i, D: -4 * i / D), {"frequencies", "frequency_exponent"}),
    ("x0 cos + x1 sin", lambda x, base=10000.0: rope_halves(x, base, sign=-1.0),
     {"minus_theta"}),
    ("positions counted from the end", lambda x, base=10000.0: rope_halves(
        x, base, positions=lambda T: torch.arange(T - 1, -1, -1, dtype=torch.float64)),
     {"positions"}),
    ("positions from dim 1", rope_bthd, {"positions_wrong_dim"}),
    ("sin in place of cos", lambda x, base=10000.0: rope_halves(x, base, sin_for_cos=True),
     {"not_rotation", "sin_cos_swapped"}),
    ("theta = base^(+2i/D)", lambda x, base=10000.0: rope_halves(
        x, base, exponent=lambda i, D: 2 * i / D), {"frequencies"}),
]


# --------------------------------------------------------------------------- warmup + cosine
def schedule(*, ramp=None, floor=None, denominator=None, shape=None, zero_warmup=None):
    def fn(step, warmup_steps, total_steps, min_ratio=0.0):
        if zero_warmup is not None and warmup_steps == 0:
            return zero_warmup(step, total_steps, min_ratio)
        if step < warmup_steps:
            return ramp(step, warmup_steps, min_ratio) if ramp else step / warmup_steps
        if step > total_steps and floor is not None:
            return floor
        den = denominator(warmup_steps, total_steps) if denominator else total_steps - warmup_steps
        p = min(1.0, (step - warmup_steps) / max(1, den))
        c = shape(p) if shape else 0.5 * (1 + math.cos(math.pi * p))
        return min_ratio + (1 - min_ratio) * c
    return fn


def schedule_le(step, warmup_steps, total_steps, min_ratio=0.0):
    if step <= warmup_steps:
        return step / max(1, warmup_steps)
    p = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p))


WARMUP = [
    ("ramp (s + 1) / (W + 1)", schedule(ramp=lambda s, w, r: (s + 1) / (w + 1)),
     {"warmup_ramp", "off_by_one"}),
    ("ramp from min_ratio", schedule(ramp=lambda s, w, r: r + (1 - r) * s / w), {"warmup_ramp"}),
    ("0 after total_steps", schedule(floor=0.0), {"floor", "no_floor"}),
    ("progress over total_steps", schedule(denominator=lambda w, t: t), {"decay_end"}),
    ("cos without 0.5 (1 + .)", schedule(shape=lambda p: math.cos(math.pi * p)),
     {"decay_shape", "decay_end"}),
    ("step <= warmup with max(1, W)", schedule_le, {"zero_warmup"}),
]


# --------------------------------------------------------------------------- GELU (tanh)
C = math.sqrt(2 / math.pi)

GELU = [
    ("0.0044715", lambda x: 0.5 * x * (1 + torch.tanh(C * (x + 0.0044715 * x ** 3))),
     {"cubic_coefficient"}),
    ("cubic outside the bracket", lambda x: 0.5 * x * (1 + torch.tanh(C * x + 0.044715 * x ** 3)),
     {"cubic_coefficient"}),
    ("times x forgotten", lambda x: 0.5 * (1 + torch.tanh(C * (x + 0.044715 * x ** 3))),
     {"not_times_x"}),
    ("sigmoid in place of tanh",
     lambda x: 0.5 * x * (1 + torch.sigmoid(C * (x + 0.044715 * x ** 3))),
     {"negative_tail", "not_tanh"}),
    ("sqrt(2) / pi", lambda x: 0.5 * x * (1 + torch.tanh(
        math.sqrt(2) / math.pi * (x + 0.044715 * x ** 3))), {"sqrt_constant",
                                                               "wrong_sqrt_constant"}),
    ("missing 1 +", lambda x: 0.5 * x * torch.tanh(C * (x + 0.044715 * x ** 3)), {"missing_one"}),
]


# --------------------------------------------------------------------------- attention
def attn(q, k, v, causal=True, *, scale=None, keep=None, fill=float("-inf"), after=None,
         weights_t=False, normalize=torch.softmax):
    T, D = q.shape[-2], q.shape[-1]
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(D) if scale is None else scale(q))
    if causal:
        mask = torch.ones(T, T, dtype=torch.bool).tril() if keep is None else keep(T)
        s = s.masked_fill(~mask, fill)
    w = normalize(s, dim=-1)
    if after is not None:
        w = after(w, q)
    if weights_t:
        w = w.transpose(-2, -1)
    return w @ v


ATTENTION = [
    ("scaled by sqrt(H)", lambda q, k, v, causal=True: attn(
        q, k, v, causal, scale=lambda q: 1 / math.sqrt(q.size(1))), {"scale"}),
    ("mask keeps the future", lambda q, k, v, causal=True: attn(
        q, k, v, causal, keep=lambda T: torch.ones(T, T, dtype=torch.bool).triu(1)),
     {"mask_direction", "mask_inverted"}),
    ("weights transposed", lambda q, k, v, causal=True: attn(q, k, v, causal, weights_t=True),
     {"weights_transposed"}),
    ("masked by multiplying with 0", lambda q, k, v, causal=True: attn(
        q, k, v, causal, fill=0.0), {"mask_with_zero"}),
    ("scale after the softmax", lambda q, k, v, causal=True: attn(
        q, k, v, causal, scale=lambda q: 1.0, after=lambda w, q: w / math.sqrt(q.shape[-1])),
     {"rows_not_normalized"}),
    ("log_softmax", lambda q, k, v, causal=True: attn(q, k, v, causal, normalize=torch.log_softmax),
     {"rows_not_normalized", "not_softmax"}),
]


# --------------------------------------------------------------------------- LayerNorm backward
# (written after its checker, with the checker's formula in view: a weaker test than the rest)
def ln_backward(*, mean_term=1.0, xhat_term=1.0, n_shift=0, weight_in_dx=True, dweight_x=False,
                unbiased=False):
    def fn(dy, x, weight, eps=1e-5):
        N = x.shape[-1]
        mu = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True) if unbiased else ((x - mu) ** 2).mean(-1, keepdim=True)
        std = torch.sqrt(var + eps)
        x_hat = (x - mu) / std
        g = dy * weight if weight_in_dx else dy
        n = N + n_shift
        dx = (g - mean_term * g.sum(-1, keepdim=True) / n
              - xhat_term * x_hat * (g * x_hat).sum(-1, keepdim=True) / n) / std
        flat = (x if dweight_x else x_hat).reshape(-1, N)
        return dx, (dy.reshape(-1, N) * flat).sum(0), dy.reshape(-1, N).sum(0)
    return fn


LN_BACKWARD = [
    ("no mean term", ln_backward(mean_term=0.0), {"missing_mean_term"}),
    ("no x_hat term", ln_backward(xhat_term=0.0), {"missing_xhat_term"}),
    ("sums divided by N - 1", ln_backward(n_shift=-1), {"wrong_n"}),
    ("dy instead of dy * weight", ln_backward(weight_in_dx=False), {"weight_forgotten"}),
    ("dweight from x", ln_backward(dweight_x=True), {"dweight_with_x"}),
    ("torch.var default", ln_backward(unbiased=True), {"unbiased_variance"}),
]



# --------------------------------------------------------------------------- multi-head attention
class Mha(nn.Module):
    """A learner's MHA written with einsum and a precomputed mask buffer; the cases below change one
    method each, the way one slip changes one line."""

    def __init__(self, d_model, n_heads, n_kv_heads=None):
        super().__init__()
        self.nh, self.nkv = n_heads, n_kv_heads or n_heads
        self.hd = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, self.kv_width(d_model), bias=False)
        self.v_proj = nn.Linear(d_model, self.kv_width(d_model), bias=False)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)

    def kv_width(self, d_model):
        return self.nkv * self.hd

    def expand_kv(self, t):
        return torch.repeat_interleave(t, self.nh // self.nkv, dim=1)

    def mask(self, T, S):
        return torch.ones(T, S, dtype=torch.bool).tril(S - T)

    def weights(self, scores, keep):
        return scores.masked_fill(~keep, float("-inf")).softmax(-1)

    def scale(self):
        return self.hd ** -0.5

    def merge(self, y, B, T):
        return y.transpose(1, 2).reshape(B, T, -1)

    def remember(self, k, v, cache):
        return cache.update(k, v) if cache is not None else (k, v)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        k, v = self.remember(k, v, cache)
        k, v = self.expand_kv(k), self.expand_kv(v)
        scores = torch.einsum("bhtd,bhsd->bhts", q, k) * self.scale()
        y = self.weights(scores, self.mask(T, k.shape[2])) @ v
        return self.o_proj(self.merge(y, B, T))


class MhaExpandGroups(Mha):
    def expand_kv(self, t):          # (B, g, H_kv, S, D) -> (B, H, S, D): head h reads h % H_kv
        B, _, S, D = t.shape
        return t[:, None].expand(B, self.nh // self.nkv, self.nkv, S, D).reshape(B, self.nh, S, D)


class MhaTriuMask(Mha):
    def mask(self, T, S):            # masks j >= t instead of j > t
        return ~torch.ones(T, S, dtype=torch.bool).triu(S - T)


class MhaPermuteView(Mha):
    def merge(self, y, B, T):
        return y.permute(0, 2, 1, 3).view(B, T, -1)


class MhaTimesSqrt(Mha):
    def scale(self):
        return math.sqrt(self.hd)


class MhaMaskWeights(Mha):
    def weights(self, scores, keep):
        return scores.softmax(-1) * keep


class MhaNanoGPTBuffer(Mha):
    def mask(self, T, S):            # nanoGPT's bias[:, :, :T, :T], sliced to the keys
        return torch.ones(64, 64, dtype=torch.bool).tril()[:T, :S]


class MhaOwnCache(Mha):
    def remember(self, k, v, cache):     # keeps the keys on self, ignores the cache passed in
        if cache is None:
            return k, v
        if getattr(self, "past", None) is not None and self.past[0].shape[0] == k.shape[0]:
            k, v = torch.cat((self.past[0], k), 2), torch.cat((self.past[1], v), 2)
        self.past = (k, v)
        return k, v


class MhaNoMaskWithCache(Mha):
    def forward(self, x, cache=None):
        self.cached = cache is not None
        return super().forward(x, cache)

    def mask(self, T, S):
        return torch.ones(T, S, dtype=torch.bool) if self.cached else super().mask(T, S)


class MhaKvFullWidth(Mha):
    def kv_width(self, d_model):
        return d_model

    def forward(self, x, cache=None):
        self.nkv = self.nh
        return super().forward(x, cache)


# Written together with the checker's first probes: four of these (triu(0), permute().view(), the
# mask multiplied in, no mask with a cache) had no key then; mask_diagonal, view_after_transpose,
# mask_after_softmax and cache_no_mask were added for them. The held-out batch below was not.
MULTI_HEAD_ATTENTION = [
    ("kv heads expanded as a block", MhaExpandGroups, {"kv_repeat"}),
    ("triu(0) mask hides the diagonal", MhaTriuMask, {"mask_diagonal"}),
    ("merge with permute().view()", MhaPermuteView, {"view_after_transpose"}),
    ("scores times sqrt(head_dim)", MhaTimesSqrt, {"scale"}),
    ("mask multiplied into the weights", MhaMaskWeights, {"mask_after_softmax"}),
    ("nanoGPT mask buffer with a cache", MhaNanoGPTBuffer, {"cache_offset"}),
    ("a cache of its own on self", MhaOwnCache, {"cache_unused"}),
    ("no mask once a cache is passed", MhaNoMaskWithCache, {"cache_no_mask"}),
    ("k_proj and v_proj of width d_model", MhaKvFullWidth, {"wrong_kv_shape"}),
]


# --------------------------------------------------------------------------- LLaMA block
def rms(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(t):
    a, b = t.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Llama(nn.Module):
    """A learner's LLaMA block in one class (functional RMSNorm and RoPE); the cases below change
    one method each."""

    def __init__(self, d_model, n_heads, hidden_dim, n_kv_heads=None):
        super().__init__()
        self.nh, self.nkv, self.hd = n_heads, n_kv_heads or n_heads, d_model // n_heads
        self.attn_norm = nn.Module()
        self.attn_norm.weight = nn.Parameter(torch.ones(d_model))
        self.ffn_norm = nn.Module()
        self.ffn_norm.weight = nn.Parameter(torch.ones(d_model))
        self.attn = nn.Module()
        for name, out in (("q_proj", d_model), ("k_proj", self.nkv * self.hd),
                          ("v_proj", self.nkv * self.hd), ("o_proj", d_model)):
            setattr(self.attn, name, nn.Linear(d_model, out, bias=False))
        self.ffn = nn.Module()
        self.ffn.w1 = nn.Linear(d_model, hidden_dim, bias=False)
        self.ffn.w3 = nn.Linear(d_model, hidden_dim, bias=False)
        self.ffn.w2 = nn.Linear(hidden_dim, d_model, bias=False)

    def norm(self, x, w):
        return rms(x, w)

    def rope(self, q, k):
        T, D = q.shape[-2:]
        inv = 1.0 / 10000 ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
        freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        emb = torch.cat((freqs, freqs), -1)
        cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def mask(self, T):
        return torch.full((T, T), float("-inf")).triu(1)

    def mlp(self, z):
        return self.ffn.w2(F.silu(self.ffn.w1(z)) * self.ffn.w3(z))

    def attention(self, h):
        B, T, C = h.shape
        a = self.attn
        q = a.q_proj(h).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = a.k_proj(h).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = a.v_proj(h).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q, k = self.rope(q, k)
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        s = q @ k.transpose(2, 3) * self.scale() + self.mask(T).to(q.dtype)
        return a.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))

    def repeat_kv(self, t):          # (B, n_kv, T, D) -> (B, H, T, D), head h reads h // group
        return t.repeat_interleave(self.nh // self.nkv, 1)

    def scale(self):
        return 1 / math.sqrt(self.hd)

    def forward(self, x):
        h = x + self.attention(self.norm(x, self.attn_norm.weight))
        return h + self.mlp(self.norm(h, self.ffn_norm.weight))


class LlamaNormAfterAdd(Llama):
    def forward(self, x):            # normalizes before the sublayer and again after the add
        h = self.norm(x + self.attention(self.norm(x, self.attn_norm.weight)),
                      self.attn_norm.weight)
        return self.norm(h + self.mlp(self.norm(h, self.ffn_norm.weight)), self.ffn_norm.weight)


class LlamaGlobalRms(Llama):
    def norm(self, x, w):
        return x / torch.sqrt(x.pow(2).mean() + 1e-5) * w


class LlamaRopeOnlyQ(Llama):
    def rope(self, q, k):
        return super().rope(q, k)[0], k


class LlamaNoMask(Llama):
    def mask(self, T):
        return torch.zeros(T, T)


class LlamaSiluOnUp(Llama):
    def mlp(self, z):
        return self.ffn.w2(self.ffn.w1(z) * F.silu(self.ffn.w3(z)))


class LlamaNoFfnNorm(Llama):
    def forward(self, x):
        h = x + self.attention(self.norm(x, self.attn_norm.weight))
        return h + self.mlp(h)


class LlamaLayerNormByHand(Llama):
    def norm(self, x, w):
        x = x - x.mean(-1, keepdim=True)
        return x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5) * w


# Written after the first probes; "RMS over the whole tensor" and "no causal mask" had no probe then
# (norm_axis and sees_future were added for them). The held-out batch below came after.
LLAMA_BLOCK = [
    ("norm before and after the add", LlamaNormAfterAdd, {"post_norm"}),
    ("RMS over the whole tensor", LlamaGlobalRms, {"norm_axis"}),
    ("RoPE on q only", LlamaRopeOnlyQ, {"no_rope"}),
    ("no causal mask", LlamaNoMask, {"sees_future"}),
    ("SiLU on the up projection", LlamaSiluOnUp, {"gate_up_swapped"}),
    ("no ffn_norm", LlamaNoFfnNorm, {"no_norm"}),
    ("LayerNorm written by hand", LlamaLayerNormByHand, {"layer_norm"}),
]


# --------------------------------------------------------------------------- online softmax
def flash(*, alpha_on=("l", "o"), alpha=lambda m_old, m_new: torch.exp(m_old - m_new),
          assign_max=True, max_first_only=False, exp_shift="running", per_block=None,
          divide=True, scale=None):
    """A learner's tiled attention (lists of blocks, keepdim statistics); each argument other than
    its default is one mistake."""
    def online_softmax_attention(q, k, v, block_size=2):
        sc = 1 / math.sqrt(q.shape[-1]) if scale is None else scale(q.shape[-1])
        m = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype)
        den = torch.zeros_like(m)
        o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
        outs = []
        for kb, vb in zip(k.split(block_size, dim=-2), v.split(block_size, dim=-2), strict=True):
            s = torch.einsum("bhtd,bhsd->bhts", q, kb) * sc
            if per_block:
                e = torch.exp(s - s.max(dim=-1, keepdim=True).values)
                outs.append((e / e.sum(-1, keepdim=True)) @ vb)
                continue
            m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
            if max_first_only and bool(torch.isfinite(m).all()):
                m_new = m
            shift = {"running": m_new, "block": s.max(dim=-1, keepdim=True).values,
                     "none": torch.zeros_like(m_new)}[exp_shift]
            e = torch.exp(s - shift)
            a = alpha(m, m_new)
            den = (den * a if "l" in alpha_on else den) + e.sum(-1, keepdim=True)
            o = (o * a if "o" in alpha_on else o) + e @ vb
            if assign_max:
                m = m_new
        if per_block == "sum":
            return sum(outs)
        if per_block == "mean":
            return torch.stack(outs).mean(0)
        return o / den if divide else o
    return online_softmax_attention


def flash_alpha_after_update(q, k, v, block_size=2):
    """The max is updated before the factor is taken: exp(m - m) = 1, nothing rescaled."""
    m = torch.full(q.shape[:-1], -math.inf, dtype=q.dtype)
    den = torch.zeros_like(m)
    o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for j in range(0, k.shape[-2], block_size):
        s = q @ k[..., j:j + block_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        m = torch.maximum(m, s.amax(-1))
        p = torch.exp(s - m[..., None])
        alpha = torch.exp(m - torch.maximum(m, s.amax(-1)))
        den = alpha * den + p.sum(-1)
        o = alpha[..., None] * o + p @ v[..., j:j + block_size, :]
    return o / den[..., None]


ONLINE_SOFTMAX = [
    ("only l rescaled", flash(alpha_on=("l",)), {"acc_not_rescaled", "tile_merge"}),
    ("only o rescaled", flash(alpha_on=("o",)), {"sum_not_rescaled", "tile_merge"}),
    ("nothing rescaled", flash(alpha_on=()), {"no_rescale", "tile_merge"}),
    ("factor exp(m_new - m_old)", flash(alpha=lambda a, b: torch.exp(b - a).nan_to_num(0, 0)),
     {"rescale_inverted", "tile_merge"}),
    ("m never assigned", flash(assign_max=False), {"max_not_updated", "tile_merge"}),
    ("max of the first block kept", flash(max_first_only=True), {"max_not_updated"}),
    ("exp without a max", flash(exp_shift="none", alpha=lambda a, b: 1.0), {"no_max"}),
    ("exp without a max, sums still rescaled", flash(exp_shift="none"), {"tile_merge"}),
    ("a softmax per block, added", flash(per_block="sum"), {"normalized_per_tile"}),
    ("a softmax per block, averaged", flash(per_block="mean"), {"normalized_per_tile"}),
    ("o not divided by l", flash(divide=False), {"no_final_division"}),
    ("no 1/sqrt(D)", flash(scale=lambda D: 1.0), {"no_scaling"}),
    ("scaled by 1/D", flash(scale=lambda D: 1 / D), {"scale"}),
    ("alpha taken after the max update", flash_alpha_after_update,
     {"no_rescale", "tile_merge"}),
    ("exp against the block's own max", flash(exp_shift="block"),
     {"tile_merge", "no_rescale", "block_not_rescaled"}),
]


# --------------------------------------------------------------------------- sliding window
def swa(*, lo=lambda p, W: p - W, hi=lambda p: p, keep=lambda W: W - 1, position=None,
        negative_slice=False):
    """A learner's sliding-window attention with a dict cache (masked_fill, torch.softmax); each
    argument other than its default is one mistake. The mask keeps keys lo(p, W) < j <= hi(p)."""
    def sliding_window_attention(q, k, v, window, cache):
        T = q.shape[-2]
        seen = cache.get("seen", 0)
        first = seen if position is None else position(cache, seen)
        pos = torch.arange(first, first + T)
        q, k = nl.apply_rope(q, pos), nl.apply_rope(k, pos)
        if "k" in cache:
            k, v = torch.cat([cache["k"], k], -2), torch.cat([cache["v"], v], -2)
        S = k.shape[-2]
        qp, kp = torch.arange(S - T, S)[:, None], torch.arange(S)[None, :]
        mask = (kp <= hi(qp)) & (kp > lo(qp, window))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        out = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ v
        n = keep(window)
        start = S - n if negative_slice else max(0, S - n)
        cache["k"], cache["v"], cache["seen"] = k[..., start:, :], v[..., start:, :], seen + T
        return out
    return sliding_window_attention


SLIDING_WINDOW = [
    ("kv_idx >= q_idx - W", swa(lo=lambda p, W: p - W - 1), {"window_too_wide"}),
    ("kv_idx > q_idx - W + 1", swa(lo=lambda p, W: p - W + 1), {"window_too_narrow"}),
    ("no window at all", swa(lo=lambda p, W: p - 10**9), {"no_window"}),
    ("a band around the query", swa(hi=lambda p: p + 10**9, lo=lambda p, W: p - W),
     {"window_not_causal"}),
    ("|i - j| < W", swa(hi=lambda p: p + 3, lo=lambda p, W: p - W), {"window_not_causal"}),
    ("cache keeps everything", swa(keep=lambda W: 10**9), {"cache_not_rolled"}),
    ("positions from the kept keys", swa(position=lambda c, s: c["k"].shape[-2] if "k" in c else 0),
     {"positions_reset", "decode_differs"}),
    ("positions from 0 each call", swa(position=lambda c, s: 0),
     {"positions_per_call", "decode_differs"}),
    ("the cache keeps W - 2", swa(keep=lambda W: max(W - 2, 0)),
     {"decode_differs", "cache_too_short"}),
    ("k[..., S - n:] with S < n", swa(negative_slice=True), {"decode_differs", "cache_too_short"}),
]


# --------------------------------------------------------------------------- QK-norm attention
def qwen3_attention(*, order="norm_rope", norm=None, v_norm=False, causal=True, layout="half",
                    norm_width=None, swap=False, only_q=False):
    """A learner's Qwen3 attention (its own RMSNorm module, einsum-free, heads as dim 2 until
    after the norm); each argument other than its default is one mistake."""
    def rms(t, w, eps):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps) * w

    class HeadNorm(nn.Module):
        def __init__(self, d, eps):
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

        def forward(self, t):
            return (norm or rms)(t, self.weight, self.eps)

    class QKNormAttention(nn.Module):
        def __init__(self, d_model, n_heads, eps=1e-6):
            super().__init__()
            self.h, self.hd = n_heads, d_model // n_heads
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(self, name, nn.Linear(d_model, d_model, bias=False))
            width = self.hd if norm_width is None else norm_width(d_model, self.hd)
            self.q_norm, self.k_norm = HeadNorm(width, eps), HeadNorm(width, eps)

        def forward(self, x):
            B, T, C = x.shape
            qn, kn = (self.k_norm, self.q_norm) if swap else (self.q_norm, self.k_norm)
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
            if norm_width is not None:                          # over the whole projection
                q, k = qn(q), kn(k)
            q, k, v = (t.view(B, T, self.h, self.hd) for t in (q, k, v))
            pos = torch.arange(T)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))    # (B, H, T, hd)
            if order == "rope_norm":
                q, k = (nl.apply_rope(t, pos, layout=layout) for t in (q, k))
            if norm_width is None:
                q = qn(q)
                k = k if only_q else kn(k)
            if v_norm:
                v = self.k_norm(v)
            if order == "norm_rope":
                q, k = (nl.apply_rope(t, pos, layout=layout) for t in (q, k))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return self.o_proj(y.transpose(1, 2).reshape(B, T, C))
    return QKNormAttention


QK_NORM = [
    ("norm after RoPE", qwen3_attention(order="rope_norm"), {"norm_after_rope"}),
    ("RMSNorm(d_model) on the projection", qwen3_attention(norm_width=lambda C, hd: C),
     {"norm_whole_projection"}),
    ("v through k_norm too", qwen3_attention(v_norm=True), {"norm_on_v"}),
    ("no eps", qwen3_attention(norm=lambda t, w, eps: t / t.pow(2).mean(-1, keepdim=True).sqrt()
                               * w), {"no_eps"}),
    ("eps fixed at 1e-5", qwen3_attention(
        norm=lambda t, w, eps: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5) * w),
     {"eps_ignored"}),
    ("F.layer_norm with the weight", qwen3_attention(
        norm=lambda t, w, eps: F.layer_norm(t, t.shape[-1:], w, None, eps)), {"layer_norm"}),
    ("weight never multiplied", qwen3_attention(
        norm=lambda t, w, eps: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps)),
     {"norm_weight_unused"}),
    ("k left unnormalized", qwen3_attention(only_q=True), {"one_side_normed"}),
    ("q_norm on k, k_norm on q", qwen3_attention(swap=True), {"norms_swapped"}),
    ("interleaved RoPE", qwen3_attention(layout="interleaved"), {"rope_layout"}),
    ("no causal mask", qwen3_attention(causal=False), {"sees_future"}),
    ("L2 norm instead of RMS", qwen3_attention(
        norm=lambda t, w, eps: F.normalize(t, dim=-1, eps=eps) * w), {"l2_norm"}),
]

# --------------------------------------------------------------------------- the set
CHECKERS = {
    "layer_norm": (ex.check_layer_norm, LAYER_NORM),
    "rms_norm": (ex.check_rms_norm, RMS_NORM),
    "batch_norm": (ex.check_batch_norm, BATCH_NORM),
    "deep_norm": (ex.check_deep_norm, DEEP_NORM),
    "swiglu_ffn": (ex.check_swiglu_ffn, SWIGLU),
    "rope": (ex.check_rope, ROPE),
    "warmup_cosine": (ex.check_warmup_cosine, WARMUP),
    "gelu_tanh": (ex.check_gelu_tanh, GELU),
    "attention": (ex.check_attention, ATTENTION),
    "layer_norm_backward": (ex.check_layer_norm_backward, LN_BACKWARD),
    "multi_head_attention": (ex.check_multi_head_attention, MULTI_HEAD_ATTENTION),
    "llama_block": (ex.check_llama_block, LLAMA_BLOCK),
    "online_softmax_attention": (ex.check_online_softmax_attention, ONLINE_SOFTMAX),
    "sliding_window_attention": (ex.check_sliding_window_attention, SLIDING_WINDOW),
    "qk_norm_attention": (ex.check_qk_norm_attention, QK_NORM),
}

CASES = [(key, name, fn, accepted) for key, (_, cases) in CHECKERS.items()
         for name, fn, accepted in cases]


# --------------------------------------------------------------------------- a held-out batch
# Written after the probes existed and never used to tune them; measured once: 18 of 19 named, one
# ("eps squared") given a true but vague divisor message; the eps_wrong probe was added after that.
def ln_eps_squared(x, weight, bias, eps=1e-5):
    mu, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps * eps) * weight + bias


def ln_mean_over_batch(x, weight, bias, eps=1e-5):
    var = ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True)
    return (x - x.mean(0, keepdim=True)) / torch.sqrt(var + eps) * weight + bias


def rms_no_sqrt(x, weight, eps=1e-6):
    h = x.float()
    return (h / (h.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def rms_abs_mean(x, weight, eps=1e-6):
    h = x.float()
    return (h / (h.abs().mean(-1, keepdim=True) + eps)).type_as(x) * weight


def held_bn(*, eval_batch_var=False, bias_times=1):
    class BatchNorm(nn.Module):
        def __init__(self, num_features, eps=1e-5, momentum=0.1):
            super().__init__()
            self.eps, self.momentum = eps, momentum
            self.weight = nn.Parameter(torch.ones(num_features))
            self.bias = nn.Parameter(torch.zeros(num_features))
            self.register_buffer("running_mean", torch.zeros(num_features))
            self.register_buffer("running_var", torch.ones(num_features))

        def forward(self, x):
            dims, shape = (0, *range(2, x.dim())), (1, -1) + (1,) * (x.dim() - 2)
            mean, var = x.mean(dims), x.var(dims, unbiased=False)
            if self.training:
                n = x.numel() // x.shape[1]
                with torch.no_grad():
                    self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                    self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))
            else:
                mean = self.running_mean
                var = var if eval_batch_var else self.running_var
            y = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
            return y * self.weight.view(shape) + bias_times * self.bias.view(shape)

    return BatchNorm


# Exercises 11 and 12, written after their probes and measured once: softmax over the heads gave NaN
# (true but vague), 1/head_dim was named; the LLaMA block's two were "cannot tell", after which the
# RoPE variants and the gate-activation probe were added.
class MhaSoftmaxOverHeads(Mha):
    def weights(self, scores, keep):
        return scores.masked_fill(~keep, float("-inf")).softmax(1)


class MhaScaledTwice(Mha):
    def scale(self):
        return 1 / math.sqrt(self.hd) / math.sqrt(self.hd)


class LlamaThetaWithoutTwo(Llama):
    def rope(self, q, k):
        T, D = q.shape[-2:]
        inv = 1.0 / 10000 ** (torch.arange(0, D // 2, dtype=torch.float64) / D)
        emb = torch.outer(torch.arange(T, dtype=torch.float64), inv).repeat(1, 2)
        cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class LlamaGeglu(Llama):
    def mlp(self, z):
        return self.ffn.w2(F.gelu(self.ffn.w1(z)) * self.ffn.w3(z))


# A second batch for 11 and 12, measured once: MHA 3 of 4 named (expand() of the kv heads raised,
# with no diagnosis: an error hint was added); LLaMA block 1 of 3: the FFN without w2 got a wrong name (no_residual) and the
# unscaled scores "cannot tell", after which the residual probe learned to zero every linear layer
# and the attention-scale probe was added.
class MhaTrilAsFill(Mha):
    def weights(self, scores, keep):         # fills where the mask is 1: hides the past
        return scores.masked_fill(keep, float("-inf")).softmax(-1)


class MhaExpandKv(Mha):
    def expand_kv(self, t):
        B, _, S, D = t.shape
        return t.expand(B, self.nh, S, D)


class MhaOffsetAfterUpdate(Mha):
    def remember(self, k, v, cache):
        out = super().remember(k, v, cache)
        self.offset = 0 if cache is None else cache.seq_len       # read after the update
        return out

    def mask(self, T, S):
        return torch.ones(T, S, dtype=torch.bool).tril(self.offset)


class LlamaResidualFromNormed(Llama):
    def forward(self, x):
        n = self.norm(x, self.attn_norm.weight)
        h = n + self.attention(n)
        m = self.norm(h, self.ffn_norm.weight)
        return m + self.mlp(m)


class LlamaUnscaled(Llama):
    def scale(self):
        return 1.0


class LlamaNoDownProjection(Llama):
    def mlp(self, z):
        return (F.silu(self.ffn.w1(z)) * self.ffn.w3(z))[..., : z.shape[-1]]


# A third batch for 12 (issue 22): wrong blocks whose RoPE is right. Before the fix, the RoPE probe
# added "positions 1 .. T" to such diagnoses (RoPE scores depend only on relative positions, so that
# offset is no mistake), the gate probe blamed the gate for a shared norm, and a GQA repeat by
# .repeat() could not be told.
class LlamaReluGate(Llama):
    def mlp(self, z):
        return self.ffn.w2(F.relu(self.ffn.w1(z)) * self.ffn.w3(z))


class LlamaSigmoidGate(Llama):
    def mlp(self, z):
        return self.ffn.w2(torch.sigmoid(self.ffn.w1(z)) * self.ffn.w3(z))


class LlamaSharedNorm(Llama):
    def forward(self, x):            # one norm weight for both sublayers
        h = x + self.attention(self.norm(x, self.attn_norm.weight))
        return h + self.mlp(self.norm(h, self.attn_norm.weight))


class LlamaTiledKv(Llama):
    def repeat_kv(self, t):          # head h reads h % n_kv_heads
        return t.repeat(1, self.nh // self.nkv, 1, 1)


def lnb_rstd_twice(dy, x, weight, eps=1e-5):
    dx, dw, db = ln_backward()(dy, x, weight, eps)
    return dx * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps), dw, db


HELD_OUT = [
    ("layer_norm", "eps squared", ln_eps_squared, {"eps_ignored", "eps_wrong"}),
    ("layer_norm", "mean over the batch", ln_mean_over_batch, {"axis", "batch_axis"}),
    ("rms_norm", "no sqrt", rms_no_sqrt, {"divides_by_mean_square"}),
    ("rms_norm", "mean |x|", rms_abs_mean, {"not_rms"}),
    ("batch_norm", "eval keeps the batch variance", held_bn(eval_batch_var=True),
     {"eval_depends_on_batch", "batch_stats_in_eval"}),
    ("batch_norm", "bias added twice", held_bn(bias_times=2), {"affine"}),
    ("deep_norm", "alpha = (2N) ** 0.25 / 2", deep_norm(alpha=lambda N: (2 * N) ** 0.25 / 2),
     {"alpha_prefactor"}),
    ("deep_norm", "no LayerNorm", deep_norm(forward=lambda m, x, f: m.alpha * x + f(x)),
     {"output_not_normalized", "no_layer_norm"}),
    ("swiglu_ffn", "sigmoid gate", swiglu(lambda m, x: m.w2(torch.sigmoid(m.w1(x)) * m.w3(x))),
     {"sigmoid_gate"}),
    ("swiglu_ffn", "gate squared", swiglu(lambda m, x: m.w2(F.silu(m.w1(x)) ** 2 * m.w3(x))),
     {"gate_activation"}),
    ("rope", "positions from 1", lambda x, base=10000.0: rope_halves(
        x, base, positions=lambda T: torch.arange(1, T + 1, dtype=torch.float64)),
     {"positions_from_one"}),
    ("rope", "base ignored", lambda x, base=10000.0: rope_halves(x, 10000.0), {"base_ignored"}),
    ("warmup_cosine", "linear decay", schedule(shape=lambda p: 1 - p), {"linear_decay"}),
    ("warmup_cosine", "min_ratio ignored", lambda s, w, t, r=0.0: schedule()(s, w, t, 0.0),
     {"min_ratio_ignored"}),
    ("gelu_tanh", "no cubic", lambda x: 0.5 * x * (1 + torch.tanh(C * x)), {"no_cubic_term"}),
    ("gelu_tanh", "exact erf", lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
     {"exact_erf"}),
    ("attention", "mask excludes the diagonal", lambda q, k, v, causal=True: attn(
        q, k, v, causal, keep=lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1)),
     {"mask_excludes_diagonal"}),
    ("attention", "scaled by 1/D", lambda q, k, v, causal=True: attn(
        q, k, v, causal, scale=lambda q: 1 / q.shape[-1]), {"scaled_by_d"}),
    ("layer_norm_backward", "dx times rstd again", lnb_rstd_twice, {"dx_scale"}),
    ("multi_head_attention", "softmax over the heads", MhaSoftmaxOverHeads,
     {"softmax_wrong_dim", "weights_not_normalized"}),
    ("multi_head_attention", "scaled by sqrt(head_dim) twice", MhaScaledTwice, {"scaled_by_d"}),
    ("llama_block", "RoPE theta without the 2", LlamaThetaWithoutTwo, {"rope_frequencies"}),
    ("llama_block", "GELU gate", LlamaGeglu, {"gate_activation"}),
    ("multi_head_attention", "tril() used as the fill mask", MhaTrilAsFill,
     {"mask_diagonal", "sees_future"}),
    ("multi_head_attention", "kv heads by expand()", MhaExpandKv, {"kv_repeat"}),
    ("multi_head_attention", "offset read after the update", MhaOffsetAfterUpdate,
     {"cache_no_mask", "cache_offset"}),
    ("llama_block", "residual from the normalized x", LlamaResidualFromNormed,
     {"post_norm", "no_residual"}),
    ("llama_block", "scores not scaled", LlamaUnscaled, {"attention_scale"}),
    ("llama_block", "no down projection", LlamaNoDownProjection, {"no_down_projection"}),
    ("llama_block", "ReLU gate, RoPE right", LlamaReluGate, {"gate_activation"}),
    ("llama_block", "sigmoid gate, RoPE right", LlamaSigmoidGate, {"gate_activation"}),
    ("llama_block", "one norm weight for both sublayers", LlamaSharedNorm,
     {"norm_weight_unused"}),
    ("llama_block", "kv heads tiled by repeat()", LlamaTiledKv, {"kv_repeat"}),
]

# Findings a correct diagnosis of these cases must not carry: a RoPE that is right (issue 22).
FALSE_FINDINGS = ("positions 1 .. T", "RoPE with", "does not return silu(z) * z")


# Every case of CASES and HELD_OUT, per exercise, as tests/unseen.py scores them.
SCORED = {key: (check, [*cases, *((f"held out: {n}", f, a) for k, n, f, a in HELD_OUT if k == key)],
                [])
          for key, (check, cases) in CHECKERS.items()}


@pytest.mark.parametrize("name, cls", [(n, c) for k, n, c, _ in HELD_OUT
                                       if c in (LlamaReluGate, LlamaSigmoidGate, LlamaSharedNorm,
                                                LlamaTiledKv, LlamaGeglu)])
def test_a_block_whose_rope_is_right_gets_no_rope_finding(name, cls):
    result = ex.check_llama_block(cls)
    assert not any(text in result.diagnosis for text in FALSE_FINDINGS), result.diagnosis


# Correct answers: the references the tests pass, in the conventions the checkers accept.
def ln_float32(x, weight, bias, eps=1e-5):            # x.float(), as the notes write it
    return (_xhat(x.float(), eps) * weight.float() + bias.float()).to(x.dtype)


def rms_float32(x, weight, eps=1e-6):
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def rope_interleaved(x, base=10000.0):
    T, D = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.outer(torch.arange(T, dtype=torch.float64), theta).repeat_interleave(2, -1)
    h = x.float()
    rot = torch.stack((-h[..., 1::2], h[..., 0::2]), -1).flatten(-2)
    return (h * ang.cos().float() + rot * ang.sin().float()).to(x.dtype)


CORRECT = [
    (ex.check_layer_norm, ln_float32),
    (ex.check_rms_norm, rms_float32),
    (ex.check_batch_norm, batch_norm()),
    (ex.check_deep_norm, deep_norm()),
    (ex.check_swiglu_ffn, swiglu(lambda m, x: m.w2(F.silu(m.w1(x)) * m.w3(x)))),
    (ex.check_rope, rope_halves),
    (ex.check_rope, rope_interleaved),
    (ex.check_warmup_cosine, schedule()),
    (ex.check_gelu_tanh, lambda x: 0.5 * x * (1 + torch.tanh(C * (x + 0.044715 * x ** 3)))),
    (ex.check_attention, attn),
    (ex.check_attention, lambda q, k, v, causal=True: attn(q, k, v, causal,
                                                           fill=torch.finfo(q.dtype).min)),
    (ex.check_layer_norm_backward, ln_backward()),
    (ex.check_multi_head_attention, Mha),
    (ex.check_llama_block, Llama),
    (ex.check_online_softmax_attention, flash()),
    (ex.check_sliding_window_attention, swa()),
    (ex.check_qk_norm_attention, qwen3_attention()),
]


@pytest.mark.parametrize("checker, fn", CORRECT, ids=[f"{c.__name__}-{i}"
                                                     for i, (c, _) in enumerate(CORRECT)])
def test_every_probe_finds_nothing_on_a_correct_answer(checker, fn, monkeypatch):
    """Probes run only after a failure; here they run on correct answers, and none may fire (a
    probe that fires on a correct answer would add a false finding to a real diagnosis)."""
    findings = []

    def probe(session, *probes):
        findings.extend((p.__name__, p()) for p in probes)

    monkeypatch.setattr(Session, "probe", probe)
    result = checker(fn)
    assert result.passed, result
    assert findings and all(out is None for _, out in findings), findings


@pytest.mark.parametrize("key", list(SCORED))
def test_unseen_mistakes_are_caught_never_misnamed_and_named_at_the_target_rates(key):
    """Every case is caught (none passes) and none is named wrongly; per exercise at least 85% are
    named correctly."""
    found = unseen.problems(SCORED, key, CANNOT_TELL, rate=0.85)
    assert not found, "\n".join(found)


if __name__ == "__main__":
    unseen.print_table(SCORED, CANNOT_TELL)
