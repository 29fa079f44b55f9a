"""A tiny decoder-only Transformer language model for CPU experiments.

Notation: B batch, T sequence, C = d_model, V vocabulary.
tokens (B, T) -> embeddings (B, T, C) -> n_layers x TransformerBlock -> [final norm] -> logits (B, T, V)

Conventions:
- Learned absolute position embeddings, unless rope=True (then RoPE inside attention, none here).
- A final norm after the last block for the placements whose residual stream is never normalized
  ("pre", "sandwich", "reordered"), as GPT-2, Gemma 3 and OLMo 2 do; Post-LN and DeepNorm blocks
  already end in a norm.
- Initialization: linear layers keep PyTorch's default (uniform, variance 1 / (3 fan_in)); token
  and position embeddings are N(0, 1/2) each, so that their sum has unit variance. Xavier weights
  (Xiong et al.'s analysis) make each sublayer's output about as large as its input; at 12 layers
  and d_model 64 a Post-LN stack then washes the token out of the residual stream at init and did
  not train in 300 steps at any lr from 1e-4 to 3e-3 (measured), so the lessons that reproduce the
  paper re-initialize explicitly where they need Xavier.
- placement="deepnorm" without an explicit alpha takes DeepNet's decoder-only constants for
  n_layers: alpha = (2 n_layers)^(1/4) at run time and beta = (8 n_layers)^(-1/4) at init.
- The model is described by a frozen ``ModelConfig`` (``model.config``; ``normlib.config``), which
  ``train_ensemble`` compares between members and ``load_llama_weights`` against a HF
  ``LlamaConfig``. The model knows nothing of HF: ``normlib.hf`` builds it from a ``LlamaConfig``
  (``model_from_llama_config``) and loads the weights.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import compute_dtype
from .blocks import TransformerBlock, make_norm
from .config import ModelConfig
from .deepnorm import deepnorm_constants, deepnorm_init_
from .kv_cache import KVCache

__all__ = ["ModelConfig", "TinyTransformerLM", "stream_rms"]


class TinyTransformerLM(nn.Module):
    """Decoder-only LM: ``TinyTransformerLM(vocab_size, d_model, n_layers, n_heads, max_seq_len,
    **options)``, the options being the other fields of ``ModelConfig`` (n_kv_heads, norm,
    norm_eps, placement, ffn, d_ff, rope, rope_base, causal, fused_norm, alpha, qk_norm,
    sliding_window, softcap), or
    ``TinyTransformerLM(config=ModelConfig(...))``. The config is kept as ``model.config``.
    device, dtype: of the parameters, as every torch module's factory kwargs.

    ``forward(idx, caches=None)`` maps token ids (B, T) (int64 or int32) to logits (B, T, V). For
    step-by-step decoding pass ``caches``, one ``KVCache`` per block
    (``[KVCache() for _ in lm.blocks]``): the T tokens are then positions caches[0].seq_len
    onwards, and each block appends its keys and values; feeding a sequence in pieces gives the
    logits of feeding it whole. With rope=True the cos and sin of the positions are computed once
    per forward pass, in float32 (float64 for a float64 model), and shared by every block.

    ``normlib.hf.model_from_llama_config(llama_config)`` builds the model a HF ``LlamaConfig``
    describes."""

    def __init__(self, vocab_size: int | None = None, d_model: int | None = None,
                 n_layers: int | None = None, n_heads: int | None = None,
                 max_seq_len: int | None = None, *, config: ModelConfig | None = None,
                 device=None, dtype=None, **options):
        super().__init__()
        sizes = (vocab_size, d_model, n_layers, n_heads, max_seq_len)
        if config is None:
            config = ModelConfig(*sizes, **options)
        elif not isinstance(config, ModelConfig):
            raise TypeError(f"TinyTransformerLM: config must be a ModelConfig, "
                            f"got {type(config).__name__}")
        elif options or any(v is not None for v in sizes):
            raise TypeError("TinyTransformerLM: give either config or the sizes and options, "
                            "not both")
        self.config = c = config
        self.deepnorm_beta = None
        if c.placement == "deepnorm":                 # DeepNet's init, whatever the alpha
            self.deepnorm_beta = deepnorm_constants(num_decoder_layers=c.n_layers)["decoder"][1]
        self.max_seq_len = c.max_seq_len
        factory = {"device": device, "dtype": dtype}
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model, **factory)
        self.pos_emb = None if c.rope else nn.Embedding(c.max_seq_len, c.d_model, **factory)
        self.blocks = nn.ModuleList(
            TransformerBlock(c.d_model, c.n_heads, c.n_kv_heads, norm=c.norm, norm_eps=c.norm_eps,
                             placement=c.placement, ffn=c.ffn, d_ff=c.d_ff, rope=c.rope,
                             rope_base=c.rope_base, causal=c.causal, fused_norm=c.fused_norm,
                             alpha=c.block_alpha, qk_norm=c.qk_norm,
                             sliding_window=c.sliding_window, softcap=c.softcap, **factory)
            for _ in range(c.n_layers))
        needs_final_norm = c.placement in ("pre", "sandwich", "reordered")
        self.norm_f = make_norm(c.norm, c.d_model, c.fused_norm, c.norm_eps, **factory) \
            if needs_final_norm else nn.Identity()
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False, **factory)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Re-initialize every weight as at construction: linear layers and norms by their own
        ``reset_parameters``, embeddings N(0, 1/2), DeepNet's init for placement="deepnorm"."""
        for module in self.modules():
            if isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=0.5**0.5)
            elif module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()
        if self.deepnorm_beta is not None:
            deepnorm_init_(self.blocks, self.deepnorm_beta)

    def forward(self, idx: torch.Tensor, caches: list[KVCache] | None = None) -> torch.Tensor:
        if not isinstance(idx, torch.Tensor) or idx.dim() != 2 \
                or idx.dtype not in (torch.long, torch.int32):
            raise TypeError(f"TinyTransformerLM: idx must be a (B, T) tensor of token ids (int64 "
                            f"or int32), got {getattr(idx, 'dtype', type(idx).__name__)} "
                            f"{tuple(getattr(idx, 'shape', ()))}")
        if caches is not None and (not isinstance(caches, list | tuple)
                                   or len(caches) != len(self.blocks)
                                   or not all(isinstance(c, KVCache) for c in caches)):
            raise TypeError(f"TinyTransformerLM: caches must be None or a list of "
                            f"{len(self.blocks)} KVCache (one per block), got "
                            f"{type(caches).__name__} {caches!r}")
        T = idx.shape[1]
        offset = 0 if caches is None else caches[0].seq_len                 # tokens already seen
        if offset + T > self.max_seq_len:
            raise ValueError(f"TinyTransformerLM: sequence length must be <= max_seq_len="
                             f"{self.max_seq_len}, got {offset + T}"
                             + (f" ({offset} cached + {T} new)" if offset else ""))
        positions = torch.arange(offset, offset + T, device=idx.device)    # (T,)
        x = self.tok_emb(idx)                                               # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb(positions)                                 # (T, C) broadcasts
        extra = {}                        # only what a block needs: lessons subclass the block
        if self.config.rope:              # RoPE's cos and sin, once for every block, (T, D/2)
            extra["position_embeddings"] = self.blocks[0].attn.rope_cos_sin(positions,
                                                                            compute_dtype(x))
        for i, block in enumerate(self.blocks):
            if caches is not None:
                extra["cache"] = caches[i]
            x = block(x, **extra)                                           # (B, T, C)
        return self.lm_head(self.norm_f(x))                                 # (B, T, V)


@torch.no_grad()
def stream_rms(model: TinyTransformerLM, idx: torch.Tensor) -> torch.Tensor:
    """How large the residual stream is after each block: the RMS over the C features of each
    block's output, averaged over the B x T tokens of ``idx`` (B, T); returns (n_layers,) float32.

    The outputs are caught with forward hooks during ``model(idx)``, so this measures exactly what
    the model computes (lesson 11 compares placements with it; tools/warmup_grid.py stores it).
    """
    if not isinstance(model, TinyTransformerLM):
        raise TypeError(f"stream_rms: model must be a TinyTransformerLM, got {type(model).__name__}")
    seen = []
    hooks = [block.register_forward_hook(lambda module, args, out: seen.append(out))
             for block in model.blocks]
    try:
        model(idx)
    finally:
        for hook in hooks:
            hook.remove()
    return torch.stack([out.float().pow(2).mean(-1).sqrt().mean() for out in seen])   # (n_layers,)
