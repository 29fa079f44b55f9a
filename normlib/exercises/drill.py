"""The interview drill (面试手撕模拟): the interviewer's one-line prompt, a ladder of hints behind it,
a timer, the checker, then the follow-up questions, in English and Chinese; every checked attempt
goes into a local history that brings back what went wrong (history.py, progress.py).

    drill = Drill()            # what your review queue says is due, else a random exercise;
                               # Drill("rope") to choose one
    drill.start()              # shows the prompt and the stub, starts the clock
    drill.hint()               # opens the next hint: hint 0 is the full specification, then the
                               # key idea, then the shape of the code (each one is counted)
    ...                        # write your answer in a cell
    drill.done()               # stops the clock, checks the function or class named as in the
                               # stub (or drill.done(answer)), records the attempt, then asks the
                               # follow-ups

    mock = Mock()              # a 45-minute mock interview: two exercises of rising difficulty
    mock.start(); ...; mock.done(); mock.start(); ...; mock.done(); mock.summary()

The clock is injected (``history.Clock``; the kernel's by default): its ``monotonic`` times the
rounds, its ``time`` dates the attempts. The widget timer only shows it ticking in the browser.
"""

from __future__ import annotations

import random

from .history import (
    HISTORY_ENV,
    SYSTEM_CLOCK,
    Attempt,
    Clock,
    History,
    Review,
    check_clock,
    due,
)
from .progress import format_duration, review_lines
from .registry import EXERCISES, exercise
from .result import CheckResult
from .spec import Exercise

__all__ = ["Drill", "Mock", "menu", "format_duration"]

