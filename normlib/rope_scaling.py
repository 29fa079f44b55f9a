"""RoPE beyond the training length: four ways to rescale the frequencies theta_i.

Notation: D head dim, i = 0 .. D/2 - 1 the pair index, theta_i = base^(-2i/D) (``rope_frequencies``),
lambda_i = 2 pi / theta_i the pair's wavelength in tokens, L the training length, s = L' / L the
factor by which the context is extended to L'. Every function returns the new frequencies theta'_i,
shape (D/2,), to pass as ``apply_rope(x, theta=...)``; the names of the arguments are those of HF's
``rope_parameters`` (``factor``, ``original_max_position_embeddings``, ``beta_fast``, ...).

Pairs whose wavelength is shorter than L have turned many times during training: every angle they
will see at longer range is one they have seen. Pairs with lambda_i > L have only seen part of a
turn; past L their angles are new to the model. The methods differ in which pairs they slow down:

    position interpolation  theta'_i = theta_i / s                          every pair
    NTK-aware               base' = base * s^(D / (D - 2))                  low frequencies most
    YaRN (NTK-by-parts)     theta'_i = (1 - gamma_i) theta_i / s + gamma_i theta_i
    Llama 3.1               as YaRN's shape, with the ramp set by wavelengths in tokens

All are computed in float64 and returned in ``dtype`` (float32 by default, as HF's inv_freq).
"""

from __future__ import annotations

import math

import torch

from ._checks import check_int, check_number
from .rope import rope_frequencies

__all__ = ["linear_scaling_frequencies", "ntk_scaling_frequencies", "yarn_frequencies",
           "yarn_attention_factor", "llama3_frequencies"]


def _check_factor(fn: str, factor) -> None:
    check_number(fn, "factor", factor, positive=True)
    if factor < 1:
        raise ValueError(f"{fn}: factor is the context extension s = L' / L and must be >= 1, "
                         f"got {factor}")


