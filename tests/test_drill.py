"""The drill that remembers (normlib/exercises/drill.py, history.py, progress.py): the prompt and its
ladder of hints, the attempts log, the review queue over days, the progress view and the mock
interview, driven by a fake clock (days pass without sleeping). The checkers run on the cheapest
exercises (warmup_cosine, gelu_tanh: pure arithmetic)."""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime, timedelta

import matplotlib
import pytest
import torch

from normlib.exercises import EXERCISES, spec
from normlib.exercises.drill import Drill, Mock
from normlib.exercises.history import (
    HISTORY_ENV,
    INTERVALS,
    Attempt,
    Clock,
    History,
    default_path,
    due,
    schedule,
)
from normlib.exercises.progress import (
    format_day,
    progress,
    progress_plot,
    progress_table,
    review,
    review_markdown,
)

matplotlib.use("Agg")

DAY = 86400.0
MONDAY = datetime(2026, 3, 2, 12, 0)             # noon, local time: a day's steps never cross midnight


class FakeClock:
    """Wall time and monotonic time that move only when told to."""

    def __init__(self):
        self.wall, self.mono = MONDAY.timestamp(), 1000.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds

    @property
    def clock(self) -> Clock:
        return Clock(time=lambda: self.wall, monotonic=lambda: self.mono)


@pytest.fixture
def fake():
    return FakeClock()


@pytest.fixture
def history(tmp_path):
    return History(tmp_path / "drill_history.jsonl")


def warmup_right(step, warmup_steps, total_steps, min_ratio=0.0):
    if step < warmup_steps:
        return step / warmup_steps
    p = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p))


def warmup_no_floor(step, warmup_steps, total_steps, min_ratio=0.0):      # warmup_cosine.no_floor
    if step < warmup_steps:
        return step / warmup_steps
    p = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p))


