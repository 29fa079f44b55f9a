"""Exercises 13-15 (online softmax, sliding window with a cache, QK-norm): wrong answers the
checkers' catalogues never saw, correct answers in other styles, and garbage (issue 33, item 5).

Written from the practice notebooks' task texts alone, the way learners err: each wrong answer is a
learner's function with one slip (a knob of ``tiled``, ``windowed`` or ``qwen3`` below, each knob a
line a learner writes differently), and names the diagnosis keys that describe its mistake
correctly. A result is
  - named correctly: its ``mistake`` is one of those keys;
  - cannot tell: the checker names no mistake ("cannot_tell", "wrong values", "NaN", "raised");
  - named wrongly: any other key;
  - passed: the checker missed it.
The target: at least 90% named correctly per exercise, none named wrongly, none passed; every
correct variant passes; every garbage answer gets a clean result (a code, no exception).
``python tests/test_exercises_unseen_2025.py`` prints the table.
"""

from __future__ import annotations

import math
import sys

import torch
import torch.nn.functional as F
import unseen
from torch import nn

import normlib as nl
from normlib import exercises as ex

# no mistake named: the outcomes that name none, and two that name only where it is (true, vague)
CANNOT_TELL = {"cannot_tell", "wrong_values", "nan", "raised", "tile_merge", "decode_differs"}
INF = float("inf")


# --------------------------------------------------------------------------- 13: online softmax
def tiled(*, m0=-INF, rescale_l=True, rescale_o=True, factor="ok", terms="new", update="running",
          divide="end", scale=lambda D: D ** -0.5, stride=0, extra=0, last="keep", exp=torch.exp,
          acc_dtype=None, layout="BHTD", returns="o"):
    """A learner's tiled attention; each keyword other than its default is one slip."""
    def online_softmax_attention(q, k, v, block_size=2):
        S, D = k.shape[-2], q.shape[-1]
        m = torch.full(q.shape[:-1], m0, dtype=q.dtype)                          # (B, H, T)
        den = torch.zeros_like(m)
        o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=acc_dtype or q.dtype)  # (B, H, T, D)
        n_tiles = 0
        end = S - S % block_size if last == "drop" else S
        for j in range(0, end, block_size + stride):
            n = max(block_size - 1, 1) if last == "short_slice" else block_size + extra
            kj, vj = k[..., j:j + n, :], v[..., j:j + n, :]
            s = q @ kj.transpose(-2, -1) * scale(D)                              # (B, H, T, Bc)
            n_tiles += 1
            if divide in ("per_tile", "per_tile_mean"):
                e = exp(s - s.amax(-1, keepdim=True))
                o = o + (e / e.sum(-1, keepdim=True)) @ vj
                continue
            m_block = s.amax(-1)
            m_new = {"running": torch.maximum(m, m_block), "never": m, "block_only": m_block,
                     "first": m_block if j == 0 else m}[update]
            if update == "never":
                m_new = torch.maximum(m, m_block) if j == 0 else m_new
            a = {"ok": exp(m - m_new), "inverted": exp(m_new - m).nan_to_num(0.0, 0.0),
                 "block": exp(m_block - m_new), "after": torch.ones_like(m)}[factor]
            ref = {"new": m_new, "old": m, "block": m_block, "none": torch.zeros_like(m)}[terms]
            p = exp(s - ref[..., None])
            den = (a * den if rescale_l else den) + p.sum(-1)
            o = (a[..., None] * o if rescale_o else o) + p @ vj
            if update != "never" or j == 0:
                m = m_new
        if divide == "per_tile_mean":
            o = o / n_tiles
        elif divide == "end":
            o = o / den[..., None]
        if returns == "pair":
            return o, den
        return o.transpose(1, 2) if layout == "BTHD" else o
    return online_softmax_attention


