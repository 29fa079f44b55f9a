"""The warmup + cosine schedule checker, and the mistakes it can name.

The learner writes ``warmup_cosine(step, warmup_steps, total_steps, min_ratio=0.0)``, the
learning-rate multiplier of ``nl.cosine_with_warmup`` (HF's convention): step / warmup_steps while
step < warmup_steps, exactly 1 at step == warmup_steps, then a half cosine down to min_ratio at
total_steps, and min_ratio after that (the floor).
"""

from __future__ import annotations

import math
import numbers

import torch

import normlib as nl

from ._cases import Case, run_cases
from ._generic import catalogue
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_warmup_cosine", "WARMUP_MISTAKES", "WARMUP_MUTANTS"]

WARMUP_MISTAKES = catalogue("warmup_cosine", {
    "off_by_one": ("off by one at the warmup boundary", "off by one at the boundary: the multiplier "
                   "is step / warmup_steps for step < warmup_steps (0 at step 0) and exactly 1 at "
                   "step == warmup_steps, where the cosine starts (progress 0).",
                   "预热边界差了一步：step < warmup_steps 时为 step / warmup_steps。"),
    "no_floor": ("no floor after total_steps", "after total_steps the cosine keeps going (and "
                 "rises again): clamp the progress at 1, so the multiplier stays at min_ratio.",
                 "total_steps 之后没有保持在下限：应一直停在 min_ratio。"),
    "min_ratio_ignored": ("min_ratio ignored", "the cosine must end at min_ratio, not 0: "
                          "min_ratio + (1 - min_ratio) * 0.5 * (1 + cos(pi * progress)).",
                          "忽略了 min_ratio：余弦衰减到 min_ratio，而不是 0。"),
    "min_ratio_as_clamp": ("min_ratio as a clamp", "min_ratio is where the cosine ends, not a "
                           "clamp on a cosine that ends at 0: scale the cosine into "
                           "[min_ratio, 1].",
                           "把 min_ratio 当作截断下限：应把余弦整体缩放到 [min_ratio, 1]。"),
    "progress_from_zero": ("cosine measured from step 0", "the cosine's progress runs from the end "
                           "of warmup: (step - warmup_steps) / (total_steps - warmup_steps).",
                           "余弦进度从第 0 步算起：应从预热结束（warmup_steps）算起。"),
    "linear_decay": ("linear decay", "the decay is a half cosine, 0.5 * (1 + cos(pi * progress)), "
                     "not a straight line.",
                     "用了线性衰减：应为余弦衰减。"),
    "full_cosine": ("a full cosine period", "the decay is half a cosine period: cos(pi * progress), "
                    "not cos(2 pi * progress).",
                    "用了一个完整的余弦周期：衰减段只走半个周期，0.5 * (1 + cos(pi * p))。"),
    "zero_warmup": ("division by warmup_steps = 0", "with warmup_steps = 0 there is no warmup: the "
                    "schedule starts at 1; do not divide by warmup_steps then.",
                    "warmup_steps = 0 时出现除以 0：没有预热时直接从 1 开始衰减。"),
    "not_a_number": ("not a number", "return the multiplier as a Python float (or int).",
                     "返回的不是数值。"),
    "decay_shape": ("the decay is not the half cosine", "after warmup the multiplier is min_ratio "
                    "+ (1 - min_ratio) * 0.5 * (1 + cos(pi * progress)).",
                    "衰减段不是半个余弦：预热之后乘数为 min_ratio + (1 - min_ratio) * 0.5 * (1 + cos(pi * progress))，"
                    "progress 为衰减进度。"),
    "warmup_ramp": ("wrong warmup ramp", "during warmup the multiplier is step / warmup_steps: 0 "
                    "at step 0.",
                    "预热段不对：预热期间乘数为 step / warmup_steps，第 0 步为 0。"),
    "decay_end": ("the cosine ends elsewhere", "the cosine reaches min_ratio exactly at "
                  "total_steps: progress (step - warmup_steps) / (total_steps - warmup_steps) is "
                  "1 there.",
                  "余弦没有恰好在 total_steps 处到达 min_ratio：那里的进度应为 1。"),
    "floor": ("wrong value after total_steps", "after total_steps the multiplier stays at "
              "min_ratio: clamp the progress at 1.",
              "total_steps 之后的值不对：应一直保持 min_ratio（把进度截断在 1）"
              "。"),
})


