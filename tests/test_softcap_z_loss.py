"""Soft-capping against flex_attention's score_mod (PyTorch's soft-capped attention), z-loss
against its definition computed another way, and both properties the papers rely on."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from tolerances import DTYPES, close

import normlib as nl


@pytest.mark.parametrize("dtype", DTYPES)
def test_softcap_bounds_and_keeps_small_logits(dtype):
    x = torch.tensor([-1e4, -60.0, -1e-3, 0.0, 1e-3, 60.0, 1e4], dtype=dtype)
    y = nl.softcap(x, 50.0)
    assert y.dtype == dtype and y.abs().max() <= 50.0
    close(y[2:5], x[2:5], rtol=1e-3, atol=1e-6)                      # slope 1 near zero
    assert torch.equal(y, -nl.softcap(-x, 50.0))                      # odd


def test_softcap_gradient_is_sech_squared():
    x = torch.linspace(-200, 200, 41, dtype=torch.float64, requires_grad=True)
    nl.softcap(x, 30.0).sum().backward()
    close(x.grad, 1 / torch.cosh(x.detach() / 30.0) ** 2)             # d/dz c tanh(z/c)
    assert x.grad[0] < 1e-4 and x.grad[20] == 1.0                      # saturated vs identity


def test_softcapped_attention_equals_flex_attention_score_mod():
    from torch.nn.attention.flex_attention import flex_attention
    q, k, v = (torch.randn(2, 3, 9, 8, dtype=torch.float64) * 6 for _ in range(3))

    def score_mod(score, b, h, q_idx, kv_idx):                        # PyTorch's docs' example
        score = 5.0 * torch.tanh(score / 5.0)
        return torch.where(kv_idx <= q_idx, score, -float("inf"))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                                # eager flex_attention warns
        expected = flex_attention(q, k, v, score_mod=score_mod)
    close(nl.attention(q, k, v, softcap=5.0), expected)
    assert not torch.allclose(nl.attention(q, k, v), expected)         # the cap is active


def test_softcap_rejects_a_non_positive_cap():
    with pytest.raises(ValueError, match="cap must be > 0, got 0"):
        nl.softcap(torch.ones(3), 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_z_loss_is_the_squared_log_normalizer(dtype):
    logits = (torch.randn(2, 5, 11, dtype=torch.float64) * 4 + 3).to(dtype)
    log_z = logits.double().exp().sum(-1).log()                        # log sum_j exp z_j
    expected = 1e-4 * (log_z ** 2).mean()
    got = nl.z_loss(logits)
    assert got.shape == () and got.dtype == (torch.float32 if dtype == torch.bfloat16 else dtype)
    close(got.double(), expected, rtol=1e-6 if dtype != torch.float64 else 1e-12, atol=0)


def test_z_loss_pulls_log_z_to_zero_and_leaves_the_softmax_alone():
    # Adding a constant to every logit leaves the cross-entropy unchanged but not the z-loss,
    # whose gradient, 2 c log Z softmax(z) / N for N rows, pushes log Z back towards 0.
    logits = torch.randn(4, 7, dtype=torch.float64)
    target = torch.randint(7, (4,))
    shifted = logits + 10.0
    close(F.cross_entropy(shifted, target), F.cross_entropy(logits, target))
    assert nl.z_loss(shifted, 1.0) > nl.z_loss(logits, 1.0) + 50
    z = shifted.clone().requires_grad_(True)
    nl.z_loss(z, 1.0).backward()
    log_z = torch.logsumexp(shifted, -1, keepdim=True)
    close(z.grad, 2 * log_z * torch.softmax(shifted, -1) / 4)
    assert nl.z_loss(logits, 0.0) == 0


def test_z_loss_checks_its_arguments():
    with pytest.raises(ValueError, match="coefficient must be >= 0, got -1"):
        nl.z_loss(torch.ones(2, 3), -1)
    with pytest.raises(TypeError, match="logits must be a floating-point tensor"):
        nl.z_loss(torch.ones(2, 3, dtype=torch.long))