MOCK_MINUTES = 45                    # a mock interview's length
FOLLOWUP_MINUTES = 5                 # per exercise, for the follow-up questions
_RUNGS = (("the full specification", "完整的题目说明"), ("the key idea", "关键思路"))
_LAST_RUNG = ("the shape of the code", "代码的骨架")
_MIDDLE_RUNG = ("a further step", "进一步的思路")


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
    """One timed round. ``choice``: an exercise key (see ``menu()``), or None for the first review
    due today in ``history`` (else a random exercise; ``seed`` makes that choice repeatable).
    ``history``: where attempts are recorded (a path or a ``History``; default: drill_history.jsonl
    in the drill's folder, or $NORMLIB_DRILL_HISTORY). ``clock``: a ``history.Clock``."""

    def __init__(self, choice: str | None = None, *, seed: int | None = None, history=None,
                 clock: Clock = SYSTEM_CLOCK):
        self.clock = check_clock("Drill", clock)
        self.history = History.of("Drill", history)
        self.review: Review | None = None         # the review that chose this exercise, if any
        if choice is None:
            queue = due(self.history.attempts(), self.clock.today())
            if queue:
                self.review = queue[0]
                choice = self.review.exercise
            else:
                choice = random.Random(seed).choice(sorted(EXERCISES))
        self.exercise: Exercise = exercise(choice)
        self.started: float | None = None
        self.elapsed: float | None = None
        self.result: CheckResult | None = None
        self.attempt: Attempt | None = None         # the last attempt recorded
        self.hints_used = 0
        self.handle = "drill"                       # the name the prompts call it by
        self._timer = None

    # ------------------------------------------------------------------ the round
    def prompt_markdown(self) -> str:
        """The prompt, as an interviewer says it, with the stub and how to ask for a hint."""
        e = self.exercise
        lines = [f"### {e.title} · {e.title_zh}  (target: {e.minutes} min · 目标用时 "
                 f"{e.minutes} 分钟)", ""]
        if self.review is not None:
            en, zh = review_lines(self.review, self.clock.today())
            lines += [f"From your review queue: {en}  ", f"来自复习队列：{zh}", ""]
        n = len(self.ladder())
        lines += [f"> **{e.prompt}**  ", f"> **{e.prompt_zh}**", "",
                  f"Write it below under the name `{e.name}`, starting from this stub. Stuck? "
                  f"`{self.handle}.hint()` opens the next of {n} hints (the first is the full "
                  f"specification; each one is counted). `{self.handle}.done()` stops the clock "
                  f"and checks your answer. · 从下面的桩函数开始，以 `{e.name}` 为名写出来。"
                  f"卡住了？`{self.handle}.hint()` 打开下一条提示（共 {n} 条，第一条是完整的"
                  f"题目说明；打开的提示都会记下）。`{self.handle}.done()` 停止计时并检查你的答案。",
                  "",
                  f"```python\n{e.stub}```"]
        return "\n".join(lines)

    def start(self) -> Drill:
        """Show the prompt and start the clock (again, for a new round: hints count from 0)."""
        _display_markdown(self.prompt_markdown())
        self.started = self.clock.monotonic()
        self.elapsed = self.result = self.attempt = None
        self.hints_used = 0
        self._timer = _show_timer(self.exercise.minutes * 60)
        return self

    def ladder(self) -> list[tuple[str, str, str, str]]:
        """The hints in order, (label, label_zh, text, text_zh): hint 0 is the task, then the
        exercise's hints, the key idea first and the shape of the code last."""
        e = self.exercise
        hints = [(e.task, e.task_zh)] + [(h.en, h.zh) for h in e.hints]
        labels = [*_RUNGS, *[_MIDDLE_RUNG] * (len(hints) - 3), _LAST_RUNG]
        return [(*label, *hint) for label, hint in zip(labels, hints, strict=True)]

    def hint(self) -> int:
        """Show the next hint and count it; returns the number of hints opened."""
        if self.started is None:
            raise RuntimeError(f"Drill.hint: call {self.handle}.start() first")
        ladder = self.ladder()
        if self.hints_used == len(ladder):
            _display_markdown(f"No more hints: all {len(ladder)} are above. · 没有更多提示了："
                              f"{len(ladder)} 条都在上面。")
            return self.hints_used
        label, label_zh, text, text_zh = ladder[self.hints_used]
        _display_markdown(f"**Hint {self.hints_used} · 提示 {self.hints_used}: {label} · "
                          f"{label_zh}** ({self.hints_used + 1} of {len(ladder)} · "
                          f"第 {self.hints_used + 1} 条，共 {len(ladder)} 条)\n\n"
                          f"{text}\n\n{text_zh}")
        self.hints_used += 1
        return self.hints_used

    def done(self, answer=None) -> CheckResult | None:
        """Stop the clock, check ``answer`` (your function or class; by default the one named as
        in the stub, looked up in the notebook), record the attempt in the history, then ask the
        follow-up questions. Nothing is recorded while there is nothing to check."""
        if self.started is None:
            raise RuntimeError(f"Drill.done: call {self.handle}.start() first")
        if answer is None:
            answer = _lookup(self.exercise.name)
        self.elapsed = self.clock.monotonic() - self.started
        if self._timer is not None:
            self._timer.playing = False
        e = self.exercise
        verdict = "within the target · 在目标用时内" if self.elapsed <= e.minutes * 60 else \
            f"target {e.minutes} min · 目标 {e.minutes} 分钟"
        print(f"Time · 用时: {format_duration(self.elapsed)} ({verdict}); hints · 提示: "
              f"{self.hints_used}.")
        if answer is None:
            print(f"Nothing to check yet: define `{e.name}` (the name in the stub), then run "
                  f"{self.handle}.done() again. · 还没有可检查的内容：先定义 `{e.name}`"
                  f"（桩函数里的名字），再运行 {self.handle}.done()。")
        else:
            self.result = e.checker(answer)
            print(self.result.report())
            if self.result.implemented:
                self._record()
        _display_markdown(self.followups_markdown())
        return self.result

    def _record(self) -> None:
        r = self.result
        self.attempt = Attempt(self.exercise.key, self.clock.now(), self.elapsed, self.hints_used,
                               r.passed, (r.code,) if r.code else ())
        try:
            self.history.append(self.attempt)
        except OSError as error:
            print(f"Not recorded: {self.history.path} cannot be written ({error.strerror}); set "
                  f"{HISTORY_ENV} to a file you can write. · 没有记下：无法写入这个文件，请用 "
                  f"{HISTORY_ENV} 指定一个可写的文件。")
            return
        print(f"Recorded in your history ({self.history.path.name}, on this machine only). · "
              "已记入你的练习记录（只保存在本机）。")

    def followups_markdown(self) -> str:
        """The follow-up questions, each answer folded away until you click it."""
        lines = ["### The interviewer asks next · 面试官接着问", ""]
        for i, f in enumerate(self.exercise.followups, 1):
            lines += [f"**{i}. {f.question}**  ", f"{f.question_zh}", "",
                      f"<details><summary>Answer · 参考答案</summary>\n\n{f.answer}\n\n"
                      f"{f.answer_zh}\n\n</details>", ""]
        return "\n".join(lines)


