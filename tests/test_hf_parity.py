"""normlib equals Hugging Face transformers' LLaMA, layer by layer and as a whole model.

Every HF module is built from a config object (no download). Tolerances, per comparison:
- bit for bit (torch.equal) where both sides run the same operations: LlamaRMSNorm in
  fp32/bf16/fp16, RoPE with HF's own inv_freq in fp32;
- the project's tolerance (tolerances.close: float32 at assert_close's defaults, rtol 1.3e-6 and
  atol 1e-5; half types one ulp of the tensor's scale) where the operations differ by rounding:
  SiLU fused (HF) vs x * sigmoid(x) (normlib); cos/sin rounded to bf16 before the product (HF)
  vs after (normlib); frequencies computed in float32 (HF) vs float64 (normlib);
- HF computes RMSNorm and RoPE in float32 even for float64 inputs, so float64 is compared at
  float32's tolerance;
- rescaled frequencies: relative 2e-6, since HF's float32 chain of pow, divide and blend is off
  by a few ulp (up to 9e-7 relative measured) from normlib's float64 values.
"""

import dataclasses
import functools

import pytest
import torch
from tolerances import close

import normlib as nl
from normlib.hf import hf_llama_to_normlib_name, load_llama_weights, model_from_llama_config

f32, f64 = torch.float32, torch.float64


# transformers is imported on first use: the import takes seconds, and every pytest-xdist worker
# collects this file while only one runs it.
@functools.cache
def llama():
    """transformers' LLaMA module: LlamaConfig, LlamaRMSNorm, LlamaMLP, LlamaRotaryEmbedding,
    apply_rotary_pos_emb, LlamaForCausalLM."""
    from transformers.models.llama import modeling_llama
    return modeling_llama


