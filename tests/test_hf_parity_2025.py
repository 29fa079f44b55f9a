"""normlib's blocks equal the decoder layers of three 2025 models in Hugging Face transformers:
Qwen3 (pre-norm, QK-norm per head), OLMo 2 (the norm on each sublayer's output only, QK-norm over
the whole projection) and Gemma 3 (norms before and after each sublayer, QK-norm per head,
sliding-window layers with their own RoPE base, RMSNorm scaled by 1 + weight).

Each HF model is built from a config object with tiny sizes (nothing downloaded) and run on
``inputs_embeds``, so its whole decoder stack and final norm are compared; the weights are copied
into ``nl.TransformerBlock``s by name. Float32 at the project's tolerance (tolerances.close:
rtol 1.3e-6, atol 1e-5); the HF side computes with ``F.scaled_dot_product_attention`` ("sdpa",
HF's default) or its hand-written "eager" attention.
"""

import functools

import pytest
import torch
from tolerances import close

import normlib as nl

SIZES = dict(vocab_size=50, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             max_position_embeddings=32)


@functools.cache
def hf():
    """transformers' Qwen3, OLMo 2 and Gemma 3 model modules (imported on first use)."""
    from transformers.models.gemma3 import modeling_gemma3
    from transformers.models.olmo2 import modeling_olmo2
    from transformers.models.qwen3 import modeling_qwen3
    return modeling_qwen3, modeling_olmo2, modeling_gemma3