def _cosine(step, w, total, r, *, ramp=None, prog=None, floor=True, clamp_min=False, shape=None):
    if step < w:
        return ramp(step, w) if ramp else step / w
    p = prog(step, w, total) if prog else (step - w) / max(1, total - w)
    p = min(1.0, p) if floor else p
    c = shape(p) if shape else 0.5 * (1 + math.cos(math.pi * p))
    return max(r, c) if clamp_min else r + (1 - r) * c


WARMUP_MUTANTS = [
    ("off_by_one", lambda s, w, t, r: _cosine(s, w, t, r, ramp=lambda s, w: (s + 1) / w)),
    ("off_by_one", lambda s, w, t, r: _cosine(s, w, t, r, ramp=lambda s, w: s / (w + 1))),
    ("off_by_one", lambda s, w, t, r: _cosine(
        s, w, t, r, prog=lambda s, w, t: (s - w + 1) / max(1, t - w))),
    ("off_by_one", lambda s, w, t, r: _cosine(
        s, w, t, r, prog=lambda s, w, t: (s - w) / max(1, t - w - 1))),
    ("no_floor", lambda s, w, t, r: _cosine(s, w, t, r, floor=False)),
    ("min_ratio_ignored", lambda s, w, t, r: _cosine(s, w, t, 0.0)),
    ("min_ratio_as_clamp", lambda s, w, t, r: _cosine(s, w, t, r, clamp_min=True)),
    ("progress_from_zero", lambda s, w, t, r: _cosine(s, w, t, r, prog=lambda s, w, t: s / t)),
    ("linear_decay", lambda s, w, t, r: _cosine(s, w, t, r, shape=lambda p: 1 - p)),
    ("full_cosine", lambda s, w, t, r: _cosine(
        s, w, t, r, shape=lambda p: 0.5 * (1 + math.cos(2 * math.pi * p)))),
]


def _pair(got: float, want: float) -> str:
    """'0.99970, expected 0.99975': as many digits as it takes to show the difference."""
    for digits in range(4, 18):
        a, b = f"{got:.{digits}g}", f"{want:.{digits}g}"
        if a != b:
            return f"{a}, expected {b}"
    return f"{got!r}, expected {want!r}"


def _as_float(value, step):
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    raise Fail(f"step {step} returned {type(value).__name__} {value!r:.30}, expected a number",
               "returned_none" if value is None else "not_a_number")


def _case(warmup, total, min_ratio, note=""):
    return Case(note or f"warmup {warmup}, total {total}, min_ratio {min_ratio}",
                lambda: (warmup, total), {"min_ratio": min_ratio})


# each case runs every step from 0 to total + 14
CASES = [
    Case("warmup 10, total 100, default min_ratio", lambda: (10, 100), {"min_ratio": 0.0},
         defaults=("min_ratio",)),
    _case(5, 50, 0.1),
    _case(1, 10, 0.0),
    _case(0, 20, 0.2, "no warmup (0), total 20, min_ratio 0.2"),
    _case(30, 40, 0.05),
]


def _steps(total):
    return range(total + 15)


