"""Recompute lesson 04's cached warmup grid (normlib/data/warmup_grid.json): ``make warmup-grid``.

Every run of one placement trains in one ``train_ensemble`` call (batched members; Post-LN and
Pre-LN are different modules); about two minutes of CPU on one thread. A slice of the grid can be
retrained alone with ``train_runs`` (tests/test_warmup_grid.py compares one with the file).
The grid's reader (load, index, final_loss, stalled) is ``normlib.warmup_grid``.

The same file keeps lesson 11's Peri-LN runs (``PERI``): the two output-norm placements in the
grid's setting without warmup at peak lr 1e-2, their losses and, after training, the residual
stream's RMS after each block (``normlib.stream_rms``) on 64 probe sequences. Lesson 11 reads
them beside the grid's Pre-LN and Post-LN runs and trains one of them again.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import platform
from collections.abc import Sequence

import torch

from normlib._checks import check_int, check_number
from normlib.data import MarkovLanguage
from normlib.model import TinyTransformerLM, stream_rms
from normlib.schedules import cosine_with_warmup
from normlib.train import train_ensemble
from normlib.warmup_grid import PATH

# The lesson's experiment (notebooks/04, Section 4), and the axes of the grid around it.
SETTINGS = {
    "placements": ["post", "pre"],
    "warmups": [0, 10, 20, 40],
    "peak_lrs": [1e-3, 3e-3, 1e-2, 3e-2],
    "seeds": [0, 1, 2],                  # each fixes a run's initial weights and its batches
    "steps": 80,
    "model": {"vocab_size": 64, "d_model": 32, "n_layers": 12, "n_heads": 4, "max_seq_len": 16},
    "language": {"vocab_size": 64, "order": 1, "branching": 4, "seed": 0},
    "batch_size": 8,
    "seq_len": 16,
    "betas": [0.9, 0.98],
    "schedule": "cosine_with_warmup(warmup, steps): linear warmup, then cosine decay to 0",
    "decimals": 3,                       # losses (nats) and RMS, rounded
}

# Lesson 11's runs of the output-norm placements (Gemma's pre + post, OLMo 2's post only), in the
# grid's model, data, seeds and schedule; the probe is lesson 11's (sequences drawn with its seed).
PERI = {
    "placements": ["sandwich", "reordered"],
    "warmup": 0,
    "peak_lr": 1e-2,
    "probe": {"sequences": 64, "seed": 7},
}


def train_runs(placement: str, runs: Sequence[tuple[int, float, int]]
               ) -> tuple[torch.Tensor, list[TinyTransformerLM]]:
    """Train the grid's runs ``(warmup, peak_lr, seed)`` of one placement together; return their
    losses, (len(runs), steps), and the trained models.

    Each run's initial weights come from ``torch.manual_seed(seed)``, its batches from ``seed``, its
    learning rate from ``peak_lr * cosine_with_warmup(warmup, steps)``: exactly the lesson's runs.
    """
    fn = "train_runs"
    placements = SETTINGS["placements"] + PERI["placements"]
    if placement not in placements:
        raise ValueError(f"{fn}: placement must be one of {placements}, got {placement!r}")
    runs = list(runs)
    if not runs:
        raise ValueError(f"{fn}: runs must be a non-empty sequence of (warmup, peak_lr, seed)")
    steps = SETTINGS["steps"]
    for warmup, peak_lr, seed in runs:
        check_int(fn, "warmup", warmup, minimum=0)
        check_number(fn, "peak_lr", peak_lr, positive=True)
        check_int(fn, "seed", seed, minimum=0)
    models, schedules = [], []
    for warmup, peak_lr, seed in runs:
        torch.manual_seed(seed)                                   # the run's initial weights
        models.append(TinyTransformerLM(**SETTINGS["model"], placement=placement))
        cosine = cosine_with_warmup(warmup, steps)
        schedules.append(lambda step, cosine=cosine, peak_lr=peak_lr: peak_lr * cosine(step))
    # lr=1 and the peak inside each schedule: runs with different peaks share one batched call.
    losses = train_ensemble(models, MarkovLanguage(**SETTINGS["language"]), steps=steps, lr=1.0,
                            schedules=schedules, seeds=[seed for _, _, seed in runs],
                            batch_size=SETTINGS["batch_size"], seq_len=SETTINGS["seq_len"],
                            betas=tuple(SETTINGS["betas"]))
    return losses, models


def _cpu() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _rounded(values: torch.Tensor) -> list:
    d = SETTINGS["decimals"]
    return [[None if math.isnan(v) else round(v, d) for v in row] for row in values.tolist()]


def levels(language: MarkovLanguage) -> dict:
    """The lesson's reference lines, in nats: log V (knows nothing), the unigram level (predicts
    each token's frequency, ignores the context; estimated as in the lesson from 2,048 sequences
    drawn with seed 123) and the entropy floor (a perfect model)."""
    targets = language.sample(2048, SETTINGS["seq_len"] + 1, torch.Generator().manual_seed(123))
    freq = torch.bincount(targets[:, 1:].flatten(), minlength=language.vocab_size)
    freq = freq[freq > 0] / targets[:, 1:].numel()
    return {"log_V": language.uniform_loss, "unigram": -(freq * freq.log()).sum().item(),
            "entropy": language.entropy}


def generate() -> dict:
    """Train the whole grid (one batched call per placement); return the JSON-ready record."""
    S = SETTINGS
    losses = {}
    for placement in S["placements"]:
        runs = [(w, lr, s) for w in S["warmups"] for lr in S["peak_lrs"] for s in S["seeds"]]
        for run, row in zip(runs, _rounded(train_runs(placement, runs)[0]), strict=True):
            losses[(placement, *run)] = row
    return {
        "about": "Training losses (nats per token, every step; null after a divergence) of the "
                 "runs of lesson 04's warmup explorer, and under peri lesson 11's Peri-LN runs. "
                 "Regenerate: make warmup-grid (python -m tools.warmup_grid).",
        **S,
        "generated_with": {"torch": torch.__version__, "python": platform.python_version(),
                           "cpu": _cpu(), "torch_threads": torch.get_num_threads()},
        "levels": {k: round(v, 4) for k, v in levels(MarkovLanguage(**S["language"])).items()},
        "losses_index": "losses[placement][warmup][peak_lr][seed][step], in the order of the "
                        "lists above",
        "losses": [[[[losses[p, w, lr, s] for s in S["seeds"]] for lr in S["peak_lrs"]]
                    for w in S["warmups"]] for p in S["placements"]],
        "peri": peri(),
    }


def peri_probe() -> torch.Tensor:
    """The sequences on which lesson 11's stream RMS is measured, (64, 16): ``PERI["probe"]``."""
    return MarkovLanguage(**SETTINGS["language"]).sample(
        PERI["probe"]["sequences"], SETTINGS["seq_len"],
        torch.Generator().manual_seed(PERI["probe"]["seed"]))


def peri() -> dict:
    """Lesson 11's runs (``PERI``): per placement and seed, the losses and the trained model's
    residual-stream RMS after each block on the probe."""
    probe = peri_probe()
    losses, rms = [], []
    for placement in PERI["placements"]:
        runs = [(PERI["warmup"], PERI["peak_lr"], s) for s in SETTINGS["seeds"]]
        trained, models = train_runs(placement, runs)
        losses.append(_rounded(trained))
        rms.append(_rounded(torch.stack([stream_rms(m, probe) for m in models])))
    return {**PERI,
            "index": "losses[placement][seed][step], stream_rms[placement][seed][layer]; the seeds "
                     "and the setting are the grid's",
            "losses": losses, "stream_rms": rms}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=PATH, help=f"default {PATH}")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)             # as the lesson; the machine is shared
    record = generate()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
