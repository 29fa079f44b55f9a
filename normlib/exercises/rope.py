"""The RoPE checker (Su et al., RoFormer, arXiv 2104.09864), and the mistakes it can name.

The learner writes ``rope(x, base=10000.0)`` for x of shape (..., T, D): the row at index t of
dim -2 sits at position t, and feature pair i is rotated by +t * theta_i, theta_i = base^(-2i/D).
Either layout passes, and the checker says which it found: "interleaved" pairs (2i, 2i+1) (Meta's
LLaMA) or "half" pairs (i, i + D/2) (HF's rotate_half). References: ``nl.apply_rope``.
"""

from __future__ import annotations

import torch

import normlib as nl

from ._cases import Case, DoesNotApply, run_backward, run_cases
from ._compare import bind, close, randn, tolerance
from ._generic import catalogue
from ._probes import fmt, near, output
from ._session import Fail, Session
from .result import CheckResult

__all__ = ["check_rope", "ROPE_MISTAKES", "ROPE_MUTANTS", "LAYOUT_NAMES"]

LAYOUT_NAMES = {"interleaved": "interleaved pairs (2i, 2i+1), as Meta's LLaMA",
                "half": "split halves (i, i + D/2), as HF's rotate_half"}

ROPE_MISTAKES = catalogue("rope", {
    "minus_theta": ("rotation by -theta", "you rotate by -theta (clockwise). That keeps the "
                    "relative property too and is a valid convention elsewhere, but LLaMA, HF and "
                    "this exercise rotate by +theta: y0 = x0 cos - x1 sin, y1 = x0 sin + x1 cos.",
                    "按 -theta 旋转（顺时针）：本练习按 +theta 旋转，y0 = x0 cos - x1 sin，"
                    "y1 = x0 sin + x1 cos。"),
    "frequency_exponent": ("theta_i = base^(-i/D)", "the frequencies are theta_i = base^(-2i/D) "
                           "for pair i = 0 .. D/2 - 1 (or base^(-j/D) for even j); base^(-i/D) "
                           "makes them fall only half as far.",
                           "频率写成了 base^(-i/D)：应为 theta_i = base^(-2i/D)。"),
    "positions_from_one": ("positions start at 1", "positions start at 0: the first row is not "
                           "rotated (torch.arange(T)).",
                           "位置从 1 开始：第一个位置是 0，第一行不旋转（torch.arange(T)）。"),
    "pairs_mixed": ("pairs mixed across layouts", "the pairing and the frequencies come from "
                    "different layouts: with rotate_half (pairs i, i + D/2) the angles repeat as "
                    "cat(theta, theta); with interleaved pairs (2i, 2i+1) as "
                    "theta.repeat_interleave(2).",
                    "配对方式和频率排列来自不同的布局：前后两半布局用 cat(theta, theta)，交错布局用 theta.repeat_interleave(2)。"),
    "half_rotated": ("only half the features rotated", "only half of the features are rotated "
                     "(or only one feature of each pair is updated): every pair (x0, x1) becomes "
                     "(x0 cos - x1 sin, x0 sin + x1 cos), using the old x0 in both.",
                     "只旋转了一半特征：每一对 (x0, x1) 都要旋转，两式都用旧的 x0。"),
    "sin_cos_swapped": ("sin and cos swapped", "sin and cos are swapped: at position 0 nothing "
                        "may change, so x * cos + rotate(x) * sin.",
                        "sin 和 cos 用反了：位置 0 不应有任何变化。"),
    "positions_wrong_dim": ("positions along the wrong dim", "the position is the index along "
                            "dim -2 (T) of x (..., T, D); with (B, H, T, D) input do not take it "
                            "from dim 1 (heads) as in the (B, T, H, D) layout.",
                            "位置取自错误的维度：位置是 x (..., T, D) 的 dim -2。"),
    "base_ignored": ("base argument ignored", "you ignore the base argument (10000 hard-coded?); "
                     "LLaMA-3 uses 500000.",
                     "忽略了 base 参数（写死了 10000？）：LLaMA-3 用 500000。"),
    "angles_low_precision": ("angles in low precision", "the angles t * theta are computed in the "
                             "input's dtype: bfloat16 cannot even represent 255 * theta precisely. "
                             "Compute the angles (and cos, sin) in float32.",
                             "角度用输入的低精度 dtype 计算：请用 float32 计算角度和 cos、sin。"),
    "frequencies": ("wrong frequencies", "theta_i = base^(-2i/D) for pair i = 0 .. D/2 - 1: from 1 "
                    "down to nearly 1/base.",
                    "旋转频率不对：theta_i = base^(-2i/D)，i = 0 .. D/2 - 1。"),
    "not_rotation": ("not a rotation", "each pair (x0, x1) is rotated: its length stays, and "
                     "position 0 leaves x unchanged.",
                     "变换不是旋转：每一对特征按 cos、sin 旋转，范数不变。"),
    "positions": ("wrong positions", "the row at index t of dim -2 sits at position t: "
                  "torch.arange(T).",
                  "位置不对：第 t 行的位置是 t，torch.arange(T)。"),
})