def check_warmup_cosine(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(step, warmup_steps, total_steps, min_ratio=0.0)`` against
    nl.cosine_with_warmup, for every step from 0 to past total_steps."""
    s = Session("Warmup + cosine", WARMUP_MISTAKES, exercise="warmup_cosine",
                time_limit=time_limit,
                references={nl.cosine_with_warmup: "nl.cosine_with_warmup"},
                error_hints=((r"division by zero", "zero_warmup"),))
    if not s.require_callable(fn):
        return s.result()

    def every_step(fn, w, total, **min_ratio):
        """One call per step; min_ratio, when passed, is the 4th positional argument."""
        return s.call(lambda: [fn(k, w, total, *min_ratio.values()) for k in _steps(total)])

    def judge(values, args, case):
        w, total, r = args
        steps = _steps(total)
        got = [_as_float(v, k) for k, v in zip(steps, values, strict=True)]
        ref = nl.cosine_with_warmup(w, total, r)
        want = [ref(k) for k in steps]
        bad = [k for k in steps if abs(got[k] - want[k]) > 1e-6]     # float32 is fine
        if not bad:
            return
        key = s.match(torch.tensor(got), torch.tensor(want),
                      [(key, (lambda f=f: torch.tensor([f(k, w, total, r) for k in steps])))
                       for key, f in WARMUP_MUTANTS], (1e-6, 1e-6))
        k = bad[0]
        hint = f" (looks like: {s.short(key)})" if key else ""
        raise Fail(f"step {k}: {_pair(got[k], want[k])}{hint}", key or "wrong_values")

    run_cases(s, fn, CASES, call=every_step, judge=judge)
    s.probe(*_probes(s, fn))
    return s.result()


def _probes(s: Session, fn) -> list:
    """The schedule at the steps where each property shows (warmup 10, total 100, min_ratio 0.1):
    0 and W - 1 (the ramp), W (the peak), (W + S) / 2 and the quarter points (the half
    cosine), S - 1, S and S + 10 (the end and the floor); and warmup_steps = 0."""
    W, S, r = 10, 100, 0.1
    ref = nl.cosine_with_warmup(W, S, r)

    def at(k, w=W, total=S, ratio=r):
        return _as_float(s.call(fn, k, w, total, ratio), k)

    def say(k, got, want):
        return f"at step {k} (warmup {W}, total {S}, min_ratio {r}) you return {_pair(got, want)}"

    def zero_warmup():
        got = at(0, 0, 20, 0.2)
        if abs(got - 1.0) > 1e-6:
            return ("zero_warmup", f"With warmup_steps = 0 step 0 returns {_pair(got, 1.0)}: with "
                    "no warmup the schedule starts at its peak, 1; do not divide by "
                    "warmup_steps then.")
        return None

    def ramp():
        bad = [(k, at(k), ref(k)) for k in (0, 1, W // 2, W - 1) if abs(at(k) - ref(k)) > 1e-6]
        if not bad:
            return None
        k, got, want = bad[0]
        return ("warmup_ramp", f"The warmup ramp is off: {say(k, got, want)}. During warmup the "
                "multiplier is step / warmup_steps: 0 at step 0, (W - 1) / W just before the peak.")

    def peak():
        if abs(at(W) - 1.0) > 1e-6:
            return ("off_by_one", f"The peak is off: {say(W, at(W), 1.0)}. The multiplier is "
                    "exactly 1 at step == warmup_steps, where the cosine starts (progress 0).")
        return None

    def end():
        for k, key, text in ((S, "decay_end", "the cosine must reach min_ratio exactly at "
                              "total_steps: progress (step - W) / (S - W) is 1 there"),
                             (S + 10, "floor", "after total_steps the multiplier stays at "
                              "min_ratio (clamp the progress at 1)")):
            if abs(at(k) - ref(k)) > 1e-6:
                if k == S and abs(at(k)) < 1e-9:
                    return ("min_ratio_ignored", f"{say(k, at(k), ref(k))}: the cosine must end "
                            "at min_ratio, not 0: min_ratio + (1 - min_ratio) * 0.5 * (1 + cos(pi "
                            "* progress)).")
                return (key, f"{say(k, at(k), ref(k)).capitalize()}: {text}.")
        return None

    def shape():
        q = [W + (S - W) * f // 4 for f in (1, 2, 3)]
        bad = [(k, at(k), ref(k)) for k in q if abs(at(k) - ref(k)) > 1e-6]
        if not bad:
            return None
        lin = all(abs(at(k) - (r + (1 - r) * (1 - (k - W) / (S - W)))) < 1e-6 for k in q)
        k, got, want = bad[0]
        if lin:
            return ("linear_decay", f"Your decay is a straight line ({say(k, got, want)}): the "
                    "decay is a half cosine, 0.5 * (1 + cos(pi * progress)).")
        return ("decay_shape", f"The decay is not the half cosine: {say(k, got, want)}. Halfway "
                "(progress 0.5) it must be (1 + min_ratio) / 2; the curve is min_ratio + "
                "(1 - min_ratio) * 0.5 * (1 + cos(pi * progress)).")

    return [zero_warmup, ramp, peak, end, shape]
