"""A small, seeded training loop for the lessons' language-model experiments (CPU).

Tiny models spend their time in per-operation overhead, not arithmetic, so ``train_ensemble``
trains M models of one architecture (seeds, or configurations that share a shape) as one batched
model: their parameters are stacked along a new leading axis M (``torch.func.stack_module_state``)
and one forward pass runs all of them with ``torch.vmap`` over ``torch.func.functional_call``.

Notation: M ensemble members, B batch, T sequence, V vocabulary.

Conventions:
- Each member gets its own batches (drawn with its own seed) and its own learning-rate schedule.
- The optimizer is Adam written out below, elementwise on the stacked parameters. Adam has no
  term that mixes elements, so this equals M independent ``torch.optim.Adam`` optimizers
  (tests/test_train.py checks it against separate runs); it follows torch's single-tensor update
  step by step. Nothing global (such as gradient-norm clipping) couples the members.
- A member whose loss becomes NaN or inf has diverged: its losses are NaN from that step on and its
  parameters stay where they were; the others train on.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state

from ._checks import check_int, check_number
from .blocks import TransformerBlock
from .config import ModelConfig
from .data import MarkovLanguage

__all__ = ["lm_loss", "train_lm", "train_ensemble"]

Schedule = Callable[[int], float]


def lm_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy in nats: predict tokens[:, 1:] from tokens[:, :-1]."""
    logits = model(tokens[:, :-1])                                      # (B, T-1, V)
    return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())


def _structure(model: nn.Module) -> list[tuple[str, tuple[int, ...], torch.dtype]]:
    return [(name, tuple(t.shape), t.dtype)
            for name, t in (*model.named_parameters(), *model.named_buffers())]


def _code(model: nn.Module) -> list[tuple[str, str, str]]:
    """What each submodule computes besides its tensors: (name, class, settings). A block's alpha
    is data (a buffer) and Post-LN is DeepNorm's code with alpha = 1, so a block shows only
    whether it is Post-LN/DeepNorm, Pre-LN or Sandwich."""
    def settings(m):
        if type(m) is TransformerBlock:
            return "post/deepnorm" if m.placement in ("post", "deepnorm") else m.placement
        return m.extra_repr()
    return [(name, type(m).__qualname__, settings(m)) for name, m in model.named_modules()]


def _check_same_code(fn: str, models: list[nn.Module]) -> None:
    """Every member is run with models[0]'s code: refuse members that compute differently."""
    first, first_config = models[0], getattr(models[0], "config", None)
    first_structure, first_code = _structure(first), _code(first)
    for i, m in enumerate(models[1:], start=1):
        why = "every member is trained with models[0]'s code"
        if type(m) is not type(first):
            raise ValueError(f"{fn}: {why}; models[{i}] is a {type(m).__name__}, "
                             f"models[0] a {type(first).__name__}")
        config = getattr(m, "config", None)
        if isinstance(first_config, ModelConfig) and isinstance(config, ModelConfig):
            diffs = first_config.differences(config)
            if diffs:
                raise ValueError(
                    f"{fn}: {why}, so members may differ only in {ModelConfig.PER_MEMBER} "
                    f"(and Post-LN/DeepNorm placement); " + "; ".join(
                        f"models[{i}].config.{name} = {theirs!r}, models[0]'s = {mine!r}"
                        for name, mine, theirs in diffs))
        for (name, cls, how), (_, cls0, how0) in zip(_code(m), first_code, strict=False):
            if (cls, how) != (cls0, how0):
                raise ValueError(f"{fn}: {why}; models[{i}].{name or '(root)'} is {cls}({how}), "
                                 f"models[0]'s is {cls0}({how0})")
        if _structure(m) != first_structure or len(_code(m)) != len(first_code):
            raise ValueError(f"{fn}: every model must have the structure of models[0] "
                             f"({type(first).__name__}: parameter and buffer names, shapes and "
                             f"dtypes); models[{i}] differs")


