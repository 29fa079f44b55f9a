"""Hugging Face LLaMA weights in normlib's TinyTransformerLM: the name mapping, nothing else.

A ``LlamaForCausalLM`` is a pre-norm decoder with RMSNorm, SwiGLU, RoPE in the "half" layout and
(optionally) grouped-query attention, so it is ``TinyTransformerLM(vocab_size, hidden_size,
num_hidden_layers, num_attention_heads, max_position_embeddings, n_kv_heads=num_key_value_heads,
norm="rmsnorm", placement="pre", ffn="swiglu", d_ff=intermediate_size, rope=True)`` with these names:

    HF (transformers)                                 normlib
    model.embed_tokens.weight                         tok_emb.weight
    model.layers.{i}.input_layernorm.weight           blocks.{i}.norm1.weight
    model.layers.{i}.self_attn.{q,k,v,o}_proj.weight  blocks.{i}.attn.{q,k,v,o}_proj.weight
    model.layers.{i}.post_attention_layernorm.weight  blocks.{i}.norm2.weight
    model.layers.{i}.mlp.gate_proj.weight             blocks.{i}.ffn.w1.weight   (gate)
    model.layers.{i}.mlp.up_proj.weight               blocks.{i}.ffn.w3.weight   (up)
    model.layers.{i}.mlp.down_proj.weight             blocks.{i}.ffn.w2.weight   (down)
    model.norm.weight                                 norm_f.weight
    lm_head.weight                                    lm_head.weight (model.embed_tokens.weight if tied)

No layout permutation is needed: HF's checkpoints already use the "half" layout (HF's conversion
script permutes the rows of W_q and W_k of Meta's interleaved checkpoints once, per head; that
permutation is ``half_to_interleaved``), and normlib's attention rotates with the "half" layout
too. Matching numbers also need the same constants: rms_norm_eps = 1e-5 (normlib's RMSNorm) and
rope_theta = 10,000 (normlib's RoPE base), no biases, no rope_scaling.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from .activations import GLUFeedForward
from .model import TinyTransformerLM
from .norms import RMSNorm

__all__ = ["hf_llama_to_normlib_name", "load_llama_weights"]

_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
_LAYER_NAMES = {
    "input_layernorm.weight": "norm1.weight",
    "post_attention_layernorm.weight": "norm2.weight",
    "self_attn.q_proj.weight": "attn.q_proj.weight",
    "self_attn.k_proj.weight": "attn.k_proj.weight",
    "self_attn.v_proj.weight": "attn.v_proj.weight",
    "self_attn.o_proj.weight": "attn.o_proj.weight",
    "mlp.gate_proj.weight": "ffn.w1.weight",
    "mlp.up_proj.weight": "ffn.w3.weight",
    "mlp.down_proj.weight": "ffn.w2.weight",
}
_TOP_NAMES = {"model.embed_tokens.weight": "tok_emb.weight", "model.norm.weight": "norm_f.weight",
              "lm_head.weight": "lm_head.weight"}


def hf_llama_to_normlib_name(name: str) -> str:
    """The normlib parameter name for a ``LlamaForCausalLM`` state-dict key (see the table above)."""
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    match = _LAYER.fullmatch(name)
    if match and match.group(2) in _LAYER_NAMES:
        return f"blocks.{match.group(1)}.{_LAYER_NAMES[match.group(2)]}"
    raise KeyError(f"hf_llama_to_normlib_name: no normlib parameter for the HF LLaMA key "
                   f"{name!r}; expected one of {sorted(_TOP_NAMES)} or "
                   f"model.layers.<i>.<{'|'.join(_LAYER_NAMES)}>")


def _check_llama_shaped(model) -> None:
    fn = "load_llama_weights"
    if not isinstance(model, TinyTransformerLM):
        raise TypeError(f"{fn}: model must be a TinyTransformerLM, got {type(model).__name__}")
    block = model.blocks[0]
    problems = []
    if block.placement != "pre":
        problems.append(f"placement={block.placement!r} (LLaMA: 'pre')")
    if not isinstance(block.norm1, RMSNorm):
        problems.append(f"norm={type(block.norm1).__name__} (LLaMA: 'rmsnorm')")
    if not (isinstance(block.ffn, GLUFeedForward) and block.ffn.variant == "swiglu"):
        problems.append(f"ffn={getattr(block.ffn, 'variant', type(block.ffn).__name__)!r} "
                        f"(LLaMA: 'swiglu')")
    if not block.attn.rope:
        problems.append("rope=False (LLaMA: rope=True)")
    if problems:
        raise ValueError(f"{fn}: model must be built like LLaMA (norm='rmsnorm', placement='pre', "
                         f"ffn='swiglu', rope=True); got {', '.join(problems)}")


def load_llama_weights(model: TinyTransformerLM, hf_model_or_state_dict) -> TinyTransformerLM:
    """Copy the weights of a HF ``LlamaForCausalLM`` (or its state dict) into ``model``, in place.

    Every normlib parameter must receive a weight of the same shape (``load_state_dict`` with
    strict=True); HF's non-parameter buffers (the rotary ``inv_freq``) are not weights and are
    skipped. A model with tied embeddings has no ``lm_head.weight`` key: the embedding is used.
    Returns the model.
    """
    _check_llama_shaped(model)
    state = hf_model_or_state_dict
    if isinstance(state, nn.Module):
        state = state.state_dict()
    if not isinstance(state, dict):
        raise TypeError(f"load_llama_weights: hf_model_or_state_dict must be a LlamaForCausalLM "
                        f"or its state dict, got {type(state).__name__}")
    mapped = {hf_llama_to_normlib_name(k): v for k, v in state.items()
              if not k.endswith("rotary_emb.inv_freq")}
    if "lm_head.weight" not in mapped and "tok_emb.weight" in mapped:
        mapped["lm_head.weight"] = mapped["tok_emb.weight"]       # tie_word_embeddings=True
    with torch.no_grad():
        model.load_state_dict(mapped, strict=True)
    return model
