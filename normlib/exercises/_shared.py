"""Mistakes that several exercises share, written once: {key: (short label, explanation)}.

``norm_mistakes`` gives the mistakes LayerNorm and RMSNorm share (worded for each);
``PROJECTION_MISTAKES`` those of the attention layer that multi-head attention and the LLaMA block
share. Each checker's catalogue is its shared table plus its own mistakes.
"""

from __future__ import annotations

__all__ = ["norm_mistakes", "PROJECTION_MISTAKES"]


def norm_mistakes(name: str, *, stat: str, stats: str, reduce: str, wrong: str, right: str,
                  small: str, zero_row: str, overflow: str, zh: dict[str, str]) -> dict:
    """The mistakes of a norm over the last dim, in English and Chinese. ``stat``: what it divides
    by ("std", "RMS"); ``stats``: the statistics it takes ("mean and variance", "mean square");
    ``reduce``: the reduction written right; ``wrong`` / ``right``: the divisor with eps outside /
    inside the sqrt; ``small``: the rows where eps's place matters most; ``zero_row``: the row that divides 0 by 0 without eps; ``overflow``: what
    overflows in float16. ``zh`` gives the same words in Chinese: name, stat, stats, right, small
    (the rows where eps's place matters most), zero_row, overflow."""
    z = zh
    return {
        "batch_axis": ("normalized over the batch (dim 0)", "you normalize over the batch "
                       f"dimension (dim 0): that is BatchNorm's axis. {name} takes its {stats} "
                       f"per sample (per token), over the last dim: {reduce}.",
                       f"在批次维（dim 0）上做了归一化：那是批归一化的轴。{z['name']}对每个样本"
                       f"（每个 token）在最后一维上求{z['stats']}：{reduce}。"),
        "all_dims": (f"one {stat} for the whole tensor", f"you take one {stat} over all dims; "
                     f"{name} takes one per row, over the last dim only.",
                     f"对整个张量只求了一个{z['stat']}：{z['name']}对每一行、只在最后一维上求一个。"),
        "axis": (f"{stat} over more than the last dim", f"{name} takes its {stats} per row, "
                 "over dim -1.",
                 f"{z['stats']}取在了最后一维以外的维度上：{z['name']}逐行在 dim -1 上求"
                 f"{z['stats']}。"),
        "missing_keepdim": ("missing keepdim=True", f"the {stats} lost the last dim: without "
                            "keepdim=True it broadcasts along the wrong axis (or fails). Use "
                            f"{reduce}.",
                            f"{z['stats']}丢了最后一维：缺少 keepdim=True，会沿错误的轴广播"
                            f"（或报错）。应写 {reduce}。"),
        "eps_outside_sqrt": ("eps outside the sqrt", f"eps sits outside the square root: {wrong}. "
                             f"torch adds it inside, {right}; the two differ most on rows of "
                             f"{small}.",
                             f"eps 放在了开方之外：{wrong}。torch 把它加在开方之内，{z['right']}；"
                             f"{z['small']}的行上两者相差最大。"),
        "no_eps": ("no eps", f"you leave out eps, so {zero_row} divides 0 by 0 (NaN).",
                   f"漏掉了 eps：{z['zero_row']}会出现 0 / 0（NaN）。"),
        "eps_ignored": ("eps argument ignored", "your function ignores its eps argument (a fixed "
                        "value?): use the eps passed in.",
                        "忽略了传入的 eps 参数（写死了某个值？）：请使用传入的 eps。"),
        "eps_wrong": ("not the eps passed", "add the eps argument itself inside the square root: "
                      f"{right}.",
                      f"开方里加的不是传入的 eps：应为 {z['right']}。"),
        "not_scaled": (f"not divided by the {stat}", f"{name} divides by {right}.",
                       f"没有除以{z['stat']} {z['right']}（重缩放）。"),
        "no_upcast": ("no float32 upcast", f"you compute in float16: {overflow} exceeds "
                      "float16's maximum (65504) and becomes inf, so the output collapses. Compute "
                      "in float32 (x.float()), then cast back with .to(x.dtype).",
                      f"没有升到 float32 计算：float16 下{z['overflow']}超过 float16 的最大值 "
                      "65504，溢出为 inf，输出随之失效。先 x.float() 计算，再用 .to(x.dtype) 转回。"),
        "detached_statistics": (f"{stat} detached", f"the {stats} is detached from autograd "
                                "(.detach(), .item() or .data): the backward pass must flow "
                                "through it too.",
                                f"{z['stats']}被从自动求导中截断（.detach()、.item() 或 .data）："
                                "反向传播也要经过它。"),
    }


PROJECTION_MISTAKES = {
    "has_bias": ("linear layers with bias", "LLaMA's attention and FFN projections are bias-free: "
                 "nn.Linear(..., bias=False).",
                 "线性层带了 bias：应为 nn.Linear(..., bias=False)。"),
    "no_o_proj": ("o_proj not applied", "after merging the heads, apply the output projection "
                  "o_proj (W_O in Vaswani et al. 2017, 3.2.2).",
                  "没有应用输出投影 o_proj。"),
    "kv_repeat": ("key/value heads repeated in the wrong order", "query head h reads key/value "
                  "head h // (n_heads // n_kv_heads): repeat each kv head in place "
                  "(repeat_interleave on dim 1, HF's repeat_kv), not the whole block "
                  "(k.repeat(1, g, 1, 1) gives head h % n_kv_heads).",
                  "键值头的重复顺序不对：查询头 h 读键值头 h // (n_heads // n_kv_heads)，"
                  "每个键值头应连续复制 g 份（repeat_interleave，头序 0,0,1,1,…）"
                  "，而不是整块平铺（repeat，头序 0,1,0,1,…）。"),
    "sees_future": ("the mask lets a token see the future", "changing a later token changes the "
                    "output of an earlier one: the causal mask must hide keys j > t "
                    "(torch.ones(T, T).tril() keeps j <= t), with -inf before the softmax.",
                    "注意力不是因果的：改变后面的 token 会改变前面的输出。"),
}
