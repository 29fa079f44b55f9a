"""Saved plots must be what the code draws now.

nbval compares text outputs and skips images (a PNG's bytes change with any library version). This
plugin compares them in the same run, so that a stale plot fails ``make nbval`` without running any
notebook twice: after nbval has executed a cell, each image/png the cell produced now is decoded and
compared with the one saved in the notebook, in order. They must have the same size in pixels, and
at most ``MAX_CHANGED`` of the pixels may differ by more than ``LEVEL`` in any channel (0-255).

The tolerance is measured (CONTRIBUTING.md, "Saved images"): re-executed notebooks compared with
themselves under the two numeric configurations of ``make nbval`` and ``make test-portable`` differ
in at most a few hundredths of a percent of the pixels (anti-aliased edges of lines whose data move
in their last digits), while the stale images this check was written for differed in size by 1-4
pixels or in about 5% of the pixels. ``NBVAL_IMAGE_STATS=path`` appends each comparison's figures to
``path`` (JSON lines), which is how the tolerance was measured.

Widget images live in the notebook's widget state, not in cell outputs: tests/test_saved_images.py
checks those.
"""

from __future__ import annotations

import base64
import io
import json
import os

import numpy as np
import pytest
from PIL import Image

LEVEL = 64            # a pixel counts as changed when a channel moves by more than this
MAX_CHANGED = 0.002   # the fraction of changed pixels a reproduced image may have


def _pixels(b64: str) -> np.ndarray:
    with Image.open(io.BytesIO(base64.b64decode(b64))) as im:
        return np.asarray(im.convert("RGBA"), dtype=np.int16)


def _images(outputs) -> list[str]:
    return [out["data"]["image/png"] for out in outputs
            if out.get("output_type") in ("display_data", "execute_result")
            and "image/png" in out.get("data", {})]


def compare(saved: str, now: str) -> tuple[bool, str, dict]:
    """Whether image ``now`` reproduces ``saved`` (both base64 PNG), a message, and the figures."""
    a, b = _pixels(saved), _pixels(now)
    if a.shape != b.shape:
        return False, f"size {b.shape[1]}x{b.shape[0]} px, saved {a.shape[1]}x{a.shape[0]} px", {
            "saved": a.shape[:2], "now": b.shape[:2]}
    changed = float((np.abs(a - b).max(-1) > LEVEL).mean())
    ok = changed <= MAX_CHANGED
    return ok, f"{changed:.3%} of the pixels differ (at most {MAX_CHANGED:.2%} may)", {
        "size": a.shape[:2], "changed": changed}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    cell = getattr(item, "cell", None)
    now_outputs = getattr(item, "test_outputs", None)
    if cell is None or now_outputs is None or cell.get("execution_count") is None:
        return result
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
