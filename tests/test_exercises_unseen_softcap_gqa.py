"""Exercises 16-17 (soft-capped attention, grouped-query attention): wrong answers the checkers'
catalogues never saw, correct answers in other styles, and garbage (issue 35).

Written from the task texts alone, the way a candidate errs under time pressure: each wrong answer
is a whole function with one slip (or two, where a slip drags another along), and names the
diagnosis keys that describe its mistake correctly. A result is
  - named correctly: its ``mistake`` is one of those keys;
  - cannot tell: the checker names no mistake ("cannot_tell", "wrong values", "NaN", "raised");
  - named wrongly: any other key;
  - passed: the checker missed it.
The target: at least 90% named correctly per exercise, none named wrongly, none passed; every
correct variant passes; every garbage answer gets a clean result (a code, no exception).
``python tests/test_exercises_unseen_softcap_gqa.py`` prints the table.
"""

from __future__ import annotations

import math
import sys

import torch
import torch.nn.functional as F
import unseen

from normlib import exercises as ex

CANNOT_TELL = {"cannot_tell", "wrong_values", "nan", "raised"}
NEG_INF = float("-inf")


# --------------------------------------------------------------------------- 16: soft-capping
def _up(*ts):
    return [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in ts]


def sc_mask_then_cap(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T = q.size(2)
    scores = qf @ kf.transpose(2, 3) / math.sqrt(q.size(-1))
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, NEG_INF)
    scores = torch.tanh(scores / cap) * cap              # the cap last, "just before the softmax"
    return (scores.softmax(-1) @ vf).to(q.dtype)


def sc_where_min_then_cap(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T = q.shape[-2]
    att = torch.einsum("bhqd,bhkd->bhqk", qf, kf) * q.shape[-1] ** -0.5
    causal = torch.tril(torch.ones(T, T)).bool()
    att = torch.where(causal, att, torch.finfo(att.dtype).min)
    att = cap * torch.tanh(att / cap)
    return torch.softmax(att, dim=-1).matmul(vf).to(q.dtype)


def sc_additive_mask_then_cap(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T = q.shape[-2]
    bias = torch.full((T, T), -1e9).triu(1)
    s = (qf @ kf.mT) / math.sqrt(q.shape[-1]) + bias
    s = cap * torch.tanh(s / cap)
    return (torch.softmax(s, -1) @ vf).to(q.dtype)


def sc_cap_raw_dots(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    logits = cap * torch.tanh((qf @ kf.transpose(-1, -2)) / cap)
    logits = logits / math.sqrt(D)
    logits = logits.masked_fill(torch.ones(T, T).triu(1).bool(), NEG_INF)
    return (F.softmax(logits, dim=-1) @ vf).type_as(q)


def sc_tanh_times_cap(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = qf @ kf.transpose(-1, -2) / math.sqrt(D)
    s = cap * torch.tanh(s)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF)
    return (s.softmax(-1) @ vf).to(q.dtype)


def sc_tanh_over_cap(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = qf @ kf.transpose(-1, -2) / math.sqrt(D)
    s = torch.tanh(s / cap)                              # forgot "* cap"
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF)
    return (s.softmax(-1) @ vf).to(q.dtype)


def sc_clamp(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = torch.clamp(qf @ kf.transpose(-1, -2) / math.sqrt(D), min=-cap, max=cap)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF)
    return (s.softmax(-1) @ vf).to(q.dtype)


def sc_cap_probs(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = qf @ kf.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF)
    p = torch.softmax(s, dim=-1)
    p = cap * torch.tanh(p / cap)
    return (p @ vf).to(q.dtype)


def sc_cap_output(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = qf @ kf.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF)
    y = torch.softmax(s, dim=-1) @ vf
    return (cap * torch.tanh(y / cap)).to(q.dtype)


def sc_forgot_cap(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = torch.einsum("bhid,bhjd->bhij", qf, kf) / D ** 0.5
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), NEG_INF)
    return torch.einsum("bhij,bhjd->bhid", s.softmax(-1), vf).to(q.dtype)


def sc_hardcoded_50(q, k, v, cap):
    CAP = 50.0                                           # Gemma 2's value
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = qf @ kf.transpose(-1, -2) / math.sqrt(D)
    s = CAP * torch.tanh(s / CAP)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF)
    return (s.softmax(-1) @ vf).to(q.dtype)


def _sc(q, k, v, cap, keep_fn, dim=-1, scale=None, fill=NEG_INF, up=True):
    """A learner's plain version, with its mask built by ``keep_fn(T)``."""
    qf, kf, vf = _up(q, k, v) if up else (q, k, v)
    T, D = q.shape[-2:]
    s = qf @ kf.transpose(-1, -2) * (D ** -0.5 if scale is None else scale(q))
    s = cap * torch.tanh(s / cap)
    s = s.masked_fill(~keep_fn(T), fill)
    return (torch.softmax(s, dim=dim) @ vf).to(q.dtype)


def sc_mask_reversed(q, k, v, cap):
    return _sc(q, k, v, cap, lambda T: torch.ones(T, T, dtype=torch.bool).triu())


def sc_mask_hides_self(q, k, v, cap):
    return _sc(q, k, v, cap, lambda T: torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1))


