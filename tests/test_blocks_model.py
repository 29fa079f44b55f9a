"""Transformer blocks in every placement, and the tiny language model."""

import pytest
import torch
from conftest import close

import normlib as nl


@pytest.mark.parametrize("placement", nl.PLACEMENTS)
@pytest.mark.parametrize("norm", nl.NORMS)
@pytest.mark.parametrize("ffn", nl.FFNS)
def test_every_block_runs_and_keeps_shape(placement, norm, ffn):
    block = nl.TransformerBlock(16, 4, norm=norm, placement=placement, ffn=ffn, rope=ffn == "swiglu")
    x = torch.randn(2, 5, 16)
    y = block(x)
    assert y.shape == x.shape and torch.isfinite(y).all()
    y.sum().backward()


def _manual(block, x, placement, alpha=1.0):
    a, f, n1, n2 = block.attn, block.ffn, block.norm1, block.norm2
    if placement == "pre":
        x = x + a(n1(x))
        return x + f(n2(x))
    if placement == "sandwich":
        x = x + block.norm1_out(a(n1(x)))
        return x + block.norm2_out(f(n2(x)))
    x = n1(alpha * x + a(x))
    return n2(alpha * x + f(x))


@pytest.mark.parametrize("placement", nl.PLACEMENTS)
def test_block_equations(placement):
    alpha = 2.5 if placement == "deepnorm" else 1.0
    block = nl.TransformerBlock(16, 2, placement=placement, alpha=alpha).double()
    x = torch.randn(2, 4, 16, dtype=torch.float64)
    close(block(x), _manual(block, x, placement, alpha))


def test_post_block_output_is_normalized_pre_block_is_not():
    x = torch.randn(4, 8, 32) * 5
    post = nl.TransformerBlock(32, 4, placement="post")(x)
    pre = nl.TransformerBlock(32, 4, placement="pre")(x)
    close(post.var(-1, unbiased=False).mean(), torch.tensor(1.0), atol=1e-3, rtol=0)
    assert pre.var(-1, unbiased=False).mean() > 10


def test_glu_default_width_keeps_parameters():
    plain = nl.make_ffn("relu", 96)
    glu = nl.make_ffn("swiglu", 96)
    n_plain = sum(p.numel() for p in plain.parameters() if p.dim() == 2)
    n_glu = sum(p.numel() for p in glu.parameters())
    assert glu.w1.out_features == 256 and abs(n_glu - n_plain) / n_plain < 0.01


@pytest.mark.parametrize("placement,final_norm", [("pre", True), ("sandwich", True),
                                                  ("post", False), ("deepnorm", False)])
def test_tiny_lm(placement, final_norm):
    lm = nl.TinyTransformerLM(50, 32, 2, 4, 16, placement=placement, norm="rmsnorm")
    idx = torch.randint(50, (3, 10))
    logits = lm(idx)
    assert logits.shape == (3, 10, 50)
    assert isinstance(lm.norm_f, nl.RMSNorm) == final_norm
    idx2 = idx.clone()
    idx2[:, 7:] = torch.randint(50, (3, 3))                  # changing the future ...
    close(lm(idx2)[:, :7], logits[:, :7])                    # ... leaves the past unchanged


def test_tiny_lm_with_rope_has_no_position_embedding():
    lm = nl.TinyTransformerLM(20, 16, 1, 2, 8, rope=True)
    assert lm.pos_emb is None and lm(torch.zeros(1, 8, dtype=torch.long)).shape == (1, 8, 20)


def test_markov_language_and_training():
    lang = nl.MarkovLanguage(vocab_size=16, order=1, branching=2, seed=0)
    tokens = lang.sample(64, 20, torch.Generator().manual_seed(0))
    assert tokens.shape == (64, 20)
    for a, b in zip(tokens[:, :-1].flatten().tolist(), tokens[:, 1:].flatten().tolist(), strict=True):
        assert b in lang.successors[a].tolist()
    assert 0 < lang.entropy <= torch.log(torch.tensor(2.0)).item() + 1e-6
    lm = nl.TinyTransformerLM(16, 32, 2, 4, 32)
    losses = nl.train_lm(lm, lang, steps=60, lr=3e-3, batch_size=16, seq_len=16)
    assert len(losses) == 60
    assert sum(losses[-10:]) / 10 < lang.uniform_loss - 1.0      # it learned the transitions
