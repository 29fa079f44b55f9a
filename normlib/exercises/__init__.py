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

from .attention import check_attention
from .batch_norm import check_batch_norm
from .catalog import EXERCISES, Exercise, exercise
from .deep_norm import check_deep_norm
from .gelu import check_gelu_tanh
from .layer_norm import check_layer_norm
from .layer_norm_backward import check_layer_norm_backward
from .llama_block import check_llama_block
from .multi_head_attention import check_multi_head_attention
from .online_softmax import check_online_softmax_attention
from .qk_norm import check_qk_norm_attention
from .result import CheckResult, language, set_language
from .rms_norm import check_rms_norm
from .rope import check_rope
from .schedule import check_warmup_cosine
from .sliding_window import check_sliding_window_attention
from .swiglu import check_swiglu_ffn

__all__ = [
    "CheckResult", "EXERCISES", "Exercise", "exercise",
    "check_attention", "check_batch_norm", "check_deep_norm", "check_gelu_tanh",
    "check_layer_norm", "check_layer_norm_backward", "check_llama_block",
    "check_multi_head_attention", "check_online_softmax_attention", "check_qk_norm_attention",
    "check_rms_norm",
    "check_rope", "check_sliding_window_attention", "check_swiglu_ffn",
    "check_warmup_cosine", "language", "set_language",
]
