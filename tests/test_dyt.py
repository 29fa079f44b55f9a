"""DyT (arXiv 2503.10622) against its equation written with torch's own ops, and its gradients."""

import pytest
import torch
from tolerances import DTYPES, close

import normlib as nl


@pytest.mark.parametrize("dtype", DTYPES)
def test_dyt_equals_gamma_tanh_alpha_x_plus_beta(dtype):
    layer = nl.DyT(16, alpha_init=0.7).to(dtype)
    with torch.no_grad():
        layer.weight.uniform_(0.5, 1.5)
        layer.bias.uniform_(-0.5, 0.5)
    x = (torch.randn(3, 5, 16, dtype=torch.float64) * 3).to(dtype)
    xf, a = x.double(), layer.alpha.double()
    expected = layer.weight.double() * torch.nn.Tanh()(a * xf) + layer.bias.double()
    y = layer(x)
    assert y.dtype == dtype
    close(y, expected.to(dtype))


def test_dyt_initial_parameters_and_no_statistics():
    layer = nl.DyT(8)
    assert layer.alpha.item() == 0.5 and torch.equal(layer.weight, torch.ones(8))
    assert torch.equal(layer.bias, torch.zeros(8))
    x = torch.randn(4, 8)
    # elementwise: each output depends only on its own input (LayerNorm's would mix the row)
    y = layer(x)
    x2 = x.clone()
    x2[:, 0] += 100
    assert torch.equal(layer(x2)[:, 1:], y[:, 1:])


def test_dyt_gradients_pass_gradcheck():
    layer = nl.DyT(6).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x, a, w, b: nl.dyt(x, a, w, b),
        (x, layer.alpha.detach().clone().requires_grad_(True),
         layer.weight.detach().clone().requires_grad_(True),
         layer.bias.detach().clone().requires_grad_(True)))


def test_dyt_without_affine_and_errors():
    layer = nl.DyT(4, elementwise_affine=False)
    assert layer.weight is None and layer.bias is None
    x = torch.randn(2, 4)
    close(layer(x), torch.tanh(0.5 * x))
    with pytest.raises(ValueError, match="weight must have shape \\(4,\\)"):
        nl.dyt(x, 0.5, torch.ones(3))
    with pytest.raises(ValueError, match="alpha must be a scalar"):
        nl.dyt(x, torch.ones(2))
    with pytest.raises(TypeError, match="normalized_shape must be an int"):
        nl.DyT((4,))
