"""Stable mistake codes: one per mistake a checker can name, in English and Chinese.

A code is ``<exercise>.<mistake>``: ``layer_norm.unbiased_variance``, ``rope.positions_from_one``.
Every exercise also has the codes of the outcomes that name no particular mistake
(``<exercise>.cannot_tell``, ``.not_implemented``, ``.raised``, ``.returned_none``,
``.wrong_shape``, ``.wrong_dtype``, ``.time_limit``, ``.shortcut``, ...), and the grader
(normlib.classroom) emits the ``submission.*`` codes for work it could not check at all.

The codes come from the registry's catalogues ({key: Mistake(label, English, Chinese)}), so they are
written once; docs/mistakes.md lists them (``make mistake-codes`` writes it), and
tests/data/released_codes.txt keeps a released code from being renamed or dropped: a renamed code
keeps an entry in ``ALIASES`` (old -> new), and a code that now names another mistake keeps a note
in ``REDEFINED``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._code import code_of
from ._generic import GENERIC_MISTAKES, OUTCOMES
from .registry import EXERCISES

__all__ = ["Code", "registry", "resolve", "code_of", "catalogues",
           "SUBMISSION_CODES", "ALIASES", "REDEFINED"]

# old code -> new code, for every released code that was renamed (tests/data/released_codes.txt)
ALIASES: dict[str, str] = {}

# released codes that still exist but name another mistake than they once did: code -> what a
# gradebook written before the change meant by it, (English, Chinese); docs/mistakes.md lists them
REDEFINED: dict[str, tuple[str, str]] = {
    "llama_block.wrong_shape": (
        "until issue 33 the LLaMA block's own key for a weight of the wrong shape, which shadowed "
        "the generic wrong output shape (code review 2, finding 5); a weight of the wrong shape is "
        "now llama_block.weight_shape, and llama_block.wrong_shape means the output's shape, as in "
        "every exercise",
        "在 issue 33 之前，这是 LLaMA 块自己的“某个权重形状不对”，它遮住了通用的“输出形状不对”"
        "（代码评审 2，问题 5）；权重形状不对现在是 llama_block.weight_shape，"
        "llama_block.wrong_shape 与其他练习一样，指输出的形状不对"),
}

# The grader's codes: (short label, English message, Chinese message, example).
SUBMISSION_CODES = {
    "submission.not_json": (
        "notebook unreadable", "the notebook could not be read: it is not valid JSON "
        "(a truncated or hand-edited file?). Download it again from JupyterLab.",
        "无法读取这个笔记本：它不是有效的 JSON（文件被截断或手动改坏了？）。请从 JupyterLab 重新下载。",
        "a file cut off half-way: {\"cells\": [{\"cell_type\": \"co"),
    "submission.no_answer": (
        "answer missing", "the exercise's answer cell is missing or empty: keep the cell the "
        "practice notebook gives you and write your code in it.",
        "练习的作答单元格缺失或为空：请保留练习笔记本给出的单元格，在其中写代码。",
        "the answer cell deleted, or left as the stub"),
    "submission.crashed": (
        "process died", "running your code ended the process (sys.exit, os._exit, a crash): "
        "nothing could be checked.",
        "运行你的代码时进程终止了（sys.exit、os._exit 或崩溃）：无法检查。",
        "import os; os._exit(0)"),
    "submission.timeout": (
        "time limit", "the whole submission ran past the grader's time limit (an endless loop "
        "at definition time?).",
        "整个提交超过了评分器的时间限制（定义时就进入了死循环？）。",
        "while True: pass"),
    "submission.memory": (
        "memory limit", "your code used more memory than the grader allows.",
        "你的代码使用的内存超过了评分器允许的上限。",
        "x = torch.empty(10**11)"),
    "submission.output_limit": (
        "printed too much", "your code printed more than the grader keeps: remove the prints "
        "in loops.",
        "你的代码打印的内容超过了评分器保留的上限：请删掉循环里的 print。",
        "print('x' * 10**9)"),
    "submission.error": (
        "error at definition", "the answer cell raised an exception when it was run, before "
        "any check (a syntax error, a name not defined?).",
        "作答单元格在运行时（任何检查之前）就抛出了异常（语法错误、名字未定义？）。",
        "def layer_norm(x, weight, bias, eps=1e-5) return x"),
    "submission.symlink": (
        "symbolic link", "the notebook (or the student's folder) is a symbolic link: the grader "
        "reads only files handed in as files. Hand in the notebook itself.",
        "笔记本（或学生文件夹）是一个符号链接：评分器只读取以文件形式提交的内容。请提交笔记本文件本身。",
        "ln -s ../alice/08_gelu_tanh.ipynb 08_gelu_tanh.ipynb"),
    "submission.unreadable": (
        "folder unreadable", "the student's folder could not be read (its permissions?): nothing "
        "in it was graded.",
        "无法读取该学生的文件夹（权限问题？）：其中的内容都没有评分。",
        "chmod 000 practice"),
    "submission.too_large": (
        "answer too large", "the answer cell is far larger than an answer can be: keep only "
        "your code in it.",
        "作答单元格远大于一份答案应有的长度：请只在其中保留你的代码。",
        "an answer cell of 10 MB of data"),
    "submission.tampered": (
        "record refused", "the grader refused what came back from running this answer (a record "
        "it cannot trust): the answer is listed under \"needs a look\" in the report.",
        "评分器拒收了运行这份答案后返回的结果（无法信任的记录）：报告的“需要人工查看”一节列出了它。",
        "an answer that writes its own record on the grader's pipe"),
    "submission.not_graded": (
        "not graded", "the grading run was stopped before this answer was graded: grade again.",
        "评分在这份答案之前被中止，它没有被评分：请重新评分。",
        "Ctrl-C during grading"),
    "submission.sandbox": (
        "no sandbox", "the grader could not start a sandbox to run this answer in: nothing was "
        "checked (see ISOLATION.md).",
        "评分器无法启动运行这份答案的沙箱：没有进行任何检查（见 ISOLATION.md）。",
        "bubblewrap refused to start on this machine"),
}


@dataclass(frozen=True)
class Code:
    """One mistake code: ``code`` = "<exercise>.<key>", its short label, its English and Chinese
    one-line messages."""

    code: str
    exercise: str
    key: str
    label: str
    message: str
    message_zh: str


def catalogues() -> dict[str, dict]:
    """{exercise key: its own mistakes {key: Mistake}}, every exercise, from the registry."""
    return {key: e.mistakes for key, e in EXERCISES.items()}


def registry() -> dict[str, Code]:
    """Every code, in the order of docs/mistakes.md: each exercise's outcomes and generic mistakes,
    then its catalogue; then the grader's ``submission.*`` codes."""
    codes: dict[str, Code] = {}
    for exercise, e in EXERCISES.items():
        for key, m in {**OUTCOMES, **GENERIC_MISTAKES, **e.mistakes}.items():
            c = code_of(exercise, key)
            codes[c] = Code(c, exercise, key, m.label, m.en, m.zh)
    for c, (label, en, zh, _) in SUBMISSION_CODES.items():
        codes[c] = Code(c, "submission", c.split(".", 1)[1], label, en, zh)
    return codes


def resolve(code: str) -> Code:
    """The current ``Code`` for ``code``, following ``ALIASES`` for a renamed one; KeyError naming
    the code otherwise."""
    codes = registry()
    current = ALIASES.get(code, code)
    if current not in codes:
        raise KeyError(f"resolve: code={code!r} is not a mistake code (see docs/mistakes.md)")
    return codes[current]
