"""The multi-head attention exercise (手撕 MHA with GQA and a KV cache): a correct layer passes, the
built-ins are refused, each classic mistake is named, and nothing the layer does breaks the checker."""

import math
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlib import exercises as ex


def mha(*, scale=None, split="ok", merge="ok", repeat="interleave", o_proj=True, dim=-1,
        mask="causal", cache_mode="ok", sdpa=False):
    """A learner's layer with one of the classic mistakes switched on."""

    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, n_heads, n_kv_heads=None):
            super().__init__()
            self.h, self.h_kv = n_heads, n_kv_heads or n_heads
            self.d = d_model // n_heads
            self.q_proj = nn.Linear(d_model, d_model, bias=False)
            self.k_proj = nn.Linear(d_model, self.h_kv * self.d, bias=False)
            self.v_proj = nn.Linear(d_model, self.h_kv * self.d, bias=False)
            self.o_proj = nn.Linear(d_model, d_model, bias=False)

        def forward(self, x, cache=None):
            B, T, C = x.shape

            def heads(t, n):                                        # (B, n, T, D)
                if split == "view":
                    return t.view(B, n, T, self.d)
                return t.view(B, T, n, self.d).transpose(1, 2)

            q, k, v = heads(self.q_proj(x), self.h), heads(self.k_proj(x), self.h_kv), \
                heads(self.v_proj(x), self.h_kv)
            g = self.h // self.h_kv

            def rep(t):
                return t.repeat(1, g, 1, 1) if repeat == "tile" else t.repeat_interleave(g, 1)

            S = 0 if cache is None else cache.seq_len
            if cache_mode == "after_repeat":
                k, v = rep(k), rep(v)
            if cache is not None and cache_mode != "unused":
                k, v = cache.update(k, v)
            if cache_mode != "after_repeat":
                k, v = rep(k), rep(v)
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            else:
                sc = q @ k.transpose(-2, -1) * (1 / math.sqrt(self.d) if scale is None
                                                else scale(C, self.d))
                keep = torch.ones(T, S + T, dtype=torch.bool).tril(0 if cache_mode == "offset"
                                                                    else S)
                if mask == "inverted":
                    keep = torch.ones(T, S + T, dtype=torch.bool).triu(S)
                if mask != "none":
                    sc = sc.masked_fill(~keep, float("-inf"))
                y = torch.softmax(sc, dim) @ v
            y = y.reshape(B, T, C) if merge == "reshape" else y.transpose(1, 2).reshape(B, T, C)
            return self.o_proj(y) if o_proj else y

    return MultiHeadAttention


def test_correct_layer_passes_with_mha_gqa_mqa_and_the_cache():
    result = ex.check_multi_head_attention(mha())
    assert result.passed, result
    assert len(result.messages) == 8
    assert "cache (B, H_kv, S, D) = (2, 2, 6, 4)" in result.messages[5]


@pytest.mark.parametrize("kwargs, mistake", [
    (dict(scale=lambda C, D: 1.0), "no_scaling"),
    (dict(scale=lambda C, D: 1 / math.sqrt(C)), "scaled_by_d_model"),
    (dict(scale=lambda C, D: 1 / D), "scaled_by_d"),
    (dict(mask="inverted"), "sees_future"),
    (dict(mask="none"), "sees_future"),
    (dict(dim=-2), "softmax_wrong_dim"),
    (dict(split="view"), "head_reshape"),
    (dict(merge="reshape"), "head_reshape"),
    (dict(repeat="tile"), "kv_repeat"),
    (dict(o_proj=False), "no_o_proj"),
    (dict(cache_mode="offset"), "cache_offset"),
    (dict(cache_mode="unused"), "cache_unused"),
    (dict(cache_mode="after_repeat"), "cache_after_repeat"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_mistake_is_named(kwargs, mistake):
    result = ex.check_multi_head_attention(mha(**kwargs))
    assert not result.passed and result.mistake == mistake, result


def test_a_head_reshape_mistake_is_not_also_blamed_on_the_mask_or_the_groups():
    result = ex.check_multi_head_attention(mha(split="view"))
    assert "sees the future" not in result.diagnosis and "kv head" not in result.diagnosis, result


def test_sdpa_is_refused():
    result = ex.check_multi_head_attention(mha(sdpa=True))
    assert not result.passed and result.mistake == "shortcut", result


def test_projection_with_bias_or_missing_is_named_at_init():
    class Biased(mha()):
        def __init__(self, d_model, n_heads, n_kv_heads=None):
            super().__init__(d_model, n_heads, n_kv_heads)
            self.o_proj = nn.Linear(d_model, d_model)

    class NoO(mha()):
        def __init__(self, d_model, n_heads, n_kv_heads=None):
            super().__init__(d_model, n_heads, n_kv_heads)
            del self.o_proj

    assert ex.check_multi_head_attention(Biased).mistake == "has_bias"
    assert ex.check_multi_head_attention(NoO).mistake == "missing_projection"


def test_returning_output_and_cache_is_one_line_per_check():
    class ReturnsPair(mha()):
        def forward(self, x, cache=None):
            return super().forward(x, cache), cache

    class NarrowSteps(mha()):
        def forward(self, x, cache=None):
            y = super().forward(x, cache)
            return y if cache is None else y[..., 1:]

    result = ex.check_multi_head_attention(ReturnsPair)
    assert not result.passed and "expected a torch.Tensor" in str(result), result
    assert "Traceback" not in str(result)
    result = ex.check_multi_head_attention(NarrowSteps)
    assert result.mistake == "wrong_shape" and len(result.failed_messages) == 2, result


def test_the_layer_cannot_break_the_checker():
    class Exits(mha()):
        def forward(self, x, cache=None):
            sys.exit(2)

    class NoGrad(mha()):
        def forward(self, x, cache=None):
            torch.set_grad_enabled(False)
            return super().forward(x, cache)

    class Spins(mha()):
        def forward(self, x, cache=None):
            while True:
                pass

    result = ex.check_multi_head_attention(Exits)
    assert not result.passed and len(result.failed_messages) == 1 and "SystemExit" in str(result)
    result = ex.check_multi_head_attention(NoGrad)
    assert torch.is_grad_enabled() and result.mistake == "no_autograd", result
    assert ex.check_multi_head_attention(Spins, time_limit=0.2).mistake == "time_limit"
    assert ex.check_multi_head_attention(42).mistake == "not_callable"
