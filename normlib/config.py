"""What a ``TinyTransformerLM`` computes besides its weights: ``ModelConfig``, checked as a whole when
it is made, and ``ModelConfig.differences``, the one definition of "computes the same".

Three readers trust a config without looking inside the model: the model (``normlib.model``) builds
itself from it, ``train_ensemble`` (``normlib.train``) compares its members' configs, and the HF
loader (``normlib.hf``) compares a model's config with the one a ``LlamaConfig`` describes. So a
config that constructs is one the model can build: ``__post_init__`` checks every field and every
rule between fields, and one error names every problem. This module builds no tensor; it sits
under ``model``, ``train`` and ``hf``, and imports none of them (torchtune's models never import
their HF converters either).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from ._checks import check_choice, check_int, check_number
from .attention import QK_NORMS
from .blocks import FFNS, NORMS, PLACEMENTS, PLAIN_FFNS
from .deepnorm import deepnorm_constants

__all__ = ["ModelConfig"]


@dataclass(frozen=True)
class ModelConfig:
    """Everything that decides what a ``TinyTransformerLM`` computes, besides its weights (as
    nanoGPT's ``GPTConfig`` and HF's ``LlamaConfig``). Frozen: ``dataclasses.replace(config,
    n_layers=6)`` makes a new one, checked again.

    Fields: vocab_size V, d_model C, n_layers, n_heads H, max_seq_len; n_kv_heads (None: H);
    norm ("layernorm" | "rmsnorm") and norm_eps; placement ("post" | "pre" | "deepnorm" |
    "sandwich" | "reordered"); ffn (a name of ``FFNS``) and d_ff (None: see ``make_ffn``); rope
    and rope_base; causal; fused_norm (torch's fused norms, the same function); alpha, DeepNorm's
    residual weight (None: DeepNet's decoder-only (2 n_layers)^(1/4) with placement="deepnorm", 1
    otherwise); qk_norm, sliding_window and softcap, every block's attention's (see
    ``MultiHeadAttention``).

    Checked at construction, each field and then the rules between them: d_model divisible by
    n_heads, n_heads by n_kv_heads; an even head dim d_model / n_heads with rope; sliding_window
    only with causal=True; alpha other than 1 only with placement="deepnorm". One error names
    every problem, each with its value and what was expected: TypeError when a field has the
    wrong type, ValueError otherwise.

    ``PER_MEMBER`` names the fields in which the members of one ``train_ensemble`` may differ:
    alpha is data (a buffer), not code. Post-LN and DeepNorm also share their code
    (``norm(alpha x + F(x))``), so placement "post" and "deepnorm" may be mixed too.
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    max_seq_len: int
    n_kv_heads: int | None = None
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    placement: str = "pre"
    ffn: str = "relu"
    d_ff: int | None = None
    rope: bool = False
    rope_base: float = 10000.0
    causal: bool = True
    fused_norm: bool = False
    alpha: float | None = None
    qk_norm: str | None = None
    sliding_window: int | None = None
    softcap: float | None = None

    PER_MEMBER: ClassVar[tuple[str, ...]] = ("alpha",)

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            kind = TypeError if any(isinstance(p, TypeError) for p in problems) else ValueError
            texts = [str(p).removeprefix("ModelConfig: ") for p in problems]
            if len(texts) > 1:
                texts = [f"{len(texts)} problems:", *(f"({i}) {t}" for i, t in enumerate(texts, 1))]
            raise kind("ModelConfig: " + " ".join(texts))

    @property
    def block_alpha(self) -> float:
        """The alpha every block uses: the field, or DeepNet's constant, or 1."""
        if self.alpha is not None:
            return self.alpha
        if self.placement == "deepnorm":
            return deepnorm_constants(num_decoder_layers=self.n_layers)["decoder"][0]
        return 1.0

    def _computed(self) -> dict:
        """The fields as the model uses them: n_kv_heads, d_ff and alpha with their defaults
        filled in (make_ffn's d_ff: 4 C for the plain FFNs, int(8 C / 3) for the GLU ones)."""
        d_ff = self.d_ff or (4 * self.d_model if self.ffn in PLAIN_FFNS
                             else int(8 * self.d_model / 3))
        return {**dataclasses.asdict(self), "n_kv_heads": self.n_kv_heads or self.n_heads,
                "d_ff": d_ff, "alpha": self.block_alpha}

    def differences(self, other: ModelConfig, *,
                    ignore: tuple[str, ...] = PER_MEMBER) -> list[tuple[str, object, object]]:
        """(field, self's value, other's value) for every field, except those in ``ignore``, in
        which a model of this config computes differently from one of ``other``; [] when they
        compute the same. The values are the ones the model uses: n_kv_heads, d_ff and alpha with
        their defaults filled in. Placement "post" is "deepnorm" (the same code,
        ``norm(alpha x + F(x))``; Post-LN's alpha is 1).

        ``ignore`` defaults to ``PER_MEMBER`` (``train_ensemble``: alpha is a buffer of each
        member); ``load_llama_weights`` ignores the fields that do not change the computation."""
        if not isinstance(other, ModelConfig):
            raise TypeError(f"ModelConfig.differences: other must be a ModelConfig, "
                            f"got {type(other).__name__}")
        names = [f.name for f in dataclasses.fields(self)]
        if isinstance(ignore, str) or any(name not in names for name in ignore):
            raise ValueError(f"ModelConfig.differences: ignore must be a tuple of field names, "
                             f"got {ignore!r}; the fields are {', '.join(names)}")

        def code(values):                  # what runs: Post-LN is DeepNorm's code
            return {**values, "placement": "deepnorm" if values["placement"] == "post"
                    else values["placement"]}
        mine, theirs = self._computed(), other._computed()
        mine_code, their_code = code(mine), code(theirs)
        return [(name, mine[name], theirs[name]) for name in names
                if name not in ignore and mine_code[name] != their_code[name]]


def _problems(config: ModelConfig) -> list[Exception]:
    """Every field's problem, then every broken rule between fields whose values passed."""
    problems: list[Exception] = []

    def ok(check, name, *args, **kwargs) -> bool:
        try:
            check("ModelConfig", name, getattr(config, name), *args, **kwargs)
        except (TypeError, ValueError) as error:
            problems.append(error)
            return False
        return True

    def optional(check, name, *args, **kwargs) -> bool:
        """True when the field is set and passes ``check``; None is always allowed."""
        return getattr(config, name) is not None and ok(check, name, *args, **kwargs)

    sizes = {name: ok(check_int, name, minimum=1)
             for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_seq_len")}
    kv_heads = optional(check_int, "n_kv_heads", minimum=1)
    optional(check_int, "d_ff", minimum=1)
    ok(check_choice, "norm", NORMS)
    placement = ok(check_choice, "placement", PLACEMENTS)
    ok(check_choice, "ffn", FFNS)
    ok(check_number, "norm_eps")
    ok(check_number, "rope_base", positive=True)
    flags = {}
    for name in ("rope", "causal", "fused_norm"):
        flags[name] = isinstance(getattr(config, name), bool)
        if not flags[name]:
            problems.append(TypeError(f"{name} must be True or False, "
                                      f"got {getattr(config, name)!r}"))
    alpha = optional(check_number, "alpha", positive=True)
    optional(check_choice, "qk_norm", QK_NORMS)
    window = optional(check_int, "sliding_window", minimum=1)
    optional(check_number, "softcap", positive=True)

    c = config
    if sizes["d_model"] and sizes["n_heads"]:
        if c.d_model % c.n_heads:
            problems.append(ValueError(f"d_model must be divisible by n_heads, got "
                                       f"d_model={c.d_model}, n_heads={c.n_heads}"))
        elif flags["rope"] and c.rope and (c.d_model // c.n_heads) % 2:
            problems.append(ValueError(f"RoPE needs an even head_dim, got d_model // n_heads = "
                                       f"{c.d_model // c.n_heads}"))
    if sizes["n_heads"] and kv_heads and c.n_heads % c.n_kv_heads:
        problems.append(ValueError(f"n_heads must be divisible by n_kv_heads (each group of query "
                                   f"heads shares one key/value head), got n_heads={c.n_heads}, "
                                   f"n_kv_heads={c.n_kv_heads}"))
    if window and flags["causal"] and not c.causal:
        problems.append(ValueError(f"sliding_window={c.sliding_window} is causal and needs "
                                   f"causal=True, got causal=False"))
    if alpha and placement and c.alpha != 1 and c.placement != "deepnorm":
        problems.append(ValueError(f"alpha is DeepNorm's residual weight and needs "
                                   f"placement='deepnorm', got alpha={c.alpha} with "
                                   f"placement={c.placement!r}"))
    return problems
