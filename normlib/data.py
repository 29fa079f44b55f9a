"""A synthetic language for the experiments: generated on the fly, nothing downloaded.

A ``MarkovLanguage`` of order k draws each token from a sparse distribution that depends on the
previous k tokens: every context has ``branching`` possible successors with random (Dirichlet)
probabilities. Its true conditional entropy is known, so a loss curve can be read against two
lines: log(vocab_size) (a model that learned nothing) and the entropy floor (a perfect model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._checks import check_int

__all__ = ["MarkovLanguage"]

# Building the table draws (vocab_size ** order, vocab_size) random floats and argsorts them
# (12 bytes per entry): 2^24 entries (order 3 over 64 tokens) take about 200 MB.
MAX_TABLE_ENTRIES = 2**24


@dataclass(frozen=True)
class MarkovLanguage:
    """An order-``order`` Markov language over ``vocab_size`` tokens, fixed by ``seed``.

    Frozen: the tables below are derived from the fields once, so the fields cannot change
    (``dataclasses.replace(lang, seed=1)`` makes another language).

    Attributes after construction:
        successors: (vocab_size ** order, branching) token ids each context may be followed by.
        probs:      (vocab_size ** order, branching) their probabilities (rows sum to 1).
    """

    vocab_size: int = 64
    order: int = 1
    branching: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("MarkovLanguage", "vocab_size", self.vocab_size, minimum=2)
        check_int("MarkovLanguage", "order", self.order, minimum=1)
        check_int("MarkovLanguage", "branching", self.branching, minimum=1)
        if self.branching > self.vocab_size:
            raise ValueError(f"MarkovLanguage: branching must be <= vocab_size={self.vocab_size},"
                             f" got {self.branching}")
        n_ctx = self.vocab_size ** self.order
        if n_ctx * self.vocab_size > MAX_TABLE_ENTRIES:
            raise ValueError(f"MarkovLanguage: vocab_size ** (order + 1) must be <= 2^24 (the "
                             f"table of successors; about 200 MB to build), got vocab_size="
                             f"{self.vocab_size}, order={self.order}: "
                             f"{n_ctx * self.vocab_size:,} entries")
        g = torch.Generator().manual_seed(self.seed)
        successors = torch.rand(n_ctx, self.vocab_size, generator=g) \
            .argsort(dim=-1)[:, : self.branching]
        gamma = -torch.rand(n_ctx, self.branching, generator=g).log()   # Dirichlet(1) via Exp(1)
        object.__setattr__(self, "successors", successors)     # frozen: derived once, here
        object.__setattr__(self, "probs", gamma / gamma.sum(-1, keepdim=True))

    @property
    def entropy(self) -> float:
        """Mean conditional entropy over contexts, in nats/token: the loss floor of a perfect model
        (averaged uniformly over contexts; the sampled mix of contexts moves it a little)."""
        p = self.probs
        return float(-(p * p.log()).sum(-1).mean())

    @property
    def uniform_loss(self) -> float:
        """log(vocab_size): the loss of a model that predicts every token with equal probability."""
        return math.log(self.vocab_size)

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator) -> torch.Tensor:
        """(batch_size, seq_len) token ids; the first ``order`` tokens of each row are uniform."""
        check_int("MarkovLanguage.sample", "batch_size", batch_size, minimum=1)
        check_int("MarkovLanguage.sample", "seq_len", seq_len, minimum=self.order + 1)
        V, k = self.vocab_size, self.order
        out = torch.empty(batch_size, seq_len, dtype=torch.long)
        out[:, :k] = torch.randint(V, (batch_size, k), generator=generator)
        for t in range(k, seq_len):
            ctx = torch.zeros(batch_size, dtype=torch.long)
            for j in range(k):                                  # context id in base V
                ctx = ctx * V + out[:, t - k + j]
            choice = torch.multinomial(self.probs[ctx], 1, generator=generator).squeeze(-1)
            out[:, t] = self.successors[ctx, choice]
        return out
