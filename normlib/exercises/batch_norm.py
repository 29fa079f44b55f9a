"""The BatchNorm checker, and the mistakes it can name.

The learner writes ``BatchNorm(num_features, eps=1e-5, momentum=0.1)``, an nn.Module for (B, C)
and (B, C, H, W) input with learnable ``weight`` and ``bias`` (gamma, beta) and buffers
``running_mean`` and ``running_var``, behaving as nn.BatchNorm1d / 2d in train and eval mode.
The reference is ``nl.BatchNorm`` (equal to torch's). Training normalizes with the *biased* batch
variance but stores the *unbiased* one: running = (1 - momentum) * running + momentum * batch.
"""

from __future__ import annotations

import torch
from torch import nn

import normlib as nl

from ._cases import new_module
from ._compare import BROADCAST_ERROR, bind, close, randn
from ._probes import fmt, near, output
from ._session import Fail, Session
from ._statistics import BN_EVAL_MUTANTS, BN_MISTAKES, BN_TRAIN_MUTANTS, RUNNING_RULES
from .result import CheckResult

__all__ = ["check_batch_norm", "BN_MISTAKES"]

_FORBIDDEN = {name: "F.batch_norm (or nn.BatchNorm1d/2d)" for name in (
    "batch_norm", "native_batch_norm", "_native_batch_norm_legit", "_batch_norm_impl_index",
    "_native_batch_norm_legit_no_training", "instance_norm")}


def _affine(m):
    """The module's (weight, bias) parameters, named weight/bias or gamma/beta, or (None, None)."""
    for w_name, b_name in (("weight", "bias"), ("gamma", "beta")):
        w, b = getattr(m, w_name, None), getattr(m, b_name, None)
        if isinstance(w, torch.Tensor) and isinstance(b, torch.Tensor):
            return w, b
    return None, None


