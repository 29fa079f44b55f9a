"""The exercises of 2025 attention (issue 21, item 6): a correct answer passes, the built-in is
refused, and each catalogue mistake, written as a learner writes it, gets its key."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import normlib as nl
from normlib import exercises as ex
from normlib.exercises.online_softmax import ONLINE_SOFTMAX_MISTAKES
from normlib.exercises.qk_norm import QK_NORM_MISTAKES
from normlib.exercises.sliding_window import SLIDING_WINDOW_MISTAKES


# --------------------------------------------------------------------------- online softmax
def tiled(q, k, v, block_size=2, *, rescale_l=True, rescale_o=True, inverted=False,
          keep_max=True, first_max=False, shift=True, per_tile=False, divide=True, scale=None):
    """Tiled attention; each keyword other than its default is one mistake."""
    sc = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
    den = torch.zeros_like(m)
    o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for j in range(0, k.shape[-2], block_size):
        s = q @ k[..., j:j + block_size, :].transpose(-2, -1) * sc
        vj = v[..., j:j + block_size, :]
        if per_tile:
            e = torch.exp(s - s.amax(-1, keepdim=True))
            o = o + e / e.sum(-1, keepdim=True) @ vj
            continue
        m_new = torch.maximum(m, s.amax(-1))
        if first_max and j > 0:
            m_new = m
        p = torch.exp(s - m_new[..., None]) if shift else torch.exp(s)
        a = torch.exp(m_new - m).nan_to_num(0.0) if inverted else torch.exp(m - m_new)
        den = (a * den if rescale_l else den) + p.sum(-1)
        o = (a[..., None] * o if rescale_o else o) + p @ vj
        if keep_max:
            m = m_new
    return o if per_tile or not divide else o / den[..., None]


def wrong(**kw):
    return lambda q, k, v, block_size=2: tiled(q, k, v, block_size, **kw)


ONLINE_WRONG = {
    "no_rescale": wrong(rescale_l=False, rescale_o=False),
    "acc_not_rescaled": wrong(rescale_o=False),
    "sum_not_rescaled": wrong(rescale_l=False),
    "rescale_inverted": wrong(inverted=True),
    "max_not_updated": wrong(keep_max=False),
    "no_max": wrong(shift=False, rescale_l=False, rescale_o=False),
    "normalized_per_tile": wrong(per_tile=True),
    "no_final_division": wrong(divide=False),
    "no_scaling": wrong(scale=1.0),
}


def test_online_softmax_correct_answer_passes():
    assert ex.check_online_softmax_attention(tiled).passed


@pytest.mark.parametrize("mistake", ONLINE_WRONG)
def test_online_softmax_mistake_is_named(mistake):
    assert mistake in ONLINE_SOFTMAX_MISTAKES
    result = ex.check_online_softmax_attention(ONLINE_WRONG[mistake])
    assert not result.passed and result.mistake == mistake, result


def test_online_softmax_max_kept_from_the_first_block_is_named_by_overflow():
    result = ex.check_online_softmax_attention(wrong(first_max=True))
    assert result.mistake == "max_not_updated" and "801" in result.diagnosis, result


@pytest.mark.parametrize("builtin", [
    lambda q, k, v, block_size=2: F.scaled_dot_product_attention(q, k, v),
    lambda q, k, v, block_size=2: torch.softmax(q @ k.transpose(-2, -1) / 8 ** 0.5, -1) @ v,
    lambda q, k, v, block_size=2: (q @ k.transpose(-2, -1) / 8 ** 0.5).softmax(-1) @ v,
], ids=["sdpa", "torch.softmax", "Tensor.softmax"])
def test_online_softmax_refuses_the_builtins(builtin):
    assert ex.check_online_softmax_attention(builtin).mistake == "shortcut"


# --------------------------------------------------------------------------- sliding window
def windowed(q, k, v, window, cache, *, lo=0, ahead=0, roll=True, position=None):
    """Sliding-window attention with a dict cache; lo widens (+1) or narrows (-1) the window,
    ahead lets a query see keys after it, roll=False keeps every key, position(cache, seen) moves
    the new tokens' first position."""
    T = q.shape[-2]
    seen = cache.get("seen", 0)
    first = seen if position is None else position(cache, seen)
    pos = torch.arange(first, first + T)
    q, k = nl.apply_rope(q, pos), nl.apply_rope(k, pos)
    if "k" in cache:
        k, v = torch.cat([cache["k"], k], -2), torch.cat([cache["v"], v], -2)
    S = k.shape[-2]
    qp, kp = torch.arange(S - T, S)[:, None], torch.arange(S)[None, :]
    keep = (kp <= qp + ahead) & (kp > qp - window - lo)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    out = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1) @ v
    start = 0 if not roll else max(0, S - (window - 1))
    cache.update(k=k[..., start:, :], v=v[..., start:, :], seen=seen + T)
    return out


