"""Sliding-window attention against PyTorch (sdpa with an explicit banded mask, flex_attention
with a mask_mod), and decoding through the rolling cache against the full pass."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from tolerances import DTYPES, close

import normlib as nl


def banded(T, S, window):
    """The mask from its definition: query i (at position S - T + i) sees keys j with
    pos - window < j <= pos."""
    pos = torch.arange(S - T, S)[:, None]
    j = torch.arange(S)[None, :]
    return (j <= pos) & (j > pos - window)


@pytest.mark.parametrize("T,S,window", [(7, 7, 3), (7, 7, 1), (7, 7, 7), (7, 7, 20), (3, 9, 4)])
def test_sliding_window_mask_is_the_band(T, S, window):
    assert torch.equal(nl.sliding_window_mask(T, S, window), banded(T, S, window))
    assert torch.equal(nl.sliding_window_mask(T, S, None), banded(T, S, S + 1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T,S", [(8, 8), (3, 8)])
def test_windowed_attention_equals_sdpa_with_the_banded_mask(dtype, T, S):
    q, k, v = (torch.randn(2, 3, n, 8, dtype=torch.float64).to(dtype) for n in (T, S, S))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=banded(T, S, 3))
    close(nl.attention(q, k, v, window=3, offset=S - T), expected)


def test_windowed_attention_equals_flex_attention():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    q, k, v = (torch.randn(1, 2, 10, 8, dtype=torch.float64) for _ in range(3))

    def sliding(b, h, q_idx, kv_idx):                   # PyTorch's flex_attention docs example
        return (kv_idx <= q_idx) & (q_idx - kv_idx < 4)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # eager flex_attention warns
        mask = create_block_mask(sliding, None, None, 10, 10, device="cpu")
        expected = flex_attention(q, k, v, block_mask=mask)
    close(nl.attention(q, k, v, window=4), expected)
    assert not torch.allclose(nl.attention(q, k, v), expected)


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("chunks", [[1] * 12, [5, 1, 1, 5], [12], [2, 7, 3]])
def test_rolling_cache_decoding_equals_the_full_pass(rope, chunks):
    mha = nl.MultiHeadAttention(32, 4, 2, rope=rope, sliding_window=4).double()
    x = torch.randn(2, 12, 32, dtype=torch.float64)
    full = mha(x)
    cache, steps, start = nl.RollingKVCache(4), [], 0
    for n in chunks:
        steps.append(mha(x[:, start:start + n], cache))
        start += n
        assert cache.seq_len == start and cache.k.shape == (2, 2, min(start, 3), 8)
    close(torch.cat(steps, dim=1), full)
    grown = nl.KVCache()                                # a full cache gives the same, larger
    close(torch.cat([mha(x[:, t:t + 1], grown) for t in range(12)], dim=1), full)
    assert grown.k.shape[-2] == 12


def test_window_limits_what_a_token_sees():
    mha = nl.MultiHeadAttention(16, 2, sliding_window=3)
    x = torch.randn(1, 8, 16)
    x2 = x.clone()
    x2[:, 2] += 5                                       # token 2 is out of reach from 5 on
    y, y2 = mha(x), mha(x2)
    assert torch.equal(y[:, 5:], y2[:, 5:]) and not torch.allclose(y[:, 2:5], y2[:, 2:5])


def test_rolling_cache_checks():
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        nl.RollingKVCache(0)
    mha = nl.MultiHeadAttention(16, 2, sliding_window=3)
    with pytest.raises(ValueError, match="RollingKVCache.*window 5.*sliding_window=3"):
        mha(torch.randn(1, 2, 16), nl.RollingKVCache(5))
    with pytest.raises(ValueError, match="window 3 needs sliding_window=3, got sliding_window=None"):
        nl.MultiHeadAttention(16, 2)(torch.randn(1, 2, 16), nl.RollingKVCache(3))


def test_tiny_lm_with_2025_blocks_decodes_through_rolling_caches():
    # ModelConfig passes qk_norm, sliding_window and softcap to every block; the "reordered"
    # placement (OLMo 2) gets a final norm, as "pre" does.
    lm = nl.TinyTransformerLM(20, 32, 2, 4, 16, norm="rmsnorm", placement="reordered",
                              ffn="swiglu", rope=True, qk_norm="per_head", sliding_window=3,
                              softcap=30.0).double()
    assert isinstance(lm.norm_f, nl.RMSNorm) and lm.blocks[1].attn.sliding_window == 3
    idx = torch.randint(20, (2, 10))
    caches = [nl.RollingKVCache(3) for _ in lm.blocks]
    steps = [lm(idx[:, :4], caches)] + [lm(idx[:, t:t + 1], caches) for t in range(4, 10)]
    close(torch.cat(steps, dim=1), lm(idx))
