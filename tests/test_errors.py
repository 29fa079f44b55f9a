"""Bad input gets a clear error naming the argument, the value and what was expected."""

import pytest
import torch

import normlib as nl

x = torch.randn(4, 8)

CASES = [
    # (call, exception, words the message must contain)
    (lambda: nl.layer_norm(x, 7), ValueError, ["normalized_shape", "[7]", "[4, 8]"]),
    (lambda: nl.layer_norm(x, (4, 7)), ValueError, ["normalized_shape", "[4, 7]"]),
    (lambda: nl.rms_norm(x, 16), ValueError, ["normalized_shape", "[16]", "[4, 8]"]),
    (lambda: nl.LayerNorm(5)(x), ValueError, ["normalized_shape", "[5]"]),
    (lambda: nl.layer_norm(x, 8, torch.ones(7)), ValueError, ["weight", "[7]", "[8]"]),
    (lambda: nl.BatchNorm(3)(x), ValueError, ["(B, 3, ...)", "(4, 8)"]),
    (lambda: nl.BatchNorm(3)(torch.randn(3)), ValueError, ["(B, 3, ...)", "(3,)"]),
    (lambda: nl.batch_norm(torch.randn(3), torch.zeros(3), torch.ones(3)), ValueError,
     ["at least 2 dims", "(3,)"]),
    (lambda: nl.batch_norm(x, torch.zeros(3), torch.ones(3)), ValueError,
     ["running_mean", "(8,)", "(3,)"]),
    (lambda: nl.BatchNorm(3)(torch.randn(1, 3)), ValueError,
     ["Expected more than 1 value per channel when training, got input size torch.Size([1, 3])"]),
    (lambda: nl.apply_rope(torch.randn(2, 5, 63)), ValueError, ["even head_dim", "63"]),
    (lambda: nl.rope_frequencies(63), ValueError, ["even head_dim", "63"]),
    (lambda: nl.half_to_interleaved(7), ValueError, ["even head_dim", "7"]),
    (lambda: nl.apply_rope(torch.randn(2, 5, 8), torch.arange(4)), ValueError,
     ["positions", "(5,)", "(4,)"]),
    (lambda: nl.apply_rope(torch.randn(2, 5, 8), base=0.0), ValueError, ["base", "> 0", "0.0"]),
    (lambda: nl.apply_rope(torch.randn(2, 5, 8), base=-1.0), ValueError, ["base", "-1.0"]),
    (lambda: nl.apply_rope(torch.randn(2, 5, 8), layout="rotated"), ValueError,
     ["layout", "'rotated'", "'interleaved'", "'half'"]),
    (lambda: nl.rope_decay_bound(64, 10, base=-5), ValueError, ["base", "-5"]),
    (lambda: nl.layer_norm(x, 8, eps=-1e-5), ValueError, ["eps", "-1e-05", ">= 0"]),
    (lambda: nl.rms_norm(x, 8, eps=-1.0), ValueError, ["eps", "-1.0"]),
    (lambda: nl.RMSNorm(8, eps=-1.0), ValueError, ["eps", "-1.0"]),
    (lambda: nl.BatchNorm(8, eps=-1.0), ValueError, ["eps", "-1.0"]),
    (lambda: nl.FeedForward(8, 32, activation="relu6"), ValueError,
     ["activation", "'relu6'", "'relu'", "'gelu'", "'swish'"]),
    (lambda: nl.activation("mish"), ValueError, ["'mish'", "'silu'"]),
    (lambda: nl.gelu(x, approximate="fast"), ValueError, ["approximate", "'fast'", "'tanh'"]),
    (lambda: nl.glu_variant(x, x, "swiglu2"), ValueError,
     ["variant", "'swiglu2'", "'glu'", "'bilinear'", "'reglu'", "'geglu'", "'swiglu'",
      "'geglu_tanh'"]),
    (lambda: nl.GLUFeedForward(8, 16, variant="xglu"), ValueError, ["variant", "'xglu'"]),
    (lambda: nl.TransformerBlock(16, 4, norm="batchnorm"), ValueError,
     ["norm", "'batchnorm'", "'layernorm'", "'rmsnorm'"]),
    (lambda: nl.TransformerBlock(16, 4, placement="middle"), ValueError,
     ["placement", "'middle'", "'post'", "'pre'", "'deepnorm'", "'sandwich'"]),
    (lambda: nl.TransformerBlock(16, 4, ffn="mlp"), ValueError, ["ffn", "'mlp'", "'swiglu'"]),
    (lambda: nl.TransformerBlock(16, 4, placement="pre", alpha=2.0), ValueError,
     ["alpha", "deepnorm", "'pre'"]),
    (lambda: nl.deepnorm_constants(), ValueError, ["num_encoder_layers=0", "num_decoder_layers=0"]),
    (lambda: nl.deepnorm_constants(-3), ValueError, ["num_encoder_layers", "-3", ">= 0"]),
    (lambda: nl.deepnorm_constants(0, -1), ValueError, ["num_decoder_layers", "-1"]),
    (lambda: nl.deepnorm_constants(2.5), TypeError, ["num_encoder_layers", "int", "2.5"]),
    (lambda: nl.deepnorm_init_(torch.nn.ReLU(), 0.5), ValueError, ["q_proj", "ReLU"]),
    (lambda: nl.deepnorm_init_(nl.MultiHeadAttention(8, 2), 0.0), ValueError, ["beta", "0.0"]),
    (lambda: nl.linear_warmup(-10), ValueError, ["warmup_steps", "-10", ">= 0"]),
    (lambda: nl.cosine_with_warmup(-1, 10), ValueError, ["warmup_steps", "-1"]),
    (lambda: nl.inverse_sqrt(512, -1), ValueError, ["warmup_steps", "-1"]),
    (lambda: nl.cosine_with_warmup(100, 50), ValueError,
     ["total_steps", "warmup_steps", "50", "100"]),
    (lambda: nl.linear_warmup(10)(-1), ValueError, ["step", "-1"]),
    (lambda: nl.MultiHeadAttention(30, 4), ValueError, ["divisible", "d_model=30", "n_heads=4"]),
    (lambda: nl.TransformerBlock(30, 4), ValueError, ["divisible", "d_model=30", "n_heads=4"]),
    (lambda: nl.TinyTransformerLM(10, 30, 2, 4, 8), ValueError, ["divisible", "n_heads=4"]),
    (lambda: nl.llama_ffn_hidden_dim(4096, multiple_of=0), ValueError, ["multiple_of", "0"]),
    (lambda: nl.llama_ffn_hidden_dim(4096, multiple_of=-256), ValueError, ["multiple_of", "-256"]),
    (lambda: nl.layer_norm([[1.0, 2.0]], 2), TypeError, ["x", "torch.Tensor", "list"]),
    (lambda: nl.rms_norm(None, 2), TypeError, ["x", "torch.Tensor", "NoneType"]),
    (lambda: nl.batch_norm(1.0, None, None, training=True), TypeError, ["x", "float"]),
    (lambda: nl.apply_rope(torch.arange(8).view(1, 8)), TypeError, ["x", "floating", "int64"]),
    (lambda: nl.attention(x, "k", x), TypeError, ["k", "torch.Tensor", "str"]),
    (lambda: nl.gelu([1.0]), TypeError, ["x", "torch.Tensor"]),
    (lambda: nl.TinyTransformerLM(10, 8, 1, 2, 4)(torch.zeros(1, 5, dtype=torch.long)),
     ValueError, ["max_seq_len=4", "5"]),
    (lambda: nl.MarkovLanguage(vocab_size=4, branching=5), ValueError, ["branching", "5"]),
    (lambda: nl.MarkovLanguage(vocab_size=64, order=4), ValueError,
     ["vocab_size ** (order + 1)", "2^24", "vocab_size=64", "order=4"]),
    (lambda: nl.ModelConfig(10, 8, 2, 2, 8, placement="middle"), ValueError,
     ["ModelConfig", "placement", "'middle'", "'pre'"]),
    (lambda: nl.ModelConfig(10, 8, 2, 2, 8, norm_eps=-1.0), ValueError, ["norm_eps", "-1.0"]),
    (lambda: nl.ModelConfig(10, 8, 2, 2, 8, rope_base=0.0), ValueError, ["rope_base", "> 0"]),
    (lambda: nl.ModelConfig(10, 8, 2, 2, 8, rope="yes"), TypeError, ["rope", "True or False"]),
    (lambda: nl.ModelConfig(10, 8, 2, 2, 8, alpha=2.0), ValueError,
     ["alpha=2.0", "placement='deepnorm'", "placement='pre'"]),
    (lambda: nl.ModelConfig(10, 8, 2, 2, 8, sliding_window=4, causal=False), ValueError,
     ["sliding_window=4", "causal=True", "causal=False"]),
    (lambda: nl.ModelConfig(10, 8, 2, 2, 8, qk_norm="typo", softcap=-1.0), ValueError,
     ["2 problems", "qk_norm 'typo'", "'per_head'", "softcap must be > 0, got -1.0"]),
    (lambda: nl.TinyTransformerLM(10, 8, 0, 2, 8), ValueError, ["n_layers", ">= 1", "0"]),
    (lambda: nl.TinyTransformerLM(config={"vocab_size": 10}), TypeError,
     ["config", "ModelConfig", "dict"]),
    (lambda: nl.TinyTransformerLM(10, 8, 1, 2, 8)(torch.zeros(1, 3)), TypeError,
     ["idx", "int64 or int32", "torch.float32"]),
    (lambda: nl.MultiHeadAttention(8, 2, rope=True, rope_base=-1.0), ValueError,
     ["rope_base", "> 0", "-1.0"]),
    (lambda: nl.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), None, (torch.ones(3, 2),) * 2),
     ValueError, ["position_embeddings", "rope=False"]),
    (lambda: nl.make_norm("rmsnorm", 8, eps=-1e-6), ValueError, ["eps", "-1e-06"]),
    (lambda: nl.MultiHeadAttention(32, 4, 3), ValueError,
     ["n_heads must be divisible by n_kv_heads", "n_heads=4", "n_kv_heads=3"]),
    (lambda: nl.MultiHeadAttention(32, 4, 0), ValueError, ["n_kv_heads", ">= 1", "0"]),
    (lambda: nl.TinyTransformerLM(10, 32, 1, 4, 8, n_kv_heads=3), ValueError, ["n_kv_heads=3"]),
    (lambda: nl.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), cache={}), TypeError,
     ["cache", "KVCache", "dict"]),
    (lambda: nl.TinyTransformerLM(10, 8, 2, 2, 8)(torch.zeros(1, 3, dtype=torch.long),
                                                  [nl.KVCache()]), TypeError,
     ["caches", "2 KVCache", "list"]),
    (lambda: _decode_past_max_seq_len(), ValueError,
     ["max_seq_len=8", "9", "6 cached + 3 new"]),
    (lambda: nl.KVCache().update(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4)), ValueError,
     ["k and v", "(1, 2, 3, 4)", "(1, 2, 5, 4)"]),
    (lambda: _filled_cache().update(torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)), ValueError,
     ["(1, 1, 3, 4)", "(1, 2, 3, 4)", "except along S"]),
    (lambda: nl.KVCache().update(torch.randn(2, 3, 4), torch.randn(2, 3, 4)), ValueError,
     ["k", "(B, H_kv, T, D)", "(2, 3, 4)"]),
    (lambda: nl.attention(x, x, x, offset=-1), ValueError, ["offset", ">= 0", "-1"]),
    (lambda: nl.repeat_kv(torch.randn(2, 3, 4), 2), ValueError, ["(B, H_kv, S, D)", "(2, 3, 4)"]),
    (lambda: nl.repeat_kv(torch.randn(1, 2, 3, 4), 0), ValueError, ["n_rep", ">= 1", "0"]),
    (lambda: nl.kv_cache_bytes(32, 8, 128, -1), ValueError, ["seq_len", ">= 0", "-1"]),
    (lambda: nl.kv_cache_bytes(32, 8.0, 128, 10), TypeError, ["n_kv_heads", "int", "8.0"]),
    (lambda: nl.apply_rope(torch.randn(5, 8), theta=torch.ones(8)), ValueError,
     ["theta", "(4,)", "(8,)"]),
    (lambda: nl.apply_rope(torch.randn(5, 8), theta=[1.0] * 4), TypeError, ["theta", "list"]),
    (lambda: nl.linear_scaling_frequencies(64, factor=0.5), ValueError, ["factor", ">= 1", "0.5"]),
    (lambda: nl.ntk_scaling_frequencies(63, factor=2.0), ValueError, ["even head_dim", "63"]),
    (lambda: nl.yarn_frequencies(64, factor=4.0, original_max_position_embeddings=0), ValueError,
     ["original_max_position_embeddings", ">= 1", "0"]),
    (lambda: nl.llama3_frequencies(64, low_freq_factor=4.0, high_freq_factor=1.0), ValueError,
     ["high_freq_factor", "low_freq_factor", "4.0", "1.0"]),
]


