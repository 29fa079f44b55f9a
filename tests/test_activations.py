"""Activations, GLU variants and the FFNs against torch and the papers' numbers."""

import math

import pytest
import torch
import torch.nn.functional as F
from tolerances import DTYPES, close

import normlib as nl

PAIRS = [
    (nl.relu, F.relu),
    (lambda x: nl.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2)),
    (nl.leaky_relu, F.leaky_relu),
    (nl.gelu, F.gelu),
    (lambda x: nl.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
    (nl.silu, F.silu),
    (nl.swish, F.silu),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mine,ref", PAIRS)
def test_activation_matches_torch_forward_and_backward(mine, ref, dtype, device):
    x = (torch.randn(64, dtype=torch.float64) * 4).to(device, dtype)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ys = [mine(xs[0]), ref(xs[1])]
    close(ys[0], ys[1])
    assert ys[0].dtype == dtype
    for y in ys:
        y.sum().backward()
    close(xs[0].grad, xs[1].grad)


def test_gelu_approximation_errors_match_the_reference_numbers():
    x = torch.linspace(-6, 6, 120_001, dtype=torch.float64)
    exact = nl.gelu(x)
    tanh_err = (nl.gelu(x, approximate="tanh") - exact).abs()
    sigmoid_err = (x * torch.sigmoid(1.702 * x) - exact).abs()
    assert 4.5e-4 < tanh_err.max() < 4.9e-4                    # FACTS: about 4.7e-4
    assert abs(x[tanh_err.argmax()].item() - (-2.69)) < 0.05   # near x = -2.69
    assert 0.019 < sigmoid_err.max() < 0.021                   # FACTS: up to 0.020


def test_swish_interpolates_between_linear_and_relu():
    x = torch.linspace(-3, 3, 61, dtype=torch.float64)
    close(nl.swish(x, beta=0.0), x / 2)
    close(nl.swish(x, beta=50.0), F.relu(x), atol=1e-3, rtol=0)


@pytest.mark.parametrize("variant,gate_fn", [
    ("glu", torch.sigmoid), ("bilinear", lambda g: g), ("reglu", F.relu),
    ("geglu", F.gelu), ("swiglu", F.silu)])
def test_glu_variants_follow_shazeer(variant, gate_fn):
    gate, up = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    close(nl.glu_variant(gate, up, variant), gate_fn(gate) * up)


def test_geglu_tanh_is_gemmas_gate():
    # GEGLU with GELU's tanh form, HF's activation "gelu_pytorch_tanh" (Gemma 1 to 3)
    gate, up = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    close(nl.glu_variant(gate, up, "geglu_tanh"), F.gelu(gate, approximate="tanh") * up)
    assert "geglu_tanh" not in nl.GLU_VARIANTS and "geglu_tanh" in nl.FFNS


def test_glu_matches_torch_glu():
    gate, up = torch.randn(3, 6), torch.randn(3, 6)
    # F.glu(cat(a, b)) = a * sigmoid(b): a is the "up" half, b the gate.
    close(nl.glu_variant(gate, up, "glu"), F.glu(torch.cat([up, gate], -1), dim=-1))


def test_feedforward_structure_and_math():
    ffn = nl.FeedForward(16, 64, activation="gelu")
    x = torch.randn(2, 3, 16)
    close(ffn(x), ffn.w2(F.gelu(ffn.w1(x))))
    t5 = nl.FeedForward(16, 64, bias=False)
    assert t5.w1.bias is None and sum(p.numel() for p in t5.parameters()) == 2 * 16 * 64


def test_glu_feedforward_is_llama_swiglu():
    ffn = nl.GLUFeedForward(16, 40)
    x = torch.randn(2, 3, 16)
    close(ffn(x), ffn.w2(F.silu(ffn.w1(x)) * ffn.w3(x)))
    assert all(getattr(ffn, n).bias is None for n in ("w1", "w2", "w3"))
    assert ffn.w1.weight.shape == (40, 16) and ffn.w2.weight.shape == (16, 40)


@pytest.mark.parametrize("dim,multiple_of,mult,expected", [
    (4096, 256, None, 11008),        # LLaMA 7B
    (8192, 4096, 1.3, 28672),        # LLaMA-2 70B
    (4096, 1024, 1.3, 14336),        # LLaMA-3 8B
    (16384, 4096, 1.2, 53248),       # LLaMA-3.1 405B
])
def test_llama_ffn_hidden_dim(dim, multiple_of, mult, expected):
    assert nl.llama_ffn_hidden_dim(dim, multiple_of, mult) == expected


def test_llama_7b_ffn_parameter_count():
    hidden = nl.llama_ffn_hidden_dim(4096)
    with torch.device("meta"):                      # shapes only, no memory
        ffn = nl.GLUFeedForward(4096, hidden)
    assert sum(p.numel() for p in ffn.parameters()) == 3 * 4096 * 11008 == 135_266_304
    # the 2/3 rule: close to the parameters of a plain 4d FFN (2 * 4096 * 16384 = 134,217,728)
    assert math.isclose(3 * 4096 * hidden, 2 * 4096 * 4 * 4096, rel_tol=0.01)


@pytest.mark.parametrize("mine,ref", PAIRS[:3])
def test_relu_and_leaky_relu_gradient_at_exactly_zero_is_torchs(mine, ref):
    # Review finding 13: torch's kernels take the x > 0 branch, so the gradient at 0 is 0 (ReLU)
    # or negative_slope (Leaky ReLU); clamp_min and x >= 0 passed 1.
    xs = [torch.tensor([-1.0, 0.0, 1.0], requires_grad=True) for _ in range(2)]
    mine(xs[0]).sum().backward()
    ref(xs[1]).sum().backward()
    assert torch.equal(xs[0].grad, xs[1].grad)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mine,formula", [
    (nl.relu, lambda x: torch.where(x <= 0, 0.0, x)),
    (nl.leaky_relu, lambda x: torch.where(x > 0, x, x * 0.01)),
    (lambda x: nl.leaky_relu(x, -0.5), lambda x: torch.where(x > 0, x, x * -0.5))])
