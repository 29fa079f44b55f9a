"""QK-norm in MultiHeadAttention against the same steps written with PyTorch's F.rms_norm and
sdpa: per head before RoPE (Qwen3, Gemma 3) and over the whole projection (OLMo 2)."""

import pytest
import torch
import torch.nn.functional as F
from tolerances import close

import normlib as nl


def reference(mha, x, per_head):
    B, T, C = x.shape
    H, H_kv, D = mha.n_heads, mha.n_kv_heads, mha.head_dim
    q, k, v = mha.q_proj(x), mha.k_proj(x), mha.v_proj(x)
    if per_head:
        q = F.rms_norm(q.view(B, T, H, D), (D,), mha.q_norm.weight, 1e-6)
        k = F.rms_norm(k.view(B, T, H_kv, D), (D,), mha.k_norm.weight, 1e-6)
    else:
        q = F.rms_norm(q, (H * D,), mha.q_norm.weight, 1e-6)
        k = F.rms_norm(k, (H_kv * D,), mha.k_norm.weight, 1e-6)
    q, k = q.reshape(B, T, H, D).transpose(1, 2), k.reshape(B, T, H_kv, D).transpose(1, 2)
    v = v.view(B, T, H_kv, D).transpose(1, 2)
    q, k = nl.apply_rope(q, layout="half"), nl.apply_rope(k, layout="half")   # after the norm
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return mha.o_proj(y.transpose(1, 2).reshape(B, T, C))


@pytest.mark.parametrize("qk_norm", ["per_head", "projection"])
def test_qk_norm_equals_rms_norm_then_rope_then_sdpa(qk_norm):
    mha = nl.MultiHeadAttention(32, 4, 2, rope=True, qk_norm=qk_norm).double()
    with torch.no_grad():
        mha.q_norm.weight.uniform_(0.5, 1.5)
        mha.k_norm.weight.uniform_(0.5, 1.5)
    shape = (8,) if qk_norm == "per_head" else (32,)
    assert mha.q_norm.weight.shape == shape
    assert mha.k_norm.weight.shape == ((8,) if qk_norm == "per_head" else (16,))
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    close(mha(x), reference(mha, x, qk_norm == "per_head"))


def test_per_head_qk_norm_bounds_the_logits():
    # With unit gains each normalized q and k head has norm sqrt(D), so |q.k| / sqrt(D) <= sqrt(D)
    # whatever the scale of x; without QK-norm the logits grow with x squared.
    D = 8
    mha = nl.MultiHeadAttention(32, 4, qk_norm="per_head").double()
    for scale in (1.0, 1e3):
        x = torch.randn(1, 5, 32, dtype=torch.float64) * scale
        q = mha.q_norm(mha.q_proj(x).view(1, 5, 4, D))
        k = mha.k_norm(mha.k_proj(x).view(1, 5, 4, D))
        logits = torch.einsum("bthd,bshd->bhts", q, k) / D ** 0.5
        assert logits.abs().max() <= D ** 0.5 + 1e-9
    raw = mha.q_proj(x).view(1, 5, 4, D)
    assert (torch.einsum("bthd,bshd->bhts", raw, raw) / D ** 0.5).abs().max() > 1e5


def test_qk_norm_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown qk_norm 'head'"):
        nl.MultiHeadAttention(16, 2, qk_norm="head")