def flash_v1(q, k, v, block_size=2):
    """Correct, FlashAttention-1 style: the running output kept normalized."""
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    den = torch.zeros_like(m)
    o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for j in range(0, k.shape[-2], block_size):
        s = torch.einsum("bhtd,bhsd->bhts", q, k[..., j:j + block_size, :]) * scale
        m_new = torch.maximum(m, s.max(dim=-1).values)
        p = torch.exp(s - m_new.unsqueeze(-1))
        l_new = torch.exp(m - m_new) * den + p.sum(-1)
        o = (o * (den * torch.exp(m - m_new)).unsqueeze(-1) + p @ v[..., j:j + block_size, :]) \
            / l_new.unsqueeze(-1)
        m, den = m_new, l_new
    return o


def flash_lse(q, k, v, block_size=2):
    """Correct, in float32 for any input dtype, a running log-sum-exp instead of (m, l)."""
    qf, kf, vf = q.float(), k.float(), v.float()
    lse = torch.full(q.shape[:-1], -INF)
    o = torch.zeros(*q.shape[:-1], v.shape[-1])
    for j in range(0, k.shape[-2], block_size):
        s = qf @ kf[..., j:j + block_size, :].mT / q.shape[-1] ** 0.5
        block = torch.logsumexp(s, -1)
        new = torch.logaddexp(lse, block)
        o = o * torch.exp(lse - new)[..., None] + torch.exp(s - new[..., None]) @ \
            vf[..., j:j + block_size, :]
        lse = new
    return o.to(q.dtype)


def flash_rows(q, k, v, block_size=2):
    """Correct, one query row at a time with Python floats for m and l (slow but right)."""
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    B, H, T, D = q.shape
    for b in range(B):
        for h in range(H):
            for t in range(T):
                m, den, acc = -INF, 0.0, torch.zeros(v.shape[-1], dtype=q.dtype)
                for j in range(0, k.shape[-2], block_size):
                    s = k[b, h, j:j + block_size] @ q[b, h, t] / math.sqrt(D)
                    m_new = max(m, float(s.max()))
                    c = math.exp(m - m_new)
                    p = torch.exp(s - m_new)
                    den = den * c + float(p.sum())
                    acc = acc * c + p @ v[b, h, j:j + block_size]
                    m = m_new
                out[b, h, t] = acc / den
    return out


ONLINE = [
    ("nothing rescaled", tiled(rescale_l=False, rescale_o=False), {"no_rescale"}),
    ("only l rescaled", tiled(rescale_o=False), {"acc_not_rescaled"}),
    ("only o rescaled", tiled(rescale_l=False), {"sum_not_rescaled"}),
    ("factor exp(m' - m)", tiled(factor="inverted"), {"rescale_inverted"}),
    ("factor taken after m is updated", tiled(factor="after"), {"no_rescale"}),
    ("running max never updated", tiled(update="never"), {"max_not_updated"}),
    ("max kept from the first block", tiled(update="first"), {"max_not_updated"}),
    ("new max = the block's max alone", tiled(update="block_only"), {"max_not_updated"}),
    ("no max subtracted", tiled(terms="none", rescale_l=False, rescale_o=False), {"no_max"}),
    ("running max starts at 0", tiled(m0=0.0), {"max_starts_at_zero"}),
    ("block terms against the block's max", tiled(terms="block"), {"block_not_rescaled"}),
    ("block terms against the old max", tiled(terms="old"), {"terms_old_max"}),
    ("factor exp(m_block - m')", tiled(factor="block"), {"rescale_wrong_max"}),
    ("softmax per tile, added", tiled(divide="per_tile"), {"normalized_per_tile"}),
    ("softmax per tile, averaged", tiled(divide="per_tile_mean"), {"normalized_per_tile"}),
    ("no division by l", tiled(divide="never"), {"no_final_division"}),
    ("no 1/sqrt(D)", tiled(scale=lambda D: 1.0), {"no_scaling"}),
    ("scale 1/D", tiled(scale=lambda D: 1 / D), {"scale"}),
    ("scale sqrt(D)", tiled(scale=lambda D: D ** 0.5), {"scale"}),
    ("scale hard-coded 1/sqrt(8)", tiled(scale=lambda D: 8 ** -0.5), {"scale"}),
    ("exp2 without log2(e)", tiled(exp=torch.exp2), {"exp2"}),
    ("blocks overlap by one key", tiled(extra=1), {"keys_counted_twice"}),
    ("last short block dropped", tiled(last="drop"), {"keys_skipped"}),
    ("one key of each block left out", tiled(last="short_slice"), {"keys_skipped"}),
    ("returns (o, l)", tiled(returns="pair"), {"not_a_tensor"}),
    ("output (B, T, H, D)", tiled(layout="BTHD"), {"wrong_shape"}),
    ("nothing rescaled, max from 0", tiled(m0=0.0, rescale_l=False, rescale_o=False),
     {"no_rescale"}),
    ("only l rescaled, by exp(m' - m)", tiled(rescale_o=False, factor="inverted"),
     {"acc_not_rescaled", "rescale_inverted"}),
    ("a key skipped between blocks", tiled(stride=1), {"keys_skipped"}),
    ("max never updated, no division", tiled(update="never", divide="never"),
     {"max_not_updated", "no_final_division"}),
]
ONLINE_CORRECT = [("normalized running output (FlashAttention-1)", flash_v1),
                  ("running log-sum-exp in float32", flash_lse),
                  ("one row at a time", flash_rows),
                  ("default knobs", tiled())]