def gelu_right(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def attempt(key="rope", day=0, passed=False, codes=("rope.pairs_mixed",), seconds=300.0, hints=0):
    at = (MONDAY + timedelta(days=day)).astimezone()
    return Attempt(key, at, seconds, hints, passed, () if passed else codes)


# ------------------------------------------------------------------------- prompts and hints
@pytest.mark.parametrize("key", list(EXERCISES))
def test_every_exercise_has_a_one_line_prompt_and_a_ladder(key, history):
    e = EXERCISES[key]
    for prompt in (e.prompt, e.prompt_zh):
        assert prompt and "\n" not in prompt and prompt not in (e.task, e.task_zh)
    assert len(e.hints) >= 2 and all(h.en.strip() and h.zh.strip() for h in e.hints)
    ladder = Drill(key, history=history).ladder()
    assert ladder[0][2:] == (e.task, e.task_zh)                  # hint 0: the full specification
    assert [rung[:2] for rung in ladder[1::len(ladder) - 2]] == [
        ("the key idea", "关键思路"), ("the shape of the code", "代码的骨架")]


def test_a_text_without_its_prompt_or_hints_fails_naming_file_and_field(tmp_path, monkeypatch):
    good = (spec.resources.files("normlib.exercises") / "text" / "gelu_tanh.toml").read_text("utf-8")
    (tmp_path / "text").mkdir()
    monkeypatch.setattr(spec.resources, "files", lambda package: tmp_path)
    cases = {"no_prompt": (good.replace("\nprompt = ", "\nprompt_gone = "), "field 'prompt'"),
             "two_lines": (good.replace('prompt_zh = "', 'prompt_zh = "one\\ntwo '),
                           "field 'prompt_zh'"),
             "one_hint": (good[:good.rindex("[[hints]]")], "field 'hints'"),
             "hint_no_zh": (good[:good.rindex("zh = ")], "field 'hints[1].zh'")}
    for key, (source, field) in cases.items():
        (tmp_path / "text" / f"{key}.toml").write_text(source, "utf-8")
        with pytest.raises(ValueError, match=rf"text/{key}\.toml: {re.escape(field)}"):
            spec.text(key)
    spec.text.cache_clear()


def test_the_drill_shows_the_prompt_and_opens_the_ladder_on_request(history, fake, capsys):
    d = Drill("warmup_cosine", history=history, clock=fake.clock)
    with pytest.raises(RuntimeError, match=r"drill\.start\(\)"):
        d.hint()
    d.start()
    shown = capsys.readouterr().out
    e = d.exercise
    assert e.prompt in shown and e.prompt_zh in shown and e.task not in shown
    assert d.hint() == 1 and e.task in capsys.readouterr().out
    assert d.hint() == 2 and e.hints[0].en in capsys.readouterr().out
    assert d.hint() == 3 and e.hints[1].zh in capsys.readouterr().out
    assert d.hint() == 3 and "No more hints" in capsys.readouterr().out
    fake.advance(125)
    d.done(warmup_right)
    out = capsys.readouterr().out
    assert "Time · 用时: 2 min 05 s" in out and "hints · 提示: 3" in out
    assert d.attempt.hints == 3 and d.attempt.passed and history.attempts() == [d.attempt]
    d.start()                                                     # a new round counts from 0
    assert d.hints_used == 0


# ---------------------------------------------------------------------------------- the log
def test_the_log_appends_one_line_per_attempt_and_nothing_else(history, fake, capsys):
    d = Drill("warmup_cosine", history=history, clock=fake.clock).start()
    d.done()                                                      # nothing defined: not recorded
    d.done(lambda *args, **kwargs: (_ for _ in ()).throw(NotImplementedError))
    assert not history.path.exists()
    fake.advance(61)
    d.done(warmup_no_floor)
    lines = history.path.read_text("utf-8").splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record == {"exercise": "warmup_cosine", "at": record["at"], "seconds": 61.0,
                      "hints": 0, "passed": False, "codes": ["warmup_cosine.no_floor"]}
    assert datetime.fromisoformat(record["at"]) == datetime.fromtimestamp(fake.wall).astimezone()


def test_a_history_that_cannot_be_written_says_so_and_the_round_goes_on(history, fake, capsys,
                                                                       monkeypatch):
    def refuse(self, attempt):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(History, "append", refuse)
    d = Drill("warmup_cosine", history=history, clock=fake.clock).start()
    assert d.done(warmup_right).passed
    out = capsys.readouterr().out
    assert f"Not recorded: {history.path} cannot be written (Permission denied); set {HISTORY_ENV}" in out
    assert "The interviewer asks next" in out


def test_a_cut_or_edited_line_is_skipped_with_a_warning_and_the_others_kept(history):
    history.append(attempt(day=0))
    with open(history.path, "a", encoding="utf-8") as f:
        f.write('{"exercise": "rope", "at": "2026-03-0')               # a write cut short
    history.append(attempt(day=1, passed=True))                   # starts on a line of its own
    with open(history.path, "a", encoding="utf-8") as f:
        f.write('{"exercise": "rope", "at": "yesterday", "seconds": 1, "hints": 0, '
                '"passed": true, "codes": []}\n["not", "an", "object"]\n\n')
    history.append(attempt(day=2))
    with pytest.warns(UserWarning, match=r"skipped 3 line\(s\).*line 2 \(not JSON.*line 4 "
                                         r"\(field 'at'.*line 5 \(not a JSON object\)"):
        read = history.attempts()
    assert [a.day for a in read] == [date(2026, 3, 2), date(2026, 3, 3), date(2026, 3, 4)]


def test_the_log_lives_in_the_workspace_or_where_the_environment_says(tmp_path, monkeypatch):
    ws = tmp_path / "workspace"
    (ws / "zh").mkdir(parents=True)
    assert default_path(ws, environ={}) == ws / "drill_history.jsonl"
    assert default_path(ws / "zh", environ={}) == ws / "drill_history.jsonl"   # one for both
    assert default_path(tmp_path / "practice" / "zh", environ={}) == (
        tmp_path / "practice" / "drill_history.jsonl")                       # a class's copy
    assert default_path(ws, environ={HISTORY_ENV: str(tmp_path / "h.jsonl")}) == tmp_path / "h.jsonl"
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "h.jsonl"))
    assert History().path == tmp_path / "h.jsonl"
    monkeypatch.setenv(HISTORY_ENV, str(ws))
    with pytest.raises(ValueError, match=rf"History: path='{ws}' \(\${HISTORY_ENV}\) is a folder"):
        History()
    with pytest.raises(ValueError, match="folder .*nowhere' does not exist"):
        History(tmp_path / "nowhere" / "h.jsonl")
    with pytest.raises(TypeError, match="History: path=3, expected a file path"):
        History(3)
    with pytest.raises(TypeError, match="expected an Attempt"):
        History(tmp_path / "h.jsonl").append({"exercise": "rope"})
    with pytest.raises(TypeError, match="Drill: clock=.*expected a normlib.exercises.history.Clock"):
        Drill("rope", history=tmp_path / "h.jsonl", clock=object())
    with pytest.raises(TypeError, match="Drill: history=3, expected None, a file path or a History"):
        Drill("rope", history=3)