def _decode_past_max_seq_len():
    """6 tokens in the caches of a model with max_seq_len 8: 3 more do not fit."""
    lm = nl.TinyTransformerLM(10, 8, 2, 2, 8)
    caches = [nl.KVCache() for _ in lm.blocks]
    lm(torch.zeros(1, 6, dtype=torch.long), caches)
    lm(torch.zeros(1, 3, dtype=torch.long), caches)


def _filled_cache():
    cache = nl.KVCache()
    cache.update(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    return cache


@pytest.mark.parametrize("call,exc,words", CASES, ids=[str(i) for i in range(len(CASES))])
def test_error_names_argument_value_and_expectation(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value), f"{w!r} missing from: {info.value}"


def test_batchnorm_error_text_is_pytorchs():
    with pytest.raises(ValueError) as mine:
        nl.BatchNorm(3)(torch.randn(1, 3))
    with pytest.raises(ValueError) as ref:
        torch.nn.BatchNorm1d(3)(torch.randn(1, 3))
    assert str(mine.value) == str(ref.value)


def test_batchnorm_num_features_must_be_a_positive_int():
    with pytest.raises(TypeError, match="num_features.*int.*3.0"):
        nl.BatchNorm(3.0)
    with pytest.raises(ValueError, match="num_features must be >= 1, got 0"):
        nl.BatchNorm(0)