# --------------------------------------------------------------------------- 14: sliding window
def windowed(*, lo=0, ahead=0, fill="-inf", self_excluded=False, rows="ok", softmax_dim=-1,
             scale=lambda D: D ** -0.5, rope="ok", start="seen", cache_mode="ok",
             layout="BHTD"):
    """A learner's sliding-window attention with a dict cache; each keyword other than its
    default is one slip."""
    def sliding_window_attention(q, k, v, window, cache):
        B, H, T, D = q.shape
        seen = cache.get("seen", 0)
        kept_k = cache.get("keys" if cache_mode == "other_names" else "k")
        kept_v = cache.get("values" if cache_mode == "other_names" else "v")
        first = {"kept": 0 if kept_k is None else kept_k.shape[-2], "zero": 0}.get(start, seen)
        pos = torch.arange(first, first + T)
        layout_ = "half" if rope == "half" else "interleaved"
        qr = q if rope == "none" else nl.apply_rope(q, pos, layout=layout_)
        kr = k if rope in ("none", "q_only") else nl.apply_rope(k, pos, layout=layout_)
        vr = nl.apply_rope(v, pos) if rope == "v_too" else v
        new_k = k if cache_mode == "unrotated" else kr
        if kept_k is not None and cache_mode != "unused":
            K = torch.cat([kr, kept_k] if cache_mode == "new_first" else [kept_k, kr], -2)
            V = torch.cat([vr, kept_v] if cache_mode == "new_first" else [kept_v, vr], -2)
            if cache_mode == "rotated_twice":
                K = torch.cat([nl.apply_rope(kept_k, torch.arange(seen - kept_k.shape[-2], seen)),
                               kr], -2)
        else:
            K, V = kr, vr
        S = K.shape[-2]
        qp = {"ok": torch.arange(S - T, S), "zero": torch.arange(T),
              "absolute": torch.arange(seen, seen + T)}[rows][:, None]
        kp = torch.arange(S)[None, :]
        if self_excluded:
            keep = (kp < qp + ahead) & (kp >= qp - window - lo)
        else:
            keep = (kp <= qp + ahead) & (kp > qp - window - lo)
        scores = qr @ K.transpose(-2, -1) * scale(D)                              # (B, H, T, S)
        if fill == "zero":
            scores = scores * keep
        else:
            scores = scores.masked_fill(~keep, {"-inf": -INF, "min": torch.finfo(q.dtype).min,
                                                "-1e4": -1e4}[fill])
        out = torch.softmax(scores, softmax_dim) @ V
        n = {"ok": window - 1, "not_rolled": S, "keep_window": window,
             "too_short": max(window - 2, 0)}.get(cache_mode, window - 1)
        store_k = K if cache_mode != "unrotated" else torch.cat(
            [kept_k, new_k], -2) if kept_k is not None else new_k
        if cache_mode == "new_first":
            store_k, V = torch.cat([kept_k, kr], -2) if kept_k is not None else kr, \
                torch.cat([kept_v, vr], -2) if kept_v is not None else vr
        if cache_mode == "oldest":
            kk, vv = store_k[..., :n, :], V[..., :n, :]
        elif cache_mode == "replace":
            kk, vv = kr[..., max(0, T - n):, :], vr[..., max(0, T - n):, :]
        else:
            kk, vv = store_k[..., max(0, S - n):, :], V[..., max(0, S - n):, :]
        if cache_mode == "rebind":
            cache = {"k": kk, "v": vv, "seen": seen + T}      # noqa: F841 (the slip itself)
        elif cache_mode == "other_names":
            cache.update(keys=kk, values=vv, seen=seen + T)
        else:
            cache.update(k=kk, v=vv, seen=seen + (1 if start == "calls" else T))
        if layout == "BTHD":
            return out.transpose(1, 2)
        return out[..., -1:, :] if layout == "last" else out
    return sliding_window_attention


