"""Exercises 18 and 19 (cross-entropy with z-loss, DyT): wrong answers the checkers' catalogues
never saw, correct answers in other styles, and garbage (issue 35).

Written from the practice notebooks' task texts alone, each wrong answer the way a candidate writes
it under time pressure (one slip each, in the candidate's own code, not the checker's mutants), and
naming the diagnosis keys that describe its mistake correctly. A result is
  - named correctly: its ``mistake`` is one of those keys;
  - cannot tell: the checker names no mistake ("cannot_tell", "wrong values", "NaN", "raised");
  - named wrongly: any other key;
  - passed: the checker missed it.
The target: at least 90% named correctly per exercise, none named wrongly, none passed; every
correct variant passes; every garbage answer gets a clean result (a code, no exception).
``python tests/test_exercises_unseen_loss_dyt.py`` prints the table.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
import unseen
from torch import nn

from normlib import exercises as ex

CANNOT_TELL = {"cannot_tell", "wrong_values", "nan", "raised", "wrong_grad"}


# --------------------------------------------------------------------------- 18: cross-entropy
def _flat(logits, targets):
    V = logits.size(-1)
    x = logits.view(-1, V)
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.float()
    return x, targets.view(-1)


def _lse(x):
    """A stable log-sum-exp, as most answers below write it."""
    mx = x.max(dim=-1, keepdim=True).values
    return (mx + torch.log(torch.sum(torch.exp(x - mx), dim=-1, keepdim=True))).squeeze(-1)


def ce_naive(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    lse = torch.log(torch.exp(x).sum(-1))                       # no max: overflows
    mask = t != ignore_index
    xt = x[torch.arange(len(t)), t.masked_fill(~mask, 0)]
    return (lse - xt)[mask].mean() + z_loss * (lse[mask] ** 2).mean()


def ce_max_kept_out(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    mx = x.max(dim=-1, keepdim=True).values
    lse = torch.log(torch.sum(torch.exp(x - mx), dim=-1))       # m forgotten afterwards
    mask = t != ignore_index
    xt = x[torch.arange(len(t)), t.masked_fill(~mask, 0)]
    return (lse - xt)[mask].mean() + z_loss * (lse[mask] ** 2).mean()


def ce_summed(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    lse = _lse(x)
    mask = (t != ignore_index).float()
    xt = x.gather(1, (t * (t != ignore_index)).unsqueeze(1)).squeeze(1)
    return ((lse - xt) * mask).sum() + z_loss * (lse.pow(2) * mask).sum()


def ce_divided_by_all(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    lse = _lse(x)
    mask = t != ignore_index
    xt = x.gather(1, t.clamp(min=0)[:, None])[:, 0]
    nll = torch.where(mask, lse - xt, torch.zeros_like(lse))
    z = torch.where(mask, lse ** 2, torch.zeros_like(lse))
    return nll.sum() / len(t) + z_loss * z.sum() / len(t)


def ce_z_everywhere(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    lse = _lse(x)
    mask = t != ignore_index
    xt = x[mask].gather(1, t[mask][:, None]).squeeze(1)
    return (lse[mask] - xt).mean() + z_loss * lse.pow(2).mean()   # z over padding too


def ce_z_unsquared(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != ignore_index
    x, t = x[keep], t[keep]
    lse = _lse(x)
    ce = (lse - x[torch.arange(len(t)), t]).mean()
    return ce + z_loss * lse.mean()


def ce_z_from_probs(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != ignore_index
    x, t = x[keep], t[keep]
    lse = _lse(x)
    probs = torch.exp(x - lse[:, None])
    ce = (lse - x[torch.arange(len(t)), t]).mean()
    return ce + z_loss * torch.log(probs.sum(-1)).pow(2).mean()  # log of 1


def ce_coefficient_swapped(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != ignore_index
    x, t = x[keep], t[keep]
    lse = _lse(x)
    ce = (lse - x[torch.arange(len(t)), t]).mean()
    return z_loss * ce + (lse * lse).mean()


def ce_gather_dim0(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != ignore_index
    x, t = x[keep], t[keep]
    lse = _lse(x)
    xt = x.gather(0, t[None, :]).squeeze(0)                       # dim 0: the wrong dim
    return (lse - xt).mean() + z_loss * (lse ** 2).mean()


def ce_logsoftmax_tokens(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    mc = x.max(dim=0, keepdim=True).values
    logp = x - (mc + torch.exp(x - mc).sum(0, keepdim=True).log())   # over the tokens
    keep = t != ignore_index
    nll = -logp[keep, t[keep]]
    lse = _lse(x)[keep]
    return nll.mean() + z_loss * (lse ** 2).mean()


def ce_mean_everything(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != ignore_index
    x, t = x[keep], t[keep]
    lse = _lse(x)
    onehot = F.one_hot(t, x.size(-1)).to(x.dtype)
    logp = x - lse[:, None]
    return -(onehot * logp).mean() + z_loss * (lse ** 2).mean()   # mean over N * V


def ce_dim1(logits, targets, z_loss=1e-4, ignore_index=-100):
    x = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    mx = x.amax(dim=1, keepdim=True)                              # (B, T, V): dim 1 is T
    lse = mx + torch.log(torch.exp(x - mx).sum(dim=1, keepdim=True))
    logp = (x - lse).reshape(-1, x.shape[-1])
    t = targets.reshape(-1)
    keep = t != ignore_index
    lz = _lse(x.reshape(-1, x.shape[-1]))[keep]
    return -logp[keep, t[keep]].mean() + z_loss * lz.pow(2).mean()


def ce_negative(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != ignore_index
    lse = _lse(x)[keep]
    logp_t = x[keep].gather(-1, t[keep].unsqueeze(-1)).squeeze(-1) - lse
    return logp_t.mean() + z_loss * lse.square().mean()          # log-likelihood, not its negative


def ce_minus_100(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != -100                                              # the argument ignored
    safe = torch.where(keep, t, torch.zeros_like(t))
    lse = _lse(x)
    nll = lse - x.gather(1, safe.unsqueeze(1)).squeeze(1)
    return nll[keep].mean() + z_loss * lse[keep].pow(2).mean()


def ce_no_mask(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    lse = _lse(x)
    nll = lse - x.gather(1, t.clamp(0, x.shape[1] - 1).unsqueeze(1)).squeeze(1)
    return nll.mean() + z_loss * lse.pow(2).mean()


def ce_default_1e3(logits, targets, z_loss=1e-3, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != ignore_index
    lse = _lse(x)[keep]
    return (lse - x[keep].gather(1, t[keep, None])[:, 0]).mean() + z_loss * (lse ** 2).mean()


def ce_square_mean(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != ignore_index
    lse = _lse(x)[keep]
    ce = (lse - x[keep].gather(1, t[keep, None])[:, 0]).mean()
    return ce + z_loss * lse.mean() ** 2


def ce_global_max(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    m = x.max()                                                   # one max for every row
    lse = m + torch.log(torch.exp(x - m).sum(-1))
    keep = t != ignore_index
    ce = (lse - x.gather(1, torch.where(keep, t, 0)[:, None])[:, 0])[keep].mean()
    return ce + z_loss * lse[keep].pow(2).mean()


def ce_no_keepdim(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    m = x.max(-1).values                                          # (N,): keepdim forgotten
    lse = m + torch.log(torch.exp(x - m).sum(-1))
    keep = t != ignore_index
    ce = (lse - x.gather(1, torch.where(keep, t, 0)[:, None])[:, 0])[keep].mean()
    return ce + z_loss * lse[keep].pow(2).mean()


def ce_per_token(logits, targets, z_loss=1e-4, ignore_index=-100):
    x, t = _flat(logits, targets)
    keep = t != ignore_index
    lse = _lse(x)
    nll = (lse - x.gather(1, torch.where(keep, t, 0)[:, None])[:, 0]) * keep
    return nll + z_loss * lse.pow(2) * keep                     # no reduction


CE = [
    ("log(sum(exp)) without the max", ce_naive, {"no_max_subtracted"}),
    ("max subtracted, not added back", ce_max_kept_out, {"max_not_added_back"}),
    ("sum over tokens", ce_summed, {"sum_over_tokens"}),
    ("divided by all N", ce_divided_by_all, {"ignored_in_mean"}),
    ("z-term over padding", ce_z_everywhere, {"z_over_ignored"}),
    ("log Z not squared", ce_z_unsquared, {"z_not_squared"}),
    ("z-term from the probabilities", ce_z_from_probs, {"no_z_term"}),
    ("coefficient on the cross-entropy", ce_coefficient_swapped, {"coefficient_on_ce"}),
    ("target gathered on dim 0", ce_gather_dim0, {"target_logit", "broadcast"}),
    ("log-softmax over the tokens", ce_logsoftmax_tokens, {"wrong_dim"}),
    ("mean over N * V", ce_mean_everything, {"mean_over_vocab"}),
    ("log-sum-exp over dim 1 of (B, T, V)", ce_dim1, {"wrong_dim"}),
    ("log-likelihood, sign flipped", ce_negative, {"sign"}),
    ("ignore_index fixed at -100", ce_minus_100, {"ignore_index_unused"}),
    ("no mask, targets clamped", ce_no_mask, {"ignore_index_unused"}),
    ("default z_loss 1e-3", ce_default_1e3, {"defaults"}),
    ("square of the mean log Z", ce_square_mean, {"z_square_of_mean"}),
    ("one max for all rows", ce_global_max, {"global_max"}),
    ("max without keepdim", ce_no_keepdim, {"broadcast"}),
    ("per-token losses, no reduction", ce_per_token, {"wrong_shape"}),
]


def ce_onehot(logits, targets, z_loss=1e-4, ignore_index=-100):
    """Correct: one-hot targets and a masked sum."""
    V = logits.shape[-1]
    x = logits.reshape(-1, V).to(torch.float32 if logits.dtype.itemsize < 4 else logits.dtype)
    t = targets.reshape(-1)
    keep = t.ne(ignore_index)
    m = x.amax(-1, keepdim=True)
    log_z = m.squeeze(-1) + (x - m).exp().sum(-1).log()
    logp = x - log_z[:, None]
    onehot = F.one_hot(t.where(keep, 0), V).to(x.dtype) * keep[:, None]
    n = keep.sum()
    return -(onehot * logp).sum() / n + z_loss * (log_z.square() * keep).sum() / n


def ce_loop(logits, targets, z_loss=1e-4, ignore_index=-100):
    """Correct: one token at a time."""
    V = logits.shape[-1]
    x = logits.reshape(-1, V)
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.float()
    ce, z, n = 0.0, 0.0, 0
    for row, tgt in zip(x, targets.reshape(-1).tolist(), strict=True):
        if tgt == ignore_index:
            continue
        m = row.max()
        lz = m + torch.log(torch.exp(row - m).sum())
        ce = ce + (lz - row[tgt])
        z = z + lz ** 2
        n += 1
    return ce / n + z_loss * z / n


def ce_in_logits_dtype(logits, targets, z_loss=1e-4, ignore_index=-100):
    """Correct for this checker: computes in the logits' dtype (float16 too), stably, and
    returns that dtype."""
    V = logits.shape[-1]
    x, t = logits.flatten(0, -2), targets.flatten()
    keep = t != ignore_index
    x, t = x[keep], t[keep]
    m = x.max(-1, keepdim=True).values
    lz = (m + (x - m).exp().sum(-1, keepdim=True).log()).squeeze(-1)
    xt = x[torch.arange(len(t)), t]
    return (lz - xt).mean() + z_loss * (lz * lz).mean() if V else None


CE_CORRECT = [("one-hot, masked sums", ce_onehot), ("a loop over tokens", ce_loop),
              ("in the logits' dtype", ce_in_logits_dtype)]


# --------------------------------------------------------------------------- 19: DyT
class DyTBase(nn.Module):
    """A learner's DyT written in one go; the subclasses below each change one line."""

    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1) * alpha_init)
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (torch.tanh(self.alpha * h) * self.weight + self.bias).type_as(x)


