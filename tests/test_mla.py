"""MLA (DeepSeek-V2, Section 2.1): the absorbed form equals the plain one, decoding through the
latent cache equals the full pass, and the plain form equals attention over the reconstructed
keys and values written with sdpa."""

import pytest
import torch
import torch.nn.functional as F
from tolerances import close

import normlib as nl


def make(q_lora_rank=12, rope_head_dim=4):
    return nl.MultiHeadLatentAttention(32, 4, 8, 10, q_lora_rank=q_lora_rank,
                                       rope_head_dim=rope_head_dim).double()


@pytest.mark.parametrize("q_lora_rank,rope_head_dim", [(12, 4), (None, 4), (12, 0)])
def test_absorbed_equals_plain(q_lora_rank, rope_head_dim):
    mla = make(q_lora_rank, rope_head_dim)
    x = torch.randn(2, 7, 32, dtype=torch.float64)
    close(mla(x, absorb=True), mla(x))


def test_plain_equals_sdpa_over_reconstructed_keys():
    mla = make()
    B, T, H, D, R = 2, 6, 4, 8, 4
    x = torch.randn(B, T, 32, dtype=torch.float64)
    c_q, c_kv = mla.w_dq(x), mla.w_dkv(x)
    q_c = mla.w_uq(c_q).view(B, T, H, D).transpose(1, 2)
    q_r = nl.apply_rope(mla.w_qr(c_q).view(B, T, H, R).transpose(1, 2), layout="half")
    k_r = nl.apply_rope(mla.w_kr(x)[:, None], layout="half").expand(B, H, T, R)
    k_c = mla.w_uk(c_kv).view(B, T, H, D).transpose(1, 2)
    v = mla.w_uv(c_kv).view(B, T, H, D).transpose(1, 2)
    y = F.scaled_dot_product_attention(torch.cat((q_c, q_r), -1), torch.cat((k_c, k_r), -1), v,
                                       is_causal=True)               # scale 1/sqrt(D + R)
    close(mla(x), mla.w_o(y.transpose(1, 2).reshape(B, T, H * D)))


@pytest.mark.parametrize("absorb", [False, True])
def test_latent_cache_decoding_equals_the_full_pass(absorb):
    mla = make()
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    cache = nl.KVCache()
    steps = [mla(x[:, :4], cache, absorb=absorb)]
    steps += [mla(x[:, t:t + 1], cache, absorb=absorb) for t in range(4, 9)]
    close(torch.cat(steps, dim=1), mla(x))
    # per token the cache holds d_c + R = 14 numbers, MHA's would hold 2 H D = 64
    assert cache.k.shape == (2, 1, 9, 10) and cache.v.shape == (2, 1, 9, 4)
    assert nl.mla_cache_elements(10, 4) == 14


def test_rope_on_the_compressed_key_cannot_be_absorbed():
    # Section 2.1.3: with RoPE on k^C the score q^T R_(s-t) W^UK c depends on s - t through the
    # rotation, so W^UQ^T W^UK alone cannot reproduce it: the same latent pair gives different
    # logits at different offsets, while the decoupled k^R carries the position instead.
    D = 8
    q, k = (torch.randn(1, 1, 1, D, dtype=torch.float64) for _ in range(2))
    logits = [(nl.apply_rope(q, torch.tensor([m]), layout="half")
               * nl.apply_rope(k, torch.tensor([0]), layout="half")).sum().item() for m in (0, 3)]
    assert abs(logits[0] - (q * k).sum().item()) < 1e-12 and abs(logits[1] - logits[0]) > 1e-3


def test_mla_checks_arguments():
    with pytest.raises(ValueError, match="even rope_head_dim, got 3"):
        nl.MultiHeadLatentAttention(32, 4, 8, 10, rope_head_dim=3)
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        make()(torch.randn(1, 2, 32, dtype=torch.float64), cache={})
