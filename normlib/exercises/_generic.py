"""The mistakes every checker can name, whatever the exercise: {key: (short label, explanation)},
and ``catalogue``, which keeps an exercise's own mistakes from shadowing them."""

__all__ = ["GENERIC_MISTAKES", "OUTCOMES", "CANNOT_TELL", "catalogue"]

CANNOT_TELL = ("I cannot tell exactly which mistake this is: the values differ from the reference "
               "(see the ✗ lines), but every property the checker probes holds. Compare your code "
               "with the formula step by step on a small input.")

# What a check can end with that is no mistake in the code's values: {key: (label, explanation)}.
OUTCOMES = {
    "not_implemented": ("not implemented yet", "replace `raise NotImplementedError` with your "
                        "code, then run the cell again."),
    "cannot_tell": ("cannot tell exactly", CANNOT_TELL),
    "shortcut": ("calls the built-in being practised", "you call the very thing this exercise asks "
                 "you to write by hand: build it from tensor operations instead."),
}

GENERIC_MISTAKES = {
    "not_callable": ("not callable", "pass your function (or class) itself, not its result."),
    "returned_none": ("returned None", "your code returns None: did you forget `return`?"),
    "not_a_tensor": ("not a tensor", "your code must return a torch.Tensor."),
    "wrong_shape": ("wrong shape", "the output has the wrong shape: normalization and rotations "
                    "keep the input's shape; print the shapes of your intermediate tensors."),
    "wrong_dtype": ("wrong dtype", "the output dtype differs from the input's: compute in float32 "
                    "if you need to, then cast back with .to(x.dtype) or .type_as(x)."),
    "nan": ("NaN or inf", "your output has NaN or inf where the reference is finite."),
    "in_place": ("modifies its input", "your code changes its input in place (x -= mu, x.sub_(...), "
                 "x[...] = ...); the caller's tensor changes under them. Build new tensors: "
                 "y = x - mu."),
    "raised": ("raised an exception", "your code raises an exception (see the ✗ lines)."),
    "time_limit": ("too slow", "your code ran past the time limit: look for an endless loop, or a "
                   "Python loop over every element where a tensor operation would do."),
    "no_autograd": ("cut off from autograd", "gradients do not reach the inputs: avoid .detach(), "
                    ".data, .item(), numpy and torch.no_grad() in the forward pass."),
    "wrong_grad": ("wrong gradients", "the forward values are right but the gradients differ: "
                   "something is detached or computed outside autograd."),
    "wrong_values": ("wrong values", "the values differ from the reference in a way the checker does "
                     "not recognise: compare your code with the formula, step by step, on a small "
                     "input."),
}


def catalogue(exercise: str, mistakes: dict) -> dict:
    """``mistakes`` ({key: (short label, explanation)}), after checking that no key is a generic
    mistake's or an outcome's: a catalogue that reused "wrong_shape" for its own meaning silently
    replaced "the output has the wrong shape" (code review 2, finding 5). Called where a checker
    defines its catalogue, so a clash fails at import; Session and codes.registry check again."""
    clash = sorted(set(mistakes) & (set(GENERIC_MISTAKES) | set(OUTCOMES)))
    if clash:
        raise ValueError(f"catalogue of {exercise!r}: mistake keys {clash} shadow the generic "
                         "mistakes of every exercise (normlib/exercises/_generic.py); give the "
                         "exercise's own mistake another key")
    return mistakes
