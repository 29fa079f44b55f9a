import os
import random

import pytest
import torch

# The tests' tensors are tiny: one intra-op thread per process. Two threads per pytest-xdist
# worker oversubscribe the cores and spin; a 60-step training test took 2.4x as long that way.
torch.set_num_threads(1)

# The browser tests (tests/e2e, tests/e2e_classroom) run only under `make e2e` and
# `make e2e-classroom`, which set E2E=1 and name their folder.
collect_ignore = ([] if os.environ.get("E2E") == "1" else ["e2e", "e2e_classroom"])

# Tolerances for torch.testing.assert_close: float32 at its defaults, float64 to 1e-10.
# Half types: assert_close's rtol, and an atol of one ulp at the tensor's largest magnitude
# (finfo.eps * max|expected|). Each half kernel rounds its intermediates differently (torch's
# BatchNorm folds the affine into one multiply-add; gradients are sums rounded once), so entries
# near zero lose all relative digits while the error stays within one ulp of the tensor's scale.
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
HALF = (torch.bfloat16, torch.float16)


def close(actual, expected, **kw):
    """assert_close with the project's tolerance for the dtype (see above)."""
    if expected.dtype == torch.float64:
        kw = {"rtol": 1e-10, "atol": 1e-10, **kw}
    elif expected.dtype in HALF and expected.numel():
        scale = max(1.0, expected.detach().abs().max().float().item())
        kw = {"rtol": 1.6e-2 if expected.dtype == torch.bfloat16 else 1e-3,
              "atol": torch.finfo(expected.dtype).eps * scale, **kw}
    torch.testing.assert_close(actual, expected, **kw)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def device(request):
    """The device a library test runs on: the CPU, and a CUDA GPU too when one is present."""
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    random.seed(0)
    torch.manual_seed(0)


@pytest.fixture
def restore_matplotlib():
    """Each test's rcParams changes (reading / lecture mode) and figures are undone after it."""
    import matplotlib
    import matplotlib.pyplot as plt
    with matplotlib.rc_context():
        yield
    plt.close("all")