def swa_where(q, k, v, window, cache):
    """Correct: the mask from true positions with torch.where and finfo.min, the cache rolled by
    slicing with a negative index."""
    T = q.shape[-2]
    seen = cache.get("seen", 0)
    pos = seen + torch.arange(T)
    q, k = nl.apply_rope(q, pos), nl.apply_rope(k, pos)
    if cache.get("k") is not None:
        k, v = torch.cat((cache["k"], k), dim=2), torch.cat((cache["v"], v), dim=2)
    key_pos = torch.arange(seen + T - k.shape[2], seen + T)
    d = pos[:, None] - key_pos[None, :]
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / q.shape[-1] ** 0.5
    scores = torch.where((d >= 0) & (d < window), scores, torch.finfo(q.dtype).min)
    w = torch.exp(scores - scores.amax(-1, keepdim=True))
    out = (w / w.sum(-1, keepdim=True)) @ v
    keep = window - 1
    cache["k"] = k[:, :, -keep:] if keep else k[:, :, :0]
    cache["v"] = v[:, :, -keep:] if keep else v[:, :, :0]
    cache["seen"] = seen + T
    return out


def swa_per_token(q, k, v, window, cache):
    """Correct: one query at a time, each attending to a slice of the keys."""
    T, D = q.shape[-2], q.shape[-1]
    seen = cache.get("seen", 0)
    pos = torch.arange(seen, seen + T)
    q, k = nl.apply_rope(q, pos), nl.apply_rope(k, pos)
    K = torch.cat([cache["k"], k], -2) if "k" in cache else k
    V = torch.cat([cache["v"], v], -2) if "v" in cache else v
    n_old = K.shape[-2] - T
    outs = []
    for t in range(T):
        hi = n_old + t + 1
        lo = max(0, hi - window)
        w = torch.softmax(q[..., t:t + 1, :] @ K[..., lo:hi, :].mT / math.sqrt(D), -1)
        outs.append(w @ V[..., lo:hi, :])
    cache.update(k=K[..., K.shape[-2] - min(K.shape[-2], window - 1):, :],
                 v=V[..., V.shape[-2] - min(V.shape[-2], window - 1):, :], seen=seen + T)
    return torch.cat(outs, -2)