def test_relu_and_leaky_relu_are_their_where_formulas_bit_for_bit(mine, formula, dtype):
    # One torch op instead of torch.where (slow on CPU): every value and gradient the same, so the
    # lessons' trained numbers did not move when the library switched.
    x = torch.cat([torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 3,
                   torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-45, -1e-45])]).to(dtype)
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ys = [mine(xs[0]), formula(xs[1])]
    assert torch.equal(ys[0].isnan(), ys[1].isnan())
    assert torch.equal(ys[0].nan_to_num(), ys[1].nan_to_num())
    assert torch.equal(ys[0].signbit(), ys[1].signbit())
    for y in ys:
        y.backward(grad)
    assert torch.equal(xs[0].grad, xs[1].grad)


@pytest.mark.parametrize("mine,ref", PAIRS)
def test_nan_and_infinities_come_out_as_torchs(mine, ref):
    # a NaN must stay NaN (a ReLU written with x > 0 turned it into 0, hiding a diverged run).
    # The reference runs in float64: on a CPU with AVX-512, torch 2.13 hands float32 F.gelu to
    # oneDNN, which returns NaN for +inf (ONEDNN_MAX_CPU_ISA=AVX2, or float64, gives +inf, the
    # limit of x * Phi(x)); ATen's own float64 kernels answer the same on every CPU. NaN and
    # infinities must match exactly, finite values to float32's rounding.
    x = torch.tensor([math.nan, math.inf, -math.inf, 0.0, 1e30, -1e30])
    torch.testing.assert_close(mine(x), ref(x.double()).float(), equal_nan=True)


def test_leaky_relu_takes_a_negative_slope_as_torch():
    x = torch.tensor([-2.0, 0.0, 3.0])
    assert torch.equal(nl.leaky_relu(x, -0.5), F.leaky_relu(x, -0.5))