def check_batch_norm(cls, *, time_limit: float = 3.0) -> CheckResult:
    """Check the class ``cls(num_features, eps=1e-5, momentum=0.1)`` against nl.BatchNorm."""
    s = Session("BatchNorm", BN_MISTAKES, exercise="batch_norm",
                time_limit=time_limit, forbidden=_FORBIDDEN,
                references={nl.batch_norm: "nl.batch_norm", nl.BatchNorm.forward: "nl.BatchNorm"},
                error_hints=((BROADCAST_ERROR, "missing_keepdim"),))
    if not s.require_callable(cls, "your class"):
        return s.result()

    def build(C, dtype=torch.float64, **kwargs):
        """The learner's module with random weight/bias, and the reference with the same."""
        m = s.call(new_module(s, cls, C, what=f"BatchNorm({C})", **kwargs).to, dtype)
        ref = nl.BatchNorm(C, **kwargs).to(dtype)
        w, b = _affine(m)
        with torch.no_grad():
            ref.weight.copy_(randn(C, seed=C, dtype=dtype, scale=0.3, offset=1.0))
            ref.bias.copy_(randn(C, seed=C + 1, dtype=dtype))
            if w is not None and w.shape == (C,) and b.shape == (C,):
                w.copy_(ref.weight)
                b.copy_(ref.bias)
            else:
                ref.weight.fill_(1.0)
                ref.bias.zero_()
        return m, ref

    def running(m, C):
        rm, rv = getattr(m, "running_mean", None), getattr(m, "running_var", None)
        for name, t in (("running_mean", rm), ("running_var", rv)):
            if not isinstance(t, torch.Tensor):
                raise Fail(f"no tensor attribute {name}", "missing_running_stats")
            if t.shape != (C,):
                raise Fail(f"{name} has shape {tuple(t.shape)}, expected ({C},)", "running_shape")
        return rm.detach().double().clone(), rv.detach().double().clone()     # a snapshot

    def structure():
        m = new_module(s, cls, 3, what="BatchNorm(3)")
        rm, rv = running(m, 3)
        buffers, params = dict(m.named_buffers()), dict(m.named_parameters())
        for name in ("running_mean", "running_var"):
            if name in params:
                raise Fail(f"{name} is an nn.Parameter; register it as a buffer", "not_buffers")
            if name not in buffers:
                raise Fail(f"{name} is a plain attribute, not a buffer", "not_buffers")
        if not (torch.equal(rm, torch.zeros(3, dtype=rm.dtype))
                and torch.equal(rv, torch.ones(3, dtype=rv.dtype))):
            raise Fail("running_mean must start at 0 and running_var at 1", "running_init")
        w, b = _affine(m)
        if not isinstance(w, nn.Parameter) or not isinstance(b, nn.Parameter) or \
                w.shape != (3,) or b.shape != (3,):
            raise Fail("no learnable weight and bias of shape (3,) (gamma, beta)", "no_affine")

    def train_step(m, ref, x, no_grad=False):
        """One training forward of both; compare outputs and running statistics."""
        rm0, rv0 = running(m, x.shape[1])
        ctx = torch.no_grad() if no_grad else torch.enable_grad()
        with ctx:
            got = s.call(m, x)
            want = ref(x)
        w, b = ref.weight.detach(), ref.bias.detach()
        mutants = bind(BN_TRAIN_MUTANTS, x, w, b, ref.eps, rm0, rv0)
        if no_grad:         # running statistics used here: train/eval decided by the grad mode
            mutants = [("grad_mode_not_training" if k == "running_stats_in_train" else k, f)
                       for k, f in mutants]
        s.expect_close(got, want, mutants=mutants)
        expect_running(m, x, rm0, rv0, ref.momentum or 0.1)

    def expect_running(m, x, rm0, rv0, momentum):
        rm, rv = running(m, x.shape[1])
        for key, rule in RUNNING_RULES:
            want = rule(x.double(), rm0, rv0, momentum)
            if want is None:
                continue
            if close(rm, want[0], (1e-5, 1e-6)) and close(rv, want[1], (1e-5, 1e-6)):
                if key == "correct":
                    return
                raise Fail(f"running statistics: wrong values (looks like: {s.short(key)})", key)
        raise Fail("running statistics: wrong values", "running_wrong")

    def steps_then_eval(shape, seed, n_steps=3):
        def check():
            C = shape[1]
            m, ref = build(C)
            for i in range(n_steps):
                x = randn(*shape, seed=seed + i, scale=1.0 + i, offset=0.5 * i, dtype=torch.float64)
                train_step(m, ref, x)
            s.call(m.eval)
            ref.eval()
            rm, rv = running(m, C)
            x = randn(*shape, seed=seed + 99, scale=3.0, offset=-1.0, dtype=torch.float64)
            got = s.call(m, x)
            s.expect_close(got, ref(x), mutants=bind(
                BN_EVAL_MUTANTS, x, ref.weight.detach(), ref.bias.detach(), ref.eps, rm, rv))
            if not (close(running(m, C)[0], rm, (0, 0)) and close(running(m, C)[1], rv, (0, 0))):
                raise Fail("eval mode changed the running statistics", "updated_in_eval")
        return four_d(check) if len(shape) == 4 else check

    def eval_set_stats():
        """Eval with given running statistics, a non-default eps and a near-zero running_var."""
        m, ref = build(3, eps=0.1)
        rm = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
        rv = torch.tensor([4.0, 1e-8, 0.25], dtype=torch.float64)
        running(m, 3)
        with torch.no_grad():
            for mod in (m, ref):
                mod.running_mean.copy_(rm)
                mod.running_var.copy_(rv)
        s.call(m.eval)
        ref.eval()
        x = randn(6, 3, seed=75, scale=2.0, dtype=torch.float64)
        s.expect_close(s.call(m, x), ref(x), mutants=bind(
            BN_EVAL_MUTANTS, x, ref.weight.detach(), ref.bias.detach(), ref.eps, rm, rv))

    def one_step(shape, seed, *, no_grad=False, edit=None, dtype=torch.float64, **kwargs):
        def check():
            m, ref = build(shape[1], dtype, **kwargs)
            x = randn(*shape, seed=seed, scale=2.0, offset=1.0, dtype=dtype)
            if edit:
                edit(x)
            train_step(m, ref, x, no_grad=no_grad)
        return four_d(check) if len(shape) == 4 else check

    def four_d(check):
        """With (B, C, H, W) input, a broadcasting error means the wrong dims or shapes."""
        def wrapped():
            try:
                check()
            except Fail as f:
                if f.mistake == "missing_keepdim":
                    f.mistake = "wrong_dims_4d"
                raise
        return wrapped

    s.run("__init__: buffers running_mean (zeros), running_var (ones); weight, bias", structure)
    s.run("train (8, 3)", one_step((8, 3), 10))
    s.run("train (2, 3), a batch of 2", one_step((2, 3), 20))
    s.run("train (4, 3, 5, 6), per-channel statistics", one_step((4, 3, 5, 6), 30))
    s.run("train (6, 3) under torch.no_grad()", one_step((6, 3), 40, no_grad=True))
    s.run("3 train steps (8, 3), then eval", steps_then_eval((8, 3), 50))
    s.run("2 train steps (2, 3, 4, 5), then eval", steps_then_eval((2, 3, 4, 5), 60, 2))
    s.run("momentum=0.3, eps=1e-3", one_step((8, 4), 70, momentum=0.3, eps=1e-3))
    s.run("eval, eps=0.1, a channel with running_var 1e-8", eval_set_stats)
    s.run("train (6, 3), a constant channel", one_step((6, 3), 80, edit=lambda x: x[:, 1].fill_(4.0)))
    s.run("float32 module, train (8, 3)", one_step((8, 3), 90, dtype=torch.float32))
    s.run("backward through the batch statistics", lambda: _backward(s, build))
    s.probe(*_probes(s, cls))
    return s.result()