SLIDING = [
    ("window W + 1", windowed(lo=1), {"window_too_wide"}),
    ("window W - 1", windowed(lo=-1), {"window_too_narrow"}),
    ("no window", windowed(lo=10**6), {"no_window"}),
    ("band, future included", windowed(ahead=10**6), {"window_not_causal"}),
    ("band of +-1 into the future", windowed(ahead=1), {"window_not_causal"}),
    ("window excludes the query itself", windowed(self_excluded=True), {"window_excludes_self"}),
    ("masked by multiplying with 0", windowed(fill="zero"), {"mask_by_zero"}),
    ("mask rows from 0, not after the kept keys", windowed(rows="zero"), {"mask_misaligned"}),
    ("mask rows at absolute positions", windowed(rows="absolute"), {"mask_misaligned"}),
    ("softmax over the queries", windowed(softmax_dim=-2), {"softmax_dim"}),
    ("no 1/sqrt(D)", windowed(scale=lambda D: 1.0), {"no_scaling"}),
    ("scale 1/D", windowed(scale=lambda D: 1 / D), {"scale"}),
    ("no RoPE", windowed(rope="none"), {"no_rope"}),
    ("RoPE in the half layout", windowed(rope="half"), {"rope_layout"}),
    ("RoPE on q only", windowed(rope="q_only"), {"rope_one_side"}),
    ("RoPE on v too", windowed(rope="v_too"), {"rope_on_v"}),
    ("positions restart each call", windowed(start="zero"), {"positions_per_call"}),
    ("positions from the keys kept", windowed(start="kept"), {"positions_reset"}),
    ("cache['seen'] counts calls", windowed(start="calls"), {"seen_counts_calls"}),
    ("cache never rolled", windowed(cache_mode="not_rolled"), {"cache_not_rolled"}),
    ("cache keeps W keys", windowed(cache_mode="keep_window"), {"cache_keeps_window"}),
    ("cache keeps W - 2 keys", windowed(cache_mode="too_short"), {"cache_too_short"}),
    ("cache keeps the oldest keys", windowed(cache_mode="oldest"), {"cache_keeps_oldest"}),
    ("cache holds keys before RoPE", windowed(cache_mode="unrotated"), {"cache_unrotated"}),
    ("cache holds only the last call's keys", windowed(cache_mode="replace"),
     {"cache_not_appended"}),
    ("cache under other names", windowed(cache_mode="other_names"), {"cache_names"}),
    ("cache dict rebound, never filled", windowed(cache_mode="rebind"), {"cache_not_kept"}),
    ("cache never read", windowed(cache_mode="unused"), {"cache_unused"}),
    ("new keys before the kept ones", windowed(cache_mode="new_first"), {"cache_order"}),
    ("kept keys rotated again", windowed(cache_mode="rotated_twice"), {"rotated_twice"}),
    ("output (B, T, H, D)", windowed(layout="BTHD"), {"wrong_shape"}),
    ("only the last token's output", windowed(layout="last"), {"wrong_shape"}),
]
SLIDING_CORRECT = [("torch.where and finfo.min", swa_where), ("one query at a time",
                                                              swa_per_token),
                   ("masked with -1e4", windowed(fill="-1e4")), ("default knobs", windowed())]


