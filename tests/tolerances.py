"""The library tests' tolerances, in a plain module: a test that imports from conftest.py gets
whichever conftest module was imported last, which is notebooks/conftest.py in a session that
collects both folders (`pytest tests notebooks`: 13 test modules failed to import)."""

import torch

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
