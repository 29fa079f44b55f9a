"""A small, seeded training loop for the lessons' language-model experiments (CPU)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_int, check_number
from .data import MarkovLanguage

__all__ = ["lm_loss", "train_lm"]


def lm_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy in nats: predict tokens[:, 1:] from tokens[:, :-1]."""
    logits = model(tokens[:, :-1])                                      # (B, T-1, V)
    return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())


def train_lm(
    model: nn.Module,
    language: MarkovLanguage,
    *,
    steps: int,
    lr: float,
    schedule: Callable[[int], float] | None = None,
    batch_size: int = 16,
    seq_len: int = 32,
    betas: tuple[float, float] = (0.9, 0.98),
    seed: int = 0,
    on_step: Callable[[int, nn.Module], None] | None = None,
) -> list[float]:
    """Train ``model`` with Adam on batches of ``language`` and return the loss of every step.

    Args:
        steps: optimizer steps; lr: peak learning rate; schedule: ``step -> multiplier`` for
            LambdaLR (None: constant lr); betas: Adam's (0.9, 0.98), as Xiong et al. 2020.
        batch_size, seq_len: each batch is (batch_size, seq_len + 1) tokens.
        seed: seeds the batches (the model's initialization is the caller's).
        on_step: called as on_step(step, model) after every update (e.g. to record a statistic).
    A loss that becomes NaN or inf is recorded as NaN and training stops there (diverged).
    """
    check_int("train_lm", "steps", steps, minimum=1)
    check_number("train_lm", "lr", lr, positive=True)
    gen = torch.Generator().manual_seed(seed)           # batches are drawn on the CPU
    device = next(model.parameters()).device
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=betas)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule) if schedule is not None else None
    model.train()
    losses: list[float] = []
    for step in range(steps):
        loss = lm_loss(model, language.sample(batch_size, seq_len + 1, gen).to(device))
        if not torch.isfinite(loss):
            losses += [float("nan")] * (steps - step)
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(step, model)
    return losses
