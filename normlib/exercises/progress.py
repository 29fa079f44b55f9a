"""What the drill's history says, in English and Chinese: the review queue of today, and a progress
table and plot (solved, attempts, best time, last mistakes and next review, per exercise).

    review()        # what is due today, and the mistakes that put it there
    progress()      # the table and the plot

Both read the log in the drill's folder (``history.History``) and never write it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from .history import (
    INTERVALS,
    SYSTEM_CLOCK,
    Attempt,
    Clock,
    History,
    Review,
    check_clock,
    due,
    schedule,
)
from .registry import EXERCISES

__all__ = ["format_duration", "format_day", "progress", "progress_plot", "progress_table",
           "review", "review_lines", "review_markdown"]

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_WEEKDAYS_ZH = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def format_duration(seconds: float) -> str:
    """'4 min 05 s' (or '42 s')."""
    seconds = int(round(seconds))
    minutes, s = divmod(seconds, 60)
    return f"{minutes} min {s:02d} s" if minutes else f"{s} s"


def format_day(day: date) -> tuple[str, str]:
    """('Monday 2 March', '3 月 2 日（周一）'): a day in English and in Chinese."""
    return (f"{_WEEKDAYS[day.weekday()]} {day.day} {_MONTHS[day.month - 1]}",
            f"{day.month} 月 {day.day} 日（{_WEEKDAYS_ZH[day.weekday()]}）")


def _titles(key: str) -> tuple[str, str]:
    """The exercise's titles; a key no longer in the registry (an old log) shows as itself."""
    return (EXERCISES[key].title, EXERCISES[key].title_zh) if key in EXERCISES else (key, key)


def _made(code: str) -> str:
    """`rope.pairs_mixed` (pairs mixed across layouts): a code with its short label."""
    key, _, mistake = code.partition(".")
    found = EXERCISES[key].all_mistakes.get(mistake) if key in EXERCISES else None
    return f"`{code}` ({found.label})" if found else f"`{code}`"


# ------------------------------------------------------------------------------ review queue
def review_lines(r: Review, today: date) -> tuple[str, str]:
    """One exercise of the queue in English and in Chinese: which mistakes were made on which day,
    and when to drill it again ("you made `rope.pairs_mixed` (...) on Monday 2 March: drill
    RoPE again today")."""
    title, title_zh = _titles(r.exercise)
    made = ", ".join(f"{_made(code)} on {format_day(day)[0]}" for code, day in r.mistakes)
    made_zh = "，".join(f"{format_day(day)[1]}犯了 `{code}`" for code, day in r.mistakes)
    en = f"you made {made}" if made else "it failed"
    zh = f"你在 {made_zh}" if made_zh else "没有通过"
    if not r.is_due(today):
        en += f": {title} comes back on {format_day(r.due)[0]}"
        zh += f"：{format_day(r.due)[1]}再练{title_zh}"
    elif r.due == today:
        en += f": drill {title} again today"
        zh += f"：今天再练一次{title_zh}"
    else:
        en += f": drill {title} again today (due since {format_day(r.due)[0]})"
        zh += f"：今天再练一次{title_zh}（{format_day(r.due)[1]}就该练了）"
    if r.step:
        en += f", review {r.step + 1} of {len(INTERVALS)}"
        zh += f"，第 {r.step + 1} 次复习，共 {len(INTERVALS)} 次"
    return en + ".", zh + "。"


def review_markdown(attempts: Iterable[Attempt], today: date) -> str:
    """The review queue as markdown: what is due on ``today`` (with `Drill("key")` to start it),
    then what comes back later."""
    queue = sorted(schedule(attempts).values(), key=lambda r: (r.due, r.exercise))
    now = [r for r in queue if r.is_due(today)]
    later = [r for r in queue if not r.is_due(today)]
    lines = ["### Review today · 今天复习", ""]
    if not now:
        lines += ["Nothing is due today. · 今天没有要复习的题。", ""]
    for r in now:
        en, zh = review_lines(r, today)
        lines += [f"- `Drill(\"{r.exercise}\")`: {en}  ", f"  {zh}"]
    if later:
        lines += ["", "Coming back later · 之后复习:", ""]
        for r in later:
            en, zh = review_lines(r, today)
            lines += [f"- {en}  ", f"  {zh}"]
    if not queue:
        lines += ["An exercise enters this queue when an attempt fails, and comes back after "
                  f"{', '.join(map(str, INTERVALS))} days as you pass it again. · "
                  "某道题没有通过就会进入复习队列，之后每再通过一次，间隔依次为 "
                  f"{'、'.join(map(str, INTERVALS))} 天。"]
    return "\n".join(lines)


