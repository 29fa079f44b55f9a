"""BatchNorm, LayerNorm and RMSNorm: a functional core and a thin nn.Module around each.

Notation: B batch, C channels (features), L length, H/W height/width, T sequence.
The three layers differ only in *which elements share one mean and variance*:
- BatchNorm: per channel, over the batch and every spatial position   -> reduce dims (0, 2, 3, ...)
- LayerNorm: per sample, over the trailing ``normalized_shape`` dims   -> reduce dims (-k, ..., -1)
- RMSNorm:   as LayerNorm, but no mean is subtracted (re-scaling only) -> reduce dims (-k, ..., -1)

Conventions (all as PyTorch): the *biased* variance (divide by n) normalizes; eps sits inside the
square root; half-precision inputs are computed in float32 and returned in their own dtype.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from ._checks import check_int, check_number, check_tensor, compute_dtype

__all__ = ["batch_norm", "BatchNorm", "layer_norm", "LayerNorm", "rms_norm", "RMSNorm"]


# --------------------------------------------------------------------------- BatchNorm
def batch_norm(
    x: torch.Tensor,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Batch normalization, the same signature and numbers as ``F.batch_norm``.

    y = (x - mu_c) / sqrt(sigma2_c + eps) * weight_c + bias_c, with mu_c and sigma2_c per channel c.

    In training, mu and sigma2 are the batch statistics over every dim except dim 1, sigma2 the
    *biased* variance (divide by n); the running buffers are updated in place with
    running = (1 - momentum) * running + momentum * batch_stat, where running_var receives the
    *unbiased* variance (divide by n - 1). In eval, the running statistics are used.

    Args:
        x: (B, C), (B, C, L) or (B, C, H, W).
        running_mean, running_var: (C,) buffers, or None to always use batch statistics
            (then ``training`` must be True).
        weight, bias: (C,) affine parameters gamma and beta, or None.
        training: use batch statistics and update the running buffers.
        momentum: weight of the new batch statistic in the running average.
        eps: added to the variance inside the square root.
    Returns:
        Tensor of x's shape and dtype.
    """
    fn = "batch_norm"
    check_tensor(fn, "x", x)
    check_number(fn, "eps", eps)
    check_number(fn, "momentum", momentum)
    if x.dim() < 2:
        raise ValueError(
            f"{fn}: x must have at least 2 dims (B, C, ...), got shape {tuple(x.shape)}"
        )
    C = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (C,):
            raise ValueError(
                f"{fn}: {name} must have shape ({C},) to match x's {C} channels (dim 1), "
                f"got {tuple(t.shape)}"
            )
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{fn}: pass both running_mean and running_var, or neither")
    if running_mean is None and not training:
        raise ValueError(f"{fn}: running statistics are None, so training must be True")

    dims = [0, *range(2, x.dim())]           # every dim but the channel dim
    shape = [1, C] + [1] * (x.dim() - 2)     # (1, C, 1, 1) to broadcast per channel
    xf = x.to(compute_dtype(x))
    if training:
        n = x.shape[0] * math.prod(x.shape[2:])             # values per channel
        if n == 0:                           # an empty batch: nothing to normalize, as torch
            return x.clone()
        if n == 1:                           # torch's message, word for word (tests check it)
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size {x.size()}"
            )
        mu = xf.mean(dim=dims)
        sigma2 = xf.var(dim=dims, unbiased=False)           # biased: normalizes the batch
        if running_mean is not None:
            with torch.no_grad():
                unbiased = sigma2 * n / (n - 1)             # unbiased: estimates the population
                running_mean.mul_(1 - momentum).add_(momentum * mu.to(running_mean.dtype))
                running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
    else:
        mu, sigma2 = running_mean.to(xf.dtype), running_var.to(xf.dtype)

    y = (xf - mu.view(shape)) * torch.rsqrt(sigma2.view(shape) + eps)
    if weight is not None:
        y = y * weight.to(y.dtype).view(shape)
    if bias is not None:
        y = y + bias.to(y.dtype).view(shape)
    return y.type_as(x)


