"""BatchNorm's catalogue of mistakes: forward mutants (train, eval) and running-statistics rules.

Notation: x is (B, C) or (B, C, H, W); the per-channel statistics are taken over every dim but 1,
n = B * H * W values per channel; m = momentum.
"""

from __future__ import annotations

from ._cases import DoesNotApply
from ._generic import catalogue

__all__ = ["BN_MISTAKES", "RUNNING_RULES", "BN_TRAIN_MUTANTS", "BN_EVAL_MUTANTS"]

BN_MISTAKES = catalogue("batch_norm", {
    "not_buffers": ("running stats not buffers", "running_mean and running_var must be registered "
                    "buffers (self.register_buffer): state that .to(), .cuda() and state_dict() "
                    "carry, and that no optimizer updates.",
                    "滑动统计量不是缓冲区（buffer）：请用 register_buffer 注册 running_mean 和 running_var。"),
    "missing_running_stats": ("no running statistics", "the module needs running_mean and "
                              "running_var, shape (C,), for eval mode.",
                              "没有滑动统计量 running_mean / running_var。"),
    "running_shape": ("running stats of the wrong shape", "running_mean and running_var have one "
                      "entry per channel: shape (C,), as nn.BatchNorm.",
                      "滑动统计量的形状不对：running_mean 和 running_var 每个通道一个值，"
                      "形状为 (C,)，与 nn.BatchNorm 相同。"),
    "running_init": ("running stats badly initialised", "running_mean starts at zeros and "
                     "running_var at ones (a variance of 0 would divide by sqrt(eps)).",
                     "滑动统计量初始化不对：running_mean 初始为 0，running_var 初始为 1（方差为 0 会除以 sqrt(eps)）"
                     "。"),
    "no_affine": ("no weight/bias", "BatchNorm has a learnable weight (gamma, ones) and bias "
                  "(beta, zeros) of shape (C,).",
                  "没有 weight / bias 参数。"),
    "batch_stats_in_eval": ("batch statistics in eval", "in eval mode you still normalize with "
                            "the batch's own mean and variance; eval must use running_mean and "
                            "running_var, so one sample's output does not depend on the others.",
                            "评估模式下仍用当前批次自己的均值和方差做归一化：eval 时应使用 running_mean 和 running_var，"
                            "一个样本的输出才不依赖于其他样本。"),
    "grad_mode_not_training": ("torch.is_grad_enabled() instead of self.training", "you decide "
                               "train vs eval from torch.is_grad_enabled(): under torch.no_grad() "
                               "in training you use the running statistics. Use self.training "
                               "(set by .train() / .eval()).",
                               "用 torch.is_grad_enabled() 判断训练模式：应看 self.training。"),
    "running_stats_in_train": ("running statistics in training", "in training you normalize with "
                               "the running statistics; training normalizes with the batch's own "
                               "mean and biased variance.",
                               "训练模式下用滑动统计量做归一化：训练时应使用当前批次自己的均值和有偏方差。"),
    "running_var_biased": ("running_var updated with the biased variance", "running_var is "
                           "updated with the biased variance; PyTorch normalizes with the biased "
                           "batch variance but stores the unbiased one (times n / (n - 1)).",
                           "running_var 用有偏方差更新：PyTorch 用无偏方差（n - 1）更新它。"),
    "momentum_reversed": ("momentum reversed", "momentum is reversed: PyTorch's update is "
                          "running = (1 - momentum) * running + momentum * batch_stat, so "
                          "momentum=0.1 moves the running value 10% of the way to the batch's.",
                          "动量用反了：running = (1 - momentum) * running + momentum * 批次统计量。"),
    "running_not_updated": ("running stats not updated", "running_mean and running_var never "
                            "change in training: update them in place (under torch.no_grad()) or "
                            "re-assign the buffers.",
                            "滑动统计量没有更新。"),
    "no_moving_average": ("running stats replaced by the batch's", "you overwrite the running "
                          "statistics with the last batch's: blend them, (1 - m) * old + m * new.",
                          "滑动统计量被直接替换成当前批次的值，而不是做滑动平均。"),
    "unbiased_with_batch_size": ("n - 1 with n = B for 4-D input", "for (B, C, H, W) input each "
                                 "channel has n = B * H * W values: the unbiased correction is "
                                 "n / (n - 1) with that n, not B / (B - 1).",
                                 "4 维输入 (B, C, H, W) 的每个通道有 n = B * H * W 个值：无偏校正是 n / (n - 1)，"
                                 "用这个 n，而不是 B / (B - 1)。"),
    "momentum_ignored": ("momentum argument ignored", "you ignore the momentum argument (0.1 "
                         "hard-coded?).",
                         "忽略了 momentum 参数：请使用传入的动量。"),
    "eps_ignored": ("eps argument ignored", "you ignore the eps argument.",
                    "忽略了传入的 eps 参数（写死了某个值？）：请使用传入的 eps。"),
    "updated_in_eval": ("running stats updated in eval", "eval mode must not change running_mean "
                        "or running_var.",
                        "评估模式下更新了滑动统计量：eval 时不应改变它们。"),
    "wrong_dims_4d": ("wrong dims for 4-D input", "for (B, C, H, W) input the statistics are per "
                      "channel, over dims (0, 2, 3): every sample and every position, kept as "
                      "shape (1, C, 1, 1) to broadcast over x; the running buffers stay (C,).",
                      "4 维输入的统计维度不对：对每个通道，在 (N, H, W) 上求统计量。"),
    "layer_axis": ("normalized over the features", "you normalize each sample over its features: "
                   "that is LayerNorm. BatchNorm normalizes each channel over the batch (dim 0).",
                   "在特征维上做了归一化，那是层归一化：批归一化对每个通道在批次上求统计量。"),
    "unbiased_in_train": ("unbiased variance in the forward pass", "training normalizes with the "
                          "biased batch variance (divide by n); only running_var stores the "
                          "unbiased one.",
                          "训练时前向传播用了无偏方差：归一化用有偏方差，只有 running_var 用无偏方差更新。"),
    "eps_outside_sqrt": ("eps outside the sqrt", "eps belongs inside the square root: "
                         "(x - mu) / sqrt(var + eps).",
                         "eps 应在开方之内：(x - mu) / sqrt(方差 + eps)。"),
    "no_eps": ("no eps", "without eps a constant channel divides 0 by 0 (NaN).",
               "漏掉了 eps：常数通道（同一通道在整个批次上取值相同）会出现 0 / 0（NaN）。"),
    "missing_keepdim": ("statistics do not broadcast", "the per-channel statistics have shape (C,); "
                        "reshape them to (1, C) or (1, C, 1, 1) (or use keepdim=True) so they "
                        "broadcast over x.",
                        "每个通道的统计量形状为 (C,)，无法广播：应 reshape 成 (1, C) 或 (1, C, 1, 1)（或用 keepdim=True）"
                        "，与 x 对齐。"),
    "detached_statistics": ("batch statistics detached", "the batch mean or variance is detached "
                            "from autograd: in training the gradient flows through them too.",
                            "批次的均值或方差被从自动求导中截断：训练时梯度也要经过它们。"),
    "running_wrong": ("wrong running statistics", "running_mean or running_var have values the "
                      "checker does not recognise: running = (1 - m) * running + m * batch_stat, "
                      "with the unbiased batch variance for running_var.",
                      "滑动统计量的值不对：running = (1 - m) * running + m * 批次统计量，"
                      "running_var 用批次的无偏方差更新。"),
    "affine": ("weight and bias misapplied", "apply the weight as a scale and the bias as a shift, "
               "per channel: y = x_hat * weight + bias.",
               "weight 和 bias 用错了：每个通道上 weight 是缩放、bias 是平移，"
               "y = x_hat * weight + bias。"),
    "affine_unused": ("weight and bias unused", "weight and bias do not change the output: y = "
                      "x_hat * weight + bias, per channel.",
                      "没有应用 weight 和 bias：每个通道上 y = x_hat * weight + bias。"),
    "eval_denominator": ("wrong eval denominator", "in eval mode divide by sqrt(running_var + "
                         "eps).",
                         "评估模式下的分母不对：应为 sqrt(running_var + eps)。"),
    "eval_depends_on_batch": ("eval output depends on the batch", "in eval mode one sample's "
                              "output must not depend on the other samples: normalize with the "
                              "running statistics only.",
                              "评估模式下的输出依赖于批次中的其他样本：eval 时只能用滑动统计量。"),
    "train_not_batch_stats": ("training does not use the batch statistics", "in training, "
                              "normalize each channel with the mean and biased variance of the "
                              "current batch.",
                              "训练时没有用当前批次的统计量：应对每个通道用当前批次的均值和有偏方差。"),
    "running_var_stat": ("running_var stores another statistic", "running_var stores the unbiased "
                         "variance of the batch (n / (n - 1) times the biased one), not the std.",
                         "running_var 里存的不是方差（是标准差？）。"),
})


