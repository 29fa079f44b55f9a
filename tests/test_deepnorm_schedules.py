"""DeepNorm constants and init (DeepNet paper), and the warmup schedules."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import normlib as nl


def test_deepnorm_constants_table():
    N, M = 18, 18
    enc = nl.deepnorm_constants(num_encoder_layers=N)["encoder"]
    dec = nl.deepnorm_constants(num_decoder_layers=M)["decoder"]
    assert enc == pytest.approx(((2 * N) ** 0.25, (8 * N) ** -0.25))
    assert dec == pytest.approx(((2 * M) ** 0.25, (8 * M) ** -0.25))
    both = nl.deepnorm_constants(num_encoder_layers=N, num_decoder_layers=M)
    assert both["encoder"] == pytest.approx((0.81 * (N**4 * M) ** (1 / 16),
                                             0.87 * (N**4 * M) ** (-1 / 16)))
    assert both["decoder"] == pytest.approx(((3 * M) ** 0.25, (12 * M) ** -0.25))
    # 1,000 layers, as the title: alpha ~ 6.69, beta ~ 0.106 (decoder-only)
    assert nl.deepnorm_constants(num_decoder_layers=1000)["decoder"] == pytest.approx(
        (2000 ** 0.25, 8000 ** -0.25))
    assert set(enc) and set(nl.deepnorm_constants(num_encoder_layers=6)) == {"encoder"}


def test_deepnorm_init_gains():
    block = nl.TransformerBlock(256, 4, placement="deepnorm", ffn="relu", d_ff=1024)
    beta = 0.25
    nl.deepnorm_init_(block, beta)

    def gain(linear):
        fan_out, fan_in = linear.weight.shape
        return linear.weight.std().item() / math.sqrt(2 / (fan_in + fan_out))

    for name in ("q_proj", "k_proj"):
        assert gain(getattr(block.attn, name)) == pytest.approx(1.0, rel=0.03)
    for lin in (block.attn.v_proj, block.attn.o_proj, block.ffn.w1, block.ffn.w2):
        assert gain(lin) == pytest.approx(beta, rel=0.03)
    assert torch.equal(block.ffn.w1.bias, torch.zeros(1024)) or block.ffn.w1.bias.abs().max() < 1


def test_tiny_lm_deepnorm_uses_decoder_constants():
    lm = nl.TinyTransformerLM(32, 32, 6, 4, 16, placement="deepnorm")
    alpha, beta = nl.deepnorm_constants(num_decoder_layers=6)["decoder"]
    assert all(b.alpha == pytest.approx(alpha) for b in lm.blocks)
    assert lm.deepnorm_beta == pytest.approx(beta)


def test_linear_warmup():
    f = nl.linear_warmup(4)
    assert [f(s) for s in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    assert nl.linear_warmup(0)(0) == 1.0


def test_inverse_sqrt_is_vaswani():
    f = nl.inverse_sqrt(512, 4000)
    peak = 512 ** -0.5 * 4000 ** -0.5
    assert f(4000) == pytest.approx(peak)
    assert max(f(s) for s in range(0, 20000, 50)) == pytest.approx(peak)
    assert f(16000) == pytest.approx(peak / 2)          # 1/sqrt(step) decay
    assert f(0) == f(1)


def test_cosine_with_warmup():
    f = nl.cosine_with_warmup(10, 110, min_ratio=0.1)
    assert f(0) == 0.0 and f(5) == 0.5 and f(10) == 1.0
    assert f(60) == pytest.approx(0.1 + 0.9 * 0.5)       # half-way down the cosine
    assert f(110) == pytest.approx(0.1) and f(1000) == pytest.approx(0.1)   # the floor


@given(st.integers(1, 200), st.integers(0, 500))
def test_schedules_are_monotone_during_warmup(warmup, total_extra):
    for f in (nl.linear_warmup(warmup), nl.inverse_sqrt(64, warmup),
              nl.cosine_with_warmup(warmup, warmup + total_extra)):
        values = [f(s) for s in range(1, warmup + 1)]
        assert all(a <= b for a, b in zip(values, values[1:], strict=False))


def test_schedule_works_with_lambdalr():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, nl.linear_warmup(2))
    lrs = []
    for _ in range(3):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == [0.0, 0.5, 1.0]