def sc_mask_one_ahead(q, k, v, cap):
    return _sc(q, k, v, cap, lambda T: ~torch.ones(T, T, dtype=torch.bool).triu(diagonal=2))


def sc_no_mask(q, k, v, cap):
    return _sc(q, k, v, cap, lambda T: torch.ones(T, T, dtype=torch.bool))


def sc_softmax_queries(q, k, v, cap):
    return _sc(q, k, v, cap, lambda T: torch.ones(T, T, dtype=torch.bool).tril(), dim=2)


def sc_scale_by_d(q, k, v, cap):
    return _sc(q, k, v, cap, lambda T: torch.ones(T, T, dtype=torch.bool).tril(),
               scale=lambda q: 1 / q.shape[-1])


def sc_no_scale(q, k, v, cap):
    return _sc(q, k, v, cap, lambda T: torch.ones(T, T, dtype=torch.bool).tril(),
               scale=lambda q: 1.0)


def sc_scale_by_seq(q, k, v, cap):
    return _sc(q, k, v, cap, lambda T: torch.ones(T, T, dtype=torch.bool).tril(),
               scale=lambda q: q.shape[-2] ** -0.5)


def sc_all_half(q, k, v, cap):
    return _sc(q, k, v, cap, lambda T: torch.ones(T, T, dtype=torch.bool).tril(), up=False)


def sc_hf_style_half_scores(q, k, v, cap):
    """Scores and cap in q's dtype, only the softmax in float32 (the task asks for all three)."""
    T = q.shape[-2]
    w = torch.matmul(q, k.transpose(2, 3)) * q.shape[-1] ** -0.5
    w = w / cap
    w = torch.tanh(w)
    w = w * cap
    w = w + torch.full((T, T), NEG_INF, dtype=q.dtype).triu(1)
    w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(w, v)


