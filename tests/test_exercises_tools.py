"""The practice tooling: robustness against any learner code, the result's report, the generator
of learner notebooks, the workspace copy, the catalogue and the drill."""

import re
import signal
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
import torch

from normlib import exercises as ex
from normlib.exercises import codes, drill
from normlib.exercises._generic import GENERIC_MISTAKES, OUTCOMES
from tools import generate_exercises as generate
from tools import mistake_codes, translations, workspace

ROOT = Path(__file__).resolve().parents[1]


def good_ln(x, weight, bias, eps=1e-5):
    h = x.float()
    y = (h - h.mean(-1, keepdim=True)) * torch.rsqrt(h.var(-1, unbiased=False, keepdim=True) + eps)
    return (y * weight + bias).to(x.dtype)


def raises(x, weight, bias, eps=1e-5):
    raise ValueError("boom")


def spins(x, weight, bias, eps=1e-5):
    while True:
        pass


def sleeps(x, weight, bias, eps=1e-5):
    time.sleep(30)


ROBUSTNESS = {
    "raised": raises,
    "returned_none": lambda x, w, b, eps=1e-5: None,
    "not_a_tensor": lambda x, w, b, eps=1e-5: good_ln(x, w, b, eps).tolist(),
    "wrong_shape": lambda x, w, b, eps=1e-5: good_ln(x, w, b, eps)[..., :-1],
    "wrong_dtype": lambda x, w, b, eps=1e-5: good_ln(x, w, b, eps).double(),
    "nan": lambda x, w, b, eps=1e-5: good_ln(x, w, b, eps) * float("nan"),
    "in_place": lambda x, w, b, eps=1e-5: good_ln(x.mul_(1.0).add_(1.0), w, b, eps),
    "no_autograd": lambda x, w, b, eps=1e-5: good_ln(x, w, b, eps).detach(),
}


@pytest.mark.parametrize("mistake", ROBUSTNESS)
def test_bad_code_gets_one_line_per_check_and_no_traceback(mistake):
    result = ex.check_layer_norm(ROBUSTNESS[mistake])
    text = str(result)
    assert not result.passed and result.mistake == mistake, text
    assert "Traceback" not in text and all("\n" not in m for m in result.messages)
    assert len(text.splitlines()) == len(result.messages) + 2          # title, lines, diagnosis


def test_an_exception_names_the_learners_line():
    line = ex.check_layer_norm(raises).messages[0]
    assert "raised ValueError: boom (line" in line and "raise ValueError" in line


@pytest.mark.parametrize("fn", [spins, sleeps])
def test_runaway_code_is_stopped_by_the_time_limit(fn):
    # The checker returning at all is the property (pytest-timeout would stop a hang); how long it
    # takes is not asserted: speed is a benchmark, never a test.
    result = ex.check_layer_norm(fn, time_limit=0.2)
    assert result.mistake == "time_limit" and len(result.messages) == 1
    assert "time limit (0.2 s per call)" in result.messages[0]


def test_the_time_limit_also_works_outside_the_main_thread():
    box = {}
    worker = threading.Thread(target=lambda: box.update(r=ex.check_layer_norm(spins, time_limit=0.2)))
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive() and box["r"].mistake == "time_limit"


def test_checks_leave_signal_handler_profiler_and_rng_as_they_were():
    handler, state = signal.getsignal(signal.SIGALRM), torch.get_rng_state()
    ex.check_layer_norm(good_ln)
    ex.check_layer_norm(spins, time_limit=0.1)
    assert signal.getsignal(signal.SIGALRM) == handler and sys.getprofile() is None
    assert torch.equal(torch.get_rng_state(), state)


def test_not_implemented_yet_and_not_callable():
    def todo(x, weight, bias, eps=1e-5):
        raise NotImplementedError
    result = ex.check_layer_norm(todo)
    assert not result.passed and not result.implemented and result.diagnosis is None
    assert str(result).startswith("LayerNorm · not implemented yet")
    assert ex.check_batch_norm(type("BatchNorm", (torch.nn.Module,), {
        "__init__": lambda self, *a, **k: todo(None, None, None)})).implemented is False
    assert ex.check_rms_norm(42).mistake == "not_callable"


