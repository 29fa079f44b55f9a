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

import math

import torch

import normlib as nl

from ._cases import Case, expect, run_cases
from ._compare import randn
from ._generic import catalogue
from ._probes import near
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_sliding_window_attention", "SLIDING_WINDOW_MISTAKES",
           "SLIDING_WINDOW_MUTANTS"]

SLIDING_WINDOW_MISTAKES = catalogue("sliding_window_attention", {
    "window_too_wide": ("window off by one: W + 1 keys", "a query sees itself and W keys before "
                        "it; the window W counts itself: keys p - W + 1 .. p (Mistral's "
                        "kv_idx > q_idx - W).",
                        "窗口有差一错误（off-by-one）：看到了 W + 1 个键。窗口 W 包括自己：键 p - W + 1 .. p。"),
    "window_too_narrow": ("window off by one: W - 1 keys", "a query sees only W - 1 keys; the "
                          "window W counts itself and the W - 1 keys before it: p - W + 1 .. p.",
                          "窗口有差一错误（off-by-one）：只看到 W - 1 个键。窗口 W 是自己加上前面 W - 1 个键："
                          "p - W + 1 .. p。"),
    "no_window": ("no window: plain causal", "every earlier key is seen; keep only keys "
                  "p - W + 1 .. p.",
                  "没有窗口：成了普通因果注意力。只保留键 p - W + 1 .. p。"),
    "window_not_causal": ("window not causal", "the window reaches into the future: keys after "
                          "the query must stay hidden, the band is p - W + 1 .. p.",
                          "窗口不是因果的：看到了未来的键。窗口是 p - W + 1 .. p。"),
    "cache_not_rolled": ("cache not rolled", "the cache grows with the text: after the update keep "
                         "only the last W - 1 keys and values (a fixed size, whatever the length).",
                         "缓存没有滚动：更新之后只保留最后 W - 1 个键和值，大小固定。"),
    "positions_reset": ("positions reset when rolled", "the new tokens are rotated at the number of "
                        "keys kept, which stops growing once the cache rolls; their position is "
                        "the number of tokens seen, cache['seen'].",
                        "滚动后位置被重置：新 token 的位置是已见过的 token 数 cache['seen']，"
                        "不是保留的键数。"),
    "positions_per_call": ("positions restart at 0 each call", "the new tokens' positions start at "
                           "cache['seen'] (the tokens before them), not at 0.",
                           "每次调用位置都从 0 开始：新 token 的位置从 cache['seen'] 开始。"),
    "decode_differs": ("decoding differs from the full pass", "the full pass is right but "
                       "decoding with the cache is not: the new tokens sit at positions "
                       "cache['seen'] onwards, attend to the kept keys followed by their own, "
                       "and the cache then keeps the last W - 1.",
                       "一次性前向正确，但用缓存解码不对：检查位置、保留的键和缓存的滚动。"),
    "window_excludes_self": ("window excludes the query itself", "a query sees keys p - W .. "
                             "p - 1; the window counts the query itself: keys p - W + 1 .. p "
                             "(the first token, with no key before it, gets NaN).",
                             "窗口把查询自己排除了：位置 p 的查询应看到键 p - W + 1 .. p，包括自己（第一个 token 没有别的键，"
                             "会得到 NaN）。"),
    "mask_by_zero": ("masked scores set to 0, not -inf", "multiplying the scores by the mask "
                     "gives a masked key the score 0, and exp(0 - m) is not 0: fill the masked "
                     "scores with -inf (masked_fill(~keep, float('-inf'))) before the softmax.",
                     "用乘以掩码的方式把分数置 0，而不是 -inf：被掩码的键仍得到权重 exp(0 - m)。"
                     "应在 softmax 之前用 -inf 填充。"),
    "mask_misaligned": ("mask rows misplaced when the cache holds keys", "the keys are the kept "
                        "ones followed by the new ones, so the T new queries are the last T rows "
                        "of positions: query i sits at index S - T + i of the S keys (the full "
                        "pass, with nothing kept, cannot show it).",
                        "缓存里有键时掩码的行放错了：键是保留的键再接新键，T 个新查询是最后 T 行，查询 i 位于 S 个键中的第 S - T + i 个。"),
    "softmax_dim": ("softmax over the queries", "normalize each query's weights over the keys: "
                    "softmax(scores, dim=-1).",
                    "softmax 的维度不对：每个查询的权重要在键的维度上归一化，softmax(scores, dim=-1)。"),
    "no_scaling": ("missing 1/sqrt(D)", "the scores are q k^T / sqrt(D), D the head dim.",
                   "没有缩放：注意力分数应除以 sqrt(头维度)。"),
    "scale": ("wrong scale", "the scores are q . k / sqrt(D), D = q.shape[-1].",
              "缩放系数不对：分数是 q . k / sqrt(头维度)。"),
    "no_rope": ("no RoPE", "rotate q and k at their positions with nl.apply_rope(x, positions) "
                "before the scores.",
                "缺少旋转位置编码：在计算分数之前对 q 和 k 做旋转。"),
    "rope_layout": ("RoPE in the half layout", "this exercise uses nl.apply_rope's default "
                    "layout, interleaved pairs (2i, 2i + 1).",
                    "旋转位置编码用了前后两半布局：本练习用 nl.apply_rope 的默认布局，交错的 (2i, 2i + 1) 对。"),
    "rope_one_side": ("RoPE on q or on k only", "rotate both q and k at their positions: the "
                      "score then depends on the distance between them.",
                      "只对 q 或只对 k 施加了旋转位置编码：两者都要在各自的位置上旋转，分数才只依赖距离。"),
    "rope_on_v": ("RoPE on v too", "only q and k are rotated; v keeps its values.",
                  "对 v 也施加了旋转位置编码：只旋转 q 和 k，v 保持原值。"),
    "seen_counts_calls": ("cache['seen'] counts calls, not tokens", "add the number of new tokens "
                          "T to cache['seen'] on each call: a prompt of several tokens counts "
                          "as several.",
                          "cache['seen'] 数的是调用次数而不是 token 数：每次调用要加上新 token 的个数 T。"),
    "cache_seen": ("cache['seen'] wrong", "cache['seen'] counts every token the cache has seen, "
                   "prompt and decoded tokens alike.",
                   "cache['seen'] 不对：它要累计缓存见过的全部 token（提示词和解码的 token 都算）"
                   "。"),
    "cache_keeps_window": ("cache keeps W keys, one too many", "the next query needs only the W - "
                           "1 keys before it (its own key is new): keep the last W - 1.",
                           "缓存保留了 W 个键，多了一个：下一个查询自己的键是新的，只需要之前的 W - 1 个。"),
    "cache_too_short": ("cache keeps fewer than W - 1 keys", "the next query attends to the W - 1 "
                        "keys before it: keep the last W - 1, not fewer.",
                        "缓存保留的键少于 W - 1 个：下一个查询要看到它之前的 W - 1 个键。"),
    "cache_not_appended": ("cache holds only the last call's keys", "append the new keys and "
                           "values to the kept ones, then keep the last W - 1 of them all: "
                           "a token decoded alone still needs the W - 2 before it.",
                           "缓存里只有上一次调用的键：要把新键值接在保留的键值后面，再保留全部中的最后 W - 1 个。"),
    "cache_keeps_oldest": ("cache keeps the oldest keys", "keep the LAST W - 1 keys and values "
                           "(k[..., -(W - 1):, :]); the oldest are the ones to drop.",
                           "缓存保留了最早的键：应保留最后 W - 1 个键和值（k[..., -(W - 1):, :]）"
                           "，丢掉最早的。"),
    "cache_unrotated": ("cache holds keys before RoPE", "store the rotated keys: a kept key "
                        "stays at the position it was rotated at, and the task asks for "
                        "cache['k'] after RoPE.",
                        "缓存里存的是旋转之前的键：应存旋转后的键，任务要求 cache['k'] 是施加 RoPE 之后的。"),
    "rotated_twice": ("kept keys rotated again", "the kept keys were rotated when they were new; "
                      "rotate only the new keys, then concatenate.",
                      "保留的键又被旋转了一次：它们在新的时候已经旋转过，只旋转新键，再拼接。"),
    "cache_values": ("cache['k'] or cache['v'] holds other tensors", "after the call "
                     "cache['k'] and cache['v'] hold the last W - 1 rotated keys and their values, "
                     "oldest first.",
                     "调用之后 cache['k'] 或 cache['v'] 的内容不对：应是最后 W - 1 个旋转后的键及其值，"
                     "按时间顺序。"),
    "cache_names": ("cache kept under other names", "keep the cache in cache['k'], cache['v'] and "
                    "cache['seen'], the names the task (and a caller) uses.",
                    "缓存用了别的名字：请用 cache['k']、cache['v'] 和 cache['seen']，"
                    "这是任务（和调用者）使用的名字。"),
    "cache_not_kept": ("the cache dict stays empty", "update the dict you are given in place "
                       "(cache['k'] = ... or cache.update(...)); cache = {...} makes a new dict "
                       "the caller never sees.",
                       "传入的缓存字典一直是空的：要原地更新传入的字典（cache['k'] = ... 或 cache.update(...)）"
                       "；cache = {...} 会新建一个调用者看不到的字典。"),
    "cache_unused": ("kept keys not attended", "the keys and values are the kept ones (cache['k'], "
                     "cache['v']) followed by the new ones: concatenate before the scores.",
                     "没有关注保留的键：键和值是保留的（cache['k']、cache['v']）再接上新的，"
                     "算分数之前要先拼接。"),
    "cache_order": ("new keys before the kept ones", "concatenate the kept keys first, then the "
                    "new ones: torch.cat([cache['k'], k], -2), so that positions increase.",
                    "新键放在了保留的键前面：先接保留的键，再接新键，torch.cat([cache['k'], k], -2)，"
                    "位置才是递增的。"),
})


