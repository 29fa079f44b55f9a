"""Mistakes that several exercises share, written once: {key: (short label, explanation)}.

``norm_mistakes`` gives the mistakes LayerNorm and RMSNorm share (worded for each);
``PROJECTION_MISTAKES`` those of the attention layer that multi-head attention and the LLaMA block
share. Each checker's catalogue is its shared table plus its own mistakes.
"""

from __future__ import annotations

__all__ = ["norm_mistakes", "PROJECTION_MISTAKES"]


def norm_mistakes(name: str, *, stat: str, stats: str, reduce: str, wrong: str, right: str,
                  zero_row: str, overflow: str) -> dict:
    """The mistakes of a norm over the last dim. ``stat``: what it divides by ("std", "RMS");
    ``stats``: the statistics it takes ("mean and variance", "mean square"); ``reduce``: the
    reduction written right; ``wrong`` / ``right``: the divisor with eps outside / inside the
    sqrt; ``zero_row``: the row that divides 0 by 0 without eps; ``overflow``: what overflows in
    float16."""
    return {
        "batch_axis": ("normalized over the batch (dim 0)", "you normalize over the batch "
                       f"dimension (dim 0): that is BatchNorm's axis. {name} takes its {stats} "
                       f"per sample (per token), over the last dim: {reduce}."),
        "all_dims": (f"one {stat} for the whole tensor", f"you take one {stat} over all dims; "
                     f"{name} takes one per row, over the last dim only."),
        "axis": (f"{stat} over more than the last dim", f"{name} takes its {stats} per row, "
                 "over dim -1."),
        "missing_keepdim": ("missing keepdim=True", f"the {stats} lost the last dim: without "
                            "keepdim=True it broadcasts along the wrong axis (or fails). Use "
                            f"{reduce}."),
        "eps_outside_sqrt": ("eps outside the sqrt", f"eps sits outside the square root: {wrong}. "
                             f"torch adds it inside, {right}; the two differ most on rows of "
                             "small spread."),
        "no_eps": ("no eps", f"you leave out eps, so {zero_row} divides 0 by 0 (NaN)."),
        "eps_ignored": ("eps argument ignored", "your function ignores its eps argument (a fixed "
                        "value?): use the eps passed in."),
        "eps_wrong": ("not the eps passed", "add the eps argument itself inside the square root: "
                      f"{right}."),
        "not_scaled": (f"not divided by the {stat}", f"{name} divides by {right}."),
        "no_upcast": ("no float32 upcast", f"you compute in float16: {overflow} exceeds "
                      "float16's maximum (65504) and becomes inf, so the output collapses. Compute "
                      "in float32 (x.float()), then cast back with .to(x.dtype)."),
        "detached_statistics": (f"{stat} detached", f"the {stats} is detached from autograd "
                                "(.detach(), .item() or .data): the backward pass must flow "
                                "through it too."),
    }


PROJECTION_MISTAKES = {
    "has_bias": ("linear layers with bias", "LLaMA's attention and FFN projections are bias-free: "
                 "nn.Linear(..., bias=False)."),
    "no_o_proj": ("o_proj not applied", "after merging the heads, apply the output projection "
                  "o_proj (W_O in Vaswani et al. 2017, 3.2.2)."),
    "kv_repeat": ("key/value heads repeated in the wrong order", "query head h reads key/value "
                  "head h // (n_heads // n_kv_heads): repeat each kv head in place "
                  "(repeat_interleave on dim 1, HF's repeat_kv), not the whole block "
                  "(k.repeat(1, g, 1, 1) gives head h % n_kv_heads)."),
    "sees_future": ("the mask lets a token see the future", "changing a later token changes the "
                    "output of an earlier one: the causal mask must hide keys j > t "
                    "(torch.ones(T, T).tril() keeps j <= t), with -inf before the softmax."),
}
