"""An exercise as data: what the learner reads (``text/<key>.toml``: title, task, stub, target
time, the lesson that teaches it, the interviewer's one-line prompt and the ladder of hints behind
it, the interviewer's follow-ups, in English and Chinese), the checker that judges an answer and
the catalogue of mistakes it can name.

The registry (``registry.py``) builds one ``Exercise`` per line; the drill, the mistake codes,
docs/mistakes.md, the grader's report and the practice notebooks' task and follow-up cells
(tools/generate_exercises.py) all read it from there.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from ._generic import GENERIC_MISTAKES, OUTCOMES, Mistake

__all__ = ["Exercise", "FollowUp", "Hint", "Text", "text"]


@dataclass(frozen=True)
class FollowUp:
    question: str
    question_zh: str
    answer: str
    answer_zh: str


@dataclass(frozen=True)
class Hint:
    """One rung of the ladder behind the prompt: the key idea, then the shape of the code."""

    en: str
    zh: str


@dataclass(frozen=True)
class Text:
    """The words of one exercise, as ``text/<key>.toml`` holds them."""

    title: str                       # "LayerNorm"
    title_zh: str                    # "层归一化 LayerNorm"
    notebook: str                    # "01_layer_norm.ipynb"
    minutes: int                     # target time in an interview
    lesson: tuple[str, str]          # (lesson notebook, section heading) that teaches it
    stub: str                        # the code the learner starts from
    task: str
    task_zh: str
    followups: tuple[FollowUp, ...]
    prompt: str                      # one line, what an interviewer says: "Write RMSNorm as LLaMA uses it."
    prompt_zh: str
    hints: tuple[Hint, ...]          # after hint 0 (the task): the key idea, then the shape of the code


_FIELDS = {"title": str, "title_zh": str, "notebook": str, "minutes": int, "lesson": list,
           "stub": str, "task": str, "task_zh": str, "prompt": str, "prompt_zh": str}
MIN_HINTS = 2                        # the key idea and the shape of the code, at least


def _hints(data: dict, name: str) -> tuple[Hint, ...]:
    """The ``[[hints]]`` tables of text/<name>, each with an English and a Chinese string."""
    hints = data.get("hints")
    if not isinstance(hints, list) or len(hints) < MIN_HINTS:
        raise ValueError(f"text/{name}: field 'hints' = {hints!r}, expected at least {MIN_HINTS} "
                         "[[hints]] tables (the key idea, then the shape of the code)")
    for i, hint in enumerate(hints):
        for field in ("en", "zh"):
            value = hint.get(field) if isinstance(hint, dict) else None
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"text/{name}: field 'hints[{i}].{field}' = {value!r}, expected "
                                 "a non-empty str")
    return tuple(Hint(hint["en"], hint["zh"]) for hint in hints)


@functools.cache
def text(key: str) -> Text:
    """The ``Text`` of exercise ``key``, read from normlib/exercises/text/<key>.toml; a missing
    file or field, or a field of the wrong type, fails naming the file and the field."""
    name = f"{key}.toml"
    source = resources.files(__package__).joinpath("text", name)
    if not source.is_file():
        raise ValueError(f"text: no file normlib/exercises/text/{name} for exercise key={key!r}")
    data = tomllib.loads(source.read_text(encoding="utf-8"))
    for field, kind in _FIELDS.items():
        if not isinstance(data.get(field), kind):
            raise ValueError(f"text/{name}: field {field!r} = {data.get(field)!r}, expected a "
                             f"{kind.__name__}")
    for field in ("prompt", "prompt_zh"):
        if "\n" in data[field].strip() or not data[field].strip():
            raise ValueError(f"text/{name}: field {field!r} = {data[field]!r}, expected one "
                             "non-empty line (what an interviewer says)")
    followups = tuple(FollowUp(**f) for f in data.get("followups", ()))
    return Text(**{f: data[f].strip() if f.startswith("prompt") else data[f]
                   for f in _FIELDS if f != "lesson"},
                lesson=tuple(data["lesson"]), followups=followups, hints=_hints(data, name))


@dataclass(frozen=True)
class Exercise:
    """One exercise: its key, its checker, its catalogue of mistakes and its text."""

    key: str                                  # "layer_norm": the code prefix, the text file
    checker: Callable                         # check_layer_norm(fn, *, time_limit=...) -> CheckResult
    mistakes: dict[str, Mistake]              # its own mistakes (the generic ones come with every exercise)
    text: Text

    @classmethod
    def load(cls, key: str, checker: Callable, mistakes: dict[str, Mistake]) -> Exercise:
        clash = sorted(set(mistakes) & (set(GENERIC_MISTAKES) | set(OUTCOMES)))
        if clash:
            raise ValueError(f"Exercise {key!r}: mistake keys {clash} shadow the generic ones")
        return cls(key, checker, mistakes, text(key))

    def __getattr__(self, name: str):         # title, notebook, task, ... come from the text
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.text, name)

    @property
    def name(self) -> str:
        """The name the learner's answer is expected under (function or class)."""
        return self.stub.split("(")[0].split()[-1]

    @property
    def all_mistakes(self) -> dict[str, Mistake]:
        """Every mistake this exercise's checker can name: outcomes, generic ones, its own."""
        return {**OUTCOMES, **GENERIC_MISTAKES, **self.mistakes}
