"""The checker's answer: passed or not, one line per check, and the named mistake.

A ``CheckResult`` prints as a short report (its repr, so a notebook cell that ends with the result
shows it)::

    LayerNorm · 2 of 9 checks failed
      ✓ float32 (2, 5, 8)
      ✗ float64 (3, 7): wrong values, max |error| 0.0345 (looks like: unbiased variance)
      ...
    Diagnosis: you divide by the unbiased standard deviation (n - 1); ...

The text holds no timings, so it is the same on every run (nbval compares it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CheckResult", "PASS", "FAIL"]

PASS, FAIL = "✓", "✗"


@dataclass
class CheckResult:
    """What a ``check_*`` function found.

    Attributes:
        name: the exercise, e.g. "LayerNorm".
        passed: True when every check passed.
        messages: one line per check, each starting with ✓ or ✗.
        diagnosis: the named mistake in a sentence, or None (passed, or not implemented yet).
        mistake: a short key for the diagnosis (e.g. "unbiased_variance"), or None.
        implemented: False when the learner's code still raises NotImplementedError.
    """

    name: str
    passed: bool
    messages: list[str] = field(default_factory=list)
    diagnosis: str | None = None
    mistake: str | None = None
    implemented: bool = True

    @property
    def failed_messages(self) -> list[str]:
        return [m for m in self.messages if m.startswith(FAIL)]

    def report(self) -> str:
        """The report as text: a title line, one line per check, then the diagnosis."""
        if not self.implemented:
            return (f"{self.name} · not implemented yet\n"
                    "  Replace `raise NotImplementedError` with your code, then run this cell again.")
        n, bad = len(self.messages), len(self.failed_messages)
        if self.passed:
            title = f"{self.name} · all {n} checks passed {PASS}"
        else:
            title = f"{self.name} · {bad} of {n} checks failed"
        lines = [title, *(f"  {m}" for m in self.messages)]
        if self.diagnosis:
            lines.append(f"Diagnosis: {self.diagnosis}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle) -> None:   # IPython's text/plain display
        p.text(self.report())

    def __bool__(self) -> bool:
        return self.passed
