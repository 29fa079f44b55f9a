"""The Transformer block and where its normalization sits (Post, Pre, DeepNorm, Sandwich,
Reordered).

Notation: B batch, T sequence, C = d_model. Each block has two sublayers F (attention, then FFN);
each sublayer is wrapped by one of five placements:

    post      x = Norm(x + F(x))                    Vaswani et al. 2017, BERT       (后归一化)
    pre       x = x + F(Norm(x))                    GPT-2, LLaMA (+ a final norm)   (前归一化)
    deepnorm  x = LayerNorm(alpha * x + F(x))       DeepNet 2022: Post-LN with the residual
                                                    up-weighted by alpha at run time
    sandwich  x = x + Norm(F(Norm(x)))              CogView's Sandwich-LN; Gemma 2 and 3's pre-
                                                    and post-norms; the "Peri-LN" family
                                                    (arXiv 2502.02732)
    reordered x = x + Norm(F(x))                    OLMo 2's "reordered norm" (arXiv 2501.00656):
                                                    the norm on the sublayer output only
In "sandwich" and "reordered" nothing normalizes the residual stream itself, so a model adds a
final norm, as with "pre" (Gemma 3 and OLMo 2 do).
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_choice, check_int, check_number, compute_dtype
from .activations import GLU_VARIANTS, FeedForward, GLUFeedForward
from .attention import MultiHeadAttention
from .norms import LayerNorm, RMSNorm

__all__ = ["TransformerBlock", "NORMS", "PLACEMENTS", "FFNS", "make_norm", "make_ffn"]

NORMS = ("layernorm", "rmsnorm")
PLACEMENTS = ("post", "pre", "deepnorm", "sandwich", "reordered")
PLAIN_FFNS = ("relu", "gelu", "swish")          # FeedForward with the activation of that name
FFNS = (*PLAIN_FFNS, *GLU_VARIANTS, "geglu_tanh")    # GLUFeedForward of that variant


def make_norm(norm: str, d_model: int, fused: bool = False, eps: float = 1e-5, *,
              device=None, dtype=None) -> nn.Module:
    """A fresh LayerNorm or RMSNorm over d_model (eps 1e-5 by default for both): normlib's
    hand-written layers, or with ``fused=True`` PyTorch's ``nn.LayerNorm`` / ``nn.RMSNorm``, the
    same function (and parameter names) in one fused kernel each way. Tiny models spend their time
    in per-op overhead: fused norms make a 12-layer lesson model's training step about 15% fewer
    ops. device, dtype: of the parameters."""
    check_choice("make_norm", "norm", norm, NORMS)
    if not isinstance(fused, bool):
        raise TypeError(f"make_norm: fused must be True or False, got {fused!r}")
    check_number("make_norm", "eps", eps)
    layer = {("layernorm", True): nn.LayerNorm, ("rmsnorm", True): nn.RMSNorm,
             ("layernorm", False): LayerNorm, ("rmsnorm", False): RMSNorm}[norm, fused]
    return layer(d_model, eps=eps, device=device, dtype=dtype)


def make_ffn(ffn: str, d_model: int, d_ff: int | None = None, *, device=None,
             dtype=None) -> nn.Module:
    """The FFN by name. d_ff defaults to 4 d_model for the plain FFNs and to int(8 d_model / 3)
    for the GLU variants, which keeps the parameter count equal (Shazeer 2020, Section 2)."""
    check_choice("make_ffn", "ffn", ffn, FFNS)
    if ffn in PLAIN_FFNS:
        return FeedForward(d_model, d_ff or 4 * d_model, activation=ffn, device=device,
                           dtype=dtype)
    return GLUFeedForward(d_model, d_ff or int(8 * d_model / 3), variant=ffn, device=device,
                          dtype=dtype)


class TransformerBlock(nn.Module):
    """One Transformer layer: self-attention then FFN, each wrapped by the chosen ``placement``.

    Args:
        d_model: width C; n_heads: divides d_model.
        n_kv_heads: key/value heads of the attention (GQA), divides n_heads; None means n_heads.
        norm: "layernorm" | "rmsnorm" (DeepNorm is defined with LayerNorm; any norm is allowed).
        placement: "post" | "pre" | "deepnorm" | "sandwich" | "reordered" (module docstring).
            In "reordered" norm1 and norm2 act on the attention's and the FFN's outputs.
        ffn: "relu" | "gelu" | "swish" | "glu" | "bilinear" | "reglu" | "geglu" | "swiglu" |
            "geglu_tanh" (Gemma's: GEGLU with GELU's tanh form).
        d_ff: FFN hidden width (default: see ``make_ffn``).
        norm_eps: the norms' eps (1e-5; HF LlamaConfig's default rms_norm_eps is 1e-6).
        rope: rotate q and k with RoPE; rope_base: its frequency base; causal: mask future
            positions.
        qk_norm, sliding_window, softcap: the attention's (see ``MultiHeadAttention``); the
            QK-norms take norm_eps.
        fused_norm: PyTorch's fused nn.LayerNorm / nn.RMSNorm instead of normlib's (see make_norm).
        alpha: DeepNorm's residual weight, used only with placement="deepnorm". Stored as a 0-dim
            buffer (not a Python float), so that Post-LN (alpha = 1) and DeepNorm blocks of one
            shape have the same structure and can be stacked with
            ``torch.func.stack_module_state`` and run under ``torch.vmap``. The buffer is float32,
            float64 in a float64 module, and never half: ``.to(torch.bfloat16)`` would round
            (2 * 12)^(1/4) = 2.21336 to 2.21875. A half x is multiplied in float32 and rounded
            once, as torch multiplies a half tensor by a Python float, so alpha * x equals x
            times the Python float bit for bit in every float dtype.
        device, dtype: of the parameters, as every torch module's factory kwargs.
    ``forward(x, cache=None, position_embeddings=None)``: (B, T, C) -> (B, T, C); ``cache`` is the
    attention's ``KVCache`` for step-by-step decoding, ``position_embeddings`` RoPE's (cos, sin)
    (see ``MultiHeadAttention``).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, *,
                 norm: str = "layernorm", norm_eps: float = 1e-5, placement: str = "pre",
                 ffn: str = "relu", d_ff: int | None = None, rope: bool = False,
                 rope_base: float = 10000.0, causal: bool = True, fused_norm: bool = False,
                 alpha: float = 1.0, qk_norm: str | None = None,
                 sliding_window: int | None = None, softcap: float | None = None, device=None,
                 dtype=None):
        super().__init__()
        fn = "TransformerBlock"
        check_int(fn, "d_model", d_model, minimum=1)
        check_int(fn, "n_heads", n_heads, minimum=1)
        check_choice(fn, "norm", norm, NORMS)
        check_choice(fn, "placement", placement, PLACEMENTS)
        check_choice(fn, "ffn", ffn, FFNS)
        if d_ff is not None:
            check_int(fn, "d_ff", d_ff, minimum=1)
        check_number(fn, "alpha", alpha, positive=True)
        if alpha != 1.0 and placement != "deepnorm":
            raise ValueError(f"{fn}: alpha is DeepNorm's residual weight and needs "
                             f"placement='deepnorm', got alpha={alpha} with placement={placement!r}")
        self.placement = placement
        self._alpha = float(alpha)
        wide = (dtype or torch.get_default_dtype()) == torch.float64
        self.register_buffer("alpha", self._alpha_buffer(wide, device), persistent=False)
        factory = {"device": device, "dtype": dtype}
        self.attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, rope=rope,
                                       rope_base=rope_base, causal=causal, qk_norm=qk_norm,
                                       qk_norm_eps=norm_eps, sliding_window=sliding_window,
                                       softcap=softcap, **factory)
        self.ffn = make_ffn(ffn, d_model, d_ff, **factory)
        self.norm1, self.norm2 = (make_norm(norm, d_model, fused_norm, norm_eps, **factory)
                                  for _ in range(2))
        if placement == "sandwich":   # a second norm on each sublayer's output
            self.norm1_out, self.norm2_out = (make_norm(norm, d_model, fused_norm, norm_eps,
                                                        **factory) for _ in range(2))

    def _alpha_buffer(self, wide: bool, device) -> torch.Tensor:
        return torch.tensor(self._alpha, dtype=torch.float64 if wide else torch.float32,
                            device=device)                     # 0-dim; see Args

    def _apply(self, fn, recurse=True):
        # alpha is a constant, not a weight: after .to / .double() / .half() it is rebuilt from
        # the Python float, float64 in a float64 module and float32 otherwise (see Args).
        super()._apply(fn, recurse)
        self.alpha = self._alpha_buffer(self.alpha.dtype == torch.float64, self.alpha.device)
        return self

    def _sublayer(self, x, f, norm, norm_out=None):
        if self.placement == "pre":
            return x + f(norm(x))
        if self.placement == "sandwich":
            return x + norm_out(f(norm(x)))
        if self.placement == "reordered":
            return x + norm(f(x))
        # post (alpha = 1) and deepnorm; alpha * x in float32 for half x, as x * a Python float
        return norm((x.to(compute_dtype(x)) * self.alpha).type_as(x) + f(x))

    def forward(self, x, cache=None, position_embeddings=None):    # (B, T, C) -> (B, T, C)
        sandwich = self.placement == "sandwich"

        def attn(h):
            return self.attn(h, cache, position_embeddings)

        x = self._sublayer(x, attn, self.norm1, self.norm1_out if sandwich else None)
        return self._sublayer(x, self.ffn, self.norm2, self.norm2_out if sandwich else None)

    def extra_repr(self) -> str:
        return f"placement={self.placement!r}, alpha={self.alpha.item():.4g}"
