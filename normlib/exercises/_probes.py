"""Property probes shared by the checkers: inputs that isolate one property at a time.

Each probe calls the learner's code (through ``Session.call``, so safely) on float64 inputs built to
show one property, and returns None when the property holds or (key, sentence) when it fails. The
sentence says what was measured and what it implies, in plain words.

The norm probes (LayerNorm, RMSNorm) work on the learner's own output y for weight 1 and bias 0:
    axis         perturb one token: no other token's output may change;
    shift        add a constant to a row: LayerNorm must not change, RMSNorm must;
    scale        multiply a row by 3: both must not change (up to eps);
    divisor      den = (x - mu) / y (LayerNorm) or x / y (RMSNorm), per row, on low-variance rows
                 at two values of eps: is it sqrt(var + eps), sqrt(var) + eps, the unbiased
                 variance, a fixed eps, no eps, or something else?
    affine       weight = 2, bias = 1: does the weight scale and the bias shift, in that order?
"""

from __future__ import annotations

import torch

from ._compare import randn
from ._session import Fail

__all__ = ["output", "near", "norm_probes", "fmt", "weighted", "causal_pattern"]


def output(s, fn, *args, like: torch.Tensor, **kwargs) -> torch.Tensor:
    """The learner's output as float64, or Fail when it is not a finite tensor shaped like ``like``
    (the ✗ lines already say so; a probe cannot use it)."""
    y = s.call(fn, *args, **kwargs)
    if not isinstance(y, torch.Tensor) or y.shape != like.shape or not bool(y.isfinite().all()):
        raise Fail("unusable output")
    return y.detach().double()