# --------------------------------------------------------------------------- 15: QK-norm
def qwen3(*, order="norm_rope", v_norm=False, norm="rms", eps_used=None, eps_place="inside",
          gain="weight", k_norm=True, q_norm=True, swap=False, layout="half", causal="ok",
          split="ok", merge="ok", scale="sdpa", bias=False, o_proj=True, v_proj="v",
          base=10000.0, whole=False, axis=-1):
    """A learner's Qwen3 attention; each keyword other than its default is one slip."""
    class Norm(nn.Module):
        def __init__(self, d, eps):
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

        def forward(self, t):
            e = self.eps if eps_used is None else eps_used
            w = self.weight.repeat(t.shape[-1] // self.weight.shape[0])
            if gain == "before":
                t = t * w
            if norm == "layer":
                t = t - t.mean(axis, keepdim=True)
            if norm == "l2":
                t = t / (t.pow(2).sum(axis, keepdim=True) + e).sqrt()
            elif eps_place == "outside":
                t = t / (t.pow(2).mean(axis, keepdim=True).sqrt() + e)
            else:
                t = t * torch.rsqrt(t.pow(2).mean(axis, keepdim=True) + e)
            return {"weight": t * w, "none": t, "one_plus": t * (1 + w), "before": t}[gain]

    class QKNormAttention(nn.Module):
        def __init__(self, d_model, n_heads, eps=1e-6):
            super().__init__()
            self.h, self.hd = n_heads, d_model // n_heads
            self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
                nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
            self.q_norm, self.k_norm = Norm(self.hd, eps), Norm(self.hd, eps)

        def heads(self, t, B, T):
            if split == "no_transpose":
                return t.reshape(B, self.h, T, self.hd)
            if split == "dims_swapped":
                return t.view(B, T, self.hd, self.h).permute(0, 3, 1, 2)
            return t.view(B, T, self.h, self.hd).transpose(1, 2)            # (B, H, T, hd)

        def forward(self, x):
            B, T, C = x.shape
            q, k = self.q_proj(x), self.k_proj(x)
            v = (self.k_proj if v_proj == "k" else self.v_proj)(x)
            qn, kn = (self.k_norm, self.q_norm) if swap else (self.q_norm, self.k_norm)
            if scale == "before_norm":
                q = q / math.sqrt(self.hd)
            if whole:
                q, k = qn(q), kn(k)
            q, k, v = (self.heads(t, B, T) for t in (q, k, v))
            rope = (lambda t: t) if layout == "none" else (
                lambda t: nl.apply_rope(t, layout=layout, base=base))
            if order == "rope_norm":
                q, k = rope(q), rope(k)
            if not whole:
                q = qn(q) if q_norm else q
                k = kn(k) if k_norm else k
            if v_norm:
                v = kn(v)
            if order == "norm_rope":
                q, k = rope(q), rope(k)
            s = q @ k.transpose(-2, -1)
            s = s * {"sdpa": self.hd ** -0.5, "before_norm": 1.0, "none": 1.0,
                     "head_dim": 1 / self.hd, "d_model": C ** -0.5}[scale]
            keep = {"ok": torch.ones(T, T, dtype=torch.bool).tril(),
                    "none": torch.ones(T, T, dtype=torch.bool),
                    "strict": torch.ones(T, T, dtype=torch.bool).tril(-1),
                    "inverted": torch.ones(T, T, dtype=torch.bool).triu()}[causal]
            y = torch.softmax(s.masked_fill(~keep, -INF), -1) @ v                # (B, H, T, hd)
            if merge == "no_transpose":
                y = y.reshape(B, T, C)
            else:
                y = y.transpose(1, 2).reshape(B, T, C)
            return self.o_proj(y) if o_proj else y
    return QKNormAttention


class WithTorchRMSNorm(qwen3()):
    """Correct: torch's nn.RMSNorm for the two norms, SDPA for the attention."""

    def __init__(self, d_model, n_heads, eps=1e-6):
        super().__init__(d_model, n_heads, eps)
        self.q_norm, self.k_norm = nn.RMSNorm(self.hd, eps=eps), nn.RMSNorm(self.hd, eps=eps)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (p(x).unflatten(-1, (self.h, self.hd)).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        q = nl.apply_rope(self.q_norm(q), layout="half")
        k = nl.apply_rope(self.k_norm(k), layout="half")
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).flatten(2))