# HF parameter name inside a decoder layer -> normlib's inside a TransformerBlock, per placement
_ATTN_AND_MLP = {f"self_attn.{p}.weight": f"attn.{p}.weight"
                 for p in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm")}
_ATTN_AND_MLP.update({"mlp.gate_proj.weight": "ffn.w1.weight", "mlp.up_proj.weight": "ffn.w3.weight",
                      "mlp.down_proj.weight": "ffn.w2.weight"})
NAMES = {
    "pre": {"input_layernorm.weight": "norm1.weight",                             # Qwen3
            "post_attention_layernorm.weight": "norm2.weight"},
    "reordered": {"post_attention_layernorm.weight": "norm1.weight",              # OLMo 2
                  "post_feedforward_layernorm.weight": "norm2.weight"},
    "sandwich": {"input_layernorm.weight": "norm1.weight",                        # Gemma 3
                 "post_attention_layernorm.weight": "norm1_out.weight",
                 "pre_feedforward_layernorm.weight": "norm2.weight",
                 "post_feedforward_layernorm.weight": "norm2_out.weight"},
}


def _randomize_norms(model, centre):
    """Norm gains away from their init (ones; Gemma's zeros, used as 1 + w): uniform around
    ``centre``, so a swapped or missing gain shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(centre - 0.5, centre + 0.5)


def _load_block(block, hf_layer, placement, plus_one):
    """Copy one HF decoder layer's weights into a TransformerBlock by name. Gemma's RMSNorm
    scales by (1 + weight) (HF Gemma3RMSNorm), normlib's by weight: Gemma's gains load as 1 + w."""
    names = {**_ATTN_AND_MLP, **NAMES[placement]}
    state = {names[k]: (v + 1 if plus_one and "norm" in k else v)
             for k, v in hf_layer.state_dict().items()}
    block.load_state_dict(state)                          # strict: every parameter, both ways


def _compare(model, blocks, final_norm, T=12, decode_from=None):
    """HF's last hidden state vs normlib's blocks and final norm on the same embeddings; with
    ``decode_from`` also normlib decoding token by token from that position on, through each
    block's cache (``caches``)."""
    x = torch.randn(2, T, model.config.hidden_size)
    with torch.no_grad():
        expected = model(inputs_embeds=x).last_hidden_state
        h = x
        for block in blocks:
            h = block(h)
        close(final_norm(h), expected)
        if decode_from is None:
            return (final_norm(h) - expected).abs().max().item()
        caches = [nl.RollingKVCache(b.attn.sliding_window) if b.attn.sliding_window
                  else nl.KVCache() for b in blocks]
        steps = []
        for start, stop in [(0, decode_from)] + [(t, t + 1) for t in range(decode_from, T)]:
            h = x[:, start:stop]
            for block, cache in zip(blocks, caches, strict=True):
                h = block(h, cache)
            steps.append(final_norm(h))
        close(torch.cat(steps, dim=1), expected)
        return (final_norm(h) - expected[:, -1:]).abs().max().item()


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_qwen3_decoder_equals_pre_norm_blocks_with_per_head_qk_norm(attn_implementation):
    qwen3 = hf()[0]
    config = qwen3.Qwen3Config(**SIZES, rms_norm_eps=1e-6, attn_implementation=attn_implementation)
    model = qwen3.Qwen3Model(config).eval()
    _randomize_norms(model, 1.0)
    blocks = [nl.TransformerBlock(64, 4, 2, norm="rmsnorm", norm_eps=1e-6, placement="pre",
                                  ffn="swiglu", d_ff=96, rope=True,
                                  rope_base=config.rope_parameters["rope_theta"],
                                  qk_norm="per_head")
              for _ in range(2)]
    for block, layer in zip(blocks, model.layers, strict=True):
        _load_block(block, layer, "pre", plus_one=False)
    final = nl.RMSNorm(64, eps=1e-6)
    final.load_state_dict(model.norm.state_dict())
    _compare(model, blocks, final, decode_from=5)


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_olmo2_decoder_equals_reordered_blocks_with_qk_norm_over_the_projection(
        attn_implementation):
    olmo2 = hf()[1]
    sizes = {k: v for k, v in SIZES.items() if k != "head_dim"}      # OLMo 2: C / H
    config = olmo2.Olmo2Config(**sizes, rms_norm_eps=1e-6, eos_token_id=None, pad_token_id=None,
                               attn_implementation=attn_implementation)
    model = olmo2.Olmo2Model(config).eval()
    _randomize_norms(model, 1.0)
    assert model.layers[0].self_attn.q_norm.weight.shape == (64,)    # H D, not D
    blocks = [nl.TransformerBlock(64, 4, 2, norm="rmsnorm", norm_eps=1e-6, placement="reordered",
                                  ffn="swiglu", d_ff=96, rope=True,
                                  rope_base=config.rope_parameters["rope_theta"],
                                  qk_norm="projection")
              for _ in range(2)]
    for block, layer in zip(blocks, model.layers, strict=True):
        _load_block(block, layer, "reordered", plus_one=False)
    final = nl.RMSNorm(64, eps=1e-6)
    final.load_state_dict(model.norm.state_dict())
    _compare(model, blocks, final, decode_from=5)


def _gemma3(attn_implementation):
    """A two-layer Gemma 3: a sliding-window layer (W = 4, RoPE base 10,000) then a global one
    (RoPE base 1,000,000), Gemma 3's local and global bases. query_pre_attn_scalar = head_dim
    makes HF's scale 1 / sqrt(D), normlib's; the FFN is Gemma 3's default, hidden_activation
    "gelu_pytorch_tanh", normlib's "geglu_tanh"."""
    gemma3 = hf()[2]
    config = gemma3.Gemma3TextConfig(**SIZES, rms_norm_eps=1e-6, query_pre_attn_scalar=16,
                                     sliding_window=4,
                                     layer_types=["sliding_attention", "full_attention"],
                                     attn_implementation=attn_implementation)
    model = gemma3.Gemma3TextModel(config).eval()
    _randomize_norms(model, 0.0)                                     # 1 + w in [0.5, 1.5]
    bases = {kind: p["rope_theta"] for kind, p in config.rope_parameters.items()}
    assert bases == {"sliding_attention": 10000.0, "full_attention": 1e6}
    blocks = [nl.TransformerBlock(64, 4, 2, norm="rmsnorm", norm_eps=1e-6, placement="sandwich",
                                  ffn="geglu_tanh", d_ff=96, rope=True, rope_base=bases[kind],
                                  qk_norm="per_head",
                                  sliding_window=4 if kind == "sliding_attention" else None)
              for kind in config.layer_types]
    for block, layer in zip(blocks, model.layers, strict=True):
        _load_block(block, layer, "sandwich", plus_one=True)
    final = nl.RMSNorm(64, eps=1e-6)
    final.load_state_dict({"weight": model.norm.weight + 1})
    return model, blocks, final


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_gemma3_decoder_equals_sandwich_blocks_with_a_sliding_window_layer(attn_implementation):
    model, blocks, final = _gemma3(attn_implementation)
    assert model.config.hidden_activation == "gelu_pytorch_tanh"       # Gemma 3's default
    assert blocks[0].attn.sliding_window == 4 and blocks[1].attn.sliding_window is None
    _compare(model, blocks, final, decode_from=5)             # the local layer decodes through
                                                              # a RollingKVCache of 3 keys


def test_gemma2_soft_capped_decoder_equals_sandwich_blocks_with_softcap():
    # Gemma 2 caps the attention logits (50 by default; 5 here so that it bites at these sizes)
    # in HF's eager attention. transformers 5.23's Gemma 3 accepts attn_logit_softcapping in its
    # config but never passes it to the attention (Gemma3Attention.forward), so Gemma 2 it is.
    from transformers.models.gemma2 import modeling_gemma2 as gemma2
    cap = 5.0
    config = gemma2.Gemma2Config(**SIZES, rms_norm_eps=1e-6, query_pre_attn_scalar=16,
                                 sliding_window=4, attn_logit_softcapping=cap,
                                 layer_types=["sliding_attention", "full_attention"],
                                 attn_implementation="eager")
    model = gemma2.Gemma2Model(config).eval()
    _randomize_norms(model, 0.0)
    blocks = [nl.TransformerBlock(64, 4, 2, norm="rmsnorm", norm_eps=1e-6, placement="sandwich",
                                  ffn="geglu_tanh", d_ff=96, rope=True,
                                  rope_base=config.rope_parameters["rope_theta"],
                                  sliding_window=4 if kind == "sliding_attention" else None,
                                  softcap=cap)
              for kind in config.layer_types]
    for block, layer in zip(blocks, model.layers, strict=True):
        _load_block(block, layer, "sandwich", plus_one=True)
    final = nl.RMSNorm(64, eps=1e-6)
    final.load_state_dict({"weight": model.norm.weight + 1})
    _compare(model, blocks, final, decode_from=5)
    for block in blocks:                                  # the cap changed the result
        block.attn.softcap = None
    with pytest.raises(AssertionError, match="not close"):
        _compare(model, blocks, final)
