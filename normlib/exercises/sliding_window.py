"""The sliding-window attention checker (a rolling KV cache and RoPE), and the mistakes it names.

The learner writes ``sliding_window_attention(q, k, v, window, cache)`` for the T new tokens'
q, k, v (B, H, T, D), before RoPE, and a dict ``cache`` ({} for a new sequence). The new tokens sit
at positions cache["seen"] .. cache["seen"] + T - 1 (0 for a new sequence); q and k are rotated
there with ``nl.apply_rope(x, positions)``; the keys are the kept ones followed by the new ones;
query p attends to keys p - W + 1 .. p (itself and the W - 1 before it, Mistral 7B, arXiv
2310.06825, Section 2; HF's sliding-window mask); then the cache keeps the last W - 1 rotated keys
and values in cache["k"], cache["v"] and cache["seen"] counts every token. The reference is
``F.scaled_dot_product_attention`` with ``nl.sliding_window_mask``; decoding token by token must
give the full pass's outputs (normlib.sliding_window.RollingKVCache is the library's cache).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import normlib as nl

from ._cases import Case, expect, run_cases
from ._compare import randn
from ._generic import catalogue
from ._probes import near
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["TITLE_ZH", "check_sliding_window_attention", "SLIDING_WINDOW_MISTAKES",
           "SLIDING_WINDOW_MUTANTS"]

# the exercise's title in the Chinese report (catalog.py shows it in the drill)
TITLE_ZH = "手撕滑动窗口注意力与滚动 KV cache"

SLIDING_WINDOW_MISTAKES = catalogue("sliding_window_attention", {
    "window_too_wide": ("window off by one: W + 1 keys", "a query sees itself and W keys before "
                        "it; the window W counts itself: keys p - W + 1 .. p (Mistral's "
                        "kv_idx > q_idx - W)."),
    "window_too_narrow": ("window off by one: W - 1 keys", "a query sees only W - 1 keys; the "
                          "window W counts itself and the W - 1 keys before it: p - W + 1 .. p."),
    "no_window": ("no window: plain causal", "every earlier key is seen; keep only keys "
                  "p - W + 1 .. p."),
    "window_not_causal": ("window not causal", "the window reaches into the future: keys after "
                          "the query must stay hidden, the band is p - W + 1 .. p."),
    "cache_not_rolled": ("cache not rolled", "the cache grows with the text: after the update keep "
                         "only the last W - 1 keys and values (a fixed size, whatever the length)."),
    "positions_reset": ("positions reset when rolled", "the new tokens are rotated at the number of "
                        "keys kept, which stops growing once the cache rolls; their position is "
                        "the number of tokens seen, cache['seen']."),
    "positions_per_call": ("positions restart at 0 each call", "the new tokens' positions start at "
                           "cache['seen'] (the tokens before them), not at 0."),
    "decode_differs": ("decoding differs from the full pass", "the full pass is right but "
                       "decoding with the cache is not: the new tokens sit at positions "
                       "cache['seen'] onwards, attend to the kept keys followed by their own, "
                       "and the cache then keeps the last W - 1."),
})


def _swa(q, k, v, window, cache, mode="ok"):
    """Sliding-window attention over the new tokens with one mistake (mode); "ok" is right."""
    T = q.shape[-2]
    seen = cache.get("seen", 0)
    kept_k = cache.get("k", k[..., :0, :])
    kept_v = cache.get("v", v[..., :0, :])
    start = {"positions_reset": kept_k.shape[-2], "positions_per_call": 0}.get(mode, seen)
    pos = torch.arange(start, start + T)
    K = torch.cat([kept_k, nl.apply_rope(k, pos)], -2)                    # (B, H, S, D)
    V = torch.cat([kept_v, v], -2)
    S = K.shape[-2]
    width = {"window_too_wide": window + 1, "window_too_narrow": window - 1,
             "no_window": None}.get(mode, window)
    if width == 0:
        return None
    keep = nl.sliding_window_mask(T, S, width)                           # (T, S)
    if mode == "window_not_causal":
        rows = torch.arange(S - T, S)[:, None]
        keep = (torch.arange(S)[None, :] - rows).abs() < window
    out = F.scaled_dot_product_attention(nl.apply_rope(q, pos), K, V, attn_mask=keep)
    kept = S if mode == "cache_not_rolled" else min(S, window - 1)
    cache.update(k=K[..., S - kept:, :], v=V[..., S - kept:, :], seen=seen + T)
    return out


_MODES = ["window_too_wide", "window_too_narrow", "no_window", "window_not_causal",
          "positions_reset", "positions_per_call"]


def _run(step, q, k, v, window, chunks):
    """Feed the tokens in chunks of the given sizes through ``step(q, k, v, window, cache)`` with
    one cache; the outputs, concatenated over the tokens, and the cache."""
    cache, outs, t = {}, [], 0
    for n in chunks:
        outs.append(step(q[..., t:t + n, :], k[..., t:t + n, :], v[..., t:t + n, :], window,
                         cache))
        t += n
    if any(not isinstance(o, torch.Tensor) for o in outs):
        return None, cache
    return torch.cat(outs, -2), cache


_FORBIDDEN = {"scaled_dot_product_attention": "F.scaled_dot_product_attention",
              "_scaled_dot_product_attention_math": "torch's SDPA kernel",
              "sliding_window_mask": "nl.sliding_window_mask"}


def _reference(q, k, v, window, chunks):
    return _run(_swa, q, k, v, window, [q.shape[-2]])[0]


SLIDING_WINDOW_MUTANTS = [(mode, (lambda q, k, v, window, chunks, mode=mode: _run(
    lambda *a: _swa(*a, mode=mode), q.double(), k.double(), v.double(), window,
    chunks)[0].to(q.dtype))) for mode in _MODES]


def _case(T, window, chunks, seed, dtype=torch.float32, note=""):
    """q, k, v (2, 2, T, 8) ~ N(0, 1), fed in chunks of the given sizes through one cache."""
    how = "the full pass" if chunks == [T] else "chunks " + " + ".join(map(str, chunks))
    return Case(f"W = {window}, {how}" + (f", {note}" if note else ""),
                lambda: tuple(randn(2, 2, T, 8, seed=seed + i, dtype=dtype) for i in range(3)),
                {"window": window, "chunks": chunks}, tol_factor=2)


CASES = [
    _case(9, 4, [9], 10),
    _case(10, 3, [1] * 10, 20, note="decoding token by token"),
    _case(9, 4, [5, 1, 1, 1, 1], 30, dtype=torch.float64, note="a prompt, then decoding"),
    _case(8, 3, [4, 4], 40, note="two chunks"),
    _case(5, 8, [2, 1, 1, 1], 50, note="the window longer than the text"),
    _case(6, 1, [3, 1, 1, 1], 60, note="W = 1: itself only"),
]


def check_sliding_window_attention(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(q, k, v, window, cache)``: the full pass, decoding through the dict cache, and
    the size of the cache."""
    s = Session("Sliding-window attention", SLIDING_WINDOW_MISTAKES,
                exercise="sliding_window_attention", title_zh=TITLE_ZH, time_limit=time_limit,
                forbidden=_FORBIDDEN,
                references={nl.sliding_window_mask: "nl.sliding_window_mask",
                             nl.RollingKVCache.update: "nl.RollingKVCache"})
    if not s.require_callable(fn):
        return s.result()

    def decode(fn, q, k, v, window, chunks):
        return _run(lambda *a: s.call(fn, *a), q, k, v, window, chunks)

    def judge(got, args, case):
        out, cache = got
        if out is None:
            raise Fail("returned None or a non-tensor for a chunk", "returned_none")
        expect(s, out, args, reference=_reference, mutants=SLIDING_WINDOW_MUTANTS,
               tol_factor=case.tol_factor)
        T, window = args[0].shape[-2], args[3]
        kept = cache.get("k") if isinstance(cache, dict) else None
        if isinstance(kept, torch.Tensor) and kept.shape[-2] > window:
            raise Fail(f"after {T} tokens cache['k'] holds {kept.shape[-2]} keys, more than "
                       f"the window W = {window}", "cache_not_rolled")

    run_cases(s, fn, CASES, call=decode, judge=judge)
    s.probe(*_probes(s, fn))
    return s.result()


