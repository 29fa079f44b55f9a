"""Whether a saved image is what the code draws now: the one comparison behind the saved-plot check
(notebooks/conftest.py, during nbval) and the saved-widget check (tests/test_widgets.py).

Two PNGs match when they have the same size in pixels and at most ``MAX_CHANGED`` of the pixels
differ by more than ``LEVEL`` in any channel (0-255). CONTRIBUTING.md ("Saved images") says how the
tolerance was measured.
"""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

LEVEL = 64            # a pixel counts as changed when a channel moves by more than this
MAX_CHANGED = 0.005   # the fraction of changed pixels a reproduced image may have


def pixels(png: str | bytes) -> np.ndarray:
    """RGBA pixels (H, W, 4) of a PNG given as bytes or as base64 text (a notebook's image/png)."""
    data = base64.b64decode(png) if isinstance(png, str) else png
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGBA"), dtype=np.int16)


def compare(saved: str | bytes, now: str | bytes) -> tuple[bool, str, dict]:
    """Whether image ``now`` reproduces ``saved``, a message, and the figures measured."""
    a, b = pixels(saved), pixels(now)
    if a.shape != b.shape:
        return False, f"size {b.shape[1]}x{b.shape[0]} px, saved {a.shape[1]}x{a.shape[0]} px", {
            "saved": a.shape[:2], "now": b.shape[:2]}
    changed = float((np.abs(a - b).max(-1) > LEVEL).mean())
    return changed <= MAX_CHANGED, (f"{changed:.3%} of the pixels differ "
                                    f"(at most {MAX_CHANGED:.2%} may)"), {"size": a.shape[:2],
                                                                          "changed": changed}