def test_learner_prints_are_hidden(capsys):
    def chatty(x, weight, bias, eps=1e-5):
        print("debugging", x.shape)
        return good_ln(x, weight, bias, eps)
    assert ex.check_layer_norm(chatty).passed
    assert "debugging" not in capsys.readouterr().out


def test_report_is_deterministic_and_shown_by_ipython():
    a, b = ex.check_layer_norm(good_ln), ex.check_layer_norm(good_ln)
    assert a.passed and bool(a) and str(a) == str(b) == repr(a)
    assert str(a).splitlines()[0] == f"LayerNorm · all {len(a.messages)} checks passed ✓"
    printed = []
    a._repr_pretty_(type("P", (), {"text": lambda self, t: printed.append(t)})(), False)
    assert printed == [str(a)]


# --------------------------------------------------------------------------- generator
SOLUTION = '''def f(x):
    """Doc."""
    ### BEGIN SOLUTION
    return x + 1
    ### END SOLUTION'''


def test_strip_solutions_keeps_indentation_and_drops_hidden_tests():
    assert generate.strip_solutions(SOLUTION) == (
        'def f(x):\n    """Doc."""\n    # YOUR CODE HERE\n    raise NotImplementedError')
    cell = "r = check(f)\n### BEGIN HIDDEN TESTS\nassert r.passed\n### END HIDDEN TESTS\nr"
    assert generate.strip_solutions(cell) == "r = check(f)\nr"
    with pytest.raises(ValueError, match="END SOLUTION"):
        generate.strip_solutions("### BEGIN SOLUTION\nx = 1")


def _write_solution(root, name="01_x.ipynb", head="def f():", body="return 1"):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Ex", metadata={"tags": ["solution-only"]}),
                nbformat.v4.new_code_cell(f"{head}\n    ### BEGIN SOLUTION\n    {body}\n"
                                          "    ### END SOLUTION")]
    folder = root / "notebooks" / "exercises" / "solutions"
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)


def test_generator_reports_out_of_date_learner_notebooks(tmp_path):
    _write_solution(tmp_path)
    learner = tmp_path / "notebooks" / "exercises" / "01_x.ipynb"
    assert generate.out_of_date(tmp_path) == ["notebooks/exercises/01_x.ipynb"]
    assert generate.main(["--root", str(tmp_path), "--check"]) == 1
    assert generate.generate(tmp_path) == [learner]
    nb = nbformat.read(learner, as_version=4)
    assert "raise NotImplementedError" in nb.cells[-1].source and "return 1" not in nb.cells[-1].source
    assert all("solution-only" not in c.metadata.get("tags", []) for c in nb.cells)
    nb.cells[-1].outputs = [nbformat.v4.new_output("stream", text="not implemented yet\n")]
    nbformat.write(nb, learner)                       # outputs do not make it out of date
    assert generate.out_of_date(tmp_path) == [] and generate.generate(tmp_path) == []
    _write_solution(tmp_path, body="return 2")            # a new solution: learner unchanged
    assert generate.out_of_date(tmp_path) == []
    _write_solution(tmp_path, head="def f(x):")             # a new signature: out of date
    assert generate.out_of_date(tmp_path) == ["notebooks/exercises/01_x.ipynb"]
    (tmp_path / "notebooks" / "exercises" / "solutions" / "01_x.ipynb").unlink()
    assert generate.out_of_date(tmp_path) == ["notebooks/exercises/01_x.ipynb"]   # orphan


