"""Exercises 18 and 19 (cross-entropy with z-loss, DyT): the reference against PyTorch, normlib and
Hugging Face; a correct answer passes, the built-ins are refused, every mutant of the catalogue
gets its own key, and every mutant takes the arguments its checker passes."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import normlib as nl
from normlib.exercises import check_cross_entropy_z_loss, check_dyt, dyt
from normlib.exercises import cross_entropy as ce


def good_ce(logits, targets, z_loss=1e-4, ignore_index=-100):
    V = logits.shape[-1]
    x = logits.reshape(-1, V)
    x = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    t = targets.reshape(-1)
    keep = t != ignore_index
    m = x.amax(-1, keepdim=True)
    log_z = (m + (x - m).exp().sum(-1, keepdim=True).log()).squeeze(-1)
    x_t = x.gather(-1, torch.where(keep, t, 0)[:, None]).squeeze(-1)
    n = keep.sum()
    return ((log_z - x_t) * keep).sum() / n + z_loss * (log_z.pow(2) * keep).sum() / n


def _batch(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(2, 6, 13, generator=g, dtype=torch.float64) * 3 + 5).to(dtype)
    targets = torch.randint(13, (2, 6), generator=g)
    targets[0, :2] = -100
    targets[1, 5] = -100
    return logits, targets


def test_the_reference_is_cross_entropy_plus_z_loss_over_the_kept_tokens():
    logits, targets = _batch()
    keep = targets != -100
    want = F.cross_entropy(logits.flatten(0, 1), targets.flatten()) + \
        nl.z_loss(logits[keep], coefficient=1e-3)
    torch.testing.assert_close(ce.reference(logits, targets, 1e-3), want)
    torch.testing.assert_close(good_ce(logits, targets, 1e-3), want)
    # nl.z_loss (like HF's Bamba) averages over every position: ignored ones change it
    assert not torch.allclose(nl.z_loss(logits), nl.z_loss(logits[keep]))


def test_the_cross_entropy_term_equals_hugging_faces_causal_lm_loss():
    loss_utils = pytest.importorskip("transformers.loss.loss_utils")
    logits, targets = _batch(1, torch.float32)          # HF computes in float32 (logits.float())
    V = logits.shape[-1]
    hf = loss_utils.ForCausalLMLoss(logits, targets, V, shift_labels=targets)
    torch.testing.assert_close(ce.reference(logits, targets, 0.0), hf)
    # and for bfloat16 logits, both upcast to float32
    hf16 = loss_utils.ForCausalLMLoss(logits.bfloat16(), targets, V, shift_labels=targets)
    torch.testing.assert_close(ce.reference(logits.bfloat16(), targets, 0.0), hf16)


def test_a_correct_answer_passes_and_the_built_ins_are_refused():
    assert check_cross_entropy_z_loss(good_ce).passed
    builtins = [
        lambda x, t, z_loss=1e-4, ignore_index=-100: F.cross_entropy(
            x.flatten(0, -2).float(), t.flatten(), ignore_index=ignore_index),
        lambda x, t, z_loss=1e-4, ignore_index=-100: F.nll_loss(
            x.flatten(0, -2).float().log_softmax(-1), t.flatten(), ignore_index=ignore_index),
        lambda x, t, z_loss=1e-4, ignore_index=-100: good_ce(x, t, z_loss, ignore_index) * 0 +
        torch.logsumexp(x.float(), -1).mean(),
    ]
    for fn in builtins:
        result = check_cross_entropy_z_loss(fn)
        assert result.mistake == "shortcut", result


@pytest.mark.parametrize("i", range(len(ce.CE_Z_MUTANTS)))
def test_each_mutant_gets_its_key(i):
    key, f = ce.CE_Z_MUTANTS[i]

    def fn(logits, targets, z_loss=1e-4, ignore_index=-100):
        return f(logits, targets, z_loss, ignore_index)

    result = check_cross_entropy_z_loss(fn)
    assert not result.passed and result.mistake == key, result


@pytest.mark.parametrize("module, table", [(ce, "CE_Z_MUTANTS"), (dyt, "DYT_MUTANTS")])
def test_every_mutant_takes_the_arguments_its_checker_passes(module, table):
    wrong = []
    for case in module.CASES:
        full = (*case.inputs(), *case.kwargs.values())
        for key, f in getattr(module, table):
            try:
                f(*full)
            except TypeError as exc:
                wrong.append(f"{key}: {exc}")
    assert not wrong, wrong


# --------------------------------------------------------------------------- 19: DyT
class GoodDyT(nn.Module):
    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), float(alpha_init)))
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.weight * torch.tanh(self.alpha * h) + self.bias).to(x.dtype)


def test_nl_dyt_is_the_papers_formula_with_the_exercises_names():
    m = nl.DyT(6, alpha_init=0.8)
    assert dict(m.named_parameters()).keys() == {"alpha", "weight", "bias"}
    assert m.alpha.shape == (1,) and m.alpha.item() == pytest.approx(0.8)
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-1, 1)
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    m = m.double()
    torch.testing.assert_close(m(x), m.weight * torch.tanh(m.alpha * x) + m.bias)
    ours = GoodDyT(6, 0.8).double()
    ours.load_state_dict(m.state_dict())
    torch.testing.assert_close(ours(x), m(x))
    torch.testing.assert_close(ours.half()(x.half()), m.half()(x.half()))


def test_a_correct_dyt_passes_and_normlibs_is_refused():
    assert check_dyt(GoodDyT).passed

    class Wrapped(GoodDyT):
        def forward(self, x):
            return nl.dyt(x, self.alpha, self.weight, self.bias)

    result = check_dyt(Wrapped)
    assert result.mistake == "shortcut", result


@pytest.mark.parametrize("i", range(len(dyt.DYT_MUTANTS)))
def test_each_dyt_mutant_gets_its_key(i):
    key, f = dyt.DYT_MUTANTS[i]

    class Mutant(GoodDyT):
        def forward(self, x):
            return f(x, self.alpha, self.weight, self.bias)

    result = check_dyt(Mutant)
    assert not result.passed and result.mistake == key, result
