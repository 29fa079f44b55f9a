"""Learning-rate schedules: each returns ``step -> multiplier`` for ``torch.optim.lr_scheduler.LambdaLR``.

Convention (as HF transformers): ``step`` counts optimizer steps from 0, LambdaLR calls the
function with 0 for the first update, and warmup is linear from 0 at step 0 to exactly 1 at
``step == warmup_steps``; warmup_steps = 0 means no warmup.
"""

from __future__ import annotations

import math

from ._checks import check_int, check_number

__all__ = ["linear_warmup", "inverse_sqrt", "cosine_with_warmup"]


def linear_warmup(warmup_steps: int):
    """min(1, step / warmup_steps): a linear ramp, then constant."""
    check_int("linear_warmup", "warmup_steps", warmup_steps, minimum=0)

    def multiplier(step: int) -> float:
        check_int("linear_warmup", "step", step, minimum=0)
        return 1.0 if step >= warmup_steps else step / warmup_steps

    return multiplier


def inverse_sqrt(d_model: int, warmup_steps: int):
    """The original Transformer's schedule (Vaswani et al. 2017, eq. 3):

        lrate = d_model^-0.5 * min(s^-0.5, s * warmup_steps^-1.5),  s = max(step, 1)

    It *is* the learning rate, so use it with the optimizer's lr set to 1.0 (or scale it).
    Rises linearly to its peak d_model^-0.5 * warmup_steps^-0.5 at s = warmup_steps, then decays
    as 1/sqrt(s). The paper's step counts from 1; step 0 is treated as step 1.
    """
    check_int("inverse_sqrt", "d_model", d_model, minimum=1)
    check_int("inverse_sqrt", "warmup_steps", warmup_steps, minimum=1)

    def multiplier(step: int) -> float:
        check_int("inverse_sqrt", "step", step, minimum=0)
        s = max(step, 1)
        return d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.5)

    return multiplier


def cosine_with_warmup(warmup_steps: int, total_steps: int, min_ratio: float = 0.0):
    """Linear warmup to 1, then a half cosine from 1 down to ``min_ratio`` at ``total_steps``.

        step < warmup:  step / warmup_steps
        otherwise:      min_ratio + (1 - min_ratio) * 0.5 * (1 + cos(pi * p)),
                        p = min(1, (step - warmup_steps) / (total_steps - warmup_steps))

    After total_steps the multiplier stays at the floor ``min_ratio``.
    """
    fn = "cosine_with_warmup"
    check_int(fn, "warmup_steps", warmup_steps, minimum=0)
    check_int(fn, "total_steps", total_steps, minimum=1)
    if total_steps < warmup_steps:
        raise ValueError(f"{fn}: total_steps must be >= warmup_steps, got total_steps="
                         f"{total_steps} < warmup_steps={warmup_steps}")
    check_number(fn, "min_ratio", min_ratio)
    if min_ratio > 1:
        raise ValueError(f"{fn}: min_ratio must be in [0, 1], got {min_ratio}")

    def multiplier(step: int) -> float:
        check_int(fn, "step", step, minimum=0)
        if step < warmup_steps:
            return step / warmup_steps
        p = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p))

    return multiplier
