"""Hugging Face LLaMA weights in normlib's TinyTransformerLM: the name mapping and the config check.

A ``LlamaForCausalLM`` is a pre-norm decoder with RMSNorm, SwiGLU, RoPE in the "half" layout and
(optionally) grouped-query attention, so it is ``TinyTransformerLM(vocab_size, hidden_size,
num_hidden_layers, num_attention_heads, max_position_embeddings, n_kv_heads=num_key_value_heads,
norm="rmsnorm", norm_eps=rms_norm_eps, placement="pre", ffn="swiglu", d_ff=intermediate_size,
rope=True, rope_base=rope_theta)`` (``TinyTransformerLM.from_hf_config``) with these names:

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
too. Matching numbers also need the same constants: ``llama_model_config`` turns a LlamaConfig
into normlib's ``ModelConfig`` (rms_norm_eps -> norm_eps, rope_theta -> rope_base) and names
what normlib cannot represent (biases, another activation, a head_dim other than
hidden_size / num_attention_heads, rope scaling); ``TinyTransformerLM.from_hf_config`` builds that
model, and ``load_llama_weights`` compares a model's config with the HF model's.
"""

from __future__ import annotations

import dataclasses
import re

import torch
from torch import nn

from .model import ModelConfig, TinyTransformerLM

__all__ = ["hf_llama_to_normlib_name", "llama_model_config", "load_llama_weights"]

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
    """The normlib parameter name for a ``LlamaForCausalLM`` state-dict key (see the table above).
    LookupError for a key normlib has no parameter for."""
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    match = _LAYER.fullmatch(name)
    if match and match.group(2) in _LAYER_NAMES:
        return f"blocks.{match.group(1)}.{_LAYER_NAMES[match.group(2)]}"
    raise LookupError(f"hf_llama_to_normlib_name: no normlib parameter for the HF LLaMA key "
                      f"{name!r}; expected one of {sorted(_TOP_NAMES)} or "
                      f"model.layers.<i>.<{'|'.join(_LAYER_NAMES)}>")


# ModelConfig field -> LlamaConfig attribute, for the fields a LlamaConfig sets
_HF_NAMES = {"vocab_size": "vocab_size", "d_model": "hidden_size", "n_layers": "num_hidden_layers",
             "n_heads": "num_attention_heads", "max_seq_len": "max_position_embeddings",
             "n_kv_heads": "num_key_value_heads", "d_ff": "intermediate_size",
             "norm_eps": "rms_norm_eps", "rope_base": "rope_theta"}
_LLAMA = {"norm": "rmsnorm", "placement": "pre", "ffn": "swiglu", "rope": True, "causal": True}


def _rope_parameters(hf_config) -> dict:
    """{'rope_type', 'rope_theta', ...}: transformers 5's rope_parameters, or the 4.x attributes."""
    parameters = getattr(hf_config, "rope_parameters", None)
    if parameters is None:
        parameters = {"rope_type": "default", "rope_theta": getattr(hf_config, "rope_theta", 1e4),
                      **(getattr(hf_config, "rope_scaling", None) or {})}
    return dict(parameters)


def llama_model_config(hf_config) -> ModelConfig:
    """normlib's ``ModelConfig`` for a HF ``LlamaConfig``; ValueError names every setting of it
    that normlib's model cannot compute (each with its value and what normlib supports)."""
    fn = "llama_model_config"
    rope = _rope_parameters(hf_config)
    hidden, heads = hf_config.hidden_size, hf_config.num_attention_heads
    head_dim = getattr(hf_config, "head_dim", None) or hidden // heads
    problems = [f"{name}={value!r} (normlib: {want!r})" for name, value, want in (
        ("hidden_act", getattr(hf_config, "hidden_act", "silu"), "silu"),
        ("attention_bias", getattr(hf_config, "attention_bias", False), False),
        ("mlp_bias", getattr(hf_config, "mlp_bias", False), False),
        ("head_dim", head_dim, hidden // heads),
        ("rope_type", rope.get("rope_type", "default"), "default"))
        if value != want]
    if problems:
        raise ValueError(f"{fn}: normlib's TinyTransformerLM cannot represent this LlamaConfig: "
                         + ", ".join(problems))
    sizes = {field: getattr(hf_config, hf_name) for field, hf_name in _HF_NAMES.items()
             if field != "rope_base"}
    return ModelConfig(**sizes, rope_base=float(rope["rope_theta"]), **_LLAMA)


def _explicit(config: ModelConfig) -> dict:
    """The config's fields with the defaults spelt out (n_kv_heads = n_heads, the GLU d_ff)."""
    values = dataclasses.asdict(config)
    values["n_kv_heads"] = config.n_kv_heads or config.n_heads
    values["d_ff"] = config.d_ff or int(8 * config.d_model / 3)
    return values


def _check_llama_shaped(model, hf_config) -> None:
    fn = "load_llama_weights"
    if not isinstance(model, TinyTransformerLM):
        raise TypeError(f"{fn}: model must be a TinyTransformerLM, got {type(model).__name__}")
    config = model.config
    problems = [f"{name}={getattr(config, name)!r} (LLaMA: {want!r})"
                for name, want in _LLAMA.items() if getattr(config, name) != want]
    if problems:
        raise ValueError(f"{fn}: model must be built like LLaMA (norm='rmsnorm', placement='pre', "
                         f"ffn='swiglu', rope=True, causal=True); got {', '.join(problems)}")
    if hf_config is None:
        return
    mine, theirs = _explicit(config), _explicit(llama_model_config(hf_config))
    # max_seq_len only bounds the input length; fused_norm is the same function
    mismatches = [f"model.config.{field} = {mine[field]!r}, HF {_HF_NAMES[field]} = "
                  f"{theirs[field]!r}" for field in _HF_NAMES
                  if field != "max_seq_len" and mine[field] != theirs[field]]
    if mismatches:
        raise ValueError(f"{fn}: the model computes differently from the HF model's config: "
                         + "; ".join(mismatches)
                         + " (TinyTransformerLM.from_hf_config(hf_model.config) builds the match)")


def load_llama_weights(model: TinyTransformerLM, hf_model_or_state_dict) -> TinyTransformerLM:
    """Copy the weights of a HF ``LlamaForCausalLM`` (or its state dict) into ``model``, in place.

    ``model`` must be LLaMA-shaped (norm="rmsnorm", placement="pre", ffn="swiglu", rope=True,
    causal=True; normlib's or torch's fused RMSNorm). Given the HF model itself, its ``config``
    is checked too: ValueError names every field in which ``model.config`` differs (rms_norm_eps,
    rope_theta, sizes) and every setting normlib cannot represent (see ``llama_model_config``);
    a bare state dict carries no config, so only the shapes are checked.
    Every normlib parameter must receive a weight of the same shape (``load_state_dict`` with
    strict=True); HF's non-parameter buffers (the rotary ``inv_freq``) are not weights and are
    skipped. A model with tied embeddings (tie_word_embeddings=True) has no ``lm_head.weight``
    key: the embedding is copied into lm_head (the same logits; normlib does not tie them, so
    training would move the two apart). Returns the model.
    """
    state = hf_model_or_state_dict
    hf_config = getattr(state, "config", None) if isinstance(state, nn.Module) else None
    _check_llama_shaped(model, hf_config)
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