def _probes(s: Session, fn) -> list:
    """Probes, float64. With v = I (T = D = 8, q = k = 0, so every score is 0) the full pass's
    output *is* the weight matrix and its nonzero entries are the mask: each wrong window shows.
    Then: the full pass right but decoding token by token wrong (the cache or the positions)."""
    T, W = 8, 3
    zeros = torch.zeros(1, 1, T, T, dtype=torch.float64)
    eye = torch.eye(T, dtype=torch.float64).expand(1, 1, T, T)

    def mask_of(width=W, band=False):
        if band:
            i = torch.arange(T)
            return (i[None, :] - i[:, None]).abs() < W
        return nl.sliding_window_mask(T, T, width)

    def pattern():
        w = s.call(fn, zeros, zeros, eye, W, {})
        if not isinstance(w, torch.Tensor) or w.shape != eye.shape or not bool(w.isfinite().all()):
            return None
        used = w.detach().double()[0, 0].abs() > 1e-12
        if bool((used == mask_of()).all()):
            return None
        for key, allowed, text in (
                ("window_too_wide", mask_of(W + 1), "itself and the W = 3 keys before it"),
                ("window_too_narrow", mask_of(W - 1), "itself and only 1 key before it"),
                ("no_window", mask_of(None), "every earlier key"),
                ("window_not_causal", mask_of(band=True), "the keys within 2 positions on "
                 "either side, the future included")):
            if bool((used == allowed).all()):
                return (key, f"With all scores 0 and v = I (the output is the weights), a query "
                        f"with W = {W} attends to {text}. A query at p sees keys p - W + 1 .. p: "
                        f"itself and the W - 1 = {W - 1} keys before it.")
        return None

    def decoding():
        q, k, v = (randn(1, 2, 7, 8, seed=970 + i, dtype=torch.float64) for i in range(3))
        for window, chunks in ((W, [1] * 7), (6, [3, 1, 1, 1, 1])):
            full, _ = _run(lambda *a: s.call(fn, *a), q, k, v, window, [7])
            want, _ = _run(_swa, q, k, v, window, [7])
            if full is None or not near(full, want, 1e-6, 1e-9):
                return None
            steps, _ = _run(lambda *a: s.call(fn, *a), q, k, v, window, chunks)
            if steps is None or near(steps, want, 1e-6, 1e-9):
                continue
            first = next(t for t in range(7)
                         if not near(steps[..., t, :], want[..., t, :], 1e-6, 1e-9))
            how = "one at a time" if chunks[0] == 1 else "as a prompt of 3, then one at a time"
            text = SLIDING_WINDOW_MISTAKES["decode_differs"][1]
            return ("decode_differs", f"Your full pass over 7 tokens (W = {window}) is right, but "
                    f"decoding them {how} differs from token {first} on. "
                    + text[:1].upper() + text[1:])
        return None

    return [pattern, decoding]