# --------------------------------------------------------------------------- the review queue
def test_the_review_queue_brings_a_mistake_back_after_1_then_3_then_7_days():
    assert INTERVALS == (1, 3, 7)
    log = [attempt(day=0)]                                        # Monday: rope.pairs_mixed
    monday, tuesday = date(2026, 3, 2), date(2026, 3, 3)
    assert due(log, monday) == [] and [r.exercise for r in due(log, tuesday)] == ["rope"]
    assert schedule(log)["rope"].mistakes == (("rope.pairs_mixed", monday),)
    log.append(attempt(day=0, passed=True))                       # fixed at once: not a review
    assert schedule(log)["rope"].due == tuesday
    log.append(attempt(day=1, passed=True))                       # Tuesday's review: 3 days
    assert schedule(log)["rope"].due == date(2026, 3, 6) and due(log, date(2026, 3, 5)) == []
    log.append(attempt(day=5, passed=True))                       # Saturday (late): 7 days on
    assert schedule(log)["rope"].due == date(2026, 3, 14)
    log.append(attempt(day=12, passed=True))                      # the third success: graduated
    assert "rope" not in schedule(log)
    log.append(attempt(day=13, codes=("rope.minus_theta",)))      # a new mistake starts again
    assert schedule(log)["rope"].due == date(2026, 3, 16)
    assert schedule(log)["rope"].mistakes == (("rope.minus_theta", date(2026, 3, 15)),)
    assert "layer_norm" not in schedule(log + [attempt("layer_norm", passed=True)])


def test_the_queue_keeps_every_code_made_since_it_entered_and_names_the_days():
    log = [attempt(day=0), attempt(day=1, codes=("rope.minus_theta",)),
           attempt(day=1, codes=("rope.pairs_mixed",))]
    r = schedule(log)["rope"]
    assert r.mistakes == (("rope.minus_theta", date(2026, 3, 3)), ("rope.pairs_mixed", date(2026, 3, 3)))
    text = review_markdown([attempt(day=0)], date(2026, 3, 5))
    assert ("you made `rope.pairs_mixed` (pairs mixed across layouts) on Monday 2 March: drill RoPE "
            "again today (due since Tuesday 3 March)") in text
    assert "你在 3 月 2 日（周一）犯了 `rope.pairs_mixed`" in text and 'Drill("rope")' in text
    later = review_markdown([attempt(day=0)], date(2026, 3, 2))
    assert "Nothing is due today" in later and "RoPE comes back on Tuesday 3 March" in later
    assert format_day(date(2026, 3, 5)) == ("Thursday 5 March", "3 月 5 日（周四）")


def test_over_days_the_drill_draws_what_is_due_and_records_its_review(history, fake, capsys):
    d = Drill("warmup_cosine", history=history, clock=fake.clock).start()
    d.done(warmup_no_floor)                                       # Monday: a mistake
    assert Drill(seed=0, history=history, clock=fake.clock).review is None   # not due today
    fake.advance(DAY)                                             # Tuesday
    capsys.readouterr()
    again = Drill(history=history, clock=fake.clock)
    assert again.exercise.key == "warmup_cosine" and again.review is not None
    again.start()
    assert "From your review queue: you made `warmup_cosine.no_floor`" in capsys.readouterr().out
    again.done(warmup_right)
    assert schedule(history.attempts())["warmup_cosine"].due == date(2026, 3, 6)   # Friday
    assert review(history, clock=fake.clock) == []
    fake.advance(3 * DAY)
    assert [r.exercise for r in review(history, clock=fake.clock)] == ["warmup_cosine"]
    assert "review 2 of 3" in capsys.readouterr().out