class AlphaPerChannel(DyTBase):
    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__(normalized_shape, alpha_init)
        self.alpha = nn.Parameter(torch.full((normalized_shape,), alpha_init))


class AlphaOne(DyTBase):
    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__(normalized_shape, alpha_init)
        self.alpha = nn.Parameter(torch.ones(1))


class AlphaHalfFixed(DyTBase):
    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__(normalized_shape, alpha_init)
        self.alpha = nn.Parameter(torch.tensor([0.5]))


class AffineInitSwapped(DyTBase):
    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__(normalized_shape, alpha_init)
        self.weight = nn.Parameter(torch.zeros(normalized_shape))
        self.bias = nn.Parameter(torch.ones(normalized_shape))


class AlphaFloat(DyTBase):
    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__(normalized_shape, alpha_init)
        del self.alpha
        self.alpha = alpha_init


class AlphaBuffer(nn.Module):
    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__()
        self.register_buffer("alpha", torch.tensor([alpha_init]))
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return self.weight * torch.tanh(self.alpha * x) + self.bias


class AlphaItem(DyTBase):
    def forward(self, x):
        a = self.alpha.item()
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.weight * torch.tanh(a * h) + self.bias).to(x.dtype)


class TanhTimesAlpha(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.weight * torch.tanh(h) * self.alpha + self.bias).to(x.dtype)