def train_ensemble(
    models: Sequence[nn.Module],
    language: MarkovLanguage,
    *,
    steps: int,
    lr: float,
    schedules: Sequence[Schedule | None] | None = None,
    seeds: Sequence[int] | None = None,
    batch_size: int = 16,
    seq_len: int = 32,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-8,
    on_step: Callable[[int, Sequence[nn.Module]], None] | None = None,
    stop_after: int | None = None,
) -> torch.Tensor:
    """Train M models of one architecture together with Adam; return the losses, (M, steps).

    Args:
        models: M >= 1 modules that compute the same function of their weights and buffers
            (every member runs models[0]'s code): the same class, parameter and buffer names,
            shapes and dtypes, submodules of the same classes and settings, and for
            ``TinyTransformerLM`` the same ``config`` except its ``PER_MEMBER`` fields (alpha);
            e.g. one config, several seeds; or Post-LN and DeepNorm, whose blocks share their
            code. ValueError names the first difference. They are updated in place.
        steps: optimizer steps; lr: peak learning rate; betas, eps: Adam's (betas (0.9, 0.98) as
            Xiong et al. 2020).
        schedules: one ``step -> multiplier`` per member (LambdaLR's convention: step 0 is the first
            update), or None for a constant lr.
        seeds: one batch seed per member (default 0, 1, ..., M-1); the initialization is the
            caller's. Member m sees exactly the batches ``train_lm(..., seed=seeds[m])`` would:
            ``language.sample(steps * batch_size, seq_len + 1, Generator().manual_seed(seed))``,
            drawn at the start and split into ``steps`` batches.
        batch_size, seq_len: each member's batch is (batch_size, seq_len + 1) tokens.
        on_step: called as on_step(step, models) after every update, with the models holding the
            current weights (copying them back costs time: pass it only when needed).
        stop_after: train only the first ``stop_after`` of the ``steps`` steps, on the same batches
            and schedules as the whole run (to check the start of a stored run without training
            all of it); None trains all of them.
    Returns:
        (M, steps) float32 tensor of training losses, (M, stop_after) with stop_after; NaN after a
        member diverged.
    """
    fn = "train_ensemble"
    models = list(models)
    if not models or not all(isinstance(m, nn.Module) for m in models):
        raise TypeError(f"{fn}: models must be a non-empty sequence of nn.Module, got {models!r}")
    M = len(models)
    check_int(fn, "steps", steps, minimum=1)
    if stop_after is not None:
        check_int(fn, "stop_after", stop_after, minimum=1)
        if stop_after > steps:
            raise ValueError(f"{fn}: stop_after must be at most steps ({steps}), got {stop_after}")
    n_steps = steps if stop_after is None else stop_after       # the steps trained
    check_number(fn, "lr", lr, positive=True)
    schedules = [None] * M if schedules is None else list(schedules)
    seeds = list(range(M)) if seeds is None else list(seeds)
    for name, value in (("schedules", schedules), ("seeds", seeds)):
        if len(value) != M:
            raise ValueError(f"{fn}: {name} must have one entry per model ({M}), got {len(value)}")
    _check_same_code(fn, models)

    device = next(models[0].parameters()).device
    for m in models:
        m.train()
    params, buffers = stack_module_state(models)                # name -> (M, ...) tensors
    names = list(params)
    shapes = [params[k].shape[1:] for k in names]
    sizes = [params[k][0].numel() for k in names]
    # All parameters of a member live in one row of flat (M, P), and all gradients in one row of
    # flat_grad: Adam is then a few operations on one tensor instead of a few per parameter. Each
    # parameter is a leaf that is a view into flat, and its .grad a view into flat_grad, so that
    # backward accumulates into flat_grad in place (nothing to split or concatenate per step).
    flat = torch.cat([params[k].detach().flatten(1) for k in names], dim=1)
    flat_grad = torch.zeros_like(flat)
    member_shape = (lambda shape: (M, *shape)) if M > 1 else tuple      # M = 1: no member axis
    leaves = {}
    for k, p, g, shape in zip(names, flat.split(sizes, dim=1), flat_grad.split(sizes, dim=1),
                              shapes, strict=True):
        leaves[k] = p.view(member_shape(shape)).requires_grad_()
        leaves[k].grad = g.view(member_shape(shape))
    member_buffers = buffers if M > 1 else {k: v[0] for k, v in buffers.items()}
    base = copy.deepcopy(models[0]).to("meta")                  # the code; the weights are stacked

    def member_loss(p, b, tokens):                              # one member: tokens (B, T + 1)
        logits = functional_call(base, (p, b), (tokens[:, :-1],))               # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())

    if M > 1:
        batched_loss = torch.vmap(member_loss)                  # (M, ...) -> (M,)
    else:                                                       # vmap's overhead buys nothing
        def batched_loss(p, b, tokens):
            return member_loss(p, b, tokens[0]).unsqueeze(0)
    # Every batch of a run is drawn at the start, (steps, B, T + 1) per member from its own seed:
    # one sampling loop per member instead of one per member and step.
    data = torch.stack([language.sample(steps * batch_size, seq_len + 1,
                                        torch.Generator().manual_seed(s))
                        .view(steps, batch_size, seq_len + 1) for s in seeds], dim=1).to(device)
    exp_avg, exp_avg_sq = torch.zeros_like(flat), torch.zeros_like(flat)      # (M, P)
    # Adam's two (M, P) temporaries are written in place each step: a fresh tensor that size
    # (11 MB for 9 members of 24 layers) is new memory from the OS each time (glibc maps large
    # blocks afresh), and faulting its pages in made the update 2.5x slower (26 -> 10.5 ms).
    denom, update = torch.empty_like(flat), torch.empty_like(flat)
    alive = torch.ones(M, 1, dtype=torch.bool, device=device)
    losses = torch.full((M, n_steps), float("nan"))
    beta1, beta2 = betas

    for step in range(n_steps):
        tokens = data[step]                                     # (M, B, T + 1)
        loss = batched_loss(leaves, member_buffers, tokens)            # (M,)
        alive &= torch.isfinite(loss.detach()).view(M, 1)
        if not alive.any():
            break
        flat_grad.zero_()
        with warnings.catch_warnings():     # the leaves are strided views of flat, not dense: torch
            warnings.filterwarnings(        # warns once; accumulating into flat_grad is still exact
                "ignore", message="grad and param do not obey the gradient layout contract")
            loss.where(alive.view(M), 0.0).sum().backward()    # members' gradients do not mix
        losses[:, step] = loss.detach().where(alive.view(M), float("nan")).cpu()
        lr_t = torch.tensor([[lr * (1.0 if s is None else s(step))] for s in schedules],
                            dtype=torch.float32, device=device)                # (M, 1)
        bias_correction1 = 1 - beta1 ** (step + 1)
        bias_correction2_sqrt = math.sqrt(1 - beta2 ** (step + 1))
        with torch.no_grad():                                   # torch.optim.Adam's update
            g = flat_grad if alive.all() else flat_grad.where(alive, 0.0)      # (M, P)
            exp_avg.lerp_(g, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            torch.sqrt(exp_avg_sq, out=denom).div_(bias_correction2_sqrt).add_(eps)
            step_size = (lr_t / bias_correction1).where(alive, 0.0)              # (M, 1)
            flat.sub_(torch.div(exp_avg, denom, out=update).mul_(step_size))
        if on_step is not None:
            _copy_back(models, flat, names, sizes, shapes, buffers)
            on_step(step, models)

    _copy_back(models, flat, names, sizes, shapes, buffers)
    return losses


@torch.no_grad()
def _copy_back(models, flat, names, sizes, shapes, buffers) -> None:
    params = {k: v.view(len(models), *shape)
              for k, v, shape in zip(names, flat.split(sizes, dim=1), shapes, strict=True)}
    for i, m in enumerate(models):
        for name, t in (*m.named_parameters(), *m.named_buffers()):
            t.copy_((params if name in params else buffers)[name][i])


def train_lm(
    model: nn.Module,
    language: MarkovLanguage,
    *,
    steps: int,
    lr: float,
    schedule: Schedule | None = None,
    batch_size: int = 16,
    seq_len: int = 32,
    betas: tuple[float, float] = (0.9, 0.98),
    seed: int = 0,
    on_step: Callable[[int, nn.Module], None] | None = None,
) -> list[float]:
    """Train one ``model`` with Adam on batches of ``language``; return the loss of every step.

    The one-member case of ``train_ensemble`` (see there for the arguments; ``seed`` seeds the
    batches, ``on_step(step, model)`` is called after every update). A loss that becomes NaN or
    inf is recorded as NaN from that step on (diverged).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"train_lm: model must be an nn.Module, got {type(model).__name__}")
    hook = None if on_step is None else (lambda step, models: on_step(step, models[0]))
    losses = train_ensemble([model], language, steps=steps, lr=lr, schedules=[schedule],
                            seeds=[seed], batch_size=batch_size, seq_len=seq_len, betas=betas,
                            on_step=hook)
    return losses[0].tolist()