def swa_wrong(**kw):
    return lambda q, k, v, window, cache: windowed(q, k, v, window, cache, **kw)


SLIDING_WRONG = {
    "window_too_wide": swa_wrong(lo=1),
    "window_too_narrow": swa_wrong(lo=-1),
    "no_window": swa_wrong(lo=10**6),
    "window_not_causal": swa_wrong(ahead=10**6),
    "cache_not_rolled": swa_wrong(roll=False),
    "positions_reset": swa_wrong(position=lambda c, s: c["k"].shape[-2] if "k" in c else 0),
    "positions_per_call": swa_wrong(position=lambda c, s: 0),
}


def test_sliding_window_correct_answer_passes():
    assert ex.check_sliding_window_attention(windowed).passed


@pytest.mark.parametrize("mistake", SLIDING_WRONG)
def test_sliding_window_mistake_is_named(mistake):
    assert mistake in SLIDING_WINDOW_MISTAKES
    result = ex.check_sliding_window_attention(SLIDING_WRONG[mistake])
    assert not result.passed and result.mistake == mistake, result


def test_sliding_window_refuses_sdpa():
    def sdpa(q, k, v, window, cache):
        mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert ex.check_sliding_window_attention(sdpa).mistake == "shortcut"


# --------------------------------------------------------------------------- QK-norm attention
def qwen3(*, after_rope=False, v_too=False, norm="rms", eps_used=None, weight=True, k_norm=True,
          swap=False, layout="half", causal=True):
    """Qwen3's attention as a class; each keyword other than its default is one mistake."""
    def head_norm(t, w, eps):
        e = eps if eps_used is None else eps_used
        if norm == "layer":
            t = t - t.mean(-1, keepdim=True)
        t = t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + e)
        return t * w if weight else t

    class Norm(nn.Module):
        def __init__(self, d, eps):
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

        def forward(self, t):
            return head_norm(t, self.weight, self.eps)

    class QKNormAttention(nn.Module):
        def __init__(self, d_model, n_heads, eps=1e-6):
            super().__init__()
            self.h, self.hd = n_heads, d_model // n_heads
            self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
                nn.Linear(d_model, d_model, bias=False) for _ in range(4))
            self.q_norm, self.k_norm = Norm(self.hd, eps), Norm(self.hd, eps)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = (p(x).view(B, T, self.h, self.hd).transpose(1, 2)
                       for p in (self.q_proj, self.k_proj, self.v_proj))
            qn, kn = (self.k_norm, self.q_norm) if swap else (self.q_norm, self.k_norm)
            if after_rope:
                q, k = nl.apply_rope(q, layout=layout), nl.apply_rope(k, layout=layout)
            q, k = qn(q), (kn(k) if k_norm else k)
            if v_too:
                v = kn(v)
            if not after_rope:
                q, k = nl.apply_rope(q, layout=layout), nl.apply_rope(k, layout=layout)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return self.o_proj(y.transpose(1, 2).reshape(B, T, C))
    return QKNormAttention


QK_WRONG = {
    "norm_after_rope": qwen3(after_rope=True),
    "norm_on_v": qwen3(v_too=True),
    "layer_norm": qwen3(norm="layer"),
    "no_eps": qwen3(eps_used=0.0),
    "eps_ignored": qwen3(eps_used=1e-5),
    "norm_weight_unused": qwen3(weight=False),
    "one_side_normed": qwen3(k_norm=False),
    "norms_swapped": qwen3(swap=True),
    "rope_layout": qwen3(layout="interleaved"),
    "sees_future": qwen3(causal=False),
}


def test_qk_norm_correct_answers_pass():
    assert ex.check_qk_norm_attention(qwen3()).passed

    class WithTorchRMSNorm(qwen3()):
        def __init__(self, d_model, n_heads, eps=1e-6):
            super().__init__(d_model, n_heads, eps)
            self.q_norm, self.k_norm = nn.RMSNorm(self.hd, eps=eps), nn.RMSNorm(self.hd, eps=eps)
    assert ex.check_qk_norm_attention(WithTorchRMSNorm).passed


@pytest.mark.parametrize("mistake", QK_WRONG)
def test_qk_norm_mistake_is_named(mistake):
    assert mistake in QK_NORM_MISTAKES
    result = ex.check_qk_norm_attention(QK_WRONG[mistake])
    assert not result.passed and result.mistake == mistake, result


def test_qk_norm_over_the_whole_projection_is_named_by_its_shape():
    class Whole(qwen3()):
        def __init__(self, d_model, n_heads, eps=1e-6):
            super().__init__(d_model, n_heads, eps)
            self.q_norm, self.k_norm = nn.RMSNorm(d_model, eps=eps), nn.RMSNorm(d_model, eps=eps)
    assert ex.check_qk_norm_attention(Whole).mistake == "norm_whole_projection"
