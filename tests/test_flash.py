"""Tiled attention with the online softmax against F.scaled_dot_product_attention, and the
conversion of multi-head attention to GQA by mean-pooling (Ainslie et al. 2023, Section 2.1)."""

import pytest
import torch
import torch.nn.functional as F
from tolerances import DTYPES, close

import normlib as nl


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T,S,block_q,block_k", [(16, 16, 4, 4), (13, 13, 5, 3), (7, 7, 64, 64),
                                                 (9, 9, 1, 1), (5, 11, 2, 4)])
def test_online_softmax_attention_equals_sdpa(dtype, causal, T, S, block_q, block_k):
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 3, n, 8, generator=g, dtype=torch.float64).to(dtype) for n in (T, S))
    v = torch.randn(2, 3, S, 6, generator=g, dtype=torch.float64).to(dtype)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    close(nl.online_softmax_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k),
          expected)


def test_online_softmax_survives_scores_that_overflow_exp():
    # scores near 1000: exp overflows in float32, the running maximum keeps every exp <= 1
    q = torch.full((1, 1, 6, 4), 30.0)
    k = torch.randn(1, 1, 6, 4, generator=torch.Generator().manual_seed(1)) * 30
    v = torch.randn(1, 1, 6, 4)
    out = nl.online_softmax_attention(q, k, v, block_q=2, block_k=2, scale=1.0)
    assert torch.isfinite(out).all()
    close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0))


def test_online_softmax_attention_scale():
    q, k, v = (torch.randn(1, 2, 5, 4, dtype=torch.float64) for _ in range(3))
    close(nl.online_softmax_attention(q, k, v, scale=0.3, block_k=2),
          F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3))


@pytest.mark.parametrize("kwargs,match", [({"block_q": 0}, "block_q"), ({"block_k": 1.5}, "block_k"),
                                          ({"scale": -1.0}, "scale")])
def test_online_softmax_attention_rejects_bad_arguments(kwargs, match):
    q = torch.randn(1, 1, 4, 2)
    with pytest.raises((ValueError, TypeError), match=match):
        nl.online_softmax_attention(q, q, q, **kwargs)


def test_online_softmax_attention_rejects_bad_shapes():
    q = torch.randn(1, 1, 4, 2)
    with pytest.raises(ValueError, match="share"):
        nl.online_softmax_attention(q, torch.randn(1, 1, 4, 3), q)
    with pytest.raises(ValueError, match="shape"):
        nl.online_softmax_attention(q[0], q, q)


def test_mha_to_gqa_pools_the_heads_of_each_group():
    torch.manual_seed(0)
    mha = nl.MultiHeadAttention(16, 4, rope=True, dtype=torch.float64)
    gqa = nl.mha_to_gqa(mha, 2)
    assert (gqa.n_heads, gqa.n_kv_heads, gqa.rope) == (4, 2, True)
    w = mha.k_proj.weight.view(4, 4, 16)                                    # (H, D, C)
    close(gqa.k_proj.weight.view(2, 4, 16)[1], (w[2] + w[3]) / 2)
    close(gqa.q_proj.weight, mha.q_proj.weight)
    close(gqa.o_proj.weight, mha.o_proj.weight)
    assert not torch.equal(gqa.v_proj.weight.view(2, 4, 16)[0], mha.v_proj.weight.view(4, 4, 16)[0])


def test_mha_to_gqa_is_exact_where_the_heads_of_a_group_are_equal():
    torch.manual_seed(0)
    mha = nl.MultiHeadAttention(16, 4, rope=True, qk_norm="per_head", dtype=torch.float64)
    with torch.no_grad():
        for proj in (mha.k_proj, mha.v_proj):
            w = proj.weight.view(4, 4, 16)
            w[1], w[3] = w[0], w[2]                                         # groups {0,1}, {2,3}
        mha.k_norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    gqa = nl.mha_to_gqa(mha, 2)
    close(gqa(x), mha(x))
    close(nl.mha_to_gqa(mha, 4)(x), mha(x))                              # no pooling: the same
    assert (mha(x) - nl.mha_to_gqa(mha, 1)(x)).abs().max() > 1e-3     # MQA pools unequal heads


def test_mha_to_gqa_rejects_bad_arguments():
    mha = nl.MultiHeadAttention(16, 4)
    with pytest.raises(ValueError, match="n_kv_heads must divide"):
        nl.mha_to_gqa(mha, 3)
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        nl.mha_to_gqa(torch.nn.MultiheadAttention(16, 4), 2)
    with pytest.raises(ValueError, match="projection"):
        nl.mha_to_gqa(nl.MultiHeadAttention(16, 4, qk_norm="projection"), 2)