# ---------------------------------------------------------------------------- progress view
def test_progress_shows_solved_attempts_best_time_last_mistakes_and_next_review(history, fake,
                                                                                 capsys):
    for a in (attempt("rope", 0, seconds=700), attempt("rope", 1, True, seconds=500),
              attempt("rope", 2, True, seconds=420), attempt("gelu_tanh", 0, True, seconds=95)):
        history.append(a)
    table = progress_table(history.attempts(), date(2026, 3, 3))
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()}
    assert f"**2 of {len(EXERCISES)} solved, 4 attempts**" in table
    assert rows["RoPE · 旋转位置编码 RoPE"] == (
        "| RoPE · 旋转位置编码 RoPE | 3 | ✓ | 7 min 00 s / 10 min | `rope.pairs_mixed` | "
        "Friday 6 March · 3 月 6 日（周五） |")
    assert rows["GELU (tanh form) · GELU（tanh 近似）"].endswith("| 1 | ✓ | 1 min 35 s / 4 min | – | – |")
    assert rows["LayerNorm · 层归一化 LayerNorm"].endswith("| 0 | – | – | – | – |")
    fig = progress_plot(history.attempts())
    left, right = fig.axes
    keys = list(EXERCISES)
    bars = left.patches
    assert bars[keys.index("rope")].get_width() == 2                    # passed
    assert bars[len(keys) + keys.index("rope")].get_width() == 1        # failed, stacked after
    assert right.patches[keys.index("gelu_tanh")].get_width() == pytest.approx(95 / 60)
    matplotlib.pyplot.close(fig)
    progress(str(history.path), clock=fake.clock)                       # no IPython: the table
    assert "| RoPE · 旋转位置编码 RoPE | 3 | ✓" in capsys.readouterr().out
    empty = progress_plot([])
    assert "no attempts yet" in empty.axes[0].texts[0].get_text()
    matplotlib.pyplot.close(empty)


# --------------------------------------------------------------------------- mock interview
def test_a_mock_interview_pairs_two_exercises_of_rising_difficulty_in_45_minutes(history, fake):
    for seed in range(20):
        first, second = Mock(seed=seed, history=history, clock=fake.clock).rounds
        assert first.exercise.minutes < second.exercise.minutes
        assert first.exercise.minutes + second.exercise.minutes <= 45 - 2 * 5
    for bad in (("rope",), ("rope", "rope"), "rope"):
        with pytest.raises(ValueError, match="Mock: exercises=.*expected two different"):
            Mock(bad, history=history)
    with pytest.raises(ValueError, match="unknown exercise 'nope'"):
        Mock(("rope", "nope"), history=history)


def test_a_mock_interview_ends_with_a_summary_of_time_hints_pass_and_codes(history, fake, capsys):
    mock = Mock(("warmup_cosine", "gelu_tanh"), history=history, clock=fake.clock)
    assert [d.exercise.key for d in mock.rounds] == ["gelu_tanh", "warmup_cosine"]   # 4, then 5
    with pytest.raises(RuntimeError, match=r"mock\.start\(\) first"):
        mock.hint()
    mock.start()
    out = capsys.readouterr().out
    assert "Mock interview · 模拟面试: 45 min" in out and "`mock.hint()`" in out
    assert mock.rounds[0].exercise.prompt in out
    with pytest.raises(RuntimeError, match="exercise 1 .* is not checked yet"):
        mock.start()
    mock.hint()
    fake.advance(190)
    mock.done(gelu_right)
    assert "The interviewer asks next" in capsys.readouterr().out
    fake.advance(300)                                             # the follow-ups, aloud
    mock.start()
    mock.hint()
    mock.hint()
    fake.advance(610)
    mock.done(warmup_no_floor)
    with pytest.raises(RuntimeError, match="both exercises are done"):
        mock.start()
    fake.advance(240)
    summary = mock.summary_markdown()
    assert ("| 1 | GELU (tanh form) · GELU（tanh 近似） | 3 min 10 s / 4 min | 1 | ✓ | – |"
            in summary)
    assert ("| 2 | Warmup + cosine schedule · 学习率预热 + 余弦衰减 | 10 min 10 s / 5 min | 2 | ✗ | "
            "`warmup_cosine.no_floor` |") in summary
    assert "Total · 总用时: 22 min 20 s of 45 min (within the time · 在时限内)." in summary
    assert "back in your review queue tomorrow" in summary
    assert [a.exercise for a in history.attempts()] == ["gelu_tanh", "warmup_cosine"]
    fake.advance(DAY)
    assert [r.exercise for r in due(history.attempts(), fake.clock.today())] == ["warmup_cosine"]
