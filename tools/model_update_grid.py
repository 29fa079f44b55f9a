"""Recompute lesson 05's cached alpha/beta ablation (normlib/data/model_update_grid.json):
``make model-update-grid``.

Lesson 05 (Section 4, "The model update") measures how far the first Adam steps move a model's
last hidden state, ||F(x, θ_t) - F(x, θ_0)|| / ||F(x, θ_0)||, for Post-LN and DeepNorm. Its widget
takes DeepNorm apart: the residual weight alpha (at run time) and DeepNet's beta init (on or off),
each depth's 10 members trained together in one ``train_ensemble`` call. Too slow for the lesson's
budget (each step copies every member's weights back to measure it), so the numbers ship with the
package and the widget only reads them; the lesson compares the two corners it trains live
(Post-LN: alpha 1, no beta; DeepNorm: alpha (2N)^(1/4), beta on, at 24 layers) with the file.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
from collections.abc import Sequence

import torch

from normlib.data import MarkovLanguage
from normlib.model import TinyTransformerLM
from normlib.train import train_ensemble
from tools.warmup_grid import _cpu

PATH = pathlib.Path(__file__).resolve().parent.parent / "normlib" / "data" / "model_update_grid.json"

# The lesson's measurement (notebooks/05, Section 4), and the axes of the ablation around it.
SETTINGS = {
    "depths": [6, 12, 24],
    "alpha_exponents": [0, 0.125, 0.25, 0.375, 0.5],    # alpha = (2N)^k: 1, ..., DeepNet, ..., GLM-130B
    "beta_init": [False, True],
    "steps": 6,
    "lr": 1e-4,                          # constant: Adam, betas (0.9, 0.98)
    "seed": 0,                           # the initial weights (torch.manual_seed) and the batches
    "probe_seed": 11,                    # the fixed batch F is measured on, (16, 16) tokens
    "model": {"vocab_size": 64, "d_model": 32, "n_heads": 4, "max_seq_len": 16, "fused_norm": True},
    "language": {"vocab_size": 64, "order": 1, "branching": 4, "seed": 0},
    "batch_size": 8,
    "seq_len": 16,
    "decimals": 5,
}


def build(n_layers: int, alpha: float, beta_init: bool) -> TinyTransformerLM:
    """The lesson's model with residual weight ``alpha``; DeepNet's beta init if ``beta_init``,
    else Post-LN's initial weights (the same draws: seed ``SETTINGS['seed']``)."""
    cfg = {**SETTINGS["model"], "n_layers": n_layers}
    torch.manual_seed(SETTINGS["seed"])
    model = TinyTransformerLM(**cfg, placement="deepnorm", alpha=alpha)
    if not beta_init:
        torch.manual_seed(SETTINGS["seed"])
        post = TinyTransformerLM(**cfg, placement="post").state_dict()
        model.load_state_dict({k: v for k, v in post.items() if k in model.state_dict()})
    return model


def updates(n_layers: int) -> torch.Tensor:
    """The relative model update after steps 1..steps, (beta_init, alpha_exponents, steps)."""
    S = SETTINGS
    language = MarkovLanguage(**S["language"])
    probe = language.sample(16, 16, torch.Generator().manual_seed(S["probe_seed"]))     # (16, 16)
    models = [build(n_layers, (2 * n_layers) ** k, b) for b in S["beta_init"] for k in S["alpha_exponents"]]

    @torch.no_grad()
    def hidden(model):                   # the input of the output head, (16, 16, d_model)
        seen = []
        hook = model.lm_head.register_forward_hook(lambda mod, inp, out: seen.append(inp[0]))
        model(probe)
        hook.remove()
        return seen[0]

    h0 = [hidden(m) for m in models]
    out = torch.zeros(len(models), S["steps"])

    def on_step(step, members):
        for i, m in enumerate(members):
            out[i, step] = (hidden(m) - h0[i]).norm() / h0[i].norm()

    train_ensemble(models, language, steps=S["steps"], lr=S["lr"], seeds=[S["seed"]] * len(models),
                   batch_size=S["batch_size"], seq_len=S["seq_len"], on_step=on_step)
    return out.view(len(S["beta_init"]), len(S["alpha_exponents"]), S["steps"])


def generate() -> dict:
    """Measure every depth (one batched call each); return the JSON-ready record."""
    S = SETTINGS
    return {
        "about": "Relative model update ||F(x, θ_t) - F(x, θ_0)|| / ||F(x, θ_0)|| after Adam steps "
                 "1..steps (F: the last hidden state on a fixed batch) of lesson 05's model, with "
                 "residual weight alpha = (2N)^k and DeepNet's beta init on or off. Regenerate: "
                 "make model-update-grid (python -m tools.model_update_grid).",
        **S,
        "generated_with": {"torch": torch.__version__, "python": platform.python_version(),
                           "cpu": _cpu(), "torch_threads": torch.get_num_threads()},
        "updates_index": "updates[depth][beta_init][alpha_exponent][step], in the order of the lists above",
        "updates": [[[[round(v, S["decimals"]) for v in row] for row in b] for b in updates(n).tolist()]
                    for n in S["depths"]],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=PATH, help=f"default {PATH}")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)             # as the lesson; the machine is shared
    record = generate()
    args.out.write_text(json.dumps(record, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