class WeightBiasSwapped(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.bias * torch.tanh(self.alpha * h) + self.weight).to(x.dtype)


class BiasForgotten(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.weight * torch.tanh(self.alpha * h)).to(x.dtype)


class BiasInTanh(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.weight * torch.tanh(self.alpha * h + self.bias)).to(x.dtype)


class Centred(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        h = h - h.mean(dim=-1, keepdim=True)
        return (self.weight * torch.tanh(self.alpha * h) + self.bias).to(x.dtype)


class NormalizedThenTanh(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        h = (h - h.mean(-1, keepdim=True)) / (h.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt()
        return (self.weight * torch.tanh(self.alpha * h) + self.bias).to(x.dtype)


class DividedByAlpha(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.weight * torch.tanh(h / self.alpha) + self.bias).to(x.dtype)


class AlphaNeverUsed(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.weight * h.tanh() + self.bias).to(x.dtype)


class WeightInTanh(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (torch.tanh(self.alpha * self.weight * h) + self.bias).to(x.dtype)


class Float32Out(DyTBase):
    def forward(self, x):
        return self.weight.float() * torch.tanh(self.alpha.float() * x.float()) + self.bias.float()


class GammaBeta(nn.Module):
    """The paper's symbols as attribute names."""

    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1) * alpha_init)
        self.gamma = nn.Parameter(torch.ones(normalized_shape))
        self.beta = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return self.gamma * torch.tanh(self.alpha * x) + self.beta


class HardTanh(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.weight * F.hardtanh(self.alpha * h) + self.bias).to(x.dtype)


class SigmoidAsTanh(DyTBase):
    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        return (self.weight * (2 * torch.sigmoid(self.alpha * h) - 1) + self.bias).to(x.dtype)


DYT = [
    ("alpha per channel", AlphaPerChannel, {"alpha_per_channel"}),
    ("alpha starts at 1", AlphaOne, {"alpha_init"}),
    ("alpha fixed at 0.5, alpha_init ignored", AlphaHalfFixed, {"alpha_init"}),
    ("weight zeros and bias ones", AffineInitSwapped, {"affine_init"}),
    ("alpha a Python float", AlphaFloat, {"alpha_not_learnable"}),
    ("alpha a buffer", AlphaBuffer, {"alpha_not_learnable"}),
    ("alpha.item() in forward", AlphaItem, {"alpha_not_learnable"}),
    ("tanh(x) * alpha", TanhTimesAlpha, {"alpha_outside"}),
    ("weight and bias swapped", WeightBiasSwapped, {"weight_bias_swapped"}),
    ("bias forgotten", BiasForgotten, {"no_bias"}),
    ("bias inside the tanh", BiasInTanh, {"bias_inside"}),
    ("mean subtracted", Centred, {"mean_subtracted"}),
    ("LayerNorm, then tanh", NormalizedThenTanh, {"statistics"}),
    ("x / alpha", DividedByAlpha, {"alpha_divides"}),
    ("alpha never used", AlphaNeverUsed, {"no_alpha"}),
    ("weight inside the tanh", WeightInTanh, {"weight_inside"}),
    ("float32 returned for half input", Float32Out, {"wrong_dtype"}),
    ("gamma and beta as names", GammaBeta, {"missing_parameter"}),
    ("hardtanh", HardTanh, {"not_tanh"}),
    ("2 sigmoid - 1 for tanh", SigmoidAsTanh, {"not_tanh"}),
]


class ScalarAlpha(nn.Module):
    """Correct: a 0-dim alpha, addcmul, in float32 for half input."""

    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        y = torch.addcmul(self.bias.float(), self.weight.float(), torch.tanh(self.alpha * x.float()))
        return y.to(x.dtype)


class Float16Throughout(nn.Module):
    """Correct for this checker: stays in the input's dtype (float16 too)."""

    def __init__(self, normalized_shape, alpha_init=0.5, *, elementwise_affine=True):
        super().__init__()
        self.alpha = nn.Parameter(alpha_init * torch.ones(1))
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return self.weight.to(x.dtype) * torch.tanh(self.alpha.to(x.dtype) * x) + \
            self.bias.to(x.dtype)


DYT_CORRECT = [("0-dim alpha, addcmul", ScalarAlpha), ("float16 throughout", Float16Throughout),
               ("the base answer", DyTBase)]


# --------------------------------------------------------------------------- garbage
def _raises(*a, **k):
    raise ValueError("not done yet")


def _exits(*a, **k):
    sys.exit(3)


class NotAModule:
    def __init__(self, *a, **k):
        pass


class BrokenInit(nn.Module):
    def __init__(self, normalized_shape, alpha_init=0.5):
        super().__init__()
        raise RuntimeError("typo in __init__")


class ReturnsNone(DyTBase):
    def forward(self, x):
        return None


class ReturnsTuple(DyTBase):
    def forward(self, x):
        return x, self.alpha


class ReturnsNaN(DyTBase):
    def forward(self, x):
        return torch.full_like(x, float("nan"))


class ExitsInForward(DyTBase):
    def forward(self, x):
        sys.exit(3)


GARBAGE = {
    "cross_entropy_z_loss": [None, 42, _raises, _exits, lambda x, t, z_loss=1e-4, ignore_index=-100: None,
                             lambda x, t, z_loss=1e-4, ignore_index=-100: "loss",
                             lambda x, t, z_loss=1e-4, ignore_index=-100: (x.sum(), x.sum()),
                             lambda x, t, z_loss=1e-4, ignore_index=-100: x,
                             lambda x, t, z_loss=1e-4, ignore_index=-100: torch.tensor(float("nan")),
                             lambda x, t, z_loss=1e-4, ignore_index=-100: 2.3,
                             lambda x, t, z_loss=1e-4, ignore_index=-100: ce_onehot(x, t).detach().item()],
    "dyt": [None, 42, _raises, NotAModule, BrokenInit, ReturnsNone, ReturnsTuple, ReturnsNaN,
            nn.Identity, nn.Linear, lambda c, alpha_init=0.5: nn.Identity(), ExitsInForward],
}

CHECKERS = {"cross_entropy_z_loss": (ex.check_cross_entropy_z_loss, CE, CE_CORRECT),
            "dyt": (ex.check_dyt, DYT, DYT_CORRECT)}


def test_each_exercise_has_at_least_12_unseen_wrong_answers():
    assert all(len(wrong) >= 12 for _, wrong, _ in CHECKERS.values())


if __name__ == "__main__":
    unseen.print_table(CHECKERS, CANNOT_TELL)