def _dims(x):
    return (0, *range(2, x.dim()))


def _view(t, x):
    return t.view(1, -1, *([1] * (x.dim() - 2)))


def _normalize(x, w, b, eps, mu, var, outside=False):
    den = var.sqrt() + eps if outside else (var + eps).sqrt()
    return (x - mu) / den * _view(w, x) + _view(b, x)


def _batch(x, w, b, eps, dims=None, unbiased=False, outside=False):
    dims = _dims(x) if dims is None else dims
    mu, var = x.mean(dims, keepdim=True), x.var(dims, unbiased=unbiased, keepdim=True)
    return _normalize(x, w, b, eps, mu, var, outside)


def _per_channel_4d(dims):
    """Statistics over ``dims`` of a (B, C, H, W) input: a mistake only 4-D input shows."""
    def f(x, w, b, eps, rm, rv):
        if x.dim() != 4:
            raise DoesNotApply
        return _batch(x, w, b, eps, dims=dims)
    return f


# wrong forwards, each f(x, weight, bias, eps, running_mean, running_var)
BN_TRAIN_MUTANTS = [
    ("running_stats_in_train", lambda x, w, b, eps, rm, rv: _normalize(
        x, w, b, eps, _view(rm, x), _view(rv, x))),
    ("layer_axis", lambda x, w, b, eps, rm, rv: _batch(x, w, b, eps,
                                                       dims=tuple(range(1, x.dim())))),
    ("unbiased_in_train", lambda x, w, b, eps, rm, rv: _batch(x, w, b, eps, unbiased=True)),
    ("eps_outside_sqrt", lambda x, w, b, eps, rm, rv: _batch(x, w, b, eps, outside=True)),
    ("eps_ignored", lambda x, w, b, eps, rm, rv: _batch(x, w, b, 1e-5)),
    ("no_eps", lambda x, w, b, eps, rm, rv: _batch(x, w, b, 0.0)),
    *[("wrong_dims_4d", _per_channel_4d(d)) for d in ((0,), (0, 2), (0, 3), (2, 3), (0, 1, 2, 3))],
]