def sc_mask_by_multiplying(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = cap * torch.tanh(qf @ kf.transpose(-1, -2) / math.sqrt(D) / cap)
    s = s * torch.tril(torch.ones(T, T))                 # zeros above the diagonal
    return (s.softmax(-1) @ vf).to(q.dtype)


def sc_mask_after_softmax(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = cap * torch.tanh(qf @ kf.transpose(-1, -2) / math.sqrt(D) / cap)
    w = s.softmax(-1) * torch.tril(torch.ones(T, T))
    return (w @ vf).to(q.dtype)


def sc_after_mask_no_scale(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T = q.shape[-2]
    s = (qf @ kf.transpose(-1, -2)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(),
                                                NEG_INF)
    s = cap * torch.tanh(s / cap)
    return (s.softmax(-1) @ vf).to(q.dtype)


def sc_returns_pair(q, k, v, cap):
    qf, kf, vf = _up(q, k, v)
    T, D = q.shape[-2:]
    s = cap * torch.tanh(qf @ kf.transpose(-1, -2) / math.sqrt(D) / cap)
    w = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF).softmax(-1)
    return (w @ vf).to(q.dtype), w


def sc_heads_last(q, k, v, cap):
    out = _sc(q, k, v, cap, lambda T: torch.ones(T, T, dtype=torch.bool).tril())
    return out.transpose(1, 2)                           # (B, T, H, D), "ready for o_proj"


SOFTCAP = [
    ("mask, then cap", sc_mask_then_cap, {"cap_after_mask"}),
    ("where(finfo.min), then cap", sc_where_min_then_cap, {"cap_after_mask"}),
    ("additive -1e9 mask, then cap", sc_additive_mask_then_cap, {"cap_after_mask"}),
    ("cap on the raw dot products", sc_cap_raw_dots, {"cap_before_scale"}),
    ("cap * tanh(s)", sc_tanh_times_cap, {"tanh_no_divide"}),
    ("tanh(s / cap)", sc_tanh_over_cap, {"tanh_no_multiply"}),
    ("torch.clamp", sc_clamp, {"clamp_instead"}),
    ("cap on the probabilities", sc_cap_probs, {"cap_on_weights"}),
    ("cap on the output", sc_cap_output, {"cap_on_output"}),
    ("forgot the cap", sc_forgot_cap, {"no_softcap"}),
    ("cap hard-coded to 50", sc_hardcoded_50, {"cap_ignored"}),
    ("mask reversed", sc_mask_reversed, {"mask_inverted"}),
    ("mask hides the diagonal", sc_mask_hides_self, {"mask_excludes_diagonal"}),
    ("mask one ahead", sc_mask_one_ahead, {"mask_leaks_future"}),
    ("no mask", sc_no_mask, {"no_causal_mask"}),
    ("softmax over the queries", sc_softmax_queries, {"softmax_dim"}),
    ("scaled by 1/D", sc_scale_by_d, {"scale"}),
    ("no 1/sqrt(D)", sc_no_scale, {"no_scaling"}),
    ("scaled by 1/sqrt(T)", sc_scale_by_seq, {"scale"}),
    ("everything in half precision", sc_all_half, {"no_upcast"}),
    ("HF style: scores in half, softmax in float32", sc_hf_style_half_scores, {"no_upcast"}),
    ("mask by multiplying", sc_mask_by_multiplying, {"mask_with_zero"}),
    ("mask after the softmax", sc_mask_after_softmax, {"mask_after_softmax"}),
    ("cap after the mask, no scale", sc_after_mask_no_scale, {"cap_after_mask", "no_scaling"}),
    ("returns (out, weights)", sc_returns_pair, {"not_a_tensor"}),
    ("output (B, T, H, D)", sc_heads_last, {"wrong_shape"}),
]


def sc_einsum_where(q, k, v, cap):
    """Correct: einsum, float32, the mask by torch.where with finfo.min after the cap."""
    qf, kf, vf = (t.to(torch.float32) if t.dtype != torch.float64 else t for t in (q, k, v))
    T = q.shape[-2]
    s = torch.einsum("bhid,bhjd->bhij", qf, kf) / math.sqrt(q.shape[-1])
    s = cap * torch.tanh(s / cap)
    s = torch.where(torch.ones(T, T, dtype=torch.bool).tril(), s, torch.finfo(s.dtype).min)
    return torch.einsum("bhij,bhjd->bhid", s.softmax(-1), vf).to(q.dtype)


def sc_sigmoid_tanh(q, k, v, cap):
    """Correct: tanh written as 2 sigmoid(2x) - 1, an additive -inf mask."""
    qf, kf, vf = _up(q, k, v)
    T = q.shape[-2]
    s = qf @ kf.transpose(-2, -1) * q.shape[-1] ** -0.5
    s = cap * (2 * torch.sigmoid(2 * s / cap) - 1)
    s = s + torch.full((T, T), NEG_INF).triu(1).to(s.dtype)
    return (torch.softmax(s, -1) @ vf).type_as(q)


def sc_loops(q, k, v, cap):
    """Correct: per batch and head, a hand softmax with the max subtracted, in float64."""
    B, H, T, D = q.shape
    out = torch.empty(B, H, T, D, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            s = q[b, h].double() @ k[b, h].double().T / math.sqrt(D)
            s = cap * torch.tanh(s / cap)
            s[torch.ones(T, T, dtype=torch.bool).triu(1)] = NEG_INF
            e = torch.exp(s - s.max(-1, keepdim=True).values)
            out[b, h] = (e / e.sum(-1, keepdim=True)) @ v[b, h].double()
    return out.to(q.dtype)


def sc_weights_cast_back(q, k, v, cap):
    """Correct: scores, cap and softmax in float32, the weights cast back before @ v."""
    T, D = q.shape[-2:]
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(D)
    s = torch.tanh(s / cap) * cap
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), NEG_INF)
    w = torch.softmax(s, dim=-1).to(v.dtype)
    return w @ v


SOFTCAP_CORRECT = [("einsum and torch.where", sc_einsum_where),
                   ("tanh as 2 sigmoid(2x) - 1", sc_sigmoid_tanh),
                   ("loops, a hand softmax, float64", sc_loops),
                   ("weights cast back before @ v", sc_weights_cast_back)]


# --------------------------------------------------------------------------- 17: grouped-query
def _attend(q, k, v, *, keep=None, dim=-1, scale=None):
    """A learner's causal attention over matching heads."""
    T, D = q.shape[-2], q.shape[-1]
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(D) if scale is None else scale)
    keep = torch.ones(T, T, dtype=torch.bool).tril() if keep is None else keep
    return torch.softmax(s.masked_fill(~keep, NEG_INF), dim=dim) @ v


