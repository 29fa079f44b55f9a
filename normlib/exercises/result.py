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

__all__ = ["CheckResult", "PASS", "FAIL", "set_language", "language", "LANGUAGES"]

PASS, FAIL = "✓", "✗"
LANGUAGES = ("en", "zh")
_language = ["en"]


def set_language(lang: str) -> None:
    """Print the checkers' reports in ``lang``: "en" (the default) or "zh" (Chinese: the title and
    the diagnosis in Chinese, the English detail below it). The Chinese practice notebooks call
    ``set_language("zh")`` in their first code cell."""
    if lang not in LANGUAGES:
        raise ValueError(f"set_language: lang={lang!r}, expected one of {', '.join(LANGUAGES)}")
    _language[0] = lang


def language() -> str:
    """The language reports print in (see ``set_language``)."""
    return _language[0]


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
        exercise: the exercise's key (e.g. "layer_norm").
        code: the stable mistake code, "<exercise>.<mistake>" (e.g. "layer_norm.unbiased_variance",
            "layer_norm.not_implemented"; see docs/mistakes.md), or None when passed.
        message: one line in English: the diagnosis, or a summary when passed.
        message_zh: one line in Chinese: the code's message, or a summary when passed.
        title_zh: the exercise's Chinese title, for the Chinese report.
    """

    name: str
    passed: bool
    messages: list[str] = field(default_factory=list)
    diagnosis: str | None = None
    mistake: str | None = None
    implemented: bool = True
    exercise: str = ""
    code: str | None = None
    message: str = ""
    message_zh: str = ""
    title_zh: str = ""

    @property
    def failed_messages(self) -> list[str]:
        return [m for m in self.messages if m.startswith(FAIL)]

    def report(self) -> str:
        """The report as text: a title line, one line per check, then the diagnosis (in the language
        set by ``set_language``)."""
        if language() == "zh":
            return self._report_zh()
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

    def _report_zh(self) -> str:
        title = self.title_zh or self.name
        if not self.implemented:
            return (f"{title} · 尚未实现\n"
                    "  把 `raise NotImplementedError` 换成你的代码，再运行这个单元格。")
        n, bad = len(self.messages), len(self.failed_messages)
        if self.passed:
            head = f"{title} · 全部 {n} 项检查通过 {PASS}"
        else:
            head = f"{title} · {n} 项检查中 {bad} 项未通过"
        lines = [head, *(f"  {m}" for m in self.messages)]
        if not self.passed and self.message_zh:
            lines.append(f"诊断：{self.message_zh}")
            if self.diagnosis:
                lines.append(f"  （英文详情：{self.diagnosis}）")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle) -> None:   # IPython's text/plain display
        p.text(self.report())

    def __bool__(self) -> bool:
        return self.passed
