"""Saved plots must be what the code draws now (and kernels are forked, and started again if they die).

nbval compares text outputs and skips images (a PNG's bytes change with any library version). This
plugin compares them in the same run, so that a stale plot fails ``make nbval`` without running any
notebook twice: after nbval has executed a cell, each image/png the cell produced now is decoded and
compared with the one saved in the notebook, in order, by ``tools.images.compare`` (same size, nearly
the same pixels). ``NBVAL_IMAGE_STATS=path`` appends each comparison's figures to ``path`` (JSON
lines), which is how the tolerance was measured (CONTRIBUTING.md, "Saved images").

A cell marked ``# NBVAL_IGNORE_OUTPUT`` is not compared here either: its plot shows what may vary
with the CPU (a long training run), exactly as its text does. Widget images live in the notebook's
widget state, not in cell outputs: tests/test_widgets.py checks
those.
"""

from __future__ import annotations

import json
import os

import nbval.kernel
import pytest

from tools.forked_kernels import ForkedKernelManager
from tools.images import compare
from tools.nbval_kernel import retrying

# A kernel that dies before it answers (two workers' kernels given the same port) is started once
# more, with its stderr in a warning: tools/nbval_kernel.py.
nbval.kernel.start_new_kernel = retrying(nbval.kernel.start_new_kernel)
# Each kernel is forked from a server that has imported torch, matplotlib, normlib (and transformers)
# once per worker, instead of importing them itself (about 3 s a notebook): tools/forked_kernels.py.
nbval.kernel.KernelManager = ForkedKernelManager


def _images(outputs) -> list[str]:
    return [out["data"]["image/png"] for out in outputs
            if out.get("output_type") in ("display_data", "execute_result")
            and "image/png" in out.get("data", {})]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    cell = getattr(item, "cell", None)
    now_outputs = getattr(item, "test_outputs", None)
    if cell is None or now_outputs is None or cell.get("execution_count") is None:
        return result
    if not getattr(item, "options", {}).get("check", True):
        return result            # # NBVAL_IGNORE_OUTPUT: what the cell shows may vary by machine
    saved, now = _images(cell.get("outputs", [])), _images(now_outputs)
    problems = []
    if len(saved) != len(now):
        problems.append(f"{len(now)} image(s) drawn, {len(saved)} saved")
    stats = os.environ.get("NBVAL_IMAGE_STATS")
    for i, (s, n) in enumerate(zip(saved, now, strict=False)):
        ok, message, figures = compare(s, n)
        if stats:
            with open(stats, "a") as f:
                f.write(json.dumps({"cell": item.nodeid, "image": i, **figures}) + "\n")
        if not ok:
            problems.append(f"image {i + 1}: {message}")
    if problems:
        pytest.fail("The saved plot is not what the cell draws now (stale: re-execute the notebook "
                    "with `make execute NB=...`): " + "; ".join(problems), pytrace=False)
    return result