def gqa_tiled(q, k, v):
    n_rep = q.size(1) // k.size(1)
    return _attend(q, k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1))


def gqa_q_grouped_outer(q, k, v):
    B, Hq, T, D = q.shape
    Hkv = k.shape[1]
    qg = q.view(B, Hq // Hkv, Hkv, T, D)                 # (B, g, H_kv, T, D)
    s = qg @ k.unsqueeze(1).transpose(-2, -1) / math.sqrt(D)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), NEG_INF)
    return (s.softmax(-1) @ v.unsqueeze(1)).reshape(B, Hq, T, D)


def gqa_cat(q, k, v):
    g = q.shape[1] // k.shape[1]
    return _attend(q, torch.cat([k] * g, dim=1), torch.cat([v] * g, dim=1))


def gqa_modulo_index(q, k, v):
    Hq, Hkv = q.shape[1], k.shape[1]
    idx = [h % Hkv for h in range(Hq)]
    return _attend(q, k[:, idx], v[:, idx])


def gqa_divides_by_hkv(q, k, v):
    Hq, Hkv = q.shape[1], k.shape[1]
    idx = torch.tensor([h // Hkv for h in range(Hq)])   # h // H_kv, not h // g
    return _attend(q, k[:, idx], v[:, idx])


def gqa_mean_kv(q, k, v):
    return _attend(q, k.mean(dim=1, keepdim=True), v.mean(dim=1, keepdim=True))


def gqa_sum_kv(q, k, v):
    return _attend(q, k.sum(1, keepdim=True), v.sum(1, keepdim=True))


def gqa_not_repeated(q, k, v):
    return _attend(q, k, v)


def gqa_repeat_time(q, k, v):
    g = q.shape[1] // k.shape[1]
    return _attend(q, k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2))


def gqa_repeat_last(q, k, v):
    g = q.shape[1] // k.shape[1]
    return _attend(q, k.repeat_interleave(g, dim=-1), v.repeat_interleave(g, dim=-1))


def gqa_count_hkv(q, k, v):
    n = k.shape[1]                                       # repeated H_kv times, not H_q // H_kv
    return _attend(q, k.repeat_interleave(n, 1), v.repeat_interleave(n, 1))


def _rep(k, q):
    return k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)


def gqa_scale_width(q, k, v):
    return _attend(q, _rep(k, q), _rep(v, q), scale=1 / math.sqrt(q.shape[1] * q.shape[-1]))


def gqa_scale_heads(q, k, v):
    return _attend(q, _rep(k, q), _rep(v, q), scale=1 / math.sqrt(q.size(1)))


