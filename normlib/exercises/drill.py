"""The interview drill (面试手撕模拟): a random (or chosen) exercise, a timer, the checker, then the
interviewer's follow-up questions, in English and Chinese.

    drill = Drill()            # random exercise; Drill("rope") to choose one
    drill.start()              # shows the task and starts the clock (and a timer in JupyterLab)
    ...                        # write your answer in a cell
    drill.done()               # stops the clock, checks the function or class named as in the
                               # stub (or drill.done(answer)), then asks the follow-ups

The clock is the kernel's (time.monotonic); the widget timer only shows it ticking in the browser.
"""

from __future__ import annotations

import random
import time

from .registry import EXERCISES, exercise
from .result import CheckResult
from .spec import Exercise

__all__ = ["Drill", "menu", "format_duration"]


def format_duration(seconds: float) -> str:
    """'4 min 05 s' (or '42 s')."""
    seconds = int(round(seconds))
    minutes, s = divmod(seconds, 60)
    return f"{minutes} min {s:02d} s" if minutes else f"{s} s"


def menu() -> str:
    """The exercises as a markdown table: key, title, target time."""
    rows = ["| key | exercise | 题目 | target time · 目标用时 |", "|---|---|---|---|"]
    rows += [f"| `{e.key}` | {e.title} | {e.title_zh} | {e.minutes} min |"
             for e in EXERCISES.values()]
    return "\n".join(rows)


def _display_markdown(text: str) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
        if get_ipython() is not None:
            display(Markdown(text))
            return
    except ImportError:
        pass
    print(text)


class Drill:
    """One timed round. ``choice``: an exercise key (see ``menu()``), or None for a random one;
    ``seed`` makes the random choice repeatable."""

    def __init__(self, choice: str | None = None, *, seed: int | None = None):
        if choice is None:
            choice = random.Random(seed).choice(sorted(EXERCISES))
        self.exercise: Exercise = exercise(choice)
        self.started: float | None = None
        self.elapsed: float | None = None
        self.result: CheckResult | None = None
        self._timer = None

    # ------------------------------------------------------------------ the round
    def task_markdown(self) -> str:
        e = self.exercise
        return (f"### {e.title} · {e.title_zh}  (target: {e.minutes} min · 目标用时 {e.minutes} 分钟)\n\n"
                f"{e.task}\n\n{e.task_zh}\n\n"
                f"Write it below under the name `{e.name}`, starting from this stub; "
                f"`drill.done()` then stops the clock and checks it. · "
                f"从下面的桩函数开始，以 `{e.name}` 为名写出来；然后 `drill.done()` 停止计时并检查。\n\n"
                f"```python\n{e.stub}```")

    def start(self) -> Drill:
        """Show the task and start the clock."""
        _display_markdown(self.task_markdown())
        self.started, self.elapsed, self.result = time.monotonic(), None, None
        self._timer = _show_timer(self.exercise.minutes * 60)
        return self

    def done(self, answer=None) -> CheckResult | None:
        """Stop the clock, check ``answer`` (your function or class; by default the one named as
        in the stub, looked up in the notebook), then ask the follow-up questions."""
        if self.started is None:
            raise RuntimeError("Drill.done: call drill.start() first")
        if answer is None:
            answer = _lookup(self.exercise.name)
        self.elapsed = time.monotonic() - self.started
        if self._timer is not None:
            self._timer.playing = False
        e = self.exercise
        target = e.minutes * 60
        verdict = "within the target · 在目标用时内" if self.elapsed <= target else \
            f"target {e.minutes} min · 目标 {e.minutes} 分钟"
        print(f"Time · 用时: {format_duration(self.elapsed)} ({verdict}).")
        if answer is None:
            print(f"Nothing to check yet: define `{e.name}` (the name in the stub), then run "
                  f"drill.done() again. · 还没有可检查的内容：先定义 `{e.name}`（桩函数里的名字），"
                  "再运行 drill.done()。")
        else:
            self.result = e.checker(answer)
            print(self.result.report())
        _display_markdown(self.followups_markdown())
        return self.result

    def followups_markdown(self) -> str:
        """The follow-up questions, each answer folded away until you click it."""
        lines = ["### The interviewer asks next · 面试官接着问", ""]
        for i, f in enumerate(self.exercise.followups, 1):
            lines += [f"**{i}. {f.question}**  ", f"{f.question_zh}", "",
                      f"<details><summary>Answer · 参考答案</summary>\n\n{f.answer}\n\n"
                      f"{f.answer_zh}\n\n</details>", ""]
        return "\n".join(lines)


def _lookup(name: str):
    """``name`` in the notebook's namespace (IPython's user namespace), or None."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell.user_ns.get(name) if shell is not None else None


def _show_timer(target_seconds: int):
    """A ticking timer in JupyterLab (ipywidgets Play, counted by the browser); None elsewhere."""
    try:
        from IPython import get_ipython
        if get_ipython() is None:
            return None
        import ipywidgets as widgets
        from IPython.display import display
    except ImportError:
        return None
    play = widgets.Play(value=0, min=0, max=4 * 3600, step=1, interval=1000, playing=True,
                        description="timer")
    seconds = widgets.IntText(value=0, description="seconds", disabled=True)
    bar = widgets.IntProgress(value=0, min=0, max=target_seconds, description="target")
    widgets.jsdlink((play, "value"), (seconds, "value"))
    widgets.jsdlink((play, "value"), (bar, "value"))
    display(widgets.HBox([play, seconds, bar]))
    return play