def _swa(q, k, v, window, cache, mode="ok"):
    """Sliding-window attention over the new tokens with one mistake (mode); "ok" is right."""
    T, D = q.shape[-2], q.shape[-1]
    seen = cache.get("seen", 0)
    kept_k = cache.get("k", k[..., :0, :])
    kept_v = cache.get("v", v[..., :0, :])
    start = {"positions_reset": kept_k.shape[-2], "positions_per_call": 0}.get(mode, seen)
    pos = torch.arange(start, start + T)
    layout = "half" if mode == "rope_layout" else "interleaved"

    def rope(x, on):
        return x if not on else nl.apply_rope(x, pos, layout=layout)

    qr = rope(q, mode not in ("no_rope", "rope_k_only"))
    kr = rope(k, mode not in ("no_rope", "rope_q_only"))
    vr = rope(v, mode == "rope_on_v")
    if mode == "cache_unused":
        kept_k, kept_v = kept_k[..., :0, :], kept_v[..., :0, :]
    first = mode == "cache_order"
    K = torch.cat([kr, kept_k] if first else [kept_k, kr], -2)                # (B, H, S, D)
    V = torch.cat([vr, kept_v] if first else [kept_v, vr], -2)
    S = K.shape[-2]
    width = {"window_too_wide": window + 1, "window_too_narrow": window - 1,
             "no_window": None}.get(mode, window)
    if width == 0:
        return None
    keep = nl.sliding_window_mask(T, S, width)                           # (T, S)
    rows = {"mask_rows_zero": torch.arange(T), "mask_rows_absolute": torch.arange(seen, seen + T)}
    if mode in rows:
        rel = torch.arange(S)[None, :] - rows[mode][:, None]
        keep = (rel <= 0) & (rel > -window)
    if mode == "window_not_causal":
        rel = torch.arange(S)[None, :] - torch.arange(S - T, S)[:, None]
        keep = rel.abs() < window
    if mode == "window_excludes_self":
        rel = torch.arange(S)[None, :] - torch.arange(S - T, S)[:, None]
        keep = (rel < 0) & (rel >= -window)
    scale = {"no_scaling": 1.0, "scale": 1 / D}.get(mode, D ** -0.5)
    scores = qr @ K.transpose(-2, -1) * scale                                # (B, H, T, S)
    scores = scores * keep if mode == "mask_by_zero" else scores.masked_fill(~keep, -math.inf)
    out = torch.softmax(scores, -2 if mode == "softmax_dim" else -1) @ V
    kept = min(S, window - 1)
    K, V = (torch.cat([kept_k, kr], -2), torch.cat([kept_v, vr], -2)) if first else (K, V)
    cache.update(k=K[..., K.shape[-2] - kept:, :], v=V[..., V.shape[-2] - kept:, :], seen=seen + T)
    return out


