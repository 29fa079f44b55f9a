"""The LLaMA block exercise (手撕 LLaMA 解码器块): a block assembled from one's own pieces passes, normlib's
block is refused, each classic mistake is named, and nothing the block does breaks the checker."""

import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import normlib as nl
from normlib import exercises as ex


def block(placement="pre", res_attn=True, res_ffn=True, norm="rms", rope="half", swap=False,
          shared=False):
    """A learner's LLaMA block with one of the classic mistakes switched on."""

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            if norm == "layer":
                x = x - x.mean(-1, keepdim=True)
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight

    def rotate(t):                                       # (B, H, T, D)
        T, D = t.shape[-2:]
        theta = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
        angle = torch.arange(T, dtype=torch.float64)[:, None] * theta            # (T, D/2)
        cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)
        if rope == "inter":
            a, b = t[..., 0::2], t[..., 1::2]
            return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)
        a, b = t[..., : D // 2], t[..., D // 2:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), -1)

    class Attn(nn.Module):
        def __init__(self, C, H, H_kv):
            super().__init__()
            self.H, self.H_kv, self.D = H, H_kv, C // H
            self.q_proj = nn.Linear(C, C, bias=False)
            self.k_proj = nn.Linear(C, H_kv * self.D, bias=False)
            self.v_proj = nn.Linear(C, H_kv * self.D, bias=False)
            self.o_proj = nn.Linear(C, C, bias=False)

        def forward(self, x):
            B, T, C = x.shape
            q = self.q_proj(x).view(B, T, self.H, self.D).transpose(1, 2)
            k = self.k_proj(x).view(B, T, self.H_kv, self.D).transpose(1, 2)
            v = self.v_proj(x).view(B, T, self.H_kv, self.D).transpose(1, 2)
            if rope != "none":
                q, k = rotate(q), rotate(k)
            g = self.H // self.H_kv
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            s = (q @ k.transpose(-2, -1) / self.D ** 0.5).masked_fill(
                ~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))

    class FFN(nn.Module):
        def __init__(self, C, hidden):
            super().__init__()
            self.w1 = nn.Linear(C, hidden, bias=False)
            self.w3 = nn.Linear(C, hidden, bias=False)
            self.w2 = nn.Linear(hidden, C, bias=False)

        def forward(self, x):
            a, u = (self.w3(x), self.w1(x)) if swap else (self.w1(x), self.w3(x))
            return self.w2(F.silu(a) * u)

    class LlamaBlock(nn.Module):
        def __init__(self, d_model, n_heads, hidden_dim, n_kv_heads=None):
            super().__init__()
            self.attn_norm, self.ffn_norm = RMSNorm(d_model), RMSNorm(d_model)
            self.attn = Attn(d_model, n_heads, n_kv_heads or n_heads)
            self.ffn = FFN(d_model, hidden_dim)

        def forward(self, x):
            ffn_norm = self.attn_norm if shared else self.ffn_norm
            if placement == "post":
                h = self.attn_norm(x + self.attn(x))
                return ffn_norm(h + self.ffn(h))
            h = self.attn(self.attn_norm(x)) + (x if res_attn else 0)
            return self.ffn(ffn_norm(h)) + (h if res_ffn else 0)

    return LlamaBlock


def test_correct_block_passes():
    result = ex.check_llama_block(block())
    assert result.passed, result
    assert len(result.messages) == 6


@pytest.mark.parametrize("kwargs, mistake", [
    (dict(placement="post"), "post_norm"),
    (dict(res_attn=False, res_ffn=False), "no_residual"),
    (dict(res_attn=False), "no_attn_residual"),
    (dict(res_ffn=False), "no_ffn_residual"),
    (dict(norm="layer"), "layer_norm"),
    (dict(rope="none"), "no_rope"),
    (dict(rope="inter"), "rope_layout"),
    (dict(swap=True), "gate_up_swapped"),
    (dict(shared=True), "norm_weight_unused"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_mistake_is_named(kwargs, mistake):
    result = ex.check_llama_block(block(**kwargs))
    assert not result.passed and result.mistake == mistake, result


def test_normlibs_block_is_refused():
    class Wraps(block()):
        def forward(self, x):
            ref = nl.TransformerBlock(x.shape[-1], self.attn.H, norm="rmsnorm", ffn="swiglu",
                                      rope=True, d_ff=self.ffn.w1.out_features).to(x.dtype)
            return ref(x)

    result = ex.check_llama_block(Wraps)
    assert not result.passed and result.mistake == "shortcut", result


def test_misnamed_or_biased_parameters_are_named_at_init():
    class Renamed(block()):
        def __init__(self, d_model, n_heads, hidden_dim, n_kv_heads=None):
            super().__init__(d_model, n_heads, hidden_dim, n_kv_heads)
            self.norm1 = self.attn_norm
            del self.attn_norm

    class Biased(block()):
        def __init__(self, d_model, n_heads, hidden_dim, n_kv_heads=None):
            super().__init__(d_model, n_heads, hidden_dim, n_kv_heads)
            self.ffn.w2 = nn.Linear(hidden_dim, d_model)

    assert ex.check_llama_block(Renamed).mistake == "missing_parameter"
    assert ex.check_llama_block(Biased).mistake == "has_bias"


def test_the_block_cannot_break_the_checker():
    class Exits(block()):
        def __init__(self, *args):
            sys.exit(1)

    class NoGrad(block()):
        def forward(self, x):
            torch.set_grad_enabled(False)
            return super().forward(x)

    class Spins(block()):
        def forward(self, x):
            while True:
                pass

    result = ex.check_llama_block(Exits)
    assert not result.passed and len(result.failed_messages) == 1 and "SystemExit" in str(result)
    result = ex.check_llama_block(NoGrad)
    assert torch.is_grad_enabled() and result.mistake == "no_autograd", result
    assert ex.check_llama_block(Spins, time_limit=0.2).mistake == "time_limit"
    assert ex.check_llama_block(None).mistake == "not_callable"