BN_EVAL_MUTANTS = [
    ("batch_stats_in_eval", lambda x, w, b, eps, rm, rv: _batch(x, w, b, eps)),
    ("eps_outside_sqrt", lambda x, w, b, eps, rm, rv: _normalize(
        x, w, b, eps, _view(rm, x), _view(rv, x), True)),
]


def _rule(biased=False, reversed_=False, fixed_m=None, n_is_batch=False, replace=False,
          frozen=False):
    """An update rule: (x, rm0, rv0, momentum) -> expected (running_mean, running_var)."""
    def update(x, rm0, rv0, momentum):
        if fixed_m is not None and fixed_m == momentum:
            return None                       # indistinguishable from the right rule here
        if n_is_batch and x.dim() < 3:
            return None
        m = fixed_m if fixed_m is not None else momentum
        mu, var = x.mean(_dims(x)), x.var(_dims(x), unbiased=False)
        n = x.shape[0] if n_is_batch else x.numel() // x.shape[1]
        var_new = var if biased else var * n / (n - 1)
        if frozen:
            return rm0, rv0
        if replace:
            return mu, var_new
        if reversed_:
            return m * rm0 + (1 - m) * mu, m * rv0 + (1 - m) * var_new
        return (1 - m) * rm0 + m * mu, (1 - m) * rv0 + m * var_new
    return update


RUNNING_RULES = [
    ("correct", _rule()),
    ("running_var_biased", _rule(biased=True)),
    ("momentum_reversed", _rule(reversed_=True)),
    ("momentum_reversed", _rule(reversed_=True, biased=True)),
    ("running_not_updated", _rule(frozen=True)),
    ("no_moving_average", _rule(replace=True)),
    ("no_moving_average", _rule(replace=True, biased=True)),
    ("unbiased_with_batch_size", _rule(n_is_batch=True)),
    ("momentum_ignored", _rule(fixed_m=0.1)),
]