_LAYOUTS = ("interleaved", "half")


def _rotate(x, layout, angle_pairs, feature_angles=None, only_half=False):
    """y = x * cos + rot(x) * sin with per-feature angles; rot pairs features by ``layout``."""
    D = x.shape[-1]
    if feature_angles is None:
        feature_angles = "interleave" if layout == "interleaved" else "cat"
    a = angle_pairs.repeat_interleave(2, -1) if feature_angles == "interleave" \
        else torch.cat((angle_pairs, angle_pairs), -1)                        # (T, D)
    if layout == "interleaved":
        rot = torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)
    else:
        rot = torch.cat((-x[..., D // 2:], x[..., : D // 2]), -1)
    y = x * a.cos() + rot * a.sin()
    if only_half:            # the second member of every pair is left as it was
        keep = torch.zeros(D, dtype=torch.bool)
        if layout == "interleaved":
            keep[1::2] = True
        else:
            keep[D // 2:] = True
        y = torch.where(keep, x, y)
    return y


def _angles(T, D, base, positions=None, exponent=2.0, dtype=torch.float64):
    i = torch.arange(D // 2, dtype=torch.float64)
    theta = base ** (-exponent * i / D)
    pos = torch.arange(T, dtype=torch.float64) if positions is None else positions
    return (pos[:, None].to(dtype) * theta[None, :].to(dtype)).to(torch.float64)


def _crossed(x, A, halves_in: bool):
    """Pairs from one layout, written out in the other's order."""
    D = x.shape[-1]
    if halves_in:
        x0, x1 = x[..., : D // 2], x[..., D // 2:]
    else:
        x0, x1 = x[..., 0::2], x[..., 1::2]
    y0, y1 = x0 * A.cos() - x1 * A.sin(), x0 * A.sin() + x1 * A.cos()
    return torch.stack((y0, y1), -1).flatten(-2) if halves_in else torch.cat((y0, y1), -1)


def _heads_as_positions(x, base, layout):
    """Positions taken from dim -3 (heads): only for input with more than one head."""
    if x.dim() < 3 or x.shape[-3] == 1:
        raise DoesNotApply
    AH = _angles(x.shape[-3], x.shape[-1], base)[:, None, :]              # (H, 1, D/2)
    return _rotate(x.double(), layout, AH)


def _mutant_table(layout):
    """[(key, f(x, base))]: wrong rotations of x in ``layout``, computed in float64."""
    other_order = "cat" if layout == "interleaved" else "interleave"

    def rotated(angles, **options):
        return lambda x, base: _rotate(x.double(), layout, angles(*x.shape[-2:], base), **options)

    return [
        ("minus_theta", rotated(lambda T, D, base: -_angles(T, D, base))),
        ("frequency_exponent", rotated(lambda T, D, base: _angles(T, D, base, exponent=1.0))),
        ("positions_from_one", rotated(lambda T, D, base: _angles(
            T, D, base, torch.arange(1, T + 1, dtype=torch.float64)))),
        ("pairs_mixed", rotated(_angles, feature_angles=other_order)),
        ("pairs_mixed", lambda x, base: _crossed(x.double(), _angles(*x.shape[-2:], base), True)),
        ("pairs_mixed", lambda x, base: _crossed(x.double(), _angles(*x.shape[-2:], base),
                                                 False)),
        ("half_rotated", rotated(_angles, only_half=True)),
        ("sin_cos_swapped", rotated(lambda T, D, base: torch.pi / 2 - _angles(T, D, base))),
        ("base_ignored", rotated(lambda T, D, base: _angles(T, D, 10000.0))),
        ("angles_low_precision", lambda x, base: _rotate(x.double(), layout, _angles(
            *x.shape[-2:], base, dtype=x.dtype))),
        ("positions_wrong_dim", lambda x, base: _heads_as_positions(x, base, layout)),
    ]


ROPE_MUTANTS = {layout: _mutant_table(layout) for layout in _LAYOUTS}


def _x(*shape, seed, dtype=torch.float32):
    return lambda: (randn(*shape, seed=seed, dtype=dtype),)


CASES = [
    Case("default base", _x(1, 2, 6, 8, seed=10, dtype=torch.float64), {"base": 10000.0},
         defaults=("base",)),
    Case("odd T, D/2 = 3", _x(2, 7, 6, seed=20), {"base": 10000.0}),
    Case("(T, D)", _x(5, 4, seed=30, dtype=torch.float64), {"base": 10000.0}),
    Case("base 500000", _x(2, 3, 8, 16, seed=40, dtype=torch.float64), {"base": 500000.0}),
    Case("a batch of 2, T = 1", _x(2, 1, 1, 8, seed=50), {"base": 10000.0}),
    Case("positions up to 1023", _x(1, 1, 1024, 8, seed=60, dtype=torch.bfloat16),
         {"base": 10000.0}, tol_factor=2),
]
BACKWARD = Case("backward", _x(1, 2, 5, 8, seed=70, dtype=torch.float64), {"base": 10000.0},
                defaults=("base",))


def check_rope(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(x, base=10000.0)`` against nl.apply_rope in either layout; report the layout."""
    s = Session("RoPE", ROPE_MISTAKES, exercise="rope", time_limit=time_limit,
                references={nl.apply_rope: "nl.apply_rope",
                            nl.apply_rope_complex: "nl.apply_rope_complex"})
    if not s.require_callable(fn):
        return s.result()
    found: list[str] = []          # the layout that the first passing check matched

    def judge(got, args, case):
        x, base = args
        wants = {lay: nl.apply_rope(x, base=base, layout=lay) for lay in _LAYOUTS}
        s.expect_tensor(got, wants["half"])
        tol = tolerance(x.dtype, float(x.abs().max()), case.tol_factor)
        layouts = found[:1] or list(_LAYOUTS)
        matches = [lay for lay in layouts if close(got, wants[lay], tol)]
        if len(matches) == 1 and not found:             # T = 1 matches both: no evidence yet
            found.append(matches[0])
            return f"found the {LAYOUT_NAMES[matches[0]]}"
        if matches:
            return None
        judged = [(lay, *s.judge(got, wants[lay], bind(ROPE_MUTANTS[lay], x, base), tol))
                  for lay in layouts]
        s.refuted |= set.union(*(seen for *_, seen, _ in judged)) - set.union(
            *(consistent for *_, consistent in judged))
        for lay, key, _, _ in judged:
            if key:
                raise Fail(f"wrong values (looks like: {s.short(key)}; {lay} layout)", key)
        raise Fail(f"wrong values (the first check found the {found[0]} layout)" if found
                   else "wrong values: matches neither layout", "wrong_values")

    run_cases(s, fn, CASES, judge=judge)
    layouts = found[:1] or list(_LAYOUTS)
    run_backward(s, fn, BACKWARD, ("x",),
                 reference=lambda x, base: nl.apply_rope(x, base=base, layout=layouts[0]),
                 mutants=[m for lay in layouts for m in ROPE_MUTANTS[lay]])
    s.probe(*_probes(s, fn))
    return s.result()


def _probes(s: Session, fn) -> list:
    """Property probes, float64, D = 8, base 100 (so that every pair turns by less than pi at
    position 1): identical rows across heads, position 0 unchanged, norms kept, then a basis vector
    in each pair's first feature at position 1 (which partner, which direction, which frequency),
    then which position each row gets."""
    D, base = 8, 100.0
    v = randn(D, seed=900, dtype=torch.float64)
    layout: list[str] = []

    def rope(x):
        return output(s, fn, x, base=base, like=x)

    def heads():
        x = v.expand(1, 3, 4, D).clone()
        y = rope(x)
        if not near(y[:, 1:], y[:, :1].expand_as(y[:, 1:]), 1e-6, 1e-9):
            return ("positions_wrong_dim", "Identical rows in different heads (dim -3) came out "
                    "different: your positions run along dim -3. In x (..., T, D) the position is "
                    "the index along dim -2.")
        return None

    def position_zero():
        x = randn(1, 1, 3, D, seed=901, dtype=torch.float64)
        y = rope(x)
        if near(y[..., 0, :], x[..., 0, :], 1e-6, 1e-9):
            return None
        if not near(y.norm(dim=-1), x.norm(dim=-1), 1e-6, 1e-9):
            return ("not_rotation", "At position 0 your output is not x itself, and the norms of "
                    "the rows change: a rotation keeps every pair's length. Each pair (x0, x1) "
                    "becomes (x0 cos - x1 sin, x0 sin + x1 cos), with cos = 1, sin = 0 at "
                    "position 0.")
        for lay in _LAYOUTS:
            for p, key, text in ((1, "positions_from_one", "1: positions start at 0"),
                                 (2, "positions", "2 (T - 1): positions are counted from the end; "
                                  "the first row is position 0")):
                pos = torch.full((3,), float(p), dtype=torch.float64)
                if near(y[..., 0, :], nl.apply_rope(x, pos, base=base, layout=lay)[..., 0, :],
                        1e-6, 1e-9):
                    return (key, f"Your first row (position 0) is rotated as position {text}.")
        return ("positions", "Your first row (position 0) changes; at position 0 every angle is 0 "
                "and the output must equal the input (cos = 1, sin = 0).")

    def norms():
        x = randn(1, 2, 5, D, seed=902, dtype=torch.float64)
        y = rope(x)
        if near(y.norm(dim=-1), x.norm(dim=-1), 1e-6, 1e-9):
            return None
        return ("not_rotation", "The norms of your output rows differ from the input's: a rotation "
                "keeps every pair's length, (x0 cos - x1 sin)^2 + (x0 sin + x1 cos)^2 = x0^2 + x1^2.")

    def turns(b):
        """The angle each pair turns by at position 1 with base b (a unit vector in its first
        feature), or a (key, sentence) when a unit vector leaves its pair."""
        measured = []
        for i in range(D // 2):
            for lay, first, partner in (("interleaved", 2 * i, 2 * i + 1), ("half", i, i + D // 2)):
                if layout and lay != layout[0]:
                    continue
                x = torch.zeros(1, 1, 2, D, dtype=torch.float64)
                x[..., first] = 1.0
                y = output(s, fn, x, base=b, like=x)[0, 0, 1]           # position 1
                others = [j for j in range(D) if j not in (first, partner)]
                if near(y[others], torch.zeros(len(others), dtype=torch.float64), 0, 1e-9) and (
                        i > 0 or abs(float(y[partner])) > 1e-6):
                    layout[:] = [lay]
                    measured.append(float(torch.atan2(y[partner], y[first])))
                    break
            else:
                return ("pairs_mixed", f"A unit vector in feature {2 * i} (or {i}) at position 1 "
                        "spreads to features outside its pair: each feature pairs with one partner, "
                        "2i + 1 (interleaved) or i + D/2 (split halves), and the two share the "
                        "angle of pair i.")
        return torch.tensor(measured, dtype=torch.float64)

    def pairs():
        got, got4 = turns(base), turns(4 * base)
        if isinstance(got, tuple):
            return got
        i = torch.arange(D // 2, dtype=torch.float64)
        theta = base ** (-2 * i / D)
        if near(got, theta, 1e-6, 1e-9) and near(got4, (4 * base) ** (-2 * i / D), 1e-6, 1e-9):
            return None
        shown = ", ".join(fmt(a) for a in got.tolist())
        want = ", ".join(fmt(float(t)) for t in theta)
        if near(got, -theta, 1e-6, 1e-9):
            return ("minus_theta", f"At position 1 your pairs turn by {shown} radians: clockwise, "
                    "-theta. LLaMA, HF and this exercise turn by +theta: y0 = x0 cos - x1 sin, "
                    "y1 = x0 sin + x1 cos.")
        if near(got, got4, 1e-6, 1e-9):
            return ("base_ignored", f"Your angles do not change when base goes from 100 to 400 "
                    f"(at position 1: {shown} radians): use the base argument, "
                    "theta_i = base^(-2i/D).")
        if near(got, base ** (-i / D), 1e-6, 1e-9):
            return ("frequency_exponent", f"At position 1 your pairs turn by {shown} radians, i.e. "
                    f"theta_i = base^(-i/D); expected theta_i = base^(-2i/D) = {want}.")
        return ("frequencies", f"At position 1 (base 100, D = 8) your pairs turn by {shown} "
                f"radians; RoPE's frequencies are theta_i = base^(-2i/D) = {want}: from 1 down, "
                "falling by a factor base^(2/D) per pair.")

    def positions():
        if not layout:
            return None
        T = 5
        x = v.expand(1, 1, T, D).clone()
        y = rope(x)
        table = nl.apply_rope(v.expand(1, 1, 2 * T, D).clone(), base=base, layout=layout[0])
        got = []
        for t in range(T):
            hits = [p for p in range(2 * T) if near(y[0, 0, t], table[0, 0, p], 1e-6, 1e-9)]
            got.append(hits[0] if hits else None)
        if got == list(range(T)):
            return None
        return ("positions", f"Rows 0 .. {T - 1} of your output get positions "
                f"{', '.join('?' if p is None else str(p) for p in got)}; row t of x (..., T, D) "
                "is position t (torch.arange(T)).")

    return [heads, position_zero, norms, pairs, positions]
