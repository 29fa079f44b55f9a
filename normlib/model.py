"""A tiny decoder-only Transformer language model for CPU experiments.

Notation: B batch, T sequence, C = d_model, V vocabulary.
tokens (B, T) -> embeddings (B, T, C) -> n_layers x TransformerBlock -> [final norm] -> logits (B, T, V)

Conventions:
- Learned absolute position embeddings, unless rope=True (then RoPE inside attention, none here).
- A final norm after the last block for the placements whose residual stream is never normalized
  ("pre", "sandwich"), as GPT-2 does; Post-LN and DeepNorm blocks already end in a norm.
- Initialization: linear layers keep PyTorch's default (uniform, variance 1 / (3 fan_in)); token
  and position embeddings are N(0, 1/2) each, so that their sum has unit variance. Xavier weights
  (Xiong et al.'s analysis) make each sublayer's output about as large as its input; at 12 layers
  and d_model 64 a Post-LN stack then washes the token out of the residual stream at init and did
  not train in 300 steps at any lr from 1e-4 to 3e-3 (measured), so the lessons that reproduce the
  paper re-initialize explicitly where they need Xavier.
- placement="deepnorm" without an explicit alpha takes DeepNet's decoder-only constants for
  n_layers: alpha = (2 n_layers)^(1/4) at run time and beta = (8 n_layers)^(-1/4) at init.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_int
from .blocks import TransformerBlock, make_norm
from .deepnorm import deepnorm_constants, deepnorm_init_
from .kv_cache import KVCache

__all__ = ["TinyTransformerLM"]


class TinyTransformerLM(nn.Module):
    """Decoder-only LM: ``TinyTransformerLM(vocab_size, d_model, n_layers, n_heads, max_seq_len,
    **block_options)``; block_options go to every ``TransformerBlock`` (n_kv_heads, norm,
    placement, ffn, d_ff, rope, causal, fused_norm, alpha).

    ``forward(idx, caches=None)`` maps token ids (B, T) to logits (B, T, V). For step-by-step
    decoding pass ``caches``, one ``KVCache`` per block (``[KVCache() for _ in lm.blocks]``): the
    T tokens are then positions caches[0].seq_len onwards, and each block appends its keys and
    values; feeding a sequence in pieces gives the logits of feeding it whole."""

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int,
                 max_seq_len: int, **block_options):
        super().__init__()
        fn = "TinyTransformerLM"
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model),
                            ("n_layers", n_layers), ("n_heads", n_heads),
                            ("max_seq_len", max_seq_len)):
            check_int(fn, name, value, minimum=1)
        placement = block_options.get("placement", "pre")
        self.deepnorm_beta = None
        if placement == "deepnorm":
            alpha, self.deepnorm_beta = deepnorm_constants(num_decoder_layers=n_layers)["decoder"]
            block_options = {"alpha": alpha, **block_options}
        self.max_seq_len = max_seq_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = None if block_options.get("rope") else nn.Embedding(max_seq_len, d_model)
        self.blocks = nn.ModuleList(
            TransformerBlock(d_model, n_heads, **block_options) for _ in range(n_layers))
        needs_final_norm = placement in ("pre", "sandwich")
        self.norm_f = make_norm(block_options.get("norm", "layernorm"), d_model,
                                block_options.get("fused_norm", False)) \
            if needs_final_norm else nn.Identity()
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                module.reset_parameters()
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=0.5**0.5)
        if self.deepnorm_beta is not None:
            deepnorm_init_(self.blocks, self.deepnorm_beta)

    def forward(self, idx: torch.Tensor, caches: list[KVCache] | None = None) -> torch.Tensor:
        if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.dtype != torch.long:
            raise TypeError(f"TinyTransformerLM: idx must be a (B, T) tensor of token ids (long), "
                            f"got {getattr(idx, 'dtype', type(idx).__name__)} "
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
        x = self.tok_emb(idx)                                               # (B, T, C)
        if self.pos_emb is not None:
            positions = torch.arange(offset, offset + T, device=idx.device)
            x = x + self.pos_emb(positions)                                 # (T, C) broadcasts
        for i, block in enumerate(self.blocks):
            x = block(x) if caches is None else block(x, caches[i])      # (B, T, C)
        return self.lm_head(self.norm_f(x))                                 # (B, T, V)