class Float32Norms(qwen3()):
    """Correct: the norms computed in float32 and cast back, HF's Qwen3RMSNorm style."""

    def __init__(self, d_model, n_heads, eps=1e-6):
        super().__init__(d_model, n_heads, eps)

        class RMS(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.weight, self.variance_epsilon = nn.Parameter(torch.ones(d)), eps

            def forward(self, h):
                dtype, h = h.dtype, h.to(torch.float32)
                h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
                return self.weight * h.to(dtype)
        self.q_norm, self.k_norm = RMS(self.hd), RMS(self.hd)


QKNORM = [
    ("norm after RoPE", qwen3(order="rope_norm"), {"norm_after_rope"}),
    ("v normalized too", qwen3(v_norm=True), {"norm_on_v"}),
    ("LayerNorm", qwen3(norm="layer"), {"layer_norm"}),
    ("L2 normalize", qwen3(norm="l2"), {"l2_norm"}),
    ("no eps", qwen3(eps_used=0.0), {"no_eps"}),
    ("eps hard-coded 1e-5", qwen3(eps_used=1e-5), {"eps_ignored"}),
    ("eps outside the sqrt", qwen3(eps_place="outside"), {"eps_outside_sqrt"}),
    ("gain unused", qwen3(gain="none"), {"norm_weight_unused"}),
    ("gain 1 + weight", qwen3(gain="one_plus"), {"gain_one_plus"}),
    ("gain before normalizing", qwen3(gain="before"), {"gain_before_norm"}),
    ("only q normalized", qwen3(k_norm=False), {"one_side_normed"}),
    ("only k normalized", qwen3(q_norm=False), {"one_side_normed"}),
    ("norms swapped", qwen3(swap=True), {"norms_swapped"}),
    ("RoPE interleaved", qwen3(layout="interleaved"), {"rope_layout"}),
    ("no RoPE", qwen3(layout="none"), {"no_rope"}),
    ("RoPE base 1e6", qwen3(base=1e6), {"rope_base"}),
    ("no causal mask", qwen3(causal="none"), {"sees_future"}),
    ("mask keeps the future", qwen3(causal="inverted"), {"sees_future"}),
    ("mask hides the diagonal", qwen3(causal="strict"), {"mask_excludes_self"}),
    ("heads split without the transpose", qwen3(split="no_transpose"), {"heads_split"}),
    ("heads split as (head_dim, H)", qwen3(split="dims_swapped"), {"heads_split"}),
    ("heads merged without the transpose", qwen3(merge="no_transpose"), {"heads_merged"}),
    ("no 1/sqrt(head_dim)", qwen3(scale="none"), {"no_scaling"}),
    ("scaled before the norm", qwen3(scale="before_norm"), {"no_scaling"}),
    ("scale 1/head_dim", qwen3(scale="head_dim"), {"scale"}),
    ("scale 1/sqrt(d_model)", qwen3(scale="d_model"), {"scale"}),
    ("projections with bias", qwen3(bias=True), {"has_bias"}),
    ("no o_proj", qwen3(o_proj=False), {"no_o_proj"}),
    ("v from k_proj", qwen3(v_proj="k"), {"wrong_projection"}),
    ("norm over the whole projection", qwen3(whole=True), {"norm_whole_projection"}),
    ("norm over the sequence", qwen3(axis=-2), {"norm_axis"}),
]
QKNORM_CORRECT = [("nn.RMSNorm and SDPA", WithTorchRMSNorm), ("float32 norms", Float32Norms),
                  ("default knobs", qwen3())]


# --------------------------------------------------------------------------- garbage
def _raises(*a, **k):
    raise ValueError("not done yet")


def _exits(*a, **k):
    sys.exit(3)


class NotAModule:
    def __init__(self, *a, **k):
        pass


class BrokenInit(nn.Module):
    def __init__(self, d_model, n_heads, eps=1e-6):
        super().__init__()
        raise RuntimeError("typo in __init__")


class ReturnsNone(qwen3()):
    def forward(self, x):
        return None


class ReturnsInput(qwen3()):
    def forward(self, x):
        return x


GARBAGE = {
    "online_softmax_attention": [None, 42, _raises, _exits, lambda q, k, v, block_size=2: None,
                                 lambda q, k, v, block_size=2: "attention",
                                 lambda q, k, v, block_size=2: [q],
                                 lambda q, k, v, block_size=2: q[..., 0],
                                 lambda q, k, v, block_size=2: torch.full_like(q, float("nan")),
                                 lambda q, k, v, block_size=2: v[..., :q.shape[-2], :]],
    "sliding_window_attention": [None, _raises, _exits, lambda q, k, v, w, c: None,
                                 lambda q, k, v, w, c: (q, c), lambda q, k, v, w, c: q.sum(),
                                 lambda q, k, v, w, c: torch.zeros(1),
                                 lambda q, k, v, w, c: c.update(k=3) or v,
                                 lambda q, k, v, w, c: c.setdefault("k", "x") and v],
    "qk_norm_attention": [None, NotAModule, BrokenInit, ReturnsNone, ReturnsInput, nn.Linear,
                          lambda d, h, eps=1e-6: nn.Identity()],
}

CHECKERS = {"online_softmax_attention": (ex.check_online_softmax_attention, ONLINE, ONLINE_CORRECT),
            "sliding_window_attention": (ex.check_sliding_window_attention, SLIDING,
                                         SLIDING_CORRECT),
            "qk_norm_attention": (ex.check_qk_norm_attention, QKNORM, QKNORM_CORRECT)}


def test_each_exercise_has_at_least_30_unseen_wrong_answers():
    assert all(len(wrong) >= 30 for _, wrong, _ in CHECKERS.values())


if __name__ == "__main__":
    unseen.print_table(CHECKERS, CANNOT_TELL)
