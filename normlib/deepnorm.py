"""DeepNorm (Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers", arXiv 2203.00555).

    x_{l+1} = LayerNorm(alpha * x_l + G_l(x_l))

alpha (> 1) up-weights the residual at *run time* (see ``TransformerBlock(placement="deepnorm")``);
beta (< 1) is used *once*, at initialization, as the xavier_normal_ gain of the FFN weights, v_proj
and o_proj (q_proj and k_proj get gain 1). beta never scales activations at run time.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_int, check_number

__all__ = ["deepnorm_constants", "deepnorm_init_"]


def deepnorm_constants(num_encoder_layers: int = 0, num_decoder_layers: int = 0) -> dict:
    """alpha and beta from the DeepNet paper's table (Figure 2, in Section 2 "TL;DR for practitioners").

    | architecture                    | alpha                 | beta                   |
    | encoder-only, N layers          | (2N)^(1/4)            | (8N)^(-1/4)            |
    | decoder-only, M layers          | (2M)^(1/4)            | (8M)^(-1/4)            |
    | encoder-decoder, encoder side   | 0.81 (N^4 M)^(1/16)   | 0.87 (N^4 M)^(-1/16)   |
    | encoder-decoder, decoder side   | (3M)^(1/4)            | (12M)^(-1/4)           |

    Args:
        num_encoder_layers: N >= 0; num_decoder_layers: M >= 0; at least one positive.
    Returns:
        {"encoder": (alpha, beta)} and/or {"decoder": (alpha, beta)}.
    """
    fn = "deepnorm_constants"
    check_int(fn, "num_encoder_layers", num_encoder_layers, minimum=0)
    check_int(fn, "num_decoder_layers", num_decoder_layers, minimum=0)
    N, M = num_encoder_layers, num_decoder_layers
    if N == 0 and M == 0:
        raise ValueError(f"{fn}: give num_encoder_layers and/or num_decoder_layers > 0, "
                         f"got num_encoder_layers={N}, num_decoder_layers={M}")
    if M == 0:
        return {"encoder": ((2 * N) ** 0.25, (8 * N) ** -0.25)}
    if N == 0:
        return {"decoder": ((2 * M) ** 0.25, (8 * M) ** -0.25)}
    return {
        "encoder": (0.81 * (N**4 * M) ** (1 / 16), 0.87 * (N**4 * M) ** (-1 / 16)),
        "decoder": ((3 * M) ** 0.25, (12 * M) ** -0.25),
    }


_GAIN_ONE = ("q_proj", "k_proj")
_GAIN_BETA = ("v_proj", "o_proj")


def deepnorm_init_(module: nn.Module, beta: float) -> nn.Module:
    """DeepNet initialization, in place: xavier_normal_(gain=beta) for every feed-forward linear
    layer (inside ``FeedForward`` / ``GLUFeedForward``), v_proj and o_proj; gain 1 for q_proj and
    k_proj. Biases and every other parameter are left as they are.

    Returns the module, so ``model = deepnorm_init_(Model(...), beta)`` reads naturally.
    """
    from .activations import FeedForward, GLUFeedForward

    check_number("deepnorm_init_", "beta", beta, positive=True)
    if not isinstance(module, nn.Module):
        raise TypeError(f"deepnorm_init_: module must be an nn.Module, got {type(module).__name__}")
    found = 0
    with torch.no_grad():
        for name, child in module.named_modules():
            if isinstance(child, FeedForward | GLUFeedForward):
                for linear in child.children():
                    nn.init.xavier_normal_(linear.weight, gain=beta)
                    found += 1
            elif isinstance(child, nn.Linear):
                leaf = name.rsplit(".", 1)[-1]
                if leaf in _GAIN_ONE or leaf in _GAIN_BETA:
                    nn.init.xavier_normal_(child.weight, gain=1.0 if leaf in _GAIN_ONE else beta)
                    found += 1
    if not found:
        raise ValueError("deepnorm_init_: found no q_proj/k_proj/v_proj/o_proj or feed-forward "
                         f"linear layers in {type(module).__name__}")
    return module