def linear_scaling_frequencies(head_dim: int, base: float = 10000.0, factor: float = 1.0, *,
                               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Position interpolation (Chen et al. 2023, arXiv 2306.15595, Section 2.3, Eq. 4; HF "linear").

    Positions are squeezed into the trained range, m -> m / s, which is the same as dividing every
    frequency: theta'_i = theta_i / s. Every angle stays within those seen in training, and
    neighbouring tokens move s times closer in angle.
    """
    _check_factor("linear_scaling_frequencies", factor)
    return (rope_frequencies(head_dim, base, dtype=torch.float64) / factor).to(dtype)


def ntk_scaling_frequencies(head_dim: int, base: float = 10000.0, factor: float = 1.0, *,
                            dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """NTK-aware scaling (bloc97, 2023; written up in YaRN, Peng et al. 2023, Section 3.1).

    A larger base instead of smaller positions: base' = base * s^(D / (D - 2)), so that the
    lowest frequency is divided by exactly s (as in position interpolation) while the highest,
    theta_0 = 1, is not changed; the pairs in between are slowed by s^(2i / (D - 2)).
    Dynamic NTK (YaRN Section 3.3; HF "dynamic") recomputes s from the current length l as the
    sequence grows: HF uses s = factor * l / L - (factor - 1) for l > L, which for factor = 1 is
    l / L, and no scaling up to L.
    """
    fn = "ntk_scaling_frequencies"
    check_int(fn, "head_dim", head_dim, minimum=4)
    _check_factor(fn, factor)
    check_number(fn, "base", base, positive=True)
    return rope_frequencies(head_dim, base * factor ** (head_dim / (head_dim - 2)),
                            dtype=torch.float64).to(dtype)


def yarn_frequencies(head_dim: int, base: float = 10000.0, factor: float = 1.0, *,
                     original_max_position_embeddings: int, beta_fast: float = 32.0,
                     beta_slow: float = 1.0, truncate: bool = True,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """YaRN's frequencies, "NTK-by-parts" (Peng et al. 2023, arXiv 2309.00071, Sections 3.2, 3.4).

    r_i = L / lambda_i counts the turns pair i makes over the training length L. Pairs with many
    turns (r_i > beta_fast) keep theta_i; pairs with fewer than beta_slow turns are interpolated,
    theta_i / s; in between a linear ramp gamma_i blends the two:
        theta'_i = (1 - gamma_i) * theta_i / s + gamma_i * theta_i.
    The paper writes gamma as linear in r; the authors' code and HF ramp linearly in the pair
    index i between the (fractional) indices where r_i = beta_fast and r_i = beta_slow, with
    i_r = D ln(L / (2 pi r)) / (2 ln base), rounded outward (floor, ceil) when ``truncate``, as
    HF does by default. We follow the code. YaRN also scales the attention logits: see
    ``yarn_attention_factor``.
    """
    fn = "yarn_frequencies"
    _check_factor(fn, factor)
    check_int(fn, "original_max_position_embeddings", original_max_position_embeddings, minimum=1)
    check_number(fn, "beta_fast", beta_fast, positive=True)
    check_number(fn, "beta_slow", beta_slow, positive=True)
    theta = rope_frequencies(head_dim, base, dtype=torch.float64)              # (D/2,)
    L = original_max_position_embeddings

    def index_of(turns: float) -> float:          # the pair index i with r_i = turns
        return head_dim * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = index_of(beta_fast), index_of(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001                             # as the reference code: avoid a zero width
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    gamma = 1 - ((i - low) / (high - low)).clamp(0, 1)                         # 1: keep theta_i
    return ((1 - gamma) * theta / factor + gamma * theta).to(dtype)


def yarn_attention_factor(factor: float) -> float:
    """YaRN's attention temperature (Peng et al. 2023, Section 3.4): logits q.k / sqrt(D) are
    divided by t with sqrt(1/t) = 0.1 ln(s) + 1 (1 for s <= 1).

    Returns sqrt(1/t). HF multiplies cos and sin by it ("attention_factor"), so that q and k are
    each scaled by sqrt(1/t) and their dot product by 1/t; ``apply_rope(x, theta=...) * factor``
    does the same.
    """
    check_number("yarn_attention_factor", "factor", factor, positive=True)
    return 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0


def llama3_frequencies(head_dim: int, base: float = 500000.0, factor: float = 8.0, *,
                       low_freq_factor: float = 1.0, high_freq_factor: float = 4.0,
                       original_max_position_embeddings: int = 8192,
                       dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Llama 3.1's frequency scaling (Meta's reference code, ``apply_scaling`` in the llama-models
    repository; HF "llama3"). The defaults are Llama 3.1's: s = 8, 1, 4, L = 8,192, base 500,000.

    With lambda_i = 2 pi / theta_i: pairs with lambda_i < L / high_freq_factor (2,048 tokens) keep
    theta_i; pairs with lambda_i > L / low_freq_factor (8,192) get theta_i / s; in between
        theta'_i = (1 - g) theta_i / s + g theta_i,  g = (L / lambda_i - low) / (high - low),
    a blend linear in the number of turns L / lambda_i (YaRN's ramp, with wavelengths in tokens).
    """
    fn = "llama3_frequencies"
    _check_factor(fn, factor)
    check_int(fn, "original_max_position_embeddings", original_max_position_embeddings, minimum=1)
    check_number(fn, "low_freq_factor", low_freq_factor, positive=True)
    check_number(fn, "high_freq_factor", high_freq_factor, positive=True)
    if not high_freq_factor > low_freq_factor:
        raise ValueError(f"{fn}: high_freq_factor must be > low_freq_factor, got "
                         f"high_freq_factor={high_freq_factor}, low_freq_factor={low_freq_factor}")
    theta = rope_frequencies(head_dim, base, dtype=torch.float64)              # (D/2,)
    L = original_max_position_embeddings
    turns = L * theta / (2 * math.pi)                                          # L / lambda_i
    g = ((turns - low_freq_factor) / (high_freq_factor - low_freq_factor)).clamp(0, 1)
    return ((1 - g) * theta / factor + g * theta).to(dtype)
