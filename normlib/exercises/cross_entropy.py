"""The cross-entropy + z-loss checker (a language model's loss, written stably), and its mistakes.

Notation: N tokens, V vocabulary. The learner writes
``cross_entropy_z_loss(logits, targets, z_loss=1e-4, ignore_index=-100)`` for logits (N, V) or
(B, T, V) (flattened to (B T, V)) and int64 targets (N,) or (B, T):

    log Z_i = m_i + log sum_j exp(x_ij - m_i),  m_i = max_j x_ij       (stable log-sum-exp)
    loss    = mean_{i kept} (log Z_i - x_{i, t_i}) + z_loss * mean_{i kept} (log Z_i)^2

"kept" being the tokens whose target is not ``ignore_index``; in float32 for float16 / bfloat16
logits. The z-term is PaLM's (Chowdhery et al. 2022, arXiv 2204.02311, Section 5: 1e-4 log^2 Z).

The reference is defined here from ``F.cross_entropy`` and ``torch.logsumexp``: ``nl.z_loss`` has
no ``ignore_index`` and averages over every position (as HF's BambaForCausalLM does); this
exercise averages the z-term over the same tokens as the cross-entropy.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._cases import Case, run_backward, run_cases
from ._compare import BROADCAST_ERROR, bind, randn, tolerance
from ._generic import catalogue
from ._probes import fmt, near, output
from ._session import Session
from .result import CheckResult

__all__ = ["check_cross_entropy_z_loss", "CE_Z_MISTAKES", "CE_Z_MUTANTS"]

CE_Z_MISTAKES = catalogue("cross_entropy_z_loss", {
    "no_max_subtracted": ("log(sum(exp(x))) without the max", "exp(x) overflows for large "
                          "logits (above about 88 in float32, 11 in float16) and the loss becomes "
                          "inf or NaN: subtract the row's max first, log Z = m + log(sum(exp(x - "
                          "m))), m = x.max(-1).",
                          "直接算 log(sum(exp(x)))、没有先减最大值：logits 很大时（float32 约 88 "
                          "以上，float16 约 11 以上）exp(x) 溢出，损失变成 inf 或 NaN。先减去每行最大值："
                          "log Z = m + log(sum(exp(x - m)))，m = x.max(-1)。"),
    "global_max": ("one max for the whole tensor", "subtract each row's own max, x.amax(-1, "
                   "keepdim=True): with one max for all rows, a row whose logits lie far below "
                   "another's has every exp(x - m) underflow to 0 and log Z = log 0 = -inf.",
                   "整个张量只减了一个最大值：应减去每行自己的最大值 x.amax(-1, keepdim=True)。只用一个"
                   "全局最大值时，某一行的 logits 若远低于另一行，它的每个 exp(x - m) 都下溢为 0，"
                   "log Z = log 0 = -inf。"),
    "broadcast": ("shapes that do not broadcast", "a row statistic lost its last dim (the max "
                  "without keepdim=True), or the targets are not flattened like the logits: "
                  "keep (N, 1) for per-row values that meet (N, V), and reshape both to (N, V) "
                  "and (N,).",
                  "形状无法广播：某个按行统计量丢了最后一维（求最大值时没写 keepdim=True），或者目标没有"
                  "像 logits 那样展平。与 (N, V) 运算的按行数值要保持 (N, 1)，两者分别整形为 (N, V) 和 (N,)。"),
    "max_not_added_back": ("the max not added back", "after log(sum(exp(x - m))) add m back: "
                           "log Z = m + log(sum(exp(x - m))). Without it the loss changes when "
                           "every logit moves by the same constant, which a softmax loss must not.",
                           "减去最大值后没有加回来：log Z = m + log(sum(exp(x - m)))。少了 m，"
                           "所有 logits 加同一个常数时损失就会变，而 softmax 的损失不应改变。"),
    "sum_over_tokens": ("sum instead of mean over tokens", "both terms are means over the "
                        "tokens that count, not sums: the loss must not grow with the batch.",
                        "对 token 求了和而不是平均：两项都是对计入的 token 取平均，损失不应随批次变大。"),
    "ignored_in_mean": ("ignored tokens counted in the mean", "divide by the number of tokens "
                        "whose target is not ignore_index, not by all N (F.cross_entropy's "
                        "'mean' does so).",
                        "平均时把被忽略的 token 也算进了分母：应除以目标不等于 ignore_index 的 token "
                        "数，而不是全部 N 个（F.cross_entropy 的 'mean' 就是这样）。"),
    "z_over_ignored": ("z-term over ignored tokens too", "in this exercise the z-term averages "
                       "(log Z)^2 over the same tokens as the cross-entropy; ignored tokens count "
                       "in neither (nl.z_loss and HF's Bamba average over every position).",
                       "z 项把被忽略的 token 也算进去了：本练习里 z 项与交叉熵在同一批 token 上对 "
                       "(log Z)^2 取平均，被忽略的 token 两项都不计（nl.z_loss 和 HF 的 Bamba 对所有位置取平均）。"),
    "ignore_index_unused": ("ignore_index not applied", "tokens whose target equals "
                            "ignore_index count in neither term: mask them out (keep = targets "
                            "!= ignore_index) and use the argument's value, not a fixed -100.",
                            "没有正确处理 ignore_index：目标等于 ignore_index 的 token 两项都不计入。用 "
                            "keep = targets != ignore_index 把它们排除，并使用传入的值，而不是写死 -100。"),
    "z_not_squared": ("log Z not squared", "the z-term is z_loss * mean((log Z)^2), the square "
                      "of each token's log Z (PaLM, Section 5: 1e-4 log^2 Z).",
                      "log Z 没有平方：z 项是 z_loss * mean((log Z)^2)，每个 token 的 log Z 先平方"
                      "（PaLM 第 5 节：1e-4 log^2 Z）。"),
    "z_square_of_mean": ("square of the mean of log Z", "square each token's log Z, then "
                         "average: mean((log Z)^2), not (mean(log Z))^2.",
                         "先平均再平方了：应先对每个 token 的 log Z 平方再平均，mean((log Z)^2)，"
                         "而不是 (mean(log Z))^2。"),
    "no_z_term": ("no z-term", "the loss is the cross-entropy alone: add z_loss * mean((log Z)^2) "
                  "with log Z the log-sum-exp of the logits (a softmax's probabilities sum to 1, "
                  "so a log Z taken from them is 0).",
                  "缺少 z 项：损失只有交叉熵。加上 z_loss * mean((log Z)^2)，其中 log Z 是 logits 的 "
                  "log-sum-exp（softmax 概率之和为 1，从概率算出的 log Z 恒为 0）。"),
    "z_term": ("wrong z-term", "the z-term is z_loss * mean over the kept tokens of (log Z)^2, "
               "log Z = logsumexp of the token's logits.",
               "z 项不对：应为 z_loss 乘以计入的 token 上 (log Z)^2 的平均，log Z 是该 token 的 logits 的 "
               "log-sum-exp。"),
    "coefficient_on_ce": ("the coefficient on the cross-entropy", "z_loss multiplies the "
                          "z-term only: loss = CE + z_loss * mean((log Z)^2).",
                          "系数乘到了交叉熵上：z_loss 只乘 z 项，loss = CE + z_loss * mean((log Z)^2)。"),
    "target_logit": ("the target's logit picked wrongly", "each token's loss uses its own "
                     "target's logit: x[i, t_i], i.e. logits.gather(-1, targets[:, None]) or "
                     "logits[torch.arange(N), targets].",
                     "取目标 logit 的方式不对：每个 token 用它自己目标的 logit x[i, t_i]，即 "
                     "logits.gather(-1, targets[:, None]) 或 logits[torch.arange(N), targets]。"),
    "wrong_dim": ("normalized over the wrong dim", "log Z is taken over the vocabulary, the "
                  "last dim: adding a constant to one token's logits must not change its loss.",
                  "在错误的维度上归一化：log Z 要在词表（最后一维）上求；给某个 token 的 logits 加同一个"
                  "常数，它的损失不应改变。"),
    "mean_over_vocab": ("averaged over the vocabulary", "log Z sums exp over the vocabulary "
                        "(log(sum), not log(mean)), and the loss averages over tokens only, "
                        "not over the (N, V) matrix.",
                        "在词表上取了平均：log Z 对词表求和（log(sum)，不是 log(mean)），损失只对 token "
                        "取平均，而不是对 (N, V) 矩阵取平均。"),
    "sign": ("sign flipped", "cross-entropy is -log p(target) = log Z - x_target, which is "
             "never negative.",
             "符号反了：交叉熵是 -log p(target) = log Z - x_target，不会是负数。"),
    "defaults": ("wrong defaults", "the defaults are z_loss=1e-4 (PaLM's) and ignore_index=-100 "
                 "(PyTorch's).",
                 "默认值不对：z_loss 默认 1e-4（PaLM 的取值），ignore_index 默认 -100（PyTorch 的取值）。"),
    "ce_term": ("wrong cross-entropy term", "with z_loss = 0 the loss is the mean over kept "
                "tokens of log Z - x_target.",
                "交叉熵项不对：z_loss = 0 时，损失应是计入的 token 上 log Z - x_target 的平均。"),
})

_HALF = (torch.float16, torch.bfloat16)


def _loss(logits, targets, z_loss=1e-4, ignore_index=-100, *, upcast=True, lse="stable",
          reduce="mean", denominator="kept", z_tokens="kept", z_form="square", coef="z",
          pick="gather", norm_dim=-1, sign=1.0):
    """A cross-entropy + z-loss; each keyword other than its default is one classic mistake."""
    V = logits.shape[-1]
    x = logits.reshape(-1, V)
    x = x.float() if upcast and x.dtype in _HALF else x
    t = targets.reshape(-1)
    keep = t != ignore_index
    safe = torch.where(keep, t, torch.zeros_like(t))
    if norm_dim == 0:                                    # log-softmax over the tokens
        m = x.amax(0, keepdim=True)
        log_z_cols = m + torch.log(torch.exp(x - m).sum(0, keepdim=True))
        mr = x.amax(-1)
        log_z = mr + torch.log(torch.exp(x - mr[:, None]).sum(-1))
        nll = (log_z_cols.expand_as(x) - x).gather(-1, safe[:, None]).squeeze(-1)
    else:
        m = x.amax(-1)
        if lse == "no_max":
            log_z = torch.log(torch.exp(x).sum(-1))
        elif lse == "global":                           # one max for the whole tensor
            log_z = x.max() + torch.log(torch.exp(x - x.max()).sum(-1))
        elif lse == "not_added":
            log_z = torch.log(torch.exp(x - m[:, None]).sum(-1))
        elif lse == "mean":
            log_z = m + torch.log(torch.exp(x - m[:, None]).mean(-1))
        else:
            log_z = m + torch.log(torch.exp(x - m[:, None]).sum(-1))
        if pick == "columns":                            # logits[:, targets]: every token's target
            x_t = x[:, safe].mean(-1)
        else:
            x_t = x.gather(-1, safe[:, None]).squeeze(-1)
        nll = log_z - x_t
    w = keep.to(x.dtype)
    n = w.sum() if denominator == "kept" else torch.tensor(float(len(t)), dtype=x.dtype)
    ce = sign * (nll * w).sum() / (1 if reduce == "sum" else n)
    zw = w if z_tokens == "kept" else torch.ones_like(w)
    zn = zw.sum() if denominator == "kept" or z_tokens != "kept" else n
    if z_form == "square":
        z = (log_z.pow(2) * zw).sum() / (1 if reduce == "sum" else zn)
    elif z_form == "plain":
        z = (log_z * zw).sum() / (1 if reduce == "sum" else zn)
    elif z_form == "square_of_mean":
        z = ((log_z * zw).sum() / zn).pow(2)
    else:                                                # "none": log Z of the probabilities, 0
        z = torch.zeros((), dtype=x.dtype)
    if coef == "on_ce":
        return z_loss * ce + z
    if coef == "both":
        return z_loss * (ce + z)
    return ce + z_loss * z


def _mutant(**knobs):
    return lambda logits, targets, z_loss, ignore_index: _loss(logits, targets, z_loss,
                                                               ignore_index, **knobs)


CE_Z_MUTANTS = [
    ("no_max_subtracted", _mutant(lse="no_max", upcast=False)),
    ("no_max_subtracted", _mutant(lse="no_max")),
    ("global_max", _mutant(lse="global")),
    ("max_not_added_back", _mutant(lse="not_added")),
    ("sum_over_tokens", _mutant(reduce="sum")),
    ("ignored_in_mean", _mutant(denominator="all")),
    ("z_over_ignored", _mutant(z_tokens="all")),
    ("z_not_squared", _mutant(z_form="plain")),
    ("z_square_of_mean", _mutant(z_form="square_of_mean")),
    ("no_z_term", _mutant(z_form="none")),
    ("coefficient_on_ce", _mutant(coef="on_ce")),
    ("coefficient_on_ce", _mutant(coef="both")),
    ("target_logit", _mutant(pick="columns")),
    ("wrong_dim", _mutant(norm_dim=0)),
    ("mean_over_vocab", _mutant(lse="mean")),
    ("sign", _mutant(sign=-1.0)),
]


def reference(logits, targets, z_loss=1e-4, ignore_index=-100):
    """F.cross_entropy (mean over kept tokens) + z_loss * mean over kept tokens of
    torch.logsumexp(logits, -1)^2, in float32 for half logits."""
    V = logits.shape[-1]
    x = logits.reshape(-1, V)
    x = x.float() if x.dtype in _HALF else x
    t = targets.reshape(-1)
    keep = t != ignore_index
    ce = F.cross_entropy(x, t, ignore_index=ignore_index)
    return ce + z_loss * torch.logsumexp(x, -1)[keep].pow(2).mean()


def _targets(shape, V, seed, ignored=(), ignore_index=-100):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(V, shape, generator=g)
    flat = t.view(-1)
    for i in ignored:
        flat[i] = ignore_index
    return t


def _inputs(shape, seed, dtype=torch.float32, *, scale=2.0, offset=0.0, ignored=(),
            ignore_index=-100):
    return lambda: (randn(*shape, seed=seed, dtype=dtype, scale=scale, offset=offset),
                    _targets(shape[:-1], shape[-1], seed + 1, ignored, ignore_index))


def _far_rows():
    """float32 logits (4, 12) whose rows sit near -60, 60, 0 and 30: exp(x - a global max)
    underflows to 0 on the lowest row."""
    x = randn(4, 12, seed=35, scale=1.0) + torch.tensor([[-60.0], [60.0], [0.0], [30.0]])
    return x, _targets((4,), 12, 36)


CASES = [
    Case("default z_loss and ignore_index, logits near 20", _inputs((6, 10), 10, torch.float64,
                                                                   offset=20.0),
         {"z_loss": 1e-4, "ignore_index": -100}, defaults=("z_loss", "ignore_index")),
    Case("(B, T, V), 3 tokens ignored, z_loss = 0.1",
         _inputs((2, 5, 11), 20, torch.float64, offset=3.0, ignored=(1, 4, 8)),
         {"z_loss": 0.1, "ignore_index": -100}),
    Case("logits near 100", _inputs((8, 50), 30, offset=100.0, ignored=(2,)),
         {"z_loss": 1e-3, "ignore_index": -100}),
    Case("rows far apart: row maxima from -60 to 60", _far_rows, {"z_loss": 1e-4,
                                                                  "ignore_index": -100}),
    Case("ignore_index = 0, z_loss = 0.01", _inputs((12, 7), 40, torch.float64, offset=-2.0,
                                                   ignored=(0, 5, 6), ignore_index=0),
         {"z_loss": 0.01, "ignore_index": 0}),
    Case("logits up to about 17, 4 tokens ignored",
         _inputs((3, 4, 32), 50, torch.float16, scale=3.0, offset=8.0, ignored=(0, 3, 7, 11)),
         {"z_loss": 1e-2, "ignore_index": -100}),
    Case("", _inputs((8, 64), 60, torch.bfloat16, scale=3.0, offset=2.0, ignored=(5,)),
         {"z_loss": 1e-2, "ignore_index": -100}),
]
BACKWARD = Case("backward", lambda: (randn(5, 7, seed=70, dtype=torch.float64, scale=2.0,
                                           offset=1.0),),
                {"targets": torch.tensor([3, -100, 0, 6, 2]), "z_loss": 0.1,
                 "ignore_index": -100})

_FORBIDDEN = {"cross_entropy": "F.cross_entropy (or nn.CrossEntropyLoss)",
              "nll_loss": "F.nll_loss", "log_softmax": "log_softmax (F., torch. or Tensor.)",
              "special_log_softmax": "torch.special.log_softmax",
              "logsumexp": "torch.logsumexp (or Tensor.logsumexp)",
              "special_logsumexp": "torch.special.logsumexp"}


def _judge(s: Session):
    """The loss against the reference at the tolerance of the logits' dtype; for half logits a
    loss returned in the logits' dtype is accepted as well as float32."""
    def judge(got, args, case):
        logits = args[0]
        want = reference(*args)
        if isinstance(got, torch.Tensor) and logits.dtype in _HALF and got.dtype == logits.dtype:
            got = got.float()
        tol = tolerance(logits.dtype, float(want.abs()), case.tol_factor)
        s.expect_close(got, want, mutants=bind(CE_Z_MUTANTS, *args), tol=tol, what="loss")
    return judge


