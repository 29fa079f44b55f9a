"""tools.images.compare, the saved-image check: a figure drawn again matches itself, a stale one
(another size, or a curve that moved) does not."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tools.images import compare  # noqa: E402


def _png(slope: float = 1.0, size=(5.6, 2.88)) -> bytes:
    fig, ax = plt.subplots(figsize=size)
    ax.plot([0, 1, 2, 3], [0, slope, 2 * slope, 3 * slope], lw=2)
    ax.set(xlabel="step", ylabel="loss", title="a figure")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def test_a_figure_drawn_again_matches(restore_matplotlib):
    ok, _, figures = compare(_png(), _png())
    assert ok and figures["changed"] == 0.0


def test_a_stale_figure_fails(restore_matplotlib):
    ok, message, _ = compare(_png(), _png(size=(5.6, 2.92)))
    assert not ok and "size" in message
    ok, message, figures = compare(_png(), _png(slope=1.3))
    assert not ok and figures["changed"] > 0.005, message