def _backward(s: Session, build) -> None:
    """Gradients w.r.t. x, weight and bias in training mode, float64."""
    m, ref = build(3)
    x = randn(6, 3, seed=100, scale=2.0, offset=1.0, dtype=torch.float64)
    g = randn(6, 3, seed=101, dtype=torch.float64)
    xl, xr = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    got = s.call(m, xl)
    want = ref(xr)
    s.expect_close(got, want)
    if not got.requires_grad or got.grad_fn is None:
        raise Fail("the output has no grad_fn (cut off from autograd)", "no_autograd")
    s.call(lambda: (got * g).sum().backward())
    (want * g).sum().backward()
    w, _ = _affine(m)
    pairs = [("x", xl.grad, xr.grad), ("weight", w.grad if w is not None else None,
                                        ref.weight.grad)]
    for name, a, b in pairs:
        if a is None:
            raise Fail(f"no gradient reaches {name}", "no_autograd")
        if not close(a, b, (2e-5, 2e-5 * max(1.0, float(b.abs().max())))):
            detached = _detached_grad(x, ref, g)
            key = "detached_statistics" if name == "x" and close(a, detached, (1e-4, 1e-4)) \
                else "wrong_grad"
            raise Fail(f"gradient w.r.t. {name}: wrong values" +
                       (f" (looks like: {s.short(key)})" if key != "wrong_grad" else ""), key)


def _detached_grad(x, ref, g):
    """d/dx of batch normalization when the batch mean and variance are detached."""
    xl = x.clone().requires_grad_(True)
    mu, var = xl.mean(0).detach(), xl.var(0, unbiased=False).detach()
    ((xl - mu) / (var + ref.eps).sqrt() * ref.weight.detach() * g).sum().backward()
    return xl.grad