def near(a, b, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    return bool(torch.allclose(torch.as_tensor(a, dtype=torch.float64),
                               torch.as_tensor(b, dtype=torch.float64), rtol=rtol, atol=atol))


def fmt(v: float) -> str:
    """A number with enough digits to tell two close values apart."""
    return f"{v:.6g}"


def weighted(W: torch.Tensor) -> torch.Tensor:
    """Where attention weights W (T_q, T_k) give a key weight: finite and not zero."""
    return W.isfinite() & (W.abs() > 1e-12)


# The wrong causal masks causal_pattern tells apart: {pattern: ((the keys that get weight, from a
# (T, T) boolean of ones; what query t attends to), ...)}
_WRONG_MASKS = {
    "none": ((lambda ones: ones, "every key, the future included"),),
    "inverted": ((lambda ones: ~ones.tril(), "only future keys j > t"),
                 (lambda ones: ones.triu(), "keys j >= t")),
    "excludes_diagonal": ((lambda ones: ones.tril(-1), "keys j < t, not itself"),),
    "leaks_future": ((lambda ones: ones.tril(1), "keys j <= t + 1, one ahead"),),
}


def causal_pattern(W: torch.Tensor) -> tuple[str, str] | None:
    """The wrong causal mask that attention weights W (T, T) show by where they give weight:
    (pattern, the keys query t attends to, naming the rows that are NaN) for a pattern of
    ``_WRONG_MASKS``; None for any other, the right one (j <= t) included."""
    T = W.shape[-1]
    ones = torch.ones(T, T, dtype=torch.bool)
    used = weighted(W)
    nan_rows = [t for t in range(T) if not bool(W[t].isfinite().all())]
    extra = f" (rows {nan_rows} are NaN: every key hidden)" if nan_rows else ""
    for pattern, masks in _WRONG_MASKS.items():
        for allowed, text in masks:
            if bool((used == allowed(ones)).all()):
                return pattern, text + extra
    return None


def norm_probes(s, call, *, centred: bool) -> list:
    """The probes of LayerNorm (centred=True) and RMSNorm (centred=False).

    ``call(x, weight, bias, eps)`` runs the learner's function (bias is None for RMSNorm) and
    returns its float64 output (see ``output``).
    """
    d = 8
    x = randn(4, 6, d, seed=500, dtype=torch.float64, scale=2.0, offset=0.5)
    ones, zeros = torch.ones(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)
    bias = zeros if centred else None
    what = "LayerNorm" if centred else "RMSNorm"

    def plain(x, eps=1e-5):
        return call(x, ones, bias, eps)

    def axis():
        y = plain(x)
        x2 = x.clone()
        x2[1, 2] += randn(d, seed=501, dtype=torch.float64, scale=3.0)
        y2 = plain(x2)
        others = torch.ones(4, 6, dtype=torch.bool)
        others[1, 2] = False
        if not near(y2[others], y[others], 1e-6, 1e-8):
            return ("axis", "Changing the features of one token changed the output of other "
                    "tokens: your statistics are taken over more than the last dim (the batch, the "
                    f"sequence, or the whole tensor). {what} takes them per row, over dim -1: "
                    "x.mean(-1, keepdim=True).")
        return None

    def shift():
        c = randn(4, 6, 1, seed=502, dtype=torch.float64, scale=3.0)
        # loose enough for a correct answer computed in float32 (x.float()), whose output moves
        # by ~1e-6 with the shift; a norm that does (or does not) centre moves it by ~1
        same = near(plain(x + c), plain(x), 1e-4, 1e-5)
        if centred and not same:
            return ("not_centred", "Adding a constant to a row changed its output: LayerNorm "
                    "subtracts the row's own mean first, so x and x + c must give the same output.")
        if not centred and same:
            return ("mean_subtracted", "Adding a constant to a row left its output unchanged: you "
                    "subtract the mean, which is LayerNorm. RMSNorm only re-scales: "
                    "y = x / sqrt(mean(x^2) + eps) * weight.")
        return None

    def scale():
        y, y3 = plain(x, 1e-12), plain(3 * x, 1e-12)
        if near(y3, y, 1e-5, 1e-7):
            return None
        if near(y3, 3 * y, 1e-5, 1e-7):
            return ("not_scaled", "Multiplying a row by 3 multiplied its output by 3: you do not "
                    "divide by the row's spread. Divide by sqrt(var + eps), so that x and 3x give "
                    "the same output.")
        if near(y3, y / 3, 1e-5, 1e-7):
            return ("divides_by_variance" if centred else "divides_by_mean_square",
                    "Multiplying a row by 3 divided its output by 3: you divide by the "
                    f"{'variance' if centred else 'mean square'} (a square), not by its square "
                    "root.")
        return ("not_scaled", "Multiplying a row by 3 changed its output: the divisor does not "
                "grow in proportion to the row's spread, as sqrt(var + eps) does.")

    def divisor():
        xs = randn(3, d, seed=503, dtype=torch.float64, scale=0.03, offset=0.0)
        if centred:
            xs = xs + torch.tensor([[0.2], [-0.1], [0.05]], dtype=torch.float64)
        dev = xs - xs.mean(-1, keepdim=True) if centred else xs
        var_b = dev.pow(2).mean(-1)
        var_u = var_b * d / (d - 1)
        stat = "var" if centred else "mean(x^2)"
        eps_values = (1e-3, 0.1)
        dens = []
        for eps in eps_values:
            y = call(xs, torch.ones(d, dtype=torch.float64), None if not centred else
                     torch.zeros(d, dtype=torch.float64), eps)
            ratio = dev / y                                  # constant along a row if y ∝ dev
            if not near(ratio, ratio.mean(-1, keepdim=True).expand_as(ratio), 1e-6, 1e-12):
                return None                                  # not a plain division: other probes
            dens.append(ratio.mean(-1))
        implied = [den.pow(2) - var_b for den in dens]       # eps as the learner's code uses it
        candidates = [
            (None, lambda e: (var_b + e).sqrt()),
            ("unbiased_variance" if centred else "not_rms", lambda e: (var_u + e).sqrt()),
            ("eps_outside_sqrt", lambda e: var_b.sqrt() + e),
            ("unbiased_and_eps_outside" if centred else "not_rms", lambda e: var_u.sqrt() + e),
        ]
        for key, den_of in candidates:
            if all(near(den, den_of(e), 1e-6, 1e-12) for den, e in zip(dens, eps_values, strict=True)):
                if key is None:
                    return None
                return (key, _DIVISOR_TEXT[key].format(stat=stat, d=d))
        resolution = 1e-6 * float(var_b.max())          # a float32 computation is this close
        if near(implied[0], implied[1], 0, resolution) and \
                near(implied[0], implied[0].mean().expand_as(implied[0]), 0, resolution):
            fixed = float(implied[0].mean())
            used = f"eps = {fixed:.3g}" if abs(fixed) > resolution else \
                f"no eps, or one below {resolution:.0e}"
            return ("eps_ignored", f"Your divisor does not change when eps goes from 0.001 to 0.1: "
                    f"you ignore the eps argument (your code uses {used}). Use the eps passed in.")
        if all(near(e, e.mean().expand_as(e), 0, resolution) for e in implied):
            seen = [fmt(float(e.mean())) for e in implied]
            return ("eps_wrong", f"Your divisor is sqrt({stat} + e), but e is not the eps passed: "
                    f"with eps = 0.001 your code adds {seen[0]}, with eps = 0.1 it adds {seen[1]}. "
                    f"Add eps itself inside the square root: sqrt({stat} + eps).")
        k = float((dens[0] / (var_b + eps_values[0]).sqrt()).mean())
        return ("not_std" if centred else "not_rms",
                f"Your divisor is not sqrt({stat} + eps): on rows of small spread with eps = 0.001 "
                f"it is {k:.4g} times that. With weight 1 and bias 0, each output row must have "
                f"{'mean 0 and ' if centred else ''}{'variance' if centred else 'mean square'} "
                "var / (var + eps), close to 1.")

    def affine():
        y0 = plain(x)
        y_w = call(x, 2 * ones, bias, 1e-5)
        w_ok = near(y_w, 2 * y0, 1e-6, 1e-9)
        if not centred:
            if near(call(x, zeros, None, 1e-5), y0, 1e-6, 1e-9):
                return ("gemma_one_plus", "With weight = 0 your output is the normalized x: you "
                        "scale by (1 + weight), Gemma's variant; here the output is x_hat * weight.")
            if near(y_w, y0 + 1, 1e-6, 1e-9):
                return ("weight_not_scaling", "With weight = 2 your output is x_hat + 1 more than "
                        "with weight = 1: you add the weight; RMSNorm multiplies by it.")
            if near(y_w, y0, 1e-6, 1e-9):
                return ("no_weight", "Changing the weight does not change your output: multiply "
                        "the normalized x by weight.")
            if not w_ok:
                return ("weight_not_scaling", "With weight = 2 your output is not twice the output "
                        "with weight = 1: the weight must multiply the normalized x.")
            return None
        y_b = call(x, ones, ones, 1e-5)
        b_ok = near(y_b, y0 + 1, 1e-6, 1e-9)
        if not w_ok and not b_ok and near(y_w, y0, 1e-6, 1e-9) and near(y_b, y0, 1e-6, 1e-9):
            return ("no_affine", "Changing weight or bias does not change your output: apply them, "
                    "y = x_hat * weight + bias.")
        if w_ok and near(y_b, y0, 1e-6, 1e-9):
            return ("bias_unused", "Changing the bias does not change your output: add it last, "
                    "y = x_hat * weight + bias.")
        if b_ok and near(y_w, y0, 1e-6, 1e-9):
            return ("weight_unused", "Changing the weight does not change your output: multiply by "
                    "it, y = x_hat * weight + bias.")
        y_wb = call(x, 2 * ones, ones, 1e-5)
        if w_ok and b_ok and near(y_wb, 2 * (y0 + 1), 1e-6, 1e-9):
            return ("affine_order", "With weight = 2 and bias = 1 your output is 2 (x_hat + 1): you "
                    "add the bias before multiplying by the weight. The bias comes last: "
                    "y = x_hat * weight + bias.")
        if near(y_w, y0 + 2, 1e-6, 1e-9) or near(y_b, y0, 1e-6, 1e-9) and not w_ok:
            return ("weight_bias_swapped", "weight = 2 shifts your output by 2 and bias = 1 does "
                    "not shift it: weight and bias are swapped. y = x_hat * weight + bias.")
        if not (w_ok and b_ok and near(y_wb, 2 * y0 + 1, 1e-6, 1e-9)):
            return ("affine", "With weight = 2 and bias = 1 your output is not 2 x_hat + 1: apply "
                    "the weight as a scale and the bias as a shift, y = x_hat * weight + bias.")
        return None

    return [axis, shift, scale, divisor, affine]


_DIVISOR_TEXT = {
    "unbiased_variance": "Your divisor is sqrt(var_unbiased + eps): the variance divides by n - 1 "
                         "(torch.var and torch.std are unbiased by default), so each output row "
                         "has std sqrt((n-1)/n) instead of 1. Use x.var(-1, unbiased=False).",
    "eps_outside_sqrt": "Your divisor is sqrt({stat}) + eps: eps sits outside the square root. "
                        "torch adds it inside, sqrt({stat} + eps); the two differ most on rows "
                        "of small spread.",
    "unbiased_and_eps_outside": "Your divisor is std_unbiased + eps, i.e. x.std(-1) + eps: torch.std "
                                "divides by n - 1 and eps sits outside the square root. nn.LayerNorm "
                                "uses sqrt(var + eps) with the biased variance (divide by n).",
    "not_rms": "Your divisor is sqrt(sum(x^2) / (n - 1) + eps): the mean of squares must divide by "
               "n = {d}, not n - 1, so each output row has RMS sqrt((n-1)/n) instead of 1.",
}