_MODES = [("window_too_wide", "window_too_wide"), ("window_too_narrow", "window_too_narrow"),
          ("no_window", "no_window"), ("window_not_causal", "window_not_causal"),
          ("positions_reset", "positions_reset"), ("positions_per_call", "positions_per_call"),
          ("window_excludes_self", "window_excludes_self"), ("mask_by_zero", "mask_by_zero"),
          ("mask_misaligned", "mask_rows_zero"), ("mask_misaligned", "mask_rows_absolute"),
          ("softmax_dim", "softmax_dim"), ("no_scaling", "no_scaling"), ("scale", "scale"),
          ("no_rope", "no_rope"), ("rope_layout", "rope_layout"),
          ("rope_one_side", "rope_q_only"), ("rope_one_side", "rope_k_only"),
          ("rope_on_v", "rope_on_v"), ("cache_unused", "cache_unused"),
          ("cache_order", "cache_order")]


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


SLIDING_WINDOW_MUTANTS = [(key, (lambda q, k, v, window, chunks, mode=mode: _run(
    lambda *a: _swa(*a, mode=mode), q.double(), k.double(), v.double(), window,
    chunks)[0].to(q.dtype))) for key, mode in _MODES]


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


def _cache_fail(cache, window, k_seen, v_seen, T, calls):
    """A Fail naming what is wrong with the learner's ``cache`` after a call, or None: it must hold
    the last min(seen, W - 1) keys rotated at their positions (k_seen: every key so far, before
    RoPE), their values, and seen = the number of tokens."""
    seen = k_seen.shape[-2]
    want_n = min(seen, window - 1)
    if not cache:
        return Fail(f"after a call of {T} tokens the cache dict is still empty", "cache_not_kept")
    missing = [name for name in ("k", "v", "seen") if name not in cache]
    if missing:
        return Fail(f"after a call the cache has no {', '.join(map(repr, missing))} (it holds "
                    f"{', '.join(map(repr, list(cache)[:4]))})", "cache_names")
    if not isinstance(cache["seen"], int) or cache["seen"] != seen:
        key = "seen_counts_calls" if cache["seen"] == calls and calls != seen else "cache_seen"
        return Fail(f"after {seen} tokens in {calls} calls cache['seen'] is {cache['seen']!r}", key)
    kept, values = cache["k"], cache["v"]
    if not isinstance(kept, torch.Tensor) or not isinstance(values, torch.Tensor) or \
            kept.shape[:-2] != k_seen.shape[:-2] or kept.shape[-1] != k_seen.shape[-1]:
        return Fail("cache['k'] or cache['v'] is not a (B, H, n, D) tensor", "cache_values")
    n = kept.shape[-2]
    where = f"after {seen} tokens (W = {window}), cache['k'] holds {n} keys"
    if n > want_n:
        key = "cache_keeps_window" if n == min(seen, window) else "cache_not_rolled"
        return Fail(f"{where}, expected W - 1 = {want_n}", key)
    if n < want_n:
        key = "cache_not_appended" if n == min(T, window - 1) else "cache_too_short"
        return Fail(f"{where}, expected {want_n}" + (f" (the {n} of the last call only)" if key
                                                     == "cache_not_appended" else ""), key)
    pos = torch.arange(seen - n, seen)
    rotated = nl.apply_rope(k_seen[..., seen - n:, :].double(), pos)
    got = kept.detach().double()
    if values.shape != kept.shape:
        return Fail(f"{where} but cache['v'] {values.shape[-2]} values", "cache_values")
    if near(got, rotated, 1e-4, 1e-5):
        if near(values, v_seen[..., seen - n:, :], 1e-4, 1e-5):
            return None
        return Fail(f"{where} as expected, but cache['v'] does not hold their values",
                    "cache_values")
    older = ~torch.isclose(got, rotated, 1e-4, 1e-5).all(-1).all(0).all(0)       # (n,)
    for key, other, text in (
            ("cache_unrotated", k_seen[..., seen - n:, :].double(), "the keys before RoPE"),
            ("cache_keeps_oldest", nl.apply_rope(k_seen[..., :n, :].double(), torch.arange(n)),
             f"the first {n} keys, not the last"),
            ("rotated_twice", nl.apply_rope(rotated, pos), "keys rotated twice at their "
             "positions")):
        if near(got[..., older, :], other[..., older, :], 1e-4, 1e-5):
            return Fail(f"{where}: {text}", key)
    return Fail(f"{where}, but not the last {n} keys rotated at positions {seen - n} .. "
                f"{seen - 1}", "cache_values")


