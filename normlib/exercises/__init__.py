"""Hand-implementation practice (手撕): checkers that run your code and name the mistake.

Each ``check_*`` runs your function (or class) against normlib and PyTorch on several shapes,
dtypes, edge inputs and the backward pass, and returns a ``CheckResult`` (passed, messages,
diagnosis) that prints as a short report. A wrong answer is probed one property at a time (a row
shifted, a row scaled, one token perturbed, weight = 2, ...) and compared with a catalogue of
classic mistakes, so the report can say *which* mistake it is ("unbiased variance (n - 1)"), or
that it cannot tell exactly.

    from normlib.exercises import check_layer_norm
    check_layer_norm(my_layer_norm)

Your code runs with a time limit, cannot hang the checker, and may not call the built-in it
practises (F.layer_norm and friends).

Every result carries a stable mistake code (``result.code``, e.g. "layer_norm.unbiased_variance";
docs/mistakes.md lists them) and its one-line message in English and Chinese (``result.message``,
``result.message_zh``); ``set_language("zh")`` prints the reports in Chinese.
"""

from .registry import EXERCISES, exercise
from .result import CheckResult, language, set_language
from .spec import Exercise

# check_layer_norm, check_rms_norm, ...: every exercise's checker, from the registry
globals().update({e.checker.__name__: e.checker for e in EXERCISES.values()})

__all__ = ["CheckResult", "EXERCISES", "Exercise", "exercise", "language", "set_language",
           *(e.checker.__name__ for e in EXERCISES.values())]
