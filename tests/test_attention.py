"""Attention against F.scaled_dot_product_attention; RoPE touches q and k only."""

import pytest
import torch
import torch.nn.functional as F
from tolerances import DTYPES, close

import normlib as nl


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T,S", [(7, 7), (1, 1), (5, 9)])
def test_attention_matches_sdpa(dtype, causal, T, S, device):
    q, k, v = (torch.randn(2, 3, n, 8, dtype=torch.float64).to(device, dtype) for n in (T, S, S))
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


def test_multihead_matches_torch_multiheadattention(device):
    d, h = 16, 4
    mine = nl.MultiHeadAttention(d, h, causal=False, device=device, dtype=torch.float64)
    ref = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, device=device,
                                      dtype=torch.float64)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mine.q_proj.weight, mine.k_proj.weight,
                                            mine.v_proj.weight]))
        ref.out_proj.weight.copy_(mine.o_proj.weight)
    x = torch.randn(2, 5, d, dtype=torch.float64, device=device)
    close(mine(x), ref(x, x, x, need_weights=False)[0])


@pytest.mark.parametrize("rope", [None, "half", "interleaved"])
def test_attention_offset_gives_the_last_rows_of_full_attention(rope):
    # q's rows sit at positions offset .. offset+T-1 of a sequence whose keys start at 0.
    q, k, v = (torch.randn(2, 3, 9, 8, dtype=torch.float64) for _ in range(3))
    full = nl.attention(q, k, v, rope=rope)
    close(nl.attention(q[..., 6:, :], k, v, rope=rope, offset=6), full[..., 6:, :])
    close(nl.attention(q[..., 8:, :], k, v, rope=rope, offset=8), full[..., 8:, :])
    lower_right = torch.ones(3, 9, dtype=torch.bool).tril(6)          # FlashAttention's alignment
    close(nl.attention(q[..., 6:, :], k, v, offset=6),
          F.scaled_dot_product_attention(q[..., 6:, :], k, v, attn_mask=lower_right))


def test_repeat_kv_matches_repeat_interleave():
    x = torch.randn(2, 3, 5, 4)
    assert torch.equal(nl.repeat_kv(x, 4), x.repeat_interleave(4, dim=1))   # head j <- j // 4
    assert nl.repeat_kv(x, 1) is x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_grouped_attention_matches_sdpa_enable_gqa(dtype, n_kv_heads, device):
    q = torch.randn(2, 8, 7, 16, dtype=torch.float64).to(device, dtype)
    k, v = (torch.randn(2, n_kv_heads, 7, 16, dtype=torch.float64).to(device, dtype)
            for _ in range(2))
    n_rep = 8 // n_kv_heads
    mine = nl.attention(q, nl.repeat_kv(k, n_rep), nl.repeat_kv(v, n_rep))
    close(mine, F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))


@pytest.mark.parametrize("n_kv_heads", [1, 2, 8])
@pytest.mark.parametrize("rope", [False, True])
def test_gqa_module_matches_sdpa_with_its_weights(n_kv_heads, rope):
    d, h = 64, 8
    mha = nl.MultiHeadAttention(d, h, n_kv_heads, rope=rope).double()
    assert mha.k_proj.out_features == mha.v_proj.out_features == n_kv_heads * 8
    x = torch.randn(2, 6, d, dtype=torch.float64)
    q = mha.q_proj(x).view(2, 6, h, 8).transpose(1, 2)                          # (B, H, T, D)
    k, v = (p(x).view(2, 6, n_kv_heads, 8).transpose(1, 2) for p in (mha.k_proj, mha.v_proj))
    if rope:
        q, k = nl.apply_rope(q, layout="half"), nl.apply_rope(k, layout="half")
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    close(mha(x), mha.o_proj(y.transpose(1, 2).reshape(2, 6, d)))


def test_gqa_is_mha_with_shared_key_value_heads():
    # Copying each key/value head's weights to the query heads of its group gives an MHA layer
    # with the same output: GQA only ties parameters (and shrinks the KV cache).
    gqa = nl.MultiHeadAttention(32, 4, 2, rope=True).double()
    mha = nl.MultiHeadAttention(32, 4, rope=True).double()
    with torch.no_grad():
        for name in ("q_proj", "o_proj"):
            getattr(mha, name).weight.copy_(getattr(gqa, name).weight)
        for name in ("k_proj", "v_proj"):                            # (H_kv * D, C) -> (H * D, C)
            w = getattr(gqa, name).weight.view(2, 8, 32)
            getattr(mha, name).weight.copy_(w.repeat_interleave(2, dim=0).reshape(32, 32))
    x = torch.randn(3, 5, 32, dtype=torch.float64)
    close(gqa(x), mha(x))


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
@pytest.mark.parametrize("rope", [False, True])
def test_decoding_with_kv_cache_equals_the_full_forward(n_kv_heads, rope):
    mha = nl.MultiHeadAttention(32, 4, n_kv_heads, rope=rope).double()
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    full = mha(x)
    cache = nl.KVCache()
    steps = [mha(x[:, :4], cache)]                                # a prompt of 4 tokens ...
    steps += [mha(x[:, t:t + 1], cache) for t in range(4, 9)]     # ... then one token at a time
    close(torch.cat(steps, dim=1), full)
    h_kv = n_kv_heads or 4
    assert cache.seq_len == 9 and cache.k.shape == cache.v.shape == (2, h_kv, 9, 8)
    k = mha.k_proj(x).view(2, 9, h_kv, 8).transpose(1, 2)        # cached keys are rotated at
    close(cache.k, nl.apply_rope(k, layout="half") if rope else k)   # their absolute positions


@pytest.mark.parametrize("options", [dict(), dict(rope=True, n_kv_heads=2, norm="rmsnorm",
                                                  ffn="swiglu"),
                                     dict(placement="deepnorm", n_kv_heads=1)])
def test_lm_decoding_with_caches_equals_the_full_forward(options, device):
    lm = nl.TinyTransformerLM(20, 32, 2, 4, 12, **options).to(device, torch.float64)
    idx = torch.randint(20, (2, 12), device=device)
    caches = [nl.KVCache() for _ in lm.blocks]
    pieces = [lm(idx[:, :5], caches)] + [lm(idx[:, t:t + 1], caches) for t in range(5, 12)]
    close(torch.cat(pieces, dim=1), lm(idx))
    nbytes = sum(c.k.nbytes + c.v.nbytes for c in caches)
    h_kv = options.get("n_kv_heads", 4)
    assert nbytes == nl.kv_cache_bytes(2, h_kv, 8, 12, batch_size=2, bytes_per_element=8)


def test_kv_cache_bytes_for_real_configurations():
    # Configurations from the Llama 3 paper (Table 3) and Llama 2 70B's config.json:
    # 8B: 32 layers, 8 KV heads; 70B: 80 layers, 8 KV heads of 64 query heads; head dim 128.
    GiB = 2**30
    assert nl.kv_cache_bytes(32, 8, 128, 8192) == 1 * GiB                  # LLaMA 3 8B, bf16
    assert nl.kv_cache_bytes(80, 8, 128, 8192) == 2.5 * GiB                # LLaMA 3 70B
    assert nl.kv_cache_bytes(80, 8, 128, 4096) == 1.25 * GiB               # LLaMA 2 70B, 4k ctx
    assert nl.kv_cache_bytes(80, 64, 128, 4096) == 8 * nl.kv_cache_bytes(80, 8, 128, 4096)
