"""Attention against F.scaled_dot_product_attention; RoPE touches q and k only."""

import pytest
import torch
import torch.nn.functional as F
from conftest import DTYPES, close

import normlib as nl


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T,S", [(7, 7), (1, 1), (5, 9)])
def test_attention_matches_sdpa(dtype, causal, T, S):
    q, k, v = (torch.randn(2, 3, n, 8, dtype=torch.float64).to(dtype) for n in (T, S, S))
    qs = [t.clone().requires_grad_(True) for t in (q, k, v)]
    rs = [t.clone().requires_grad_(True) for t in (q, k, v)]
    mine = nl.attention(*qs, causal=causal)
    ref = F.scaled_dot_product_attention(*rs, is_causal=causal)
    close(mine, ref)
    mine.sum().backward()
    ref.sum().backward()
    for a, e in zip(qs, rs, strict=True):
        close(a.grad, e.grad)


def test_attention_with_rope_rotates_q_and_k_only():
    q, k, v = (torch.randn(1, 2, 6, 8, dtype=torch.float64) for _ in range(3))
    for layout in nl.ROPE_LAYOUTS:
        expected = F.scaled_dot_product_attention(nl.apply_rope(q, layout=layout),
                                                  nl.apply_rope(k, layout=layout), v, is_causal=True)
        close(nl.attention(q, k, v, rope=layout), expected)


def test_causal_attention_ignores_the_future():
    mha = nl.MultiHeadAttention(16, 4, rope=True)
    x = torch.randn(1, 6, 16)
    y = mha(x)
    x2 = x.clone()
    x2[:, 4:] = torch.randn(1, 2, 16)
    close(mha(x2)[:, :4], y[:, :4])
    assert not torch.allclose(mha(x2)[:, 4:], y[:, 4:])


def test_multihead_matches_torch_multiheadattention():
    d, h = 16, 4
    mine = nl.MultiHeadAttention(d, h, causal=False).double()
    ref = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mine.q_proj.weight, mine.k_proj.weight,
                                            mine.v_proj.weight]))
        ref.out_proj.weight.copy_(mine.out_proj.weight)
    x = torch.randn(2, 5, d, dtype=torch.float64)
    close(mine(x), ref(x, x, x, need_weights=False)[0])