def test_practice_notebooks_are_read_only_and_point_to_make_exercises(tmp_path):
    _write_solution(tmp_path)
    generate.generate(tmp_path)
    nb = nbformat.read(tmp_path / "notebooks" / "exercises" / "01_x.ipynb", as_version=4)
    assert "make exercises" in nb.cells[0].source.splitlines()[0]
    assert all(c.metadata.get("editable") is False for c in nb.cells)
    copied, _ = workspace.copy_exercises(tmp_path / "notebooks" / "exercises", tmp_path / "ws")
    mine = nbformat.read(tmp_path / "ws" / "01_x.ipynb", as_version=4)
    assert copied == ["01_x.ipynb"] and all("editable" not in c.metadata for c in mine.cells)


def test_work_typed_into_a_practice_notebook_is_never_overwritten(tmp_path, capsys):
    _write_solution(tmp_path)
    generate.generate(tmp_path)
    learner = tmp_path / "notebooks" / "exercises" / "01_x.ipynb"
    nb = nbformat.read(learner, as_version=4)
    nb.cells[-1].source = "def f():\n    return 'my answer'"             # solved in place
    nbformat.write(nb, learner)
    assert generate.edited(learner)
    assert generate.main(["--root", str(tmp_path), "--check"]) == 1
    assert "edited by hand" in capsys.readouterr().out
    assert generate.generate(tmp_path) == [learner]
    kept = tmp_path / "workspace" / "01_x.edited.ipynb"
    assert "my answer" in nbformat.read(kept, as_version=4).cells[-1].source
    assert "my answer" not in learner.read_text() and not generate.edited(learner)
    nb = nbformat.read(learner, as_version=4)
    nb.cells[-1].source += "\n# second attempt"
    nbformat.write(nb, learner)
    _write_solution(tmp_path, head="def f(x, y):")
    generate.generate(tmp_path)                          # a second edit: a second, free name
    assert (tmp_path / "workspace" / "01_x.edited-2.ipynb").exists() and kept.exists()


def test_the_committed_learner_notebooks_are_up_to_date():
    assert generate.out_of_date(ROOT) == []