# -------------------------------------------------------------------------------- progress
def _rows(attempts: list[Attempt], today: date) -> list[tuple[str, ...]]:
    """Per exercise: title, attempts, solved, best time / target, last mistakes, next review."""
    queue = schedule(attempts)
    rows = []
    for key, e in EXERCISES.items():
        mine = [a for a in attempts if a.exercise == key]
        passed = [a.seconds for a in mine if a.passed]
        failed = [a for a in mine if not a.passed]
        solved = "✓" if passed else ("✗" if mine else "–")
        best = f"{format_duration(min(passed))} / {e.minutes} min" if passed else "–"
        last = ", ".join(f"`{c}`" for c in failed[-1].codes) if failed else "–"
        if key not in queue:
            nxt = "–"
        elif queue[key].is_due(today):
            nxt = "today · 今天"
        else:
            nxt = " · ".join(format_day(queue[key].due))
        rows.append((f"{e.title} · {e.title_zh}", str(len(mine)), solved, best, last, nxt))
    return rows


def progress_table(attempts: Iterable[Attempt], today: date) -> str:
    """Every exercise as a markdown table row: attempts, solved, best time against the target,
    the codes of the last failed attempt, and the next review."""
    attempts = list(attempts)
    rows = _rows(attempts, today)
    solved = sum(row[2] == "✓" for row in rows)
    head = [f"**{solved} of {len(rows)} solved, {len(attempts)} attempts** · "
            f"**已解出 {solved} / {len(rows)} 道，共 {len(attempts)} 次尝试**", "",
            "| exercise · 题目 | attempts · 次数 | solved · 解出 | best time / target · 最好用时 / 目标 "
            "| last mistakes · 最近的错误 | next review · 下次复习 |",
            "|---|---|---|---|---|---|"]
    return "\n".join(head + ["| " + " | ".join(row) + " |" for row in rows])


def progress_plot(attempts: Iterable[Attempt]):
    """A matplotlib figure: attempts per exercise (passed and failed), and the best time of each
    solved exercise against its target time."""
    import matplotlib.pyplot as plt

    from .. import viz

    with plt.rc_context({"font.family": ["DejaVu Sans", *viz.cjk_fonts()]}):   # Chinese labels
        return _plot(list(attempts), plt)


def _plot(attempts: list[Attempt], plt):
    keys = list(EXERCISES)
    titles = [EXERCISES[k].title for k in keys]
    passed = [sum(a.passed for a in attempts if a.exercise == k) for k in keys]
    failed = [sum(not a.passed for a in attempts if a.exercise == k) for k in keys]
    best = [min((a.seconds / 60 for a in attempts if a.exercise == k and a.passed), default=0)
            for k in keys]
    target = [EXERCISES[k].minutes for k in keys]
    y = range(len(keys))
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.0, 5.2), sharey=True,
                                   layout="constrained")
    left.barh(y, passed, color="#009E73", label="passed · 通过")
    left.barh(y, failed, left=passed, color="#D55E00", label="failed · 未通过")
    left.set_yticks(list(y), titles)
    left.invert_yaxis()
    left.set_xlabel("attempts · 尝试次数")
    left.xaxis.get_major_locator().set_params(integer=True)
    right.barh(y, best, color="#0072B2", label="best time · 最好用时")
    right.scatter(target, list(y), marker="|", s=200, color="black", label="target · 目标用时",
                  zorder=3)
    right.set_xlabel("minutes · 分钟")
    for ax in (left, right):
        ax.set_axisbelow(True)
    if not attempts:
        left.text(0.5, 0.5, "no attempts yet\n还没有记录", transform=left.transAxes,
                  ha="center", va="center")
    fig.suptitle("Your interview drill · 你的面试演练")
    fig.legend(loc="outside lower center", ncol=4, frameon=False)     # both axes' entries
    return fig


# ------------------------------------------------------------------------ shown in the notebook
def _show(markdown: str, figure=None) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
        if get_ipython() is not None:
            display(Markdown(markdown))
            if figure is not None:
                display(figure)
            return
    except ImportError:
        pass
    print(markdown)


def review(history=None, *, clock: Clock = SYSTEM_CLOCK) -> list[Review]:
    """Show what is due today (and later) from ``history`` (a path or a ``History``; default: the
    drill's folder's log); returns the reviews due today."""
    history = History.of("review", history)
    clock = check_clock("review", clock)
    attempts, today = history.attempts(), clock.today()
    _show(review_markdown(attempts, today))
    return due(attempts, today)


def progress(history=None, *, clock: Clock = SYSTEM_CLOCK) -> None:
    """Show the progress table and plot of ``history`` (a path or a ``History``; default: the
    drill's folder's log); outside
    IPython, print the table (``progress_plot`` draws the plot)."""
    import matplotlib.pyplot as plt

    history = History.of("progress", history)
    attempts = history.attempts()
    figure = progress_plot(attempts)
    _show(progress_table(attempts, check_clock("progress", clock).today()), figure)
    plt.close(figure)

