"""The LayerNorm backward exercise (手推 LayerNorm 反向传播): a correct hand-written backward passes,
autograd is refused, and the diagnoses name the missing mean term, the missing x_hat term and the
wrong N, also when the mistake is written in a form the catalogue does not hold."""

import pytest
import torch
import torch.nn.functional as F

from normlib import exercises as ex


def backward(dy, x, weight, eps=1e-5, *, n=None, mean_term=True, xhat_term=True):
    mu = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    x_hat = (x - mu) * rstd
    g = dy * weight
    n = x.shape[-1] if n is None else n(x)
    dx = g - (g.sum(-1, keepdim=True) / n if mean_term else 0)
    dx = rstd * (dx - (x_hat * (g * x_hat).sum(-1, keepdim=True) / n if xhat_term else 0))
    lead = tuple(range(x.dim() - 1))
    return dx, (dy * x_hat).sum(lead), dy.sum(lead)


def test_correct_backward_passes_in_float64_and_float32():
    result = ex.check_layer_norm_backward(backward)
    assert result.passed, result
    assert len(result.messages) == 5


@pytest.mark.parametrize("fn", [
    lambda dy, x, w, eps=1e-5: torch.autograd.grad(
        F.layer_norm(x.requires_grad_(), x.shape[-1:], w.requires_grad_(), None, eps),
        (x, w), dy) + (dy.sum(0),),
    lambda dy, x, w, eps=1e-5: (F.layer_norm(x := x.clone().requires_grad_(), x.shape[-1:],
                                            None, None, eps).backward(dy), x.grad)[1],
], ids=["autograd.grad", "backward"])
def test_autograd_is_refused(fn):
    result = ex.check_layer_norm_backward(fn)
    assert not result.passed and result.mistake == "shortcut", result


@pytest.mark.parametrize("kwargs, mistake", [
    (dict(mean_term=False), "missing_mean_term"),
    (dict(xhat_term=False), "missing_xhat_term"),
    (dict(n=lambda x: x.shape[-1] - 1), "wrong_n"),
    (dict(n=lambda x: x.numel()), "wrong_n"),             # not in the catalogue: the probes
], ids=["mean term", "x_hat term", "N - 1", "N = all elements"])
def test_the_three_classic_mistakes_are_named(kwargs, mistake):
    result = ex.check_layer_norm_backward(lambda dy, x, w, eps=1e-5: backward(dy, x, w, eps,
                                                                               **kwargs))
    assert not result.passed and result.mistake == mistake, result


def test_returning_something_else_is_one_line():
    result = ex.check_layer_norm_backward(lambda dy, x, w, eps=1e-5: dy)
    assert result.mistake == "not_a_triple" and "Traceback" not in str(result), result
    lead = lambda dy, x, w, eps=1e-5: (backward(dy, x, w)[0], dy * x, dy)  # noqa: E731
    assert ex.check_layer_norm_backward(lead).mistake == "grads_not_summed"