class BatchNorm(nn.Module):
    """BatchNorm for (B, C), (B, C, L) or (B, C, H, W) input: ``nn.BatchNorm1d/2d`` in one class.

    Buffers (state that LayerNorm does not need): ``running_mean`` (C,), ``running_var`` (C,),
    ``num_batches_tracked`` (counts training forwards). ``momentum=None`` makes the running
    statistics a cumulative average: momentum = 1 / num_batches_tracked. Train/eval behaviour
    follows ``self.training``; a module without running statistics uses batch statistics in both.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        check_int("BatchNorm", "num_features", num_features, minimum=1)
        check_number("BatchNorm", "eps", eps)
        if momentum is not None:
            check_number("BatchNorm", "momentum", momentum)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        factory = {"device": device, "dtype": dtype}
        if affine:
            self.weight = nn.Parameter(torch.ones(num_features, **factory))
            self.bias = nn.Parameter(torch.zeros(num_features, **factory))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **factory))
            self.register_buffer("running_var", torch.ones(num_features, **factory))
            self.register_buffer("num_batches_tracked",
                                 torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor("BatchNorm", "x", x)
        if x.dim() < 2 or x.shape[1] != self.num_features:
            raise ValueError(
                f"BatchNorm: x must have shape (B, {self.num_features}, ...) with the channels in "
                f"dim 1, got {tuple(x.shape)}"
            )
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:                      # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or self.running_mean is None
        return batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                          use_batch_stats, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


# --------------------------------------------------------------------------- LayerNorm / RMSNorm
def _as_shape(normalized_shape) -> tuple[int, ...]:
    """An int n means (n,), as torch's normalized_shape."""
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)


def _normalized_dims(fn: str, x: torch.Tensor, normalized_shape) -> tuple[int, ...]:
    """Validate ``normalized_shape`` against x's trailing dims; return the dims to reduce."""
    shape = _as_shape(normalized_shape)
    k = len(shape)
    if k == 0 or k > x.dim() or tuple(x.shape[-k:]) != shape:
        raise ValueError(
            f"{fn}: normalized_shape {list(shape)} must match the last dims of x, "
            f"got x of shape {list(x.shape)}"
        )
    return tuple(range(-k, 0))


def _check_affine(fn: str, name: str, t: torch.Tensor | None, x: torch.Tensor, dims) -> None:
    if t is not None and tuple(t.shape) != tuple(x.shape[dims[0]:]):
        raise ValueError(
            f"{fn}: {name} must have shape {list(x.shape[dims[0]:])} (normalized_shape), "
            f"got {list(t.shape)}"
        )


