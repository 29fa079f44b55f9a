import os
import random

import pytest


# torch is imported where a test needs it, not here: pytest-xdist's controller, which runs no test,
# loads this file before it starts the workers, and importing torch there kept both cores waiting
# (`pytest tests -n 2` collecting nothing: 12.3-13.3 s, 8.5-10.0 s without it).
def pytest_sessionstart(session):
    if session.config.getoption("numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        return                                              # the controller
    import torch

    # The tests' tensors are tiny: one intra-op thread per process. Two threads per pytest-xdist
    # worker oversubscribe the cores and spin; a 60-step training test took 2.4x as long that way.
    torch.set_num_threads(1)


# The browser tests (tests/e2e, tests/e2e_classroom) run only under `make e2e` and
# `make e2e-classroom`, which set E2E=1 and name their folder.
collect_ignore = ([] if os.environ.get("E2E") == "1" else ["e2e", "e2e_classroom"])


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    """The device a library test runs on: the CPU, and a CUDA GPU too when one is present."""
    import torch
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    import torch
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