def gqa_no_mask(q, k, v):
    T = q.shape[-2]
    return _attend(q, _rep(k, q), _rep(v, q), keep=torch.ones(T, T, dtype=torch.bool))


def gqa_mask_strict(q, k, v):
    T = q.shape[-2]
    return _attend(q, _rep(k, q), _rep(v, q), keep=torch.ones(T, T, dtype=torch.bool).tril(-1))


def gqa_mask_reversed(q, k, v):
    T = q.shape[-2]
    return _attend(q, _rep(k, q), _rep(v, q), keep=torch.ones(T, T, dtype=torch.bool).triu())


def gqa_softmax_queries(q, k, v):
    return _attend(q, _rep(k, q), _rep(v, q), dim=-2)


def gqa_group_mean_output(q, k, v):
    B, Hq, T, D = q.shape
    Hkv = k.shape[1]
    qg = q.view(B, Hkv, Hq // Hkv, T, D)
    out = _attend(qg, k.unsqueeze(2), v.unsqueeze(2))    # (B, H_kv, g, T, D)
    return out.mean(dim=2)                                # one output per kv head


def gqa_grouped_output(q, k, v):
    B, Hq, T, D = q.shape
    Hkv = k.shape[1]
    qg = q.view(B, Hkv, Hq // Hkv, T, D)
    return _attend(qg, k.unsqueeze(2), v.unsqueeze(2))    # left as (B, H_kv, g, T, D)


def gqa_first_heads(q, k, v):
    return _attend(q[:, :k.shape[1]], k, v)              # one query head per kv head


def gqa_expand_before_heads(q, k, v):
    B, Hkv, T, D = k.shape
    g = q.shape[1] // Hkv
    k2 = k[:, None].expand(B, g, Hkv, T, D).reshape(B, g * Hkv, T, D)
    v2 = v[:, None].expand(B, g, Hkv, T, D).reshape(B, g * Hkv, T, D)
    return _attend(q, k2, v2)


def gqa_heads_last(q, k, v):
    return _attend(q, _rep(k, q), _rep(v, q)).transpose(1, 2)


GQA = [
    ("k.repeat(1, g, 1, 1)", gqa_tiled, {"kv_order"}),
    ("q grouped as (B, g, H_kv, T, D)", gqa_q_grouped_outer, {"kv_order"}),
    ("torch.cat([k] * g)", gqa_cat, {"kv_order"}),
    ("index h % H_kv", gqa_modulo_index, {"kv_order"}),
    ("index h // H_kv", gqa_divides_by_hkv, {"kv_order"}),
    ("new axis before the heads, expand, reshape", gqa_expand_before_heads, {"kv_order"}),
    ("kv heads averaged", gqa_mean_kv, {"kv_mean"}),
    ("kv heads summed", gqa_sum_kv, {"kv_sum"}),
    ("kv heads not repeated", gqa_not_repeated, {"kv_not_repeated"}),
    ("repeated along T", gqa_repeat_time, {"kv_not_repeated"}),
    ("repeated along D", gqa_repeat_last, {"kv_not_repeated"}),
    ("repeated H_kv times", gqa_count_hkv, {"kv_not_repeated"}),
    ("scale 1/sqrt(H_q D)", gqa_scale_width, {"scale"}),
    ("scale 1/sqrt(H_q)", gqa_scale_heads, {"scale"}),
    ("no causal mask", gqa_no_mask, {"no_causal_mask"}),
    ("mask hides the diagonal", gqa_mask_strict, {"mask_excludes_diagonal"}),
    ("mask reversed", gqa_mask_reversed, {"mask_inverted"}),
    ("softmax over the queries", gqa_softmax_queries, {"softmax_dim"}),
    ("outputs of a group averaged", gqa_group_mean_output, {"output_kv_heads"}),
    ("output left grouped", gqa_grouped_output, {"groups_not_merged"}),
    ("only the first H_kv query heads", gqa_first_heads, {"output_kv_heads"}),
    ("output (B, T, H, D)", gqa_heads_last, {"wrong_shape"}),
]


def gqa_meta_expand(q, k, v):
    """Correct: Meta's repeat_kv, a new axis after the heads, expand, reshape."""
    B, Hkv, T, D = k.shape
    g = q.shape[1] // Hkv
    k = k[:, :, None].expand(B, Hkv, g, T, D).reshape(B, Hkv * g, T, D)
    v = v[:, :, None].expand(B, Hkv, g, T, D).reshape(B, Hkv * g, T, D)
    return _attend(q, k, v)


def gqa_folded_rows(q, k, v):
    """Correct: each group folded into the query rows, no copy of k and v."""
    B, Hq, T, D = q.shape
    Hkv = k.shape[1]
    g = Hq // Hkv
    s = q.reshape(B, Hkv, g * T, D) @ k.transpose(-2, -1) / math.sqrt(D)   # (B, H_kv, gT, T)
    keep = torch.ones(T, T, dtype=torch.bool).tril().repeat(g, 1)
    w = s.masked_fill(~keep, NEG_INF).softmax(-1)
    return (w @ v).reshape(B, Hq, T, D)


def gqa_loop(q, k, v):
    """Correct: one query head at a time, kv head h // g."""
    g = q.shape[1] // k.shape[1]
    return torch.stack([_attend(q[:, h], k[:, h // g], v[:, h // g])
                        for h in range(q.shape[1])], dim=1)


def gqa_einsum_groups(q, k, v):
    """Correct: q grouped as (B, H_kv, g, T, D), einsum against the shared heads, float32."""
    B, Hq, T, D = q.shape
    Hkv = k.shape[1]
    qf, kf, vf = _up(q, k, v)
    qg = qf.view(B, Hkv, Hq // Hkv, T, D)
    s = torch.einsum("bkgtd,bksd->bkgts", qg, kf) * D ** -0.5
    s = torch.where(torch.ones(T, T, dtype=torch.bool).tril(), s, torch.finfo(s.dtype).min)
    out = torch.einsum("bkgts,bksd->bkgtd", s.softmax(-1), vf)
    return out.reshape(B, Hq, T, D).to(q.dtype)


def gqa_index_select(q, k, v):
    """Correct: index_select with arange(H_q) // g."""
    idx = torch.arange(q.shape[1]) // (q.shape[1] // k.shape[1])
    return _attend(q, k.index_select(1, idx), v.index_select(1, idx))


GQA_CORRECT = [("Meta's expand and reshape", gqa_meta_expand),
               ("groups folded into the rows", gqa_folded_rows),
               ("a loop over query heads", gqa_loop),
               ("einsum over groups, float32", gqa_einsum_groups),
               ("index_select", gqa_index_select)]


# --------------------------------------------------------------------------- garbage
def _raises(*a, **k):
    raise ValueError("not done yet")


def _exits(*a, **k):
    sys.exit(3)


GARBAGE = {
    "softcap_attention": [None, 42, _raises, _exits, lambda q, k, v, cap: None,
                          lambda q, k, v, cap: "attention", lambda q, k, v, cap: (q, k),
                          lambda q, k, v, cap: q[..., 0], lambda q, k, v, cap: q.sum(),
                          lambda q, k, v, cap: torch.full_like(q, float("nan")),
                          lambda q, k, v, cap: v[..., :1, :], lambda q, k: q],
    "gqa_attention": [None, 42, _raises, _exits, lambda q, k, v: None, lambda q, k, v: "gqa",
                      lambda q, k, v: (q, k), lambda q, k, v: q[..., 0], lambda q, k, v: k,
                      lambda q, k, v: torch.full_like(q, float("nan")), lambda q, k, v: v[:, :1],
                      lambda q, k: q],
}

CHECKERS = {"softcap_attention": (ex.check_softcap_attention, SOFTCAP, SOFTCAP_CORRECT),
            "gqa_attention": (ex.check_gqa_attention, GQA, GQA_CORRECT)}


def test_each_exercise_has_at_least_12_unseen_wrong_answers():
    assert all(len(wrong) >= 12 for _, wrong, _ in CHECKERS.values())


if __name__ == "__main__":
    unseen.print_table(CHECKERS, CANNOT_TELL)