def _probes(s: Session, cls) -> list:
    """Property probes (see _probes.py): which axis, which statistics in train and eval, the eval
    divisor, the running-statistics update (momentum and which statistic), weight and bias."""
    C = 3

    def fresh(**kwargs):
        m = s.call(cls, C, **kwargs)
        return s.call(m.to, torch.float64)

    def buffers(m):
        return (m.running_mean.detach().double().clone(), m.running_var.detach().double().clone())

    x = randn(16, C, seed=600, dtype=torch.float64, scale=2.0, offset=1.0)
    mu, var_b = x.mean(0), x.var(0, unbiased=False)

    def per_channel():
        m = fresh()
        x4 = randn(4, C, 3, 5, seed=601, dtype=torch.float64, scale=2.0, offset=1.0)
        y = output(s, m, x4, like=x4)
        x5 = x4.clone()
        x5[:, 0] = x5[:, 0] * 3 + 2
        y5 = output(s, fresh(), x5, like=x5)
        if not near(y5[:, 1:], y[:, 1:], 1e-6, 1e-9):
            return ("wrong_dims_4d", "With (B, C, H, W) input, changing every value of channel 0 "
                    "changed the outputs of channels 1 and 2: your statistics mix channels. Take "
                    "them per channel, over dims (0, 2, 3) (a reshape(-1, C) of (B, C, H, W) does "
                    "not group by channel; x.transpose(0, 1).reshape(C, -1) does).")
        return None

    def train_statistics():
        m = fresh()
        before = buffers(m)
        y = output(s, m, x, like=x)
        after = buffers(m)
        if near(y, (x - mu) / (var_b + 1e-5).sqrt(), 1e-6, 1e-9):
            return None
        for rm, rv, when in ((*before, "before"), (*after, "after")):
            if near(y, (x - rm) / (rv + 1e-5).sqrt(), 1e-6, 1e-9):
                return ("running_stats_in_train", "In training your output is normalized with "
                        f"the running statistics (as they are {when} the update), not with the "
                        "batch's own mean and biased variance.")
        x2 = x.clone()
        x2[0] = x2[0] * 4 - 3
        y2 = output(s, fresh(), x2, like=x2)
        if near(y2[1:], y[1:], 1e-6, 1e-9):
            return ("train_not_batch_stats", "In training, changing one sample left the other "
                    "samples' outputs unchanged: you do not normalize with the batch's statistics "
                    "(each channel's mean and variance over the batch).")
        col_mean, col_var = y.mean(0), y.var(0, unbiased=False)
        return ("train_not_batch_stats", "In training, with weight 1 and bias 0, every channel of "
                "your output should have mean 0 and variance close to 1 over the batch; yours has "
                f"means up to {fmt(float(col_mean.abs().max()))} and variances from "
                f"{fmt(float(col_var.min()))} to {fmt(float(col_var.max()))}.")

    def running_update():
        m = fresh(momentum=0.3)
        old_m, old_v = buffers(m)
        output(s, m, x, like=x)
        new_m, new_v = buffers(m)
        step = (new_m - old_m) / (mu - old_m)           # how far running_mean moved
        if not near(step, step.mean().expand_as(step), 1e-6, 1e-9):
            return None
        moved = float(step.mean())
        stats = {"the unbiased variance": var_b * 16 / 15, "the biased variance": var_b,
                 "the unbiased standard deviation": (var_b * 16 / 15).sqrt(),
                 "the biased standard deviation": var_b.sqrt()}
        stored = next((name for name, stat in stats.items()
                       if near(new_v, (1 - moved) * old_v + moved * stat, 1e-6, 1e-9)), None)
        if abs(moved - 0.3) > 1e-6:
            if abs(moved - 0.7) < 1e-6:
                return ("momentum_reversed", "With momentum = 0.3 your running statistics moved "
                        "70% of the way to the batch's: momentum is reversed. PyTorch's update is "
                        "running = (1 - momentum) * running + momentum * batch_stat.")
            if abs(moved) < 1e-9:
                return ("running_not_updated", "Training did not change running_mean: update the "
                        "running statistics in every training forward.")
            return ("momentum_ignored", f"With momentum = 0.3 your running statistics moved "
                    f"{fmt(moved)} of the way to the batch's: use the momentum argument, "
                    "running = (1 - momentum) * running + momentum * batch_stat.")
        if stored is None or stored == "the unbiased variance":
            return None
        key = "running_var_biased" if stored == "the biased variance" else "running_var_stat"
        return (key, f"running_var is updated with {stored} of the batch; PyTorch stores the "
                "unbiased variance (n / (n - 1) times the biased one) in running_var.")

    def eval_probes():
        m = fresh(eps=0.1)
        with torch.no_grad():
            m.running_mean.copy_(torch.tensor([0.5, -1.0, 2.0]))
            m.running_var.copy_(torch.tensor([4.0, 1e-8, 0.25]))
        rm, rv = buffers(m)
        s.call(m.eval)
        y = output(s, m, x, like=x)
        x2 = x.clone()
        x2[0] = x2[0] * 4 - 3
        y2 = output(s, m, x2, like=x2)
        if not near(y2[1:], y[1:], 1e-6, 1e-9):
            return ("eval_depends_on_batch", "In eval mode, changing one sample changed the other "
                    "samples' outputs: eval must use running_mean and running_var, so each "
                    "sample's output depends on that sample alone.")
        den = (x - rm) / y
        if not near(den, den.mean(0).expand_as(den), 1e-6, 1e-9):
            return None
        den = den.mean(0)
        if near(den, (rv + 0.1).sqrt(), 1e-6, 1e-9):
            return None
        known = [("eval_denominator", rv.sqrt(), "sqrt(running_var), without eps"),
                 ("eps_outside_sqrt", rv.sqrt() + 0.1, "sqrt(running_var) + eps"),
                 ("eps_ignored", (rv + 1e-5).sqrt(), "sqrt(running_var + 1e-5) although eps = 0.1")]
        key, text = next(((k, t) for k, want, t in known if near(den, want, 1e-6, 1e-12)),
                         ("eval_denominator", f"{[fmt(float(v)) for v in den]}"))
        return (key, f"In eval mode (eps = 0.1, running_var = 4, 1e-8, 0.25) your divisor is "
                f"{text}; it must be sqrt(running_var + eps), which matters most for a channel of "
                "near-zero running variance.")

    def affine():
        m = fresh()
        y0 = output(s, m, x, like=x)
        m2 = fresh()
        w, b = _affine(m2)
        with torch.no_grad():
            w.fill_(2.0)
            b.fill_(1.0)
        y2 = output(s, m2, x, like=x)
        if near(y2, y0, 1e-6, 1e-9):
            return ("affine_unused", "Setting weight = 2 and bias = 1 does not change your output: "
                    "apply them, y = x_hat * weight + bias (per channel).")
        if not near(y2, 2 * y0 + 1, 1e-6, 1e-9):
            return ("affine", "With weight = 2 and bias = 1 your output is not 2 x_hat + 1: "
                    "y = x_hat * weight + bias.")
        return None

    return [per_channel, train_statistics, eval_probes, running_update, affine]
