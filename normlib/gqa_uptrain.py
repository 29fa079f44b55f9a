"""Multi-head attention into grouped-query attention, by mean-pooling key and value heads.

Ainslie et al. 2023 (GQA, arXiv 2305.13245, Section 2.1, "Uptraining"): a multi-head checkpoint
becomes a GQA (or, with one group, MQA) checkpoint by mean-pooling the key and value projection
matrices of the heads of each group, then continued pre-training for a small fraction (5%) of the
original steps lets the model adapt. Mean-pooling kept more quality than taking one head of each
group or initializing the heads randomly (Section 3.3). The pooling alone is exact only
where the heads of a group were already equal; the uptraining recovers the rest.
"""

from __future__ import annotations

import torch

from ._checks import check_int
from .attention import MultiHeadAttention

__all__ = ["mha_to_gqa"]


@torch.no_grad()
def mha_to_gqa(attn: MultiHeadAttention, n_kv_heads: int) -> MultiHeadAttention:
    """A new ``MultiHeadAttention`` with ``n_kv_heads`` key/value heads, its k_proj and v_proj the
    means of ``attn``'s over each group of heads (query head h joins group h // (H / n_kv_heads),
    as ``repeat_kv`` reads it); q_proj, o_proj, the QK-norm gains and every option are copied.

    Args:
        attn: the multi-head (or grouped) attention to convert; left unchanged.
        n_kv_heads: H_kv of the result; divides attn.n_kv_heads.
    Raises ValueError for qk_norm="projection", whose key norm spans all key heads together
    (OLMo 2): pooled heads would be normalized over another width.
    """
    fn = "mha_to_gqa"
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"{fn}: attn must be a normlib MultiHeadAttention, "
                        f"got {type(attn).__name__}")
    check_int(fn, "n_kv_heads", n_kv_heads, minimum=1)
    if attn.n_kv_heads % n_kv_heads:
        raise ValueError(f"{fn}: n_kv_heads must divide attn's {attn.n_kv_heads} key/value heads "
                         f"(each group pools whole heads), got n_kv_heads={n_kv_heads}")
    if attn.qk_norm == "projection":
        raise ValueError(f"{fn}: attn has qk_norm='projection', one key norm over all its "
                         f"{attn.n_kv_heads} heads; pooling needs qk_norm=None or 'per_head'")
    weight = attn.q_proj.weight
    C, D = weight.shape[1], attn.head_dim
    new = MultiHeadAttention(C, attn.n_heads, n_kv_heads, rope=attn.rope,
                             rope_base=attn.rope_base, causal=attn.causal, qk_norm=attn.qk_norm,
                             qk_norm_eps=attn.q_norm.eps if attn.qk_norm else 1e-6,
                             sliding_window=attn.sliding_window, softcap=attn.softcap,
                             device=weight.device, dtype=weight.dtype)
    group = attn.n_kv_heads // n_kv_heads
    for name in ("k_proj", "v_proj"):
        w = getattr(attn, name).weight.view(n_kv_heads, group, D, C)           # (H_kv, g, D, C)
        getattr(new, name).weight.copy_(w.mean(1).reshape(n_kv_heads * D, C))
    new.q_proj.weight.copy_(attn.q_proj.weight)
    new.o_proj.weight.copy_(attn.o_proj.weight)
    if attn.qk_norm:
        new.q_norm.load_state_dict(attn.q_norm.state_dict())
        new.k_norm.load_state_dict(attn.k_norm.state_dict())
    return new
