"""The exercises, one line each: key, checker, catalogue. Everything else that lists the
exercises (the package's exports, the mistake codes, docs/mistakes.md, the drill's menu, the
grader's report) is derived from ``EXERCISES``; the order here is the notebooks' order."""

from __future__ import annotations

from . import (
    attention,
    batch_norm,
    cross_entropy,
    deep_norm,
    dyt,
    geglu,
    gelu,
    gqa_attention,
    layer_norm,
    layer_norm_backward,
    llama_block,
    multi_head_attention,
    online_softmax,
    qk_norm,
    rms_norm,
    rope,
    rope_scaling,
    schedule,
    sliding_window,
    softcap_attention,
    swiglu,
)
from .spec import Exercise

__all__ = ["EXERCISES", "exercise"]

_ALL = [
    Exercise.load("layer_norm", layer_norm.check_layer_norm, layer_norm.LAYER_NORM_MISTAKES),
    Exercise.load("batch_norm", batch_norm.check_batch_norm, batch_norm.BN_MISTAKES),
    Exercise.load("rms_norm", rms_norm.check_rms_norm, rms_norm.RMS_NORM_MISTAKES),
    Exercise.load("deep_norm", deep_norm.check_deep_norm, deep_norm.DEEP_NORM_MISTAKES),
    Exercise.load("swiglu_ffn", swiglu.check_swiglu_ffn, swiglu.SWIGLU_MISTAKES),
    Exercise.load("rope", rope.check_rope, rope.ROPE_MISTAKES),
    Exercise.load("warmup_cosine", schedule.check_warmup_cosine, schedule.WARMUP_MISTAKES),
    Exercise.load("gelu_tanh", gelu.check_gelu_tanh, gelu.GELU_MISTAKES),
    Exercise.load("attention", attention.check_attention, attention.ATTENTION_MISTAKES),
    Exercise.load("layer_norm_backward", layer_norm_backward.check_layer_norm_backward,
                  layer_norm_backward.LN_BACKWARD_MISTAKES),
    Exercise.load("multi_head_attention", multi_head_attention.check_multi_head_attention,
                  multi_head_attention.MHA_MISTAKES),
    Exercise.load("llama_block", llama_block.check_llama_block, llama_block.LLAMA_MISTAKES),
    Exercise.load("online_softmax_attention", online_softmax.check_online_softmax_attention,
                  online_softmax.ONLINE_SOFTMAX_MISTAKES),
    Exercise.load("sliding_window_attention", sliding_window.check_sliding_window_attention,
                  sliding_window.SLIDING_WINDOW_MISTAKES),
    Exercise.load("qk_norm_attention", qk_norm.check_qk_norm_attention, qk_norm.QK_NORM_MISTAKES),
    Exercise.load("softcap_attention", softcap_attention.check_softcap_attention,
                  softcap_attention.SOFTCAP_MISTAKES),
    Exercise.load("gqa_attention", gqa_attention.check_gqa_attention,
                  gqa_attention.GQA_MISTAKES),
    Exercise.load("cross_entropy_z_loss", cross_entropy.check_cross_entropy_z_loss,
                  cross_entropy.CE_Z_MISTAKES),
    Exercise.load("dyt", dyt.check_dyt, dyt.DYT_MISTAKES),
    Exercise.load("geglu_ffn", geglu.check_geglu_ffn, geglu.GEGLU_MISTAKES),
    Exercise.load("rope_scaling", rope_scaling.check_rope_scaling,
                  rope_scaling.ROPE_SCALING_MISTAKES),
]

EXERCISES: dict[str, Exercise] = {e.key: e for e in _ALL}


def exercise(key: str) -> Exercise:
    """The exercise called ``key`` (one of EXERCISES), with a clear error otherwise."""
    if key not in EXERCISES:
        raise ValueError(f"exercise: unknown exercise {key!r}; expected one of "
                         f"{', '.join(EXERCISES)}")
    return EXERCISES[key]