# --------------------------------------------------------------------------- workspace
def test_workspace_copy_never_overwrites_and_reports_skipped(tmp_path, capsys):
    source, dest = tmp_path / "exercises", tmp_path / "workspace"
    source.mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1", execution_count=3)])
        nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"},
                                                      execution_count=3)]
        nbformat.write(nb, source / name)
    assert workspace.copy_exercises(source, dest) == (["01_a.ipynb", "02_b.ipynb"], [])
    copied = nbformat.read(dest / "01_a.ipynb", as_version=4)
    assert copied.cells[0].outputs == [] and copied.cells[0].execution_count is None
    (dest / "01_a.ipynb").write_text("my work")
    (source / "03_c.ipynb").write_bytes((source / "02_b.ipynb").read_bytes())
    assert workspace.main(["--source", str(source), "--dest", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "copied   03_c.ipynb" in out and "skipped  01_a.ipynb" in out and "skipped  02_b.ipynb" in out
    assert (dest / "01_a.ipynb").read_text() == "my work"
    with pytest.raises(FileNotFoundError, match="source"):
        workspace.copy_exercises(tmp_path / "missing", dest)


def test_workspace_copies_the_chinese_practice_notebooks_into_workspace_zh(tmp_path, capsys):
    english, chinese = tmp_path / "notebooks" / "exercises", tmp_path / "notebooks" / "zh" / "exercises"
    english.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Exercise 01")])
    nbformat.write(nb, english / "01_a.ipynb")
    ws = tmp_path / "workspace"
    assert workspace.editions(tmp_path) == [(english, ws)]       # nothing translated yet
    chinese.mkdir(parents=True)
    nb.cells[0].source = "# 练习 01"
    nb.cells[0].metadata["editable"] = False                    # as the generated notebooks are
    nbformat.write(nb, chinese / "01_a.ipynb")
    assert workspace.editions(tmp_path) == [(english, ws), (chinese, ws / "zh")]
    assert workspace.main(["--root", str(tmp_path)]) == 0
    assert "copied   zh/01_a.ipynb" in capsys.readouterr().out
    mine = nbformat.read(ws / "zh" / "01_a.ipynb", as_version=4)
    assert mine.cells[0].source == "# 练习 01" and "editable" not in mine.cells[0].metadata
    assert nbformat.read(ws / "01_a.ipynb", as_version=4).cells[0].source == "# Exercise 01"
    (ws / "zh" / "01_a.ipynb").write_text("我的答案", "utf-8")
    assert workspace.main(["--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "skipped  zh/01_a.ipynb (already in workspace/zh/; yours is kept)" in out
    assert "skipped  01_a.ipynb (already in workspace/; yours is kept)" in out
    assert (ws / "zh" / "01_a.ipynb").read_text("utf-8") == "我的答案"


# --------------------------------------------------------------------------- catalogue, drill
@pytest.mark.parametrize("key", list(ex.EXERCISES))
def test_each_exercise_notebook_states_the_stub_and_calls_its_checker(key):
    e = ex.EXERCISES[key]
    for path in (ROOT / "notebooks" / "exercises" / "solutions" / e.notebook,
                 ROOT / "notebooks" / "exercises" / e.notebook):
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
        assert e.stub.splitlines()[0] in text and f"{e.checker.__name__}({e.name})" in text


def test_the_task_and_followups_are_written_from_the_text_file(tmp_path):
    e = ex.EXERCISES["rms_norm"]
    folder = tmp_path / "notebooks" / "exercises" / "solutions"
    folder.mkdir(parents=True)
    solution = folder / e.notebook
    nb = nbformat.read(ROOT / "notebooks" / "exercises" / "solutions" / e.notebook, as_version=4)
    for cell in nb.cells:
        cell.source = cell.source.replace(e.task, "an old task").replace(
            e.followups[0].answer, "an old answer")
    nbformat.write(nb, solution)
    assert f"notebooks/exercises/solutions/{e.notebook} (its task or follow-ups differ from " \
           "normlib/exercises/text/)" in generate.out_of_date(tmp_path)
    assert solution in generate.generate(tmp_path)
    text = "\n".join(c.source for c in nbformat.read(solution, as_version=4).cells)
    assert e.task in text and e.followups[0].answer in text and "an old" not in text
    assert generate.out_of_date(tmp_path) == []
    nb.cells = [c for c in nb.cells if not c.source.startswith(generate.FOLLOWUPS_HEADING)]
    with pytest.raises(ValueError, match="one starting '## Interview questions"):
        generate.with_text(nb, e.notebook)


def test_drill_picks_checks_and_asks(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NORMLIB_DRILL_HISTORY", str(tmp_path / "drill_history.jsonl"))
    assert drill.Drill(seed=3).exercise.key == drill.Drill(seed=3).exercise.key
    with pytest.raises(ValueError, match="rms_norm"):
        drill.Drill("rms")
    d = drill.Drill("layer_norm")
    with pytest.raises(RuntimeError, match="start"):
        d.done(good_ln)
    d.start()
    result = d.done(good_ln)
    out = capsys.readouterr().out
    assert result.passed and "Time · 用时: " in out and "within the target · 在目标用时内" in out
    assert "The interviewer asks next" in out and "面试官接着问" in out
    d.start()
    assert d.done() is None and "Nothing to check yet: define `layer_norm`" in capsys.readouterr().out
    assert drill.format_duration(65) == "1 min 05 s" and drill.format_duration(9.6) == "10 s"
    assert drill.menu().count("\n") == len(ex.EXERCISES) + 1


# --------------------------------------------------------------------------- mistake codes
RELEASED = ROOT / "tests" / "data" / "released_codes.txt"


def released_codes() -> list[str]:
    return [line.strip() for line in RELEASED.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_every_released_code_still_exists_or_has_an_alias():
    current = codes.registry()
    for code in released_codes():
        assert code in current or codes.ALIASES.get(code) in current, (
            f"{code} was released: keep it, or map it to its new name in codes.ALIASES")


def test_an_alias_resolves_and_an_unknown_code_is_refused(monkeypatch):
    monkeypatch.setitem(codes.ALIASES, "layer_norm.unbiased_std", "layer_norm.unbiased_variance")
    assert codes.resolve("layer_norm.unbiased_std").code == "layer_norm.unbiased_variance"
    with pytest.raises(KeyError, match="layer_norm.typo"):
        codes.resolve("layer_norm.typo")


def test_every_code_has_one_line_in_english_and_chinese():
    registry = codes.registry()
    assert len(registry) > 300 and all(c in registry for c in codes.SUBMISSION_CODES)
    for c in registry.values():
        assert c.message and c.message_zh, c
        assert "\n" not in c.message + c.message_zh, c
        assert re.search(r"[\u4e00-\u9fff]", c.message_zh), c      # Chinese, not a copy


def test_the_mistakes_page_is_current():
    assert (ROOT / "docs" / "mistakes.md").read_text() == mistake_codes.page(), \
        "docs/mistakes.md is out of date: run make mistake-codes"


@pytest.mark.parametrize("exercise", list(mistake_codes.MODULES))
def test_every_key_a_checker_can_emit_is_in_its_catalogue(exercise):
    """A key missing from the catalogue would silently become "wrong values" (review finding 18)."""
    known = set(codes.catalogues()[exercise]) | set(GENERIC_MISTAKES) | set(OUTCOMES)
    for module in mistake_codes.MODULES[exercise]:
        assert mistake_codes.emitted_keys(module) <= known, module


def test_the_shared_norm_probes_emit_only_catalogued_keys():
    for module, exercises in mistake_codes.SHARED.items():
        known = set().union(*(codes.catalogues()[e] for e in exercises))
        assert mistake_codes.emitted_keys(module) <= known | set(GENERIC_MISTAKES)


def _mutant_calls(module):
    """(table name, key, thunk) for every mutant of a checker module's tables, each called on
    every forward case's arguments as its checker calls it: like the reference,
    f(*inputs, *kwargs.values()); DeepNorm's as f(x, sublayer, alpha, beta) with DeepNet's
    constants; the schedule's as f(step, warmup, total, min_ratio) at its first steps."""
    from normlib.exercises import deep_norm
    for name, table in vars(module).items():
        if not name.endswith("_MUTANTS") or name == "DEEP_NORM_CONSTANT_MUTANTS":
            continue
        tables = table.items() if isinstance(table, dict) else [(None, table)]
        for case in module.CASES:
            full = (*case.inputs(), *case.kwargs.values())
            if module is deep_norm:
                x, sub, n = full
                full = (x, sub, *deep_norm.nl.deepnorm_constants(num_encoder_layers=n)["encoder"])
            for part, rows in tables:
                for key, f in rows:
                    if name == "WARMUP_MUTANTS":
                        yield name, key, lambda f=f, full=full: [f(k, *full) for k in range(3)]
                    else:
                        yield f"{name}[{part}]" if part else name, key, \
                            lambda f=f, full=full: f(*full)


CASE_MODULES = ["attention", "deep_norm", "gelu", "layer_norm", "layer_norm_backward",
                "llama_block", "multi_head_attention", "online_softmax", "qk_norm", "rms_norm",
                "rope", "schedule", "sliding_window", "swiglu"]


@pytest.mark.parametrize("name", CASE_MODULES)
def test_every_mutant_takes_the_arguments_its_checker_passes(name):
    """A mutant may fail on an input it means nothing for (the session skips it), but one whose
    arguments do not match the table's convention would be skipped on every input, silently: the
    mistake it stands for would never be named. A TypeError from the call is that bug."""
    import importlib
    module = importlib.import_module(f"normlib.exercises.{name}")
    assert module.CASES
    calls = list(_mutant_calls(module))
    assert calls, f"{name}: no mutant table found"
    wrong = []
    for table, key, call in calls:
        try:
            with torch.no_grad():
                call()
        except TypeError as exc:
            wrong.append(f"{table}: {key}: {exc}")
        except Exception:        # does not apply to this input (DoesNotApply, a shape error)
            pass
    assert not wrong, "\n".join(wrong[:5])


def test_a_mutant_with_the_wrong_arguments_is_caught(monkeypatch):
    from normlib.exercises import gelu
    monkeypatch.setattr(gelu, "GELU_MUTANTS", [*gelu.GELU_MUTANTS, ("exact_erf", lambda x, e: x)])
    with pytest.raises(AssertionError, match="exact_erf"):
        test_every_mutant_takes_the_arguments_its_checker_passes("gelu")


def test_the_key_scanner_finds_a_typo(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text('def probe():\n    return ("eps_outsde_sqrt", f"Your {1}")\n'
                                   'def check():\n    raise Fail("detail", "not_centered")\n')
    monkeypatch.setattr(mistake_codes, "SOURCES", tmp_path)
    assert mistake_codes.emitted_keys("m") == {"eps_outsde_sqrt", "not_centered"}


def test_result_carries_code_and_messages_and_the_report_speaks_chinese():
    wrong = lambda x, w, b, eps=1e-5: (x - x.mean(-1, keepdim=True)) / (  # noqa: E731
        x.std(-1, keepdim=True) + eps) * w + b
    result = ex.check_layer_norm(wrong)
    assert result.code == "layer_norm.unbiased_and_eps_outside"
    assert result.message == result.diagnosis and "\n" not in result.message
    assert result.message_zh == codes.registry()[result.code].message_zh
    good = ex.check_layer_norm(good_ln)
    assert good.code is None and good.message == f"LayerNorm: all {len(good.messages)} checks passed"
    stub = ex.check_layer_norm(lambda x, w, b, eps=1e-5: (_ for _ in ()).throw(NotImplementedError))
    assert stub.code == "layer_norm.not_implemented" and not stub.passed
    try:
        ex.set_language("zh")
        text = str(result)
        assert text.startswith("层归一化 LayerNorm · ") and f"诊断：{result.message_zh}" in text
        assert "全部" in str(good) and "尚未实现" in str(stub)
    finally:
        ex.set_language("en")
    assert str(result).startswith("LayerNorm · ") and ex.language() == "en"
    with pytest.raises(ValueError, match="lang='fr'"):
        ex.set_language("fr")


# --------------------------------------------------------------------------- Chinese practice outputs
def _practice(source: str, printed: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source, id="check")
    cell.outputs = [nbformat.v4.new_output("stream", text=printed)]
    cell.execution_count = 3
    nb.cells = [nbformat.v4.new_markdown_cell("# Exercise", id="title"), cell]
    return nb


def test_a_chinese_practice_notebook_keeps_the_outputs_it_was_executed_with(tmp_path):
    target = tmp_path / "01_a.ipynb"
    nbformat.write(_practice("result = check(f)", "尚未实现"), target)
    english = _practice("result = check(f)", "not implemented yet")
    assert translations.keep_outputs(english, target)
    assert english.cells[1].outputs[0].text == "尚未实现"


def test_a_chinese_practice_notebook_whose_code_changed_keeps_the_english_outputs(tmp_path):
    target = tmp_path / "01_a.ipynb"
    assert not translations.keep_outputs(_practice("x = 1", "English"), target)   # not written yet
    nbformat.write(_practice("result = check(f)", "尚未实现"), target)
    english = _practice("result = check(g)", "not implemented yet")
    assert not translations.keep_outputs(english, target)
    assert english.cells[1].outputs[0].text == "not implemented yet"


def test_every_chinese_practice_notebook_reports_in_chinese():
    """Their saved check outputs are the Chinese report (set_language("zh")), not the English one."""
    practice = [ROOT / "notebooks" / "zh" / "exercises" / e.notebook for e in ex.EXERCISES.values()]
    for path in practice:
        nb = nbformat.read(path, as_version=4)
        printed = "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                            for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        assert "尚未实现" in printed and "not implemented yet" not in printed, path.name