@functools.cache
def rope_init_functions():
    """transformers' RoPE frequency initializers by rope_type (ROPE_INIT_FUNCTIONS)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    return ROPE_INIT_FUNCTIONS


def _config(**kw):
    """A tiny LLaMA: d 64, 4 query heads of dim 16, 2 key/value heads (GQA), eps 1e-5."""
    options = dict(vocab_size=50, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                   num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                   max_position_embeddings=32)
    return llama().LlamaConfig(**{**options, **kw})


@pytest.mark.parametrize("dtype", [f32, torch.bfloat16, torch.float16, f64])
def test_rmsnorm_equals_llama_rmsnorm(dtype):
    hf = llama().LlamaRMSNorm(64, eps=1e-5).to(dtype)
    with torch.no_grad():
        hf.weight.uniform_(0.5, 1.5)
    mine = nl.RMSNorm(64, eps=1e-5).to(dtype)
    mine.load_state_dict(hf.state_dict())                 # the same parameter name: weight
    x = (torch.randn(4, 7, 64, dtype=f64) * 3).to(dtype)
    if dtype == f64:                                      # HF normalizes float64 in float32
        close(mine(x), hf(x), rtol=1.3e-6, atol=1e-5)
    else:                                                 # same order: cast back, then weight
        assert torch.equal(mine(x), hf(x))


@pytest.mark.parametrize("dtype", [f32, f64, torch.bfloat16])
def test_swiglu_equals_llama_mlp(dtype):
    hf = llama().LlamaMLP(_config()).to(dtype)
    mine = nl.GLUFeedForward(64, 96, variant="swiglu").to(dtype)
    mine.load_state_dict({"w1.weight": hf.gate_proj.weight, "w3.weight": hf.up_proj.weight,
                          "w2.weight": hf.down_proj.weight})
    x = torch.randn(3, 5, 64, dtype=f64).to(dtype)
    close(mine(x), hf(x))


LLAMA31 = dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
               high_freq_factor=4.0, original_max_position_embeddings=16)


@pytest.mark.parametrize("rope_parameters", [dict(rope_type="default", rope_theta=10000.0),
                                             LLAMA31], ids=["default", "llama3"])
@pytest.mark.parametrize("dtype", [f32, torch.bfloat16])
def test_apply_rope_half_equals_apply_rotary_pos_emb(rope_parameters, dtype):
    # Head dim 64 over 64 positions; with the llama3 scaling and a training length of 16 the
    # positions reach 4 times past it, and all three frequency regimes occur (kept, blended,
    # divided by 8).
    config = _config(hidden_size=256, max_position_embeddings=128,
                     rope_parameters=dict(rope_parameters))
    rotary = llama().LlamaRotaryEmbedding(config)
    q = torch.randn(2, 4, 64, 64, dtype=f64).to(dtype)                      # (B, H, T, D)
    k = torch.randn(2, 2, 64, 64, dtype=f64).to(dtype)                      # (B, H_kv, T, D)
    cos, sin = rotary(q, torch.arange(64)[None])
    hf_q, hf_k = llama().apply_rotary_pos_emb(q, k, cos, sin)
    if rope_parameters["rope_type"] == "default":                # = apply_rope(base=10,000)
        theta = nl.rope_frequencies(64, 10000.0, dtype=f64)
    else:
        theta = nl.llama3_frequencies(64, 500000.0, 8.0, original_max_position_embeddings=16,
                                      dtype=f64)
    for x, expected in ((q, hf_q), (k, hf_k)):
        mine = nl.apply_rope(x, layout="half", theta=theta)
        if dtype == f32:
            # With HF's own float32 frequencies the rotation is the same, bit for bit ...
            assert torch.equal(nl.apply_rope(x, layout="half", theta=rotary.inv_freq), expected)
            # ... and with normlib's (float64, rounded once) the angles differ by at most
            # m * |theta - inv_freq|, which grows with the position m: the error budget is
            # that angle times the largest pair norm, plus float32 rounding.
            d_theta = (theta.double() - rotary.inv_freq.double()).abs().max().item()
            pair_norm = x.view(*x.shape[:-1], 2, 32).norm(dim=-2).max().item()
            close(mine, expected, rtol=0, atol=63 * d_theta * pair_norm + 1e-5)
        else:
            close(mine, expected)



def test_yarn_rotation_times_attention_factor_equals_hf():
    # A convention difference: HF folds YaRN's temperature into cos and sin (both times
    # sqrt(1/t) = attention_factor, so q.k gets 1/t); normlib returns the frequencies and the
    # factor separately, and apply_rope(x, theta=yarn) * factor is HF's rotation.
    parameters = dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                      original_max_position_embeddings=16)
    rotary = llama().LlamaRotaryEmbedding(_config(hidden_size=256, max_position_embeddings=64,
                                                  rope_parameters=parameters))
    factor = nl.yarn_attention_factor(4.0)
    assert rotary.attention_scaling == pytest.approx(factor, rel=1e-12) and factor > 1.1
    q, k = torch.randn(2, 4, 64, 64), torch.randn(2, 2, 64, 64)            # (B, H, T, D)
    cos, sin = rotary(q, torch.arange(64)[None])
    for x, expected in zip((q, k), llama().apply_rotary_pos_emb(q, k, cos, sin), strict=True):
        close(nl.apply_rope(x, layout="half", theta=rotary.inv_freq) * factor, expected)
        assert not torch.allclose(nl.apply_rope(x, layout="half", theta=rotary.inv_freq), expected)

def _hf_frequencies(rope_type, head_dim=128, seq_len=None, max_position_embeddings=4096,
                    **rope_parameters):
    config = _config(hidden_size=4 * head_dim, max_position_embeddings=max_position_embeddings,
                     rope_parameters=dict(rope_type=rope_type, **rope_parameters))
    inv_freq, attention_factor = rope_init_functions()[rope_type](config, "cpu", seq_len=seq_len)
    return inv_freq.double(), attention_factor


def _close_relative(mine, theirs):
    close(mine, theirs, rtol=2e-6, atol=0)


def test_llama3_frequencies_equal_hf():
    parameters = {**LLAMA31, "original_max_position_embeddings": 8192}
    theirs, factor = _hf_frequencies(parameters.pop("rope_type"), max_position_embeddings=131072,
                                     **parameters)
    _close_relative(nl.llama3_frequencies(128, dtype=f64), theirs)          # Llama 3.1 defaults
    assert factor == 1.0


def test_position_interpolation_equals_hf_linear():
    theirs, _ = _hf_frequencies("linear", rope_theta=10000.0, factor=4.0)
    _close_relative(nl.linear_scaling_frequencies(128, 10000.0, 4.0, dtype=f64), theirs)


@pytest.mark.parametrize("factor,seq_len", [(1.0, 8192), (2.0, 8192), (4.0, 5000), (2.0, 4096)])
def test_ntk_scaling_equals_hf_dynamic(factor, seq_len):
    # HF's dynamic NTK at length l > L uses s = factor * l / L - (factor - 1); s = 1 up to L.
    theirs, _ = _hf_frequencies("dynamic", seq_len=seq_len, rope_theta=10000.0, factor=factor)
    s = factor * seq_len / 4096 - (factor - 1)
    _close_relative(nl.ntk_scaling_frequencies(128, 10000.0, s, dtype=f64), theirs)


@pytest.mark.parametrize("factor,truncate", [(4.0, True), (8.0, True), (16.0, False)])
def test_yarn_equals_hf_yarn(factor, truncate):
    theirs, attention_factor = _hf_frequencies(
        "yarn", max_position_embeddings=int(4096 * factor), rope_theta=10000.0, factor=factor,
        original_max_position_embeddings=4096, truncate=truncate)
    mine = nl.yarn_frequencies(128, 10000.0, factor, original_max_position_embeddings=4096,
                               truncate=truncate, dtype=f64)
    _close_relative(mine, theirs)
    assert nl.yarn_attention_factor(factor) == pytest.approx(attention_factor, rel=1e-12)


def test_hf_names_map_onto_every_normlib_parameter():
    hf = llama().LlamaForCausalLM(_config())
    lm = nl.TinyTransformerLM(50, 64, 3, 4, 32, n_kv_heads=2, norm="rmsnorm", ffn="swiglu",
                              d_ff=96, rope=True)
    mapped = {hf_llama_to_normlib_name(k) for k in hf.state_dict()}
    assert mapped == set(lm.state_dict())


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("n_kv_heads", [2, 4, 1])
def test_tiny_llama_logits_equal_normlib(attn_implementation, n_kv_heads):
    # HF's default attention is "sdpa" (F.scaled_dot_product_attention); "eager" is its
    # hand-written softmax(q k^T / sqrt(D)) v. Both give normlib's logits (max difference
    # measured: 1.8e-7 on logits of size 0.6, float32).
    config = _config(num_key_value_heads=n_kv_heads, attn_implementation=attn_implementation)
    hf = llama().LlamaForCausalLM(config).eval()
    with torch.no_grad():                    # norm weights away from their init of ones
        for name, p in hf.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    lm = nl.TinyTransformerLM(50, 64, 3, 4, 32, n_kv_heads=n_kv_heads, norm="rmsnorm",
                              placement="pre", ffn="swiglu", d_ff=96, rope=True)
    load_llama_weights(lm, hf)
    idx = torch.randint(50, (2, 32))
    with torch.no_grad():
        close(lm(idx), hf(idx).logits)
        caches = [nl.KVCache() for _ in lm.blocks]               # and decoding step by step
        steps = [lm(idx[:, :20], caches)] + [lm(idx[:, t:t + 1], caches) for t in range(20, 32)]
        close(torch.cat(steps, dim=1), hf(idx).logits)


def test_load_llama_weights_refuses_a_model_that_is_not_llama_shaped():
    hf = llama().LlamaForCausalLM(_config())
    post = nl.TinyTransformerLM(50, 64, 3, 4, 32, n_kv_heads=2, norm="layernorm",
                                placement="post", ffn="swiglu", d_ff=96, rope=True)
    with pytest.raises(ValueError, match="norm = 'layernorm', LLaMA: 'rmsnorm'; "
                                         "model.config.placement = 'post', LLaMA: 'pre'"):
        load_llama_weights(post, hf)
    wide = nl.TinyTransformerLM(50, 64, 3, 4, 32, norm="rmsnorm", ffn="swiglu", d_ff=96,
                                rope=True)                   # 4 key/value heads, HF has 2
    with pytest.raises(ValueError, match="model.config.n_kv_heads = 4, HF num_key_value_heads = 2"):
        load_llama_weights(wide, hf)
    with pytest.raises(RuntimeError, match="k_proj.weight"):        # a state dict has no config
        load_llama_weights(wide, hf.state_dict())
    with pytest.raises(LookupError, match="'model.layers.0.self_attn.q_norm.weight'") as info:
        hf_llama_to_normlib_name("model.layers.0.self_attn.q_norm.weight")
    assert type(info.value) is LookupError      # not KeyError, whose str() repr-quotes the message
    causal = nl.TinyTransformerLM(config=dataclasses.replace(nl.llama_model_config(_config()),
                                                             causal=False))
    with pytest.raises(ValueError, match="model.config.causal = False, LLaMA: True"):
        load_llama_weights(causal, hf)


def _hf_with_norm_weights(config):
    """A LlamaForCausalLM in eval mode, its norm weights moved away from their init of ones."""
    hf = llama().LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return hf


def test_model_from_llama_config_reproduces_llama3_constants():
    # Review finding 7: rope_theta 500,000 (Llama 3) and rms_norm_eps 1e-6 (LlamaConfig's
    # default) were accepted silently by a model that computes with 10,000 and 1e-5 (logits off by
    # up to 6.8 and 4.9e-4). model_from_llama_config represents them; the logits are equal.
    config = _config(rope_theta=500_000.0, rms_norm_eps=1e-6)
    hf = _hf_with_norm_weights(config)
    lm = model_from_llama_config(config)
    assert (lm.config.rope_base, lm.config.norm_eps) == (500_000.0, 1e-6)
    load_llama_weights(lm, hf)
    idx = torch.randint(50, (2, 32))
    with torch.no_grad():
        close(lm(idx), hf(idx).logits)


def test_load_llama_weights_names_every_config_mismatch():
    hf = _hf_with_norm_weights(_config(rope_theta=500_000.0, rms_norm_eps=1e-6))
    lm = nl.TinyTransformerLM(50, 64, 3, 4, 32, n_kv_heads=2, norm="rmsnorm", ffn="swiglu",
                              d_ff=96, rope=True)                    # eps 1e-5, base 10,000
    with pytest.raises(ValueError) as info:
        load_llama_weights(lm, hf)
    for words in ("model.config.norm_eps = 1e-05, HF rms_norm_eps = 1e-06",
                  "model.config.rope_base = 10000.0, HF rope_theta = 500000.0"):
        assert words in str(info.value)


@pytest.mark.parametrize("ignored", [dict(fused_norm=True), dict(max_seq_len=48)])
def test_load_llama_weights_ignores_only_fields_that_do_not_change_the_logits(ignored):
    # Review finding 7: fused_norm=True (nn.RMSNorm, the same function) was refused with
    # "norm=RMSNorm (LLaMA: 'rmsnorm')". max_seq_len only bounds the input length.
    config = _config()
    hf = _hf_with_norm_weights(config)
    lm = nl.TinyTransformerLM(config=dataclasses.replace(nl.llama_model_config(config), **ignored))
    load_llama_weights(lm, hf)
    idx = torch.randint(50, (2, 32))
    with torch.no_grad():
        close(lm(idx), hf(idx).logits)


def _hf_with_large_weights():
    """Code review 2's LlamaForCausalLM (finding 6): every weight drawn from N(0, 0.5), so that a
    field the loader did not compare changes the logits by far more than rounding."""
    hf = llama().LlamaForCausalLM(_config(num_hidden_layers=2)).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.5)
    return hf


# Code review 2, finding 6: these three were loaded and computed other logits than HF's (max
# |difference| 3.66 for softcap 2.0 and 4.72 for a window of 4), or failed in load_state_dict with
# "Missing key(s) ... q_norm.weight" (qk_norm)
FIELDS_2025 = [(dict(softcap=2.0), "model.config.softcap = 2.0, LLaMA: None"),
               (dict(sliding_window=4), "model.config.sliding_window = 4, LLaMA: None"),
               (dict(qk_norm="per_head"), "model.config.qk_norm = 'per_head', LLaMA: None")]


@pytest.mark.parametrize("extra,words", FIELDS_2025, ids=["softcap", "sliding_window", "qk_norm"])
def test_load_llama_weights_compares_the_whole_config(extra, words):
    hf = _hf_with_large_weights()
    same = nl.TinyTransformerLM(config=nl.llama_model_config(hf.config)).eval()
    load_llama_weights(same, hf)
    idx = torch.randint(50, (1, 16))
    with torch.no_grad():
        close(same(idx), hf(idx).logits)                   # the loader and the check are right
    other = nl.TinyTransformerLM(config=dataclasses.replace(same.config, **extra))
    for source in (hf, hf.state_dict()):                   # a bare state dict too
        with pytest.raises(ValueError, match="computes differently") as info:
            load_llama_weights(other, source)
        assert words in str(info.value)


def test_load_llama_weights_names_every_difference_in_one_error():
    hf = _hf_with_large_weights()
    config = dataclasses.replace(nl.llama_model_config(hf.config), softcap=2.0, sliding_window=4,
                                 norm_eps=1e-3, d_ff=64, max_seq_len=16, fused_norm=True)
    with pytest.raises(ValueError) as info:
        load_llama_weights(nl.TinyTransformerLM(config=config), hf)
    message = str(info.value)
    for words in ("model.config.norm_eps = 0.001, HF rms_norm_eps = 1e-05",
                  "model.config.d_ff = 64, HF intermediate_size = 96",
                  "model.config.sliding_window = 4, LLaMA: None",
                  "model.config.softcap = 2.0, LLaMA: None"):
        assert words in message
    assert "max_seq_len" not in message and "fused_norm" not in message
    assert message.count("model.config.") == 4


def test_load_llama_weights_fills_in_the_configs_defaults():
    # n_kv_heads=None is n_heads, and d_ff=None is int(8 d_model / 3) for SwiGLU: the same model
    # as the LlamaConfig that spells them out
    hf = _hf_with_norm_weights(_config(num_key_value_heads=4, intermediate_size=170))
    lm = nl.TinyTransformerLM(50, 64, 3, 4, 32, norm="rmsnorm", ffn="swiglu", rope=True)
    load_llama_weights(lm, hf)
    idx = torch.randint(50, (2, 32))
    with torch.no_grad():
        close(lm(idx), hf(idx).logits)


@pytest.mark.parametrize("setting,words", [
    (dict(attention_bias=True), "attention_bias=True (normlib: False)"),
    (dict(mlp_bias=True), "mlp_bias=True (normlib: False)"),
    (dict(hidden_act="gelu"), "hidden_act='gelu' (normlib: 'silu')"),
    (dict(head_dim=32), "head_dim=32 (normlib: 16)"),
    (dict(rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=2.0)),
     "rope_type='linear' (normlib: 'default')"),
])
def test_configs_normlib_cannot_represent_are_named(setting, words):
    config = _config(**setting)
    with pytest.raises(ValueError, match="cannot represent") as info:
        model_from_llama_config(config)
    assert words in str(info.value)
    lm = nl.TinyTransformerLM(50, 64, 3, 4, 32, n_kv_heads=2, norm="rmsnorm", ffn="swiglu",
                              d_ff=96, rope=True)
    with pytest.raises(ValueError, match="cannot represent"):
        load_llama_weights(lm, llama().LlamaForCausalLM(config))
