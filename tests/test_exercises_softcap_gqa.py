"""Exercises 16-17 (issue 35): soft-capped attention (Gemma 2) and grouped-query attention. A
correct answer passes, the built-ins are refused, each catalogue mistake's mutant gets its key,
every mutant takes the arguments its checker passes, the probes find nothing in correct answers,
and the references equal Hugging Face's: Gemma 2's eager attention with attn_logit_softcapping,
and LLaMA's repeat_kv and eager attention with grouped key/value heads (built offline)."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F

import normlib as nl
from normlib import exercises as ex
from normlib.exercises import softcap_attention as sca
from normlib.exercises._session import Session


# --------------------------------------------------------------------------- 16: soft-capping
def softcap_attention(q, k, v, cap):
    """The solution notebook's answer."""
    T, D, dtype = q.shape[-2], q.shape[-1], q.dtype
    wide = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    q, k, v = q.to(wide), k.to(wide), v.to(wide)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    scores = cap * torch.tanh(scores / cap)
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~keep, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).to(dtype)


def test_softcap_correct_answer_passes():
    result = ex.check_softcap_attention(softcap_attention)
    assert result.passed, result


@pytest.mark.parametrize("key, mutant", sca.SOFTCAP_MUTANTS, ids=[k for k, _ in sca.SOFTCAP_MUTANTS])
def test_softcap_mutant_is_named(key, mutant):
    assert key in sca.SOFTCAP_MISTAKES
    result = ex.check_softcap_attention(mutant)
    assert not result.passed and result.mistake == key, result


@pytest.mark.parametrize("builtin", [
    lambda q, k, v, cap: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    lambda q, k, v, cap: nl.attention(q, k, v, softcap=cap),
    lambda q, k, v, cap: softcap_attention(q, k, v, cap) + 0 * nl.softcap(q, cap).sum(),
], ids=["sdpa", "nl.attention", "nl.softcap"])
def test_softcap_refuses_the_builtins(builtin):
    result = ex.check_softcap_attention(builtin)
    assert result.mistake == "shortcut", result


def _mutants_take_the_arguments(module, table):
    wrong = []
    for case in module.CASES:
        full = (*case.inputs(), *case.kwargs.values())
        for key, f in table:
            try:
                with torch.no_grad():
                    f(*full)
            except TypeError as exc:
                wrong.append(f"{key}: {exc}")
            except Exception:       # does not apply to this input
                pass
    return wrong


def test_softcap_mutants_take_the_arguments_the_checker_passes():
    assert not _mutants_take_the_arguments(sca, sca.SOFTCAP_MUTANTS)


def _probe_results(probes_of, check, fn):
    """What each probe says about ``fn`` (run directly, not only after a failure)."""
    s = Session("probe", check, exercise=probes_of[0])
    return [p() for p in probes_of[1](s, fn)]


@pytest.mark.parametrize("fn", [
    softcap_attention,
    lambda q, k, v, cap: nl.attention(q, k, v, softcap=cap),
    lambda q, k, v, cap: sca._sca(q.float(), k.float(), v.float(), cap).to(q.dtype),
], ids=["solution", "normlib", "float32 for float64 inputs"])
def test_softcap_probes_find_nothing_in_a_correct_answer(fn):
    found = _probe_results(("softcap_attention", sca._probes), sca.SOFTCAP_MISTAKES, fn)
    assert found == [None] * len(found), found


def test_softcap_cap_after_mask_is_told_by_equal_weights_on_future_keys():
    def after_mask(q, k, v, cap):
        T = q.shape[-2]
        s = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(
            ~torch.ones(T, T, dtype=torch.bool).tril(), -1e4)
        return torch.softmax(torch.tanh(s / cap), -1) @ v       # and not multiplied back
    found = _probe_results(("softcap_attention", sca._probes), sca.SOFTCAP_MISTAKES, after_mask)
    assert found[0][0] == "cap_after_mask" and "same weight" in found[0][1], found


# --------------------------------------------------------------------------- Hugging Face parity
@functools.cache
def _hf():
    from transformers.models.gemma2 import modeling_gemma2
    from transformers.models.llama import modeling_llama
    return modeling_gemma2, modeling_llama


class _Module(torch.nn.Module):
    """What HF's eager attention reads from its module: head_dim, the groups, training."""

    def __init__(self, head_dim, groups):
        super().__init__()
        self.head_dim, self.num_key_value_groups = head_dim, groups
        self.eval()


def _causal(T, dtype):
    return torch.full((T, T), float("-inf"), dtype=dtype).triu(1)[None, None]


