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
