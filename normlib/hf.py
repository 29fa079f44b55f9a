"""Hugging Face LLaMA weights in normlib's TinyTransformerLM: the name mapping and the config check.

A ``LlamaForCausalLM`` is a pre-norm decoder with RMSNorm, SwiGLU, RoPE in the "half" layout and
(optionally) grouped-query attention, so it is ``TinyTransformerLM(vocab_size, hidden_size,
num_hidden_layers, num_attention_heads, max_position_embeddings, n_kv_heads=num_key_value_heads,
norm="rmsnorm", norm_eps=rms_norm_eps, placement="pre", ffn="swiglu", d_ff=intermediate_size,
rope=True, rope_base=rope_theta)`` (``model_from_llama_config``) with these names:

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
hidden_size / num_attention_heads, rope scaling); ``model_from_llama_config`` builds that
model, and ``load_llama_weights`` compares a model's whole config with the HF model's
(``ModelConfig.differences``). This module imports the model; the model never imports it.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from .config import ModelConfig
from .model import TinyTransformerLM

__all__ = ["hf_llama_to_normlib_name", "llama_model_config", "load_llama_weights",
           "model_from_llama_config"]

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
# the fields every LlamaConfig fixes: Pre-RMSNorm, SwiGLU, RoPE, causal, and none of the 2025
# additions (QK-norm, a sliding window, soft-capped logits)
_LLAMA = {"norm": "rmsnorm", "placement": "pre", "ffn": "swiglu", "rope": True, "causal": True,
          "qk_norm": None, "sliding_window": None, "softcap": None}
# the fields that do not change what a model computes from given weights, which the loader
# ignores: max_seq_len only bounds the input length (with RoPE, which LLaMA uses, there is no
# position table it would size); fused_norm is torch's fused kernel of the same function, with
# the same parameter names
_SAME_COMPUTATION = ("max_seq_len", "fused_norm")


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


def model_from_llama_config(hf_config, *, device=None, dtype=None) -> TinyTransformerLM:
    """The ``TinyTransformerLM`` a HF ``LlamaConfig`` describes (sizes, GQA, rms_norm_eps,
    rope_theta: ``llama_model_config``), ready for ``load_llama_weights``; ValueError names every
    setting normlib cannot represent (biases, another activation or head_dim, rope scaling, ...).
    device, dtype: of the parameters."""
    return TinyTransformerLM(config=llama_model_config(hf_config), device=device, dtype=dtype)


def _llama_differences(config: ModelConfig, hf_config) -> list[str]:
    """Every difference in what ``config`` and the LLaMA model compute, in words; with no
    hf_config (a bare state dict), in the fields every LlamaConfig fixes. (alpha needs no check
    of its own: a config whose alpha is not 1 has placement "deepnorm", not LLaMA's "pre".)"""
    if hf_config is None:
        differences = [(name, getattr(config, name), want) for name, want in _LLAMA.items()
                       if getattr(config, name) != want]
    else:
        differences = config.differences(llama_model_config(hf_config), ignore=_SAME_COMPUTATION)
    return [f"model.config.{name} = {mine!r}, "
            + (f"HF {_HF_NAMES[name]} = {theirs!r}" if name in _HF_NAMES else f"LLaMA: {theirs!r}")
            for name, mine, theirs in differences]


def load_llama_weights(model: TinyTransformerLM, hf_model_or_state_dict) -> TinyTransformerLM:
    """Copy the weights of a HF ``LlamaForCausalLM`` (or its state dict) into ``model``, in place.

    ``model`` must compute what the LLaMA model computes. Given the HF model itself, the whole
    ``model.config`` is compared with the one its ``config`` describes (``llama_model_config``,
    ``ModelConfig.differences``): one ValueError names every field that differs (sizes,
    rms_norm_eps, rope_theta, the LLaMA shape, the 2025 fields), or every setting normlib cannot
    represent. Two fields are ignored because they do not change the computation: max_seq_len
    (it only bounds the input length; RoPE has no position table to size) and fused_norm (torch's
    fused RMSNorm, the same function). A bare state dict carries no config: then the fields every
    LlamaConfig fixes are checked (norm="rmsnorm", placement="pre", ffn="swiglu", rope=True,
    causal=True, and qk_norm, sliding_window and softcap None), and the sizes by the shapes.
    Every normlib parameter must receive a weight of the same shape (``load_state_dict`` with
    strict=True); HF's non-parameter buffers (the rotary ``inv_freq``) are not weights and are
    skipped. A model with tied embeddings (tie_word_embeddings=True) has no ``lm_head.weight``
    key: the embedding is copied into lm_head (the same logits; normlib does not tie them, so
    training would move the two apart). Returns the model.
    """
    fn = "load_llama_weights"
    if not isinstance(model, TinyTransformerLM):
        raise TypeError(f"{fn}: model must be a TinyTransformerLM, got {type(model).__name__}")
    state = hf_model_or_state_dict
    hf_config = getattr(state, "config", None) if isinstance(state, nn.Module) else None
    differences = _llama_differences(model.config, hf_config)
    if differences:
        raise ValueError(f"{fn}: the model computes differently from the "
                         + ("HF model's config" if hf_config is not None else "LLaMA a state "
                            "dict holds (LlamaConfig fixes these fields)")
                         + ": " + "; ".join(differences)
                         + " (normlib.hf.model_from_llama_config(llama_config) builds the model "
                           "a LlamaConfig describes)")
    if isinstance(state, nn.Module):
        state = state.state_dict()
    if not isinstance(state, dict):
        raise TypeError(f"{fn}: hf_model_or_state_dict must be a LlamaForCausalLM "
                        f"or its state dict, got {type(state).__name__}")
    mapped = {hf_llama_to_normlib_name(k): v for k, v in state.items()
              if not k.endswith("rotary_emb.inv_freq")}
    if "lm_head.weight" not in mapped and "tok_emb.weight" in mapped:
        mapped["lm_head.weight"] = mapped["tok_emb.weight"]       # tie_word_embeddings=True
    with torch.no_grad():
        model.load_state_dict(mapped, strict=True)
    return model