def check_cross_entropy_z_loss(fn, *, time_limit: float = 3.0) -> CheckResult:
    """Check ``fn(logits, targets, z_loss=1e-4, ignore_index=-100)`` against F.cross_entropy +
    z_loss * mean((torch.logsumexp)^2) over the tokens not ignored."""
    s = Session("Cross-entropy + z-loss", CE_Z_MISTAKES, exercise="cross_entropy_z_loss",
                time_limit=time_limit, forbidden=_FORBIDDEN,
                error_hints=((r"index -\d+ is out of bounds", "ignore_index_unused"),
                             (r"index \d+ is out of bounds for dimension 0", "target_logit"),
                             (BROADCAST_ERROR, "broadcast")))
    if not s.require_callable(fn):
        return s.result()

    run_cases(s, fn, CASES, judge=_judge(s))
    run_backward(s, fn, BACKWARD, ("logits",), reference=reference, mutants=CE_Z_MUTANTS)
    s.probe(*_probes(s, fn))
    return s.result()


def _probes(s: Session, fn) -> list:
    """Properties on float64 logits, each measured on the learner's own outputs: a loss that
    ignores a token equals the loss without it; a mean does not change when the batch is
    repeated; with z_loss = 0 the loss does not change when every logit, or one token's logits,
    move by a constant; the z-term, L(z) - L(0), is mean((log Z)^2); the defaults; logits near
    100 (float32) stay finite."""
    zero = torch.zeros((), dtype=torch.float64)
    x3 = randn(2, 4, 7, seed=900, dtype=torch.float64, scale=2.0, offset=3.0)   # (B, T, V)
    t3 = _targets((2, 4), 7, 901)
    x2 = randn(6, 9, seed=902, dtype=torch.float64, scale=2.0, offset=2.0)       # (N, V)
    t2 = torch.tensor([4, -100, 0, 8, -100, 2])
    keep = t2 != -100

    def loss(x, t, z, ignore_index=-100, **kw):
        return float(output(s, fn, x, t, z, ignore_index, like=zero, **kw))

    def ref_ce(x, t, ignore_index=-100):
        return float(reference(x, t, 0.0, ignore_index))

    def log_z(x):
        return torch.logsumexp(x.reshape(-1, x.shape[-1]), -1)

    def overflow():
        x = randn(4, 16, seed=903, dtype=torch.float32, scale=2.0, offset=100.0)
        y = s.call(fn, x, _targets((4,), 16, 904), 1e-4, -100)
        if isinstance(y, torch.Tensor) and y.numel() == 1 and not bool(y.isfinite().all()):
            return ("no_max_subtracted", "With float32 logits near 100 your loss is "
                    f"{fmt(float(y))}: exp(100) overflows float32 (its maximum is about 3.4e38 "
                    "= e^88.7). Subtract each row's max before exp and add it back: log Z = m + "
                    "log(sum(exp(x - m))).")
        return None

    def far_rows():
        x = randn(3, 8, seed=906, dtype=torch.float32) + torch.tensor([[-60.0], [60.0], [0.0]])
        y = s.call(fn, x, _targets((3,), 8, 907), 1e-4, -100)
        if isinstance(y, torch.Tensor) and y.numel() == 1 and not bool(y.isfinite().all()):
            return ("global_max", "With float32 rows whose logits lie near -60, 60 and 0 your "
                    f"loss is {fmt(float(y))}: exp(-60 - 60) underflows to 0, so one max for the "
                    "whole tensor gives the lowest row log Z = log 0 = -inf. Subtract each "
                    "row's own max, x.amax(-1, keepdim=True).")
        return None

    def ignored():
        full, kept = loss(x2, t2, 0.1), loss(x2[keep], t2[keep], 0.1)
        if near(full, kept, 1e-6, 1e-9):
            return None
        ce_full, ce_kept = loss(x2, t2, 0.0), loss(x2[keep], t2[keep], 0.0)
        n, k = len(t2), int(keep.sum())
        if near(ce_full, ce_kept, 1e-6, 1e-9):
            return ("z_over_ignored", "With z_loss = 0 your loss with 2 of 6 tokens ignored "
                    "equals the loss of the 4 others alone, but with z_loss = 0.1 it does not: "
                    "your z-term also averages over the ignored tokens. Take both means over "
                    "the tokens whose target is not ignore_index.")
        if near(ce_full * n, ce_kept * k, 1e-6, 1e-9):
            return ("ignored_in_mean", f"With z_loss = 0 and 2 of 6 tokens ignored your loss "
                    f"is {k}/{n} of the loss of the 4 others alone: you divide by all 6 tokens. "
                    "Divide by the number of tokens not ignored.")
        return ("ignore_index_unused", "With 2 of 6 tokens ignored (target -100) your loss "
                "differs from the loss of the 4 others alone: a token whose target is "
                "ignore_index must count in neither term.")

    def other_index():
        t = t2.clone()
        t[~keep] = 5                                   # ignored through ignore_index = 5 ...
        t[t2 == 5] = 6
        full = loss(x2, t, 0.1, 5)
        if near(full, loss(x2[keep], t[keep], 0.1, 5), 1e-6, 1e-9) or \
                not near(loss(x2, t2, 0.1), loss(x2[keep], t2[keep], 0.1), 1e-6, 1e-9):
            return None                                # right, or already reported by `ignored`
        return ("ignore_index_unused", "With ignore_index = 5 your loss counts the tokens whose "
                "target is 5, though with the default -100 it ignores them: use the "
                "ignore_index argument, not a fixed -100.")

    def batch():
        one, two = loss(x3, t3, 0.1), loss(torch.cat([x3, x3]), torch.cat([t3, t3]), 0.1)
        if near(one, two, 1e-6, 1e-9):
            return None
        if near(two, 2 * one, 1e-6, 1e-9):
            return ("sum_over_tokens", "Repeating the batch twice doubled your loss: you sum "
                    "over the tokens. Take the mean, so that the loss does not grow with the batch.")
        return None

    def shift():
        base = loss(x3, t3, 0.0)
        moved = loss(x3 + 5.0, t3, 0.0)
        if near(base, moved, 1e-6, 1e-9):
            rows = randn(2, 4, 1, seed=905, dtype=torch.float64, scale=4.0)
            if near(loss(x3 + rows, t3, 0.0), base, 1e-6, 1e-9):
                return None
            return ("wrong_dim", "With z_loss = 0, adding the same constant to every logit "
                    "leaves your loss unchanged, but adding a different constant to each "
                    "token's logits changes it: you normalize over another dim than the "
                    "vocabulary. log Z is a logsumexp over the last dim, per token.")
        if near(moved - base, -5.0, 1e-6, 1e-9):
            return ("max_not_added_back", "With z_loss = 0, adding 5 to every logit lowered "
                    "your loss by 5: your log Z does not move with the logits, the max is not "
                    "added back. log Z = m + log(sum(exp(x - m))).")
        return None

    def z_term():
        xk, tk = x3, t3
        c0, c1 = loss(xk, tk, 0.0), loss(xk, tk, 1.0)
        lz = log_z(xk)
        ce = ref_ce(xk, tk)
        d = c1 - c0
        if near(d, float(lz.pow(2).mean()), 1e-6, 1e-9):
            if near(c0, ce, 1e-6, 1e-9) or near(c0, -ce, 1e-6, 1e-9):
                return None
        if near(c0, float(lz.pow(2).mean()), 1e-6, 1e-9) and near(d, ce, 1e-6, 1e-9) or \
                near(c0, 0.0, 0, 1e-9) and near(d, ce + float(lz.pow(2).mean()), 1e-6, 1e-9):
            return ("coefficient_on_ce", f"With z_loss = 0 your loss is {fmt(c0)}, not the "
                    f"cross-entropy {fmt(ce)}: z_loss multiplies the cross-entropy. It "
                    "multiplies the z-term only: CE + z_loss * mean((log Z)^2).")
        known = [("z_not_squared", lz.mean(), "mean(log Z), not squared"),
                 ("z_square_of_mean", lz.mean().pow(2), "(mean(log Z))^2, the square of the "
                  "mean; square each token's log Z first"),
                 ("no_z_term", zero, "0: there is no z-term (a log Z taken from the softmax's "
                  "probabilities is log 1 = 0)"),
                 ("mean_over_vocab", (lz - math.log(xk.shape[-1])).pow(2).mean(),
                  "mean((log Z - log V)^2): your log Z is log(mean(exp)), not log(sum(exp))")]
        if near(d, float(lz.pow(2).mean()), 1e-6, 1e-9):
            return None                               # the z-term is right: `ce` says the rest
        for key, want, text in known:
            if near(d, float(want), 1e-6, 1e-9):
                return (key, f"Your z-term, the loss at z_loss = 1 minus the loss at z_loss = 0, "
                        f"is {text}. It is mean((log Z)^2) over the kept tokens.")
        return ("z_term", f"Your z-term, the loss at z_loss = 1 minus the loss at z_loss = 0, is "
                f"{fmt(d)}; mean((log Z)^2) is {fmt(float(lz.pow(2).mean()))} on these logits.")

    def ce_value():
        c0, ce = loss(x3, t3, 0.0), ref_ce(x3, t3)
        if near(c0, ce, 1e-6, 1e-9):
            return None
        x = x3.reshape(-1, x3.shape[-1])
        t = t3.reshape(-1)
        lz = log_z(x3)
        known = [("sign", -ce, "minus the cross-entropy: it is log Z - x_target, never negative"),
                 ("mean_over_vocab", ce - math.log(x.shape[-1]), "the cross-entropy minus log V: "
                  "your log Z is log(mean(exp)); sum over the vocabulary"),
                 ("mean_over_vocab", float((lz[:, None] - x).mean()), "the mean of -log p over "
                  "the whole (N, V) matrix: take -log p of the target only"),
                 ("mean_over_vocab", ce / x.shape[-1], "the cross-entropy divided by V: average "
                  "over the tokens only"),
                 ("target_logit", float((lz - x[:, t].mean(-1)).mean()), "log Z minus the mean "
                  "of x[i, t_j] over all j: logits[:, targets] takes every token's target for "
                  "every row")]
        for key, want, text in known:
            if near(c0, float(want), 1e-6, 1e-9):
                return (key, f"With z_loss = 0 your loss is {text}.")
        return ("ce_term", f"With z_loss = 0 your loss is {fmt(c0)}; the cross-entropy, the mean "
                f"of log Z - x_target, is {fmt(ce)} on these logits.")

    def defaults():
        t = t2.clone()
        mine = float(output(s, fn, x2 + 15.0, t, like=zero))
        if near(mine, loss(x2 + 15.0, t, 1e-4), 1e-6, 1e-9):
            return None
        return ("defaults", "Called without z_loss and ignore_index your loss differs from the "
                "one with z_loss=1e-4 and ignore_index=-100 passed: set those defaults.")

    return [overflow, far_rows, ignored, other_index, batch, shift, z_term, ce_value, defaults]
