"""normlib's BatchNorm, LayerNorm and RMSNorm against torch's own, forward and backward."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from tolerances import DTYPES, HALF, close
from torch import nn

import normlib as nl

BN_SHAPES = [(4, 3), (5, 3, 7), (2, 3, 4, 5)]


def _grads(f, *tensors):
    """Output of f and the gradients of sum(out * fixed random weights) w.r.t. tensors."""
    tensors = [t.detach().clone().requires_grad_(True) for t in tensors]
    out = f(*tensors)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out)
    (out * g).sum().backward()
    return out, [t.grad for t in tensors]


def _inputs(shape, dtype, C):
    x = (torch.randn(shape, dtype=torch.float64) * 2 + 0.5).to(dtype)
    w = (torch.rand(C, dtype=torch.float64) + 0.5).to(dtype)
    b = torch.randn(C, dtype=torch.float64).to(dtype)
    return x, w, b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_torch(shape, dtype, training, device):
    C = shape[1]
    x, w, b = (t.to(device) for t in _inputs(shape, dtype, C))
    stats = (torch.randn(C, dtype=dtype, device=device),
             torch.rand(C, dtype=dtype, device=device) + 0.5)
    mine_stats = [s.clone() for s in stats]
    ref_stats = [s.clone() for s in stats]
    mine, mine_g = _grads(lambda x, w, b: nl.batch_norm(x, *mine_stats, w, b, training, 0.1, 1e-5),
                          x, w, b)
    ref, ref_g = _grads(lambda x, w, b: F.batch_norm(x, *ref_stats, w, b, training, 0.1, 1e-5),
                        x, w, b)
    close(mine, ref)
    for a, e in zip(mine_g, ref_g, strict=True):
        close(a, e)
    for a, e in zip(mine_stats, ref_stats, strict=True):   # running stats updated alike
        close(a, e)


@pytest.mark.parametrize("momentum", [0.1, 0.5, None])
@pytest.mark.parametrize("shape", BN_SHAPES)
def test_batchnorm_module_several_steps_then_eval(shape, momentum):
    C = shape[1]
    ref = (nn.BatchNorm1d if len(shape) < 4 else nn.BatchNorm2d)(C, momentum=momentum).double()
    mine = nl.BatchNorm(C, momentum=momentum).double()
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
        ref.bias.normal_()
        mine.load_state_dict(ref.state_dict())
    for step in range(5):
        x = torch.randn(shape, dtype=torch.float64) * (step + 1) + step
        close(mine(x), ref(x))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(mine, name), getattr(ref, name), rtol=1e-10, atol=1e-10)
    assert int(mine.num_batches_tracked) == 5
    mine.eval()
    ref.eval()
    x = torch.randn(shape, dtype=torch.float64)
    close(mine(x), ref(x))


def test_batchnorm_running_var_is_unbiased_and_normalization_biased():
    x = torch.tensor([[1.0], [2.0], [3.0], [6.0]], dtype=torch.float64)   # (B=4, C=1)
    bn = nl.BatchNorm(1, momentum=1.0).double()
    y = bn(x)
    assert torch.allclose(bn.running_var, x.var(0, unbiased=True))         # 4.6667
    assert torch.allclose(y.var(0, unbiased=False), torch.ones(1, dtype=torch.float64), atol=1e-4)


def test_batchnorm_without_running_stats_uses_batch_stats_in_eval():
    ref, mine = nn.BatchNorm2d(3, track_running_stats=False), nl.BatchNorm(3, track_running_stats=False)
    mine.eval()
    ref.eval()
    x = torch.randn(4, 3, 2, 2)
    close(mine(x), ref(x))
    assert mine.running_mean is None and len(list(mine.buffers())) == 0


def test_batchnorm_state_dict_loads_into_torch():
    mine = nl.BatchNorm(4)
    mine(torch.randn(8, 4))
    ref = nn.BatchNorm1d(4)
    ref.load_state_dict(mine.state_dict())
    close(ref.running_mean, mine.running_mean)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,normalized_shape", [((4, 8), 8), ((2, 5, 7), (7,)),
                                                    ((2, 3, 4, 6), (4, 6)), ((3, 5), 5)])
def test_layer_norm_matches_torch(shape, normalized_shape, dtype, device):
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    x = (torch.randn(shape, dtype=torch.float64) * 3 + 1).to(device, dtype)
    w = (torch.rand(ns, dtype=torch.float64) + 0.5).to(device, dtype)
    b = torch.randn(ns, dtype=torch.float64).to(device, dtype)
    mine, mine_g = _grads(lambda x, w, b: nl.layer_norm(x, normalized_shape, w, b), x, w, b)
    ref, ref_g = _grads(lambda x, w, b: F.layer_norm(x, ns, w, b), x, w, b)
    close(mine, ref)
    assert mine.dtype == dtype
    for a, e in zip(mine_g, ref_g, strict=True):
        close(a, e)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [None, 1e-6])
@pytest.mark.parametrize("shape,normalized_shape", [((4, 8), 8), ((2, 5, 7), (7,)),
                                                    ((2, 3, 4, 6), (4, 6))])
def test_rms_norm_matches_torch(shape, normalized_shape, eps, dtype, device):
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    x = (torch.randn(shape, dtype=torch.float64) * 3 + 1).to(device, dtype)
    w = (torch.rand(ns, dtype=torch.float64) + 0.5).to(device, dtype)
    mine, mine_g = _grads(lambda x, w: nl.rms_norm(x, normalized_shape, w, eps), x, w)
    ref, ref_g = _grads(lambda x, w: F.rms_norm(x, ns, w, eps), x, w)
    close(mine, ref)
    assert mine.dtype == dtype
    for a, e in zip(mine_g, ref_g, strict=True):
        close(a, e)


@pytest.mark.parametrize("dtype,eps_dtype", [(torch.float64, torch.float64),
                                              (torch.float32, torch.float32)])
def test_rms_norm_eps_none_is_finfo_eps_of_the_computation_dtype(dtype, eps_dtype):
    x = torch.full((1, 4), 1e-4, dtype=dtype)    # mean(x^2) = 1e-8 is near eps(float32)
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + torch.finfo(eps_dtype).eps)
    close(nl.rms_norm(x, 4), expected)


@pytest.mark.parametrize("dtype", HALF)
def test_rms_norm_eps_none_on_small_half_rows_matches_torch(dtype):
    # Rows with RMS near 1e-2: mean(x^2) ~ 1e-4 is below fp16's eps (9.8e-4) and bf16's (7.8e-3),
    # so finfo(x.dtype).eps would shrink the output by up to 3x; torch (and normlib) add float32's.
    x = (torch.randn(4, 64, dtype=torch.float64) * 1e-2).to(dtype)
    xf = x.float()
    expected = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True)
                                 + torch.finfo(torch.float32).eps)).to(dtype)
    assert torch.equal(F.rms_norm(x, (64,)), expected)               # torch's rule, measured
    assert torch.equal(nl.rms_norm(x, 64), expected)
    ref, mine = nn.RMSNorm(64).to(dtype), nl.RMSNorm(64).to(dtype)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
    mine.load_state_dict(ref.state_dict())
    close(mine(x), ref(x))                  # the weight order differs by an ulp (next test)
    wrong = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + torch.finfo(dtype).eps)).to(dtype)
    assert (wrong.float() - expected.float()).abs().max() > 0.5      # what the old rule gave


@pytest.mark.parametrize("dtype", HALF)
def test_rms_norm_weight_order_llama_in_normlib_gemma_in_torch(dtype):
    x = (torch.randn(64, 256, dtype=torch.float64) * 3).to(dtype)
    w = (1 + 0.5 * torch.randn(256, dtype=torch.float64)).to(dtype)
    xf = x.float()
    normalized = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
    llama = normalized.to(dtype) * w                    # cast back, then weight (HF LlamaRMSNorm)
    gemma = (normalized * w.float()).to(dtype)          # weight in float32, one cast at the end
    assert torch.equal(nl.rms_norm(x, 256, w, 1e-6), llama)
    assert torch.equal(F.rms_norm(x, (256,), w, 1e-6), gemma)       # torch 2.13 CPU, measured
    assert (llama != gemma).float().mean() > 0.1                     # about a quarter differ
    close(llama, gemma)


def test_rms_norm_half_is_computed_in_float32():
    # fp16 squares overflow above 256: x = 300 gives x^2 = 90000 > 65504 (fp16 max) -> inf.
    x = torch.full((2, 16), 300.0, dtype=torch.float16)
    y = nl.rms_norm(x, 16)
    assert y.dtype == torch.float16 and torch.isfinite(y).all()
    close(y, torch.ones_like(y))
    naive = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)      # no upcast: zeros
    assert (naive == 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_modules_match_torch_modules(dtype, device):
    x = torch.randn(2, 5, 12, dtype=torch.float64).to(device, dtype)
    pairs = [(nl.LayerNorm(12), nn.LayerNorm(12)),
             (nl.LayerNorm(12, bias=False), nn.LayerNorm(12, bias=False)),
             (nl.LayerNorm(12, elementwise_affine=False), nn.LayerNorm(12, elementwise_affine=False)),
             (nl.RMSNorm(12), nn.RMSNorm(12)), (nl.RMSNorm(12, eps=1e-6), nn.RMSNorm(12, eps=1e-6)),
             (nl.RMSNorm(12, elementwise_affine=False), nn.RMSNorm(12, elementwise_affine=False))]
    for mine, ref in pairs:
        assert [n for n, _ in mine.named_parameters()] == [n for n, _ in ref.named_parameters()]
        with torch.no_grad():
            for p in ref.parameters():
                p.uniform_(0.5, 1.5)
        mine.load_state_dict(ref.state_dict())
        close(mine.to(device, dtype)(x), ref.to(device, dtype)(x))


def test_parameter_and_buffer_counts():
    bn, ln = nl.BatchNorm(768), nl.LayerNorm(768)
    assert sum(p.numel() for p in bn.parameters()) == sum(p.numel() for p in ln.parameters()) == 1536
    assert sum(b.numel() for b in bn.buffers()) == 768 * 2 + 1     # running mean, var, count
    assert list(ln.buffers()) == []


rows = st.lists(st.floats(-100, 100, allow_nan=False), min_size=2, max_size=16)


@settings(max_examples=60, deadline=None)
@given(rows, st.floats(-50, 50), st.floats(0.01, 100))
def test_layer_norm_is_shift_and_scale_invariant(row, shift, scale):
    x = torch.tensor(row, dtype=torch.float64)[None]
    if x.std() < 1e-3:
        return     # a (near-)constant row: eps dominates, invariance does not apply
    y = nl.layer_norm(x, x.shape[-1], eps=0.0)
    close(nl.layer_norm(x * scale + shift, x.shape[-1], eps=0.0), y, rtol=1e-6, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(rows, st.floats(0.01, 100))
def test_rms_norm_is_scale_invariant(row, scale):
    x = torch.tensor(row, dtype=torch.float64)[None]
    if x.abs().max() < 1e-3:
        return
    close(nl.rms_norm(x * scale, x.shape[-1], eps=0.0), nl.rms_norm(x, x.shape[-1], eps=0.0),
          rtol=1e-6, atol=1e-6)


def test_rms_norm_is_not_shift_invariant():
    x = torch.randn(8, 16, dtype=torch.float64)
    assert not torch.allclose(nl.rms_norm(x + 3.0, 16), nl.rms_norm(x, 16), atol=1e-2)
    close(nl.layer_norm(x + 3.0, 16), nl.layer_norm(x, 16), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [1, 2])
def test_layer_norm_tiny_rows_float64(n):
    # One or two features per row: the output is 0 (n=1) or +-1 (n=2) for any input; the gradient
    # with respect to x is (nearly) zero. Compared in float64, where rounding noise stays tiny.
    x = torch.randn(3, n, dtype=torch.float64)
    mine, mine_g = _grads(lambda x: nl.layer_norm(x, n), x)
    ref, ref_g = _grads(lambda x: F.layer_norm(x, (n,)), x)
    close(mine, ref)
    close(mine_g[0], ref_g[0])


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")   # torch's, unfused
@pytest.mark.parametrize("dtype", HALF)
def test_rms_norm_keeps_a_half_input_dtype_with_a_float32_weight(dtype):
    # Review finding 8: y * weight promoted a bf16 x to float32; F.rms_norm and normlib's own
    # layer_norm return x's dtype. The weight is cast to x's dtype after normalizing (LLaMA's order).
    x = torch.randn(3, 16, dtype=torch.float64).to(dtype)
    w = torch.rand(16) + 0.5                                               # float32
    y = nl.rms_norm(x, 16, w, 1e-5)
    assert y.dtype == F.rms_norm(x, (16,), w, 1e-5).dtype == nl.layer_norm(x, 16, w).dtype == dtype
    assert torch.equal(y, nl.rms_norm(x, 16, w.to(dtype), 1e-5))
    assert nl.RMSNorm(16)(x).dtype == nn.RMSNorm(16)(x).dtype == dtype


@pytest.mark.parametrize("shape", [(0, 3), (0, 3, 5)])
def test_batchnorm_on_an_empty_batch_returns_it_as_torch(shape):
    # Review finding 14: torch returns an empty batch in training mode and leaves the running
    # statistics as they were; normlib raised "Expected more than 1 value per channel".
    mine, ref = nl.BatchNorm(3), nn.BatchNorm1d(3)
    x = torch.randn(shape)
    y, expected = mine(x), ref(x)
    assert y.shape == expected.shape == shape
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert torch.equal(getattr(mine, name), getattr(ref, name)), name
