"""Which values of a widget's controls get a pre-rendered frame, and which frame a value shows.

A widget's frames form a grid: one axis per control, every combination rendered once. A toggle,
dropdown or checkbox keeps every option (the reader can pick each one); a slider keeps every step
when the grid fits within CAP frames, else an even subset of its steps (its first, last and starting
value always among them), the sliders sharing what the options leave. The browser snaps each control
to its nearest kept value (site/_static/widgets-render.js does the same arithmetic as ``nearest``).
Pure functions of numbers: tests/test_site.py checks them without a kernel.
"""

from __future__ import annotations

import itertools
import math

# At most this many frames a widget, unless its options alone make more (they are all kept: a
# dropdown's choice must show its own picture). 48 keeps the whole site's frames to about a
# thousand, rendered in about two minutes on two cores, and a slider of two controls at 7 x 7 stops.
CAP = 48


def even_subset(n: int, k: int, keep: int) -> list[int]:
    """``k`` indices of ``range(n)`` spread evenly, with 0, n - 1 and ``keep`` among them (sorted)."""
    if n < 1 or not 0 <= keep < n:
        raise ValueError(f"even_subset: need 0 <= keep < n, got n={n}, keep={keep}")
    if k >= n:
        return list(range(n))
    k = max(k, 2 if keep in (0, n - 1) else 3)
    chosen = {round(i * (n - 1) / (k - 1)) for i in range(k)}
    if keep not in chosen:          # the starting value replaces its nearest inner stop
        inner = sorted(chosen - {0, n - 1}, key=lambda i: abs(i - keep))
        if inner and len(chosen) >= k:
            chosen.discard(inner[0])
        chosen.add(keep)
    return sorted(chosen)


def plan(sizes: list[int], sliders: list[bool], starts: list[int], cap: int = CAP) -> list[list[int]]:
    """The kept indices of each axis: ``sizes[i]`` values, ``sliders[i]`` whether it may be thinned,
    ``starts[i]`` the index shown first. Options are kept whole; sliders share ``cap`` evenly."""
    if not (len(sizes) == len(sliders) == len(starts)):
        raise ValueError("plan: sizes, sliders and starts must have one entry per control")
    fixed = math.prod(n for n, s in zip(sizes, sliders, strict=True) if not s)
    thinned = [i for i, s in enumerate(sliders) if s]
    kept = [list(range(n)) for n in sizes]
    if fixed * math.prod(sizes[i] for i in thinned) <= cap or not thinned:
        return kept
    # Each slider keeps at least its ends and its start (2 or 3 values); then the sliders grow one
    # stop at a time, the one with the fewest kept values relative to its steps first, while the
    # grid stays within the budget.
    counts = {i: min(sizes[i], 2 if starts[i] in (0, sizes[i] - 1) else 3) for i in thinned}
    budget = max(cap / fixed, math.prod(counts.values()))
    while True:
        grow = [i for i in thinned if counts[i] < sizes[i]
                and math.prod(counts[j] + (j == i) for j in thinned) <= budget]
        if not grow:
            break
        i = min(grow, key=lambda j: (counts[j] / sizes[j], j))
        counts[i] += 1
    for i in thinned:
        kept[i] = even_subset(sizes[i], counts[i], starts[i])
    return kept


def combinations(kept: list[list[int]]) -> list[tuple[int, ...]]:
    """Every frame's indices, in the order frames are numbered (the last control varies fastest)."""
    return list(itertools.product(*kept))


def nearest(values: list[float], value: float, log: bool = False) -> int:
    """The position in ``values`` (a control's kept values) of the one nearest ``value``."""
    if not values:
        raise ValueError("nearest: no values")
    key = (lambda v: math.log(v)) if log else (lambda v: v)
    return min(range(len(values)), key=lambda i: (abs(key(values[i]) - key(value)), i))


def frame_number(positions: list[int], lengths: list[int]) -> int:
    """The frame of the positions (one per control, in its kept values) in a grid of ``lengths``."""
    number = 0
    for position, length in zip(positions, lengths, strict=True):
        if not 0 <= position < length:
            raise ValueError(f"frame_number: position {position} outside 0..{length - 1}")
        number = number * length + position
    return number