def layer_norm(
    x: torch.Tensor,
    normalized_shape,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Layer normalization, the same signature and numbers as ``F.layer_norm``.

    y = (x - mu) / sqrt(sigma2 + eps) * weight + bias, where mu and sigma2 (biased, divide by n)
    are taken over the trailing ``normalized_shape`` dims of each sample.

    Args:
        x: (..., *normalized_shape), for example (B, T, C) with normalized_shape C.
        normalized_shape: int or tuple, the trailing dims that share one mean and variance.
        weight, bias: gamma and beta of shape normalized_shape, or None.
        eps: added to the variance inside the square root.
    Returns:
        Tensor of x's shape and dtype (computed in float32 for fp16/bf16).
    """
    fn = "layer_norm"
    check_tensor(fn, "x", x)
    check_number(fn, "eps", eps)
    dims = _normalized_dims(fn, x, normalized_shape)
    _check_affine(fn, "weight", weight, x, dims)
    _check_affine(fn, "bias", bias, x, dims)
    xf = x.to(compute_dtype(x))
    mu = xf.mean(dim=dims, keepdim=True)                       # keepdim: (..., 1) broadcasts
    xc = xf - mu
    sigma2 = (xc * xc).mean(dim=dims, keepdim=True)            # biased (divide by n), as nn.LayerNorm
    y = xc * torch.rsqrt(sigma2 + eps)                         # eps inside the sqrt
    if weight is not None:
        y = y * weight.to(y.dtype)
    if bias is not None:
        y = y + bias.to(y.dtype)
    return y.type_as(x)


class LayerNorm(nn.Module):
    """``nn.LayerNorm`` twin: learnable weight (ones) and bias (zeros) over ``normalized_shape``."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        check_number("LayerNorm", "eps", eps)
        self.normalized_shape, self.eps = _as_shape(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        factory = {"device": device, "dtype": dtype}
        if elementwise_affine:
            self.weight = nn.Parameter(torch.empty(self.normalized_shape, **factory))
        else:
            self.register_parameter("weight", None)
        if elementwise_affine and bias:
            self.bias = nn.Parameter(torch.empty(self.normalized_shape, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """weight = 1, bias = 0, as ``nn.LayerNorm.reset_parameters``."""
        if self.weight is not None:
            nn.init.ones_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


def rms_norm(
    x: torch.Tensor,
    normalized_shape,
    weight: torch.Tensor | None = None,
    eps: float | None = None,
) -> torch.Tensor:
    """Root-mean-square normalization, the same signature and numbers as ``F.rms_norm``.

    y = x / sqrt(mean(x^2) + eps) * weight, the mean over the trailing ``normalized_shape`` dims.
    No mean is subtracted: RMSNorm re-scales but does not re-center (Zhang & Sennrich 2019).

    Conventions: eps inside the sqrt (torch, LLaMA, HF; the paper's formula has no eps).
    ``eps=None`` means the machine epsilon of the *computation* dtype, as torch (PR #142848):
    ``finfo(float32).eps`` for fp16, bf16 and fp32 inputs, ``finfo(float64).eps`` for fp64.
    Weight order for fp16/bf16 inputs: normlib normalizes in float32, casts back to x's dtype,
    *then* multiplies by the weight (cast to x's dtype, so the result keeps x's dtype as
    ``F.rms_norm`` and ``layer_norm`` do), as Meta's LLaMA and HF ``LlamaRMSNorm`` do for a
    weight in the model's dtype (HF's would promote a half x to a float32 weight's dtype). torch 2.13's
    ``F.rms_norm`` / ``nn.RMSNorm`` (measured on CPU) multiply by the weight in float32 and cast
    once at the end, the order of HF ``GemmaRMSNorm``. The two orders round differently (about a
    quarter of bf16 elements differ by one ulp); for fp32 and fp64 inputs they are the same.

    Args:
        x: (..., *normalized_shape).
        normalized_shape: int or tuple of the trailing dims.
        weight: gain g of shape normalized_shape, or None.
        eps: float >= 0 or None.
    Returns:
        Tensor of x's shape and dtype.
    """
    fn = "rms_norm"
    check_tensor(fn, "x", x)
    dtype = compute_dtype(x)
    if eps is None:
        eps = torch.finfo(dtype).eps                # the computation dtype's, not x.dtype's
    check_number(fn, "eps", eps)
    dims = _normalized_dims(fn, x, normalized_shape)
    _check_affine(fn, "weight", weight, x, dims)
    xf = x.to(dtype)
    y = (xf * torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + eps)).type_as(x)
    return y * weight.to(y.dtype) if weight is not None else y     # x's dtype, as F.rms_norm


class RMSNorm(nn.Module):
    """``nn.RMSNorm`` twin: a learnable gain (ones) over ``normalized_shape``, no bias."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        if eps is not None:
            check_number("RMSNorm", "eps", eps)
        self.normalized_shape, self.eps = _as_shape(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.empty(self.normalized_shape, device=device,
                                                   dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """weight = 1, as ``nn.RMSNorm.reset_parameters``."""
        if self.weight is not None:
            nn.init.ones_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
