"""Lesson 04's warmup explorer reads a grid of short training runs, computed once and cached.

Placement (Post-LN, Pre-LN) x warmup length x peak learning rate x seed, each an 80-step run of
the lesson's 12-layer ``TinyTransformerLM`` on its bigram language: the same model, data, Adam
betas and cosine schedule as the lesson's live experiment (Section 4), which is one slice of this
grid. Training all of it takes about two minutes of CPU, far more than a lesson may spend, so the
losses ship with the package (``normlib/data/warmup_grid.json``) and the lesson's widget only reads
them. The file records the grid, the settings, the torch version and the CPU it was computed on;
the repository's ``tools/warmup_grid.py`` (``make warmup-grid``) recomputes it.

The file also keeps lesson 11's runs of the output-norm placements in the same setting
(``record["peri"]``): their losses and the trained models' residual-stream RMS per layer.
"""

from __future__ import annotations

import json
import pathlib

import torch

__all__ = ["PATH", "final_loss", "index", "load", "stalled"]

PATH = pathlib.Path(__file__).resolve().parent / "data" / "warmup_grid.json"


def load(path: str | pathlib.Path = PATH) -> dict:
    """The cached grid: the JSON record, with ``losses`` as a float tensor
    (placements, warmups, peak_lrs, seeds, steps), NaN where a run had diverged, and lesson 11's
    ``peri["losses"]`` (placements, seeds, steps) and ``peri["stream_rms"]`` (placements, seeds,
    n_layers) as float tensors."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"load: no warmup grid at {path}; run `make warmup-grid` to create it")
    record = json.loads(path.read_text())
    record["losses"] = _tensor(record["losses"])
    for key in ("losses", "stream_rms"):
        record["peri"][key] = _tensor(record["peri"][key])
    return record


def _tensor(values) -> torch.Tensor:
    """Nested lists as the file stores them (null after a divergence) -> float32, NaN for null."""
    def fill(v):
        return [fill(x) for x in v] if isinstance(v, list) else float("nan") if v is None else v
    return torch.tensor(fill(values), dtype=torch.float32)


def index(grid: dict, placement: str, warmup: int, peak_lr: float) -> tuple[int, int, int]:
    """Where one setting sits in the (placements, warmups, peak_lrs, ...) tensors of a loaded grid,
    e.g. ``grid["losses"][index(grid, "post", 40, 1e-2)]``, its (seeds, steps) losses."""
    out = []
    for name, value, options in (("placement", placement, grid["placements"]),
                                 ("warmup", warmup, grid["warmups"]),
                                 ("peak_lr", peak_lr, grid["peak_lrs"])):
        if value not in options:
            raise ValueError(f"index: {name} must be one of the grid's {options}, got {value!r}")
        out.append(options.index(value))
    return tuple(out)


def final_loss(losses: torch.Tensor) -> torch.Tensor:
    """A run's final loss as in the lesson: the mean of its last 10 steps (float64), (...)."""
    return losses[..., -10:].double().mean(-1)


def stalled(grid: dict, losses: torch.Tensor) -> torch.Tensor:
    """True where a run ends within 0.1 nats of the unigram level (the lesson's stall), (...)."""
    return (final_loss(losses) - grid["levels"]["unigram"]).abs() < 0.1