class Mock:
    """A 45-minute mock interview: two exercises of rising difficulty (by target time), each with
    its prompt, hints and follow-ups, then a summary. ``exercises``: two keys, or None for a
    random pair whose target times leave 5 minutes of follow-ups per exercise in the 45
    (``seed`` makes it repeatable). ``history`` and ``clock`` as for ``Drill``.

        mock.start()     # the plan and the first prompt; the second call starts the second
        mock.hint()      # the current exercise's next hint
        mock.done()      # check it, record it, the follow-ups
        mock.summary()   # time, hints, pass and mistake codes per exercise
    """

    def __init__(self, exercises: tuple[str, str] | None = None, *, seed: int | None = None,
                 history=None, clock: Clock = SYSTEM_CLOCK):
        self.clock = check_clock("Mock", clock)
        self.history = History.of("Mock", history)
        coding = MOCK_MINUTES - 2 * FOLLOWUP_MINUTES
        if exercises is None:
            pairs = [(a.key, b.key) for a in EXERCISES.values() for b in EXERCISES.values()
                     if a.minutes < b.minutes and a.minutes + b.minutes <= coding]
            exercises = random.Random(seed).choice(sorted(pairs))
        elif (not isinstance(exercises, (tuple, list)) or len(exercises) != 2
              or exercises[0] == exercises[1]):
            raise ValueError(f"Mock: exercises={exercises!r}, expected two different exercise "
                             f"keys, e.g. ('rms_norm', 'rope')")
        rounds = sorted((exercise(key) for key in exercises), key=lambda e: e.minutes)
        self.rounds = [Drill(e.key, history=self.history, clock=self.clock) for e in rounds]
        for d in self.rounds:
            d.handle = "mock"
        self.current = -1                         # the round in progress; -1 before start()
        self.started: float | None = None

    def start(self) -> Drill:
        """Start the next exercise (the first call also shows the plan and starts the clock)."""
        if self.started is None:
            self.started = self.clock.monotonic()
            plan = [f"{i}. {d.exercise.title} · {d.exercise.title_zh} ({d.exercise.minutes} min)"
                    for i, d in enumerate(self.rounds, 1)]
            _display_markdown(f"## Mock interview · 模拟面试: {MOCK_MINUTES} min\n\n"
                              + "\n".join(plan) + "\n\n"
                              f"Each exercise: its prompt, `mock.hint()` when stuck, "
                              f"`mock.done()` to check it, then its follow-up questions (about "
                              f"{FOLLOWUP_MINUTES} min: answer them aloud). `mock.start()` then "
                              "starts the next one, and `mock.summary()` ends the interview. · "
                              "每道题：先看题面，卡住时 `mock.hint()`，写完 `mock.done()` 检查，"
                              f"然后回答追问（约 {FOLLOWUP_MINUTES} 分钟，说出来）。接着 "
                              "`mock.start()` 开始下一道，`mock.summary()` 结束面试。")
        elif self.current >= 0 and self.rounds[self.current].attempt is None:
            raise RuntimeError(f"Mock.start: exercise {self.current + 1} "
                               f"({self.rounds[self.current].exercise.key}) is not checked yet: "
                               "write it, then mock.done()")
        if self.current + 1 == len(self.rounds):
            raise RuntimeError("Mock.start: both exercises are done; mock.summary() ends the "
                               "interview")
        self.current += 1
        return self.rounds[self.current].start()

    def _round(self, where: str) -> Drill:
        if self.current < 0:
            raise RuntimeError(f"Mock.{where}: call mock.start() first")
        return self.rounds[self.current]

    def hint(self) -> int:
        """The current exercise's next hint (see ``Drill.hint``)."""
        return self._round("hint").hint()

    def done(self, answer=None) -> CheckResult | None:
        """Check the current exercise (see ``Drill.done``), then say what comes next."""
        result = self._round("done").done(answer)
        if self.rounds[self.current].attempt is not None:
            last = self.current + 1 == len(self.rounds)
            _display_markdown("Answer the follow-ups aloud, then "
                              + ("`mock.summary()`." if last else
                                 "`mock.start()` for the next exercise.")
                              + " · 先把追问答出来，然后"
                              + ("运行 `mock.summary()`。" if last else
                                 "运行 `mock.start()` 开始下一道。"))
        return result

    def summary(self) -> None:
        """Show the summary (``summary_markdown``)."""
        _display_markdown(self.summary_markdown())

    def summary_markdown(self) -> str:
        """The interview so far: per exercise the time against its target, hints, pass and
        mistake codes, and the total time since ``start()`` against the 45 minutes."""
        if self.started is None:
            raise RuntimeError("Mock.summary: call mock.start() first")
        total = self.clock.monotonic() - self.started
        lines = ["## Mock interview: summary · 模拟面试小结", "",
                 "| | exercise · 题目 | time / target · 用时 / 目标 | hints · 提示 | "
                 "passed · 通过 | mistake codes · 错误代码 |", "|---|---|---|---|---|---|"]
        for i, d in enumerate(self.rounds, 1):
            e, a = d.exercise, d.attempt
            if a is None:
                lines.append(f"| {i} | {e.title} · {e.title_zh} | – / {e.minutes} min | – | "
                             "not checked · 未检查 | – |")
            else:
                codes = ", ".join(f"`{c}`" for c in a.codes) or "–"
                lines.append(f"| {i} | {e.title} · {e.title_zh} | {format_duration(a.seconds)}"
                             f" / {e.minutes} min | {a.hints} | {'✓' if a.passed else '✗'} | "
                             f"{codes} |")
        within = total <= MOCK_MINUTES * 60
        lines += ["", f"Total · 总用时: {format_duration(total)} of {MOCK_MINUTES} min "
                      + ("(within the time · 在时限内)." if within else
                         "(over the time · 超时)."), ""]
        failed = [d.exercise.title for d in self.rounds if d.attempt and not d.attempt.passed]
        if failed:
            lines.append(f"{', '.join(failed)}: back in your review queue tomorrow "
                         f"(`review()`). · {'、'.join(failed)} 明天会回到你的复习队列"
                         "（`review()`）。")
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