def check_sliding_window_attention(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(q, k, v, window, cache)``: the full pass, decoding through the dict cache, and
    what the cache holds after every call."""
    s = Session("Sliding-window attention", SLIDING_WINDOW_MISTAKES,
                exercise="sliding_window_attention", time_limit=time_limit,
                forbidden=_FORBIDDEN,
                references={nl.sliding_window_mask: "nl.sliding_window_mask",
                            nl.RollingKVCache.update: "nl.RollingKVCache"})
    if not s.require_callable(fn):
        return s.result()

    def decode(fn, q, k, v, window, chunks):
        """The learner's outputs over the chunks, each checked for its type and shape, and the
        cache checked after each call."""
        calls = 0

        def step(qc, kc, vc, window, cache):
            nonlocal calls
            out = s.call(fn, qc, kc, vc, window, cache)
            calls += 1
            if out is None:
                raise Fail(f"returned None for a chunk of {qc.shape[-2]} tokens", "returned_none")
            if not isinstance(out, torch.Tensor):
                raise Fail(f"returned a {type(out).__name__} for a chunk, expected a tensor",
                           "not_a_tensor")
            if out.shape != qc.shape:
                raise Fail(f"for a chunk q of shape {tuple(qc.shape)} (B, H, T, D) the output has "
                           f"shape {tuple(out.shape)}, expected {tuple(qc.shape)}", "wrong_shape")
            end = sum(chunks[:calls])
            failures.append(_cache_fail(cache, window, k[..., :end, :], v[..., :end, :],
                                        qc.shape[-2], calls))
            return out

        failures: list[Fail | None] = []
        out, _ = _run(step, q, k, v, window, chunks)
        return out, next((f for f in failures if f is not None), None)

    def judge(got, args, case):
        """The outputs first (a mistake a mutant shows there also spoils the cache), then the
        cache: the first call after which it does not hold what it should."""
        out, cache_failure = got
        try:
            expect(s, out, args, reference=_reference, mutants=SLIDING_WINDOW_MUTANTS,
                   tol_factor=case.tol_factor)
        except Fail as f:
            if cache_failure is None or f.mistake in SLIDING_WINDOW_MISTAKES:
                raise
            raise Fail(f"{f.detail}; {cache_failure.detail}", cache_failure.mistake) from None
        if cache_failure is not None:
            raise cache_failure

    run_cases(s, fn, CASES, call=decode, judge=judge)
    s.probe(*_probes(s, fn))
    return s.result()


def _probes(s: Session, fn) -> list:
    """Probes, float64. With v = I (T = D = 8, q = k = 0, so every score is 0) the full pass's
    output *is* the weight matrix and its nonzero entries are the mask: each wrong window shows.
    Then: the full pass right but decoding token by token wrong (the cache or the positions), and
    last, what was measured: where the outputs differ."""
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
        future = used & ~torch.ones(T, T, dtype=torch.bool).tril()
        if bool(future.any()):
            i, j = (int(x) for x in future.nonzero()[0])
            return ("window_not_causal", f"With all scores 0 and v = I (the output is the "
                    f"weights), query {i} gives weight to key {j}, after it: keys after the "
                    "query must stay hidden; a query at p sees keys p - W + 1 .. p.")
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

    def measured():
        q, k, v = (randn(1, 2, 7, 8, seed=980 + i, dtype=torch.float64) for i in range(3))
        rows, wrong = [], False
        for window, chunks in ((3, [7]), (3, [1] * 7), (7, [7])):
            got, _ = _run(lambda *a: s.call(fn, *a), q, k, v, window, chunks)
            want, _ = _run(_swa, q, k, v, window, chunks)
            if got is None or got.shape != want.shape:
                return None
            bad = [t for t in range(7) if not near(got[..., t, :], want[..., t, :], 1e-6, 1e-9)]
            how = "the full pass" if len(chunks) == 1 else "decoding token by token"
            rows.append(f"W = {window}, {how}: " + (f"tokens {_spans(bad)} differ (max |error| "
                        f"{float((got - want).abs().max()):.3g})" if bad else "right"))
            wrong = wrong or bool(bad)
        if not wrong:
            return None
        return ("cannot_tell", "No known mistake fits. Measured on float64 inputs of 7 tokens: "
                + "; ".join(rows) + ". A mistake in the window shows in the full pass, one in the "
                "cache or the positions only when decoding.")

    return [pattern, decoding, measured]


def _spans(ts: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, start = [], None
    for i, t in enumerate(ts):
        if start is None:
            start = t
        if i + 1 == len(ts) or ts[i + 1] != t + 1:
            out.append(f"{start}" if start == t else f"{start}-{t}")
            start = None
    return ", ".join(out)