@pytest.mark.parametrize("cap", [2.0, 50.0])
@pytest.mark.parametrize("groups", [1, 2])
def test_softcap_reference_equals_gemma2_eager_attention(cap, groups):
    gemma2, _ = _hf()
    g = torch.Generator().manual_seed(5)
    B, H, T, D = 2, 4, 7, 16
    q = torch.randn(B, H, T, D, generator=g) * 3
    k, v = (torch.randn(B, H // groups, T, D, generator=g) * s for s in (3, 1))
    hf, _ = gemma2.eager_attention_forward(_Module(D, groups), q, k, v, _causal(T, q.dtype),
                                           scaling=D ** -0.5, softcap=cap)
    ours = nl.attention(q, nl.repeat_kv(k, groups), nl.repeat_kv(v, groups), causal=True,
                        softcap=cap)
    torch.testing.assert_close(ours.transpose(1, 2), hf, rtol=1e-5, atol=1e-5)
    if groups == 1:
        torch.testing.assert_close(sca._reference(q, k, v, cap).transpose(1, 2), hf,
                                   rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(softcap_attention(q, k, v, cap).transpose(1, 2), hf,
                                   rtol=1e-5, atol=1e-5)


def test_gemma2_config_caps_are_the_ones_the_text_states():
    from transformers.models.gemma2 import configuration_gemma2
    config = configuration_gemma2.Gemma2Config()
    assert (config.attn_logit_softcapping, config.final_logit_softcapping) == (50.0, 30.0)
    assert "50.0" in ex.EXERCISES["softcap_attention"].followups[1].answer


# --------------------------------------------------------------------------- 17: grouped-query
from normlib.exercises import gqa_attention as gqa  # noqa: E402


def gqa_attention(q, k, v):
    """The solution notebook's answer."""
    T, D = q.shape[-2], q.shape[-1]
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def test_gqa_correct_answer_passes():
    result = ex.check_gqa_attention(gqa_attention)
    assert result.passed, result


@pytest.mark.parametrize("key, mutant", gqa.GQA_MUTANTS,
                         ids=[f"{k}-{i}" for i, (k, _) in enumerate(gqa.GQA_MUTANTS)])
def test_gqa_mutant_is_named(key, mutant):
    assert key in gqa.GQA_MISTAKES
    result = ex.check_gqa_attention(mutant)
    assert not result.passed and result.mistake == key, result


@pytest.mark.parametrize("builtin", [
    lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
    lambda q, k, v: nl.attention(q, k.repeat_interleave(q.shape[1] // k.shape[1], 1),
                                 v.repeat_interleave(q.shape[1] // k.shape[1], 1)),
    lambda q, k, v: gqa_attention(q, nl.repeat_kv(k, 1), v),
], ids=["sdpa", "nl.attention", "nl.repeat_kv"])
def test_gqa_refuses_the_builtins(builtin):
    result = ex.check_gqa_attention(builtin)
    assert result.mistake == "shortcut", result


def test_gqa_kv_heads_never_repeated_are_named_from_the_error():
    def no_repeat(q, k, v):                  # right for MHA, and broadcast for MQA
        T = q.shape[-2]
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(s, -1) @ v
    result = ex.check_gqa_attention(no_repeat)
    assert result.mistake == "kv_not_repeated" and "dimension 1" in "\n".join(result.messages), \
        result


def test_gqa_mutants_take_the_arguments_the_checker_passes():
    assert not _mutants_take_the_arguments(gqa, gqa.GQA_MUTANTS)


@pytest.mark.parametrize("fn", [
    gqa_attention,
    lambda q, k, v: gqa._reference(q, k, v),
    lambda q, k, v: gqa._gqa(q.float(), k.float(), v.float()).to(q.dtype),
], ids=["solution", "normlib", "float32 for float64 inputs"])
def test_gqa_probes_find_nothing_in_a_correct_answer(fn):
    found = _probe_results(("gqa_attention", gqa._probes), gqa.GQA_MISTAKES, fn)
    assert found == [None] * len(found), found


def test_gqa_heads_probe_reads_the_map():
    tiled = dict(gqa.GQA_MUTANTS)["kv_order"]
    found = _probe_results(("gqa_attention", gqa._probes), gqa.GQA_MISTAKES, tiled)
    assert found[0][0] == "kv_order" and "[0, 1, 2, 0, 1, 2]" in found[0][1], found


@pytest.mark.parametrize("n_kv", [1, 2, 4])
def test_repeat_kv_equals_llamas_and_the_reference_its_eager_attention(n_kv):
    _, llama = _hf()
    g = torch.Generator().manual_seed(7)
    B, H, T, D = 2, 4, 6, 8
    q = torch.randn(B, H, T, D, generator=g)
    k, v = torch.randn(2, B, n_kv, T, D, generator=g).unbind(0)
    assert torch.equal(nl.repeat_kv(k, H // n_kv), llama.repeat_kv(k, H // n_kv))
    hf, _ = llama.eager_attention_forward(_Module(D, H // n_kv), q, k, v, _causal(T, q.dtype),
                                          scaling=D ** -0.5)
    torch.testing.assert_close(gqa._reference(q, k, v).transpose(1, 2), hf, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gqa_attention(q, k, v).transpose(1, 2), hf, rtol=1e-5, atol=1e-5)
    if 1 < n_kv < H:                         # k.repeat tiles the heads: another model
        tiled = nl.attention(q, k.repeat(1, H // n_kv, 1, 1), v.repeat(1, H // n_kv, 1, 1))
        assert not torch.allclose(tiled.transpose(1, 2), hf, atol=1e-3)
