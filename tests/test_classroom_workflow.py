"""A graded course end to end (issue 34): collect at a deadline, grade an assignment against a
roster, versioned notebooks, grades kept out of git, LMS exports, feedback per student and its
return into the homes, and the similarity report, each on planted cases."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_classroom_grader import hand_in, needs_bwrap, solution

from normlib.classroom.__main__ import main
from normlib.classroom.assignment import (
    Assignment,
    parse_deadline,
    parse_exercises,
    parse_points,
    read_roster,
    versioned,
)
from normlib.classroom.collect import collect
from normlib.classroom.feedback import return_feedback
from normlib.classroom.grade import find_submissions, grade_class
from normlib.classroom.outputs import Outputs, write_all
from normlib.classroom.similarity import similar_pairs

# The usual wrong LayerNorm: x.std(-1) + eps (unbiased, eps outside the root).
WRONG_LN = '''def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / (x.std(-1, keepdim=True) + eps) * weight + bias
'''
# Honest LayerNorms: the same maths, each written its own way; they share the signature (the
# stub's) and what anyone writes for a mean.
HONEST_LN = [
    '''def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', '''def layer_norm(x, weight, bias, eps=1e-5):
    x32 = x.float()
    centred = x32 - x32.mean(dim=-1, keepdim=True)
    inv = torch.rsqrt((centred ** 2).mean(dim=-1, keepdim=True) + eps)
    return (centred * inv).type_as(x) * weight + bias
''', '''def layer_norm(x, weight, bias, eps=1e-5):
    d = x.shape[-1]
    mu = x.sum(-1, keepdim=True) / d
    sq = ((x - mu) * (x - mu)).sum(-1, keepdim=True) / d
    y = (x - mu) / (sq + eps).sqrt()
    return weight * y + bias
''', '''def layer_norm(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    normed = (x - mean) * (var + eps) ** -0.5
    return torch.addcmul(bias, normed, weight)
''']
# A copy of HONEST_LN[1]: every name changed, comments added, the layout changed.
PLANTED_COPY = '''def layer_norm(x, weight, bias, eps=1e-5):
    # my own LayerNorm, written from the lecture
    h = x.float()
    shifted = h - h.mean(dim=-1,
                         keepdim=True)       # subtract the mean
    scale = torch.rsqrt(
        (shifted ** 2).mean(dim=-1, keepdim=True) + eps)
    return (shifted * scale).type_as(x) * weight + bias
'''


def _item(student, answer, stem="01_layer_norm"):
    return {"student": student, "stem": stem, "answer": answer}


def test_similarity_finds_a_renamed_copy_and_spares_honest_answers():
    items = [_item(f"honest-{i}", a) for i, a in enumerate(HONEST_LN)]
    pairs = similar_pairs(items + [_item("copier", PLANTED_COPY)])
    assert [(p.exercise, set(p.students)) for p in pairs] == \
        [("01_layer_norm", {"honest-1", "copier"})]
    assert pairs[0].score >= 0.8 and PLANTED_COPY in pairs[0].answers
    # a class of two: the copy is still found (nothing counts as "what the class writes")
    assert len(similar_pairs([_item("a", HONEST_LN[1]), _item("b", PLANTED_COPY)])) == 1
    # honest answers alone: no pair, nor with the stub left in place or an unparsable answer
    assert similar_pairs(items + [_item("stub", "def layer_norm(x, weight, bias, eps=1e-5):\n"
                                                "    raise NotImplementedError"),
                                  _item("broken", "def layer_norm(:")]) == []
    with pytest.raises(ValueError, match="--similarity.*1.5"):
        similar_pairs(items, 1.5)


def test_versioned_notebooks_map_to_their_exercise(tmp_path):
    assert versioned("01_layer_norm.ipynb") == ("01_layer_norm", 1)
    assert versioned("01_layer_norm_v2.ipynb") == ("01_layer_norm", 2)
    assert versioned("01_layer_norm_v0.ipynb") is None and versioned("99_x_v2.ipynb") is None
    hand_in(tmp_path, "alice", "layer_norm", WRONG_LN)
    hand_in(tmp_path, "alice", "layer_norm", solution("layer_norm"))
    (tmp_path / "alice" / "01_layer_norm.ipynb").rename(tmp_path / "alice" /
                                                       "01_layer_norm_v2.ipynb")
    hand_in(tmp_path, "alice", "layer_norm", WRONG_LN)             # v1, saved later
    _, stems, items = find_submissions(tmp_path)
    assert stems == ["01_layer_norm"]
    assert items[0]["notebook"] == "01_layer_norm_v2.ipynb" and items[0]["version"] == 2


def test_an_untouched_exercise_is_the_english_notebook(tmp_path):
    """Neither edition answered: the row names the English notebook, though the Chinese copy was
    written last (walkthrough, problem 14: an English class saw zh/ in its report)."""
    hand_in(tmp_path, "alice", "rms_norm", "raise NotImplementedError")
    time.sleep(0.01)
    hand_in(tmp_path, "alice", "rms_norm", "raise NotImplementedError", zh=True)
    assert find_submissions(tmp_path)[2][0]["notebook"] == "03_rms_norm.ipynb"


def test_the_assignment_decides_the_rows(tmp_path):
    for key in ("layer_norm", "rms_norm", "gelu_tanh"):
        hand_in(tmp_path, "alice", key, solution(key))
    hand_in(tmp_path, "zed", "rms_norm", solution("rms_norm"))
    roster = tmp_path / "roster.csv"
    roster.write_text("student,name\nalice,Alice\ncarol,Carol\n", encoding="utf-8-sig")
    students, stems, items = find_submissions(tmp_path, Assignment(
        exercises=parse_exercises("01_layer_norm,rms_norm"), roster=read_roster(roster)))
    assert students == ["alice", "carol", "zed"]          # the roster's order, then the others
    assert stems == ["01_layer_norm", "03_rms_norm"]      # 08_gelu_tanh was not assigned
    codes = {(i["student"], i.get("stem", i.get("exercise"))): i.get("code") for i in items}
    assert codes["carol", "01_layer_norm"] == "submission.missing"
    assert codes["zed", "01_layer_norm"] == "submission.no_answer"
    assert len(items) == 6


@pytest.mark.parametrize("call, message", [
    (lambda: parse_exercises("01_layer_norm,01_layer_norm"), "--exercises: .*named twice"),
    (lambda: parse_exercises("layer_normm"), "--exercises: no exercise 'layer_normm'"),
    (lambda: parse_points("01_layer_norm=-3"), "--points: .*got '01_layer_norm=-3'"),
    (lambda: parse_deadline("next friday"), "--deadline: .*ISO-8601.*'next friday'"),
    (lambda: Assignment(exercises=("01_layer_norm",), points={"03_rms_norm": 5.0}),
     "--points: 03_rms_norm is not among the assigned"),
    (lambda: Outputs(formats=("blackboard",)), "--format: .*'blackboard'"),
])
def test_every_bad_argument_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("text, message", [
    ("name,email\nAlice,a@x\n", "'student' column"),
    ("student,name\nalice,A\nalice,B\n", "line 3: student 'alice' is listed twice"),
    ("student\n../bob\n", "line 2: '../bob' is not a student id"),
    ("student,name\nalice\n", "line 2 has 1 cells, the header 2"),
    ("student\n", "lists no students"),
])
def test_a_bad_roster_is_named(tmp_path, text, message):
    (tmp_path / "r.csv").write_text(text)
    with pytest.raises(ValueError, match=f"--roster: .*{message}"):
        read_roster(tmp_path / "r.csv")


def test_the_cli_names_a_bad_argument(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["grade", str(tmp_path), "--out", str(tmp_path / "o"), "--deadline", "soon"])
    assert exit_.value.code == 2
    assert "argument --deadline: expected an ISO-8601" in capsys.readouterr().err
    assert main(["grade", str(tmp_path), "--out", str(tmp_path / "o"), "--roster",
                 str(tmp_path / "none.csv")]) == 2
    assert "--roster: cannot read" in capsys.readouterr().err


def test_grades_and_snapshots_stay_out_of_git(tmp_path):
    repo = tmp_path / "course"
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    hand_in(tmp_path / "class", "alice", "gelu_tanh", solution("gelu_tanh"))
    with pytest.raises(ValueError, match=r"grade --out: .*inside the git work tree.*--inside-git"):
        grade_class(tmp_path / "class", repo / "graded")
    assert not (repo / "graded").exists()
    (tmp_path / "homes").mkdir()
    with pytest.raises(ValueError, match="collect --out: .*inside the git work tree"):
        collect(tmp_path / "homes", repo / "submissions")


def _home(homes: Path, student: str, key: str, answer: str, *, zh: bool = False) -> Path:
    hand_in(homes / student / "course", "practice", key, answer, zh=zh)
    folder = homes / student / "course" / "practice" / ("zh" if zh else "")
    return next(folder.glob("*.ipynb"))


def test_collect_takes_a_snapshot_and_follows_no_link(tmp_path):
    homes, before = tmp_path / "homes", time.time() - 86400
    alice = _home(homes, "alice", "layer_norm", WRONG_LN)
    os.utime(alice, (before, before))
    _home(homes, "alice", "layer_norm", solution("layer_norm"), zh=True)   # saved now: late
    bob = homes / "bob" / "course" / "practice"
    bob.mkdir(parents=True)
    (bob / "03_rms_norm.ipynb").symlink_to(alice)           # a link to a classmate's notebook
    os.mkfifo(bob / "08_gelu_tanh.ipynb")                   # would hang a plain open()
    (bob / "notes.txt").write_text("not a notebook")
    (homes / "carol").mkdir()                                # never opened a link
    (homes / "mallory").mkdir()
    (homes / "mallory" / "course").symlink_to(homes / "alice" / "course")
    out = tmp_path / "submissions"
    deadline = datetime.now(UTC) - timedelta(hours=1)
    found = collect(homes, out, deadline=deadline)
    assert found.files == {"alice": ["01_layer_norm.ipynb", "zh/01_layer_norm.ipynb"]}
    assert found.late == {"alice": ["zh/01_layer_norm.ipynb"]}
    assert set(found.skipped) == {"carol", "mallory"}
    copied = out / "alice" / "01_layer_norm.ipynb"
    assert copied.read_bytes() == alice.read_bytes()
    assert copied.stat().st_mtime == pytest.approx(before, abs=1e-3)
    for path in out.rglob("*"):
        assert path.stat().st_mode & 0o777 == (0o700 if path.is_dir() else 0o600), path
    assert not (out / "bob" / "03_rms_norm.ipynb").exists()
    manifest = json.loads((out / "collected.json").read_text())
    assert parse_deadline(manifest["deadline"]) == deadline
    with pytest.raises(ValueError, match="collect --out: expected a new or empty folder"):
        collect(homes, out)


def _row(student, exercise, passed, code=None, **kw):
    return {"student": student, "exercise": exercise, "edition": kw.get("edition", "en"),
            "notebook": kw.get("notebook", f"{exercise}.ipynb"), "passed": passed, "code": code,
            "message": kw.get("message", "m"), "message_zh": kw.get("message_zh"),
            "checks": kw.get("checks", []), "output": "", "late": kw.get("late", False),
            "submitted_at": kw.get("submitted_at", "")}


def test_exports_and_feedback(tmp_path):
    (tmp_path / "roster.csv").write_text("student,name,SIS Login ID,section\n"
                                         "alice,\"=cmd|' /C calc'!A0\",a1,S1\nli,李雷,l2,S1\n"
                                         "carol,Carol,c3,S2\n")
    assignment = Assignment(exercises=("01_layer_norm", "03_rms_norm"),
                            points={"01_layer_norm": 20.0}, roster=read_roster(
                                tmp_path / "roster.csv"),
                            deadline=parse_deadline("2026-03-06T23:59+01:00"))
    xss = "<script>alert(1)</script>"
    rows = [
        _row("alice", "01_layer_norm", False, "layer_norm.unbiased_and_eps_outside",
             message=xss, checks=["✓ a", "✓ b", "✗ c", "✗ d"], late=True,
             submitted_at="2026-03-07T09:00:00+00:00"),
        _row("alice", "03_rms_norm", False, "rms_norm.not_implemented"),
        _row("li", "01_layer_norm", True, edition="zh", notebook="zh/01_layer_norm.ipynb"),
        _row("li", "03_rms_norm", False, "rms_norm.mean_subtracted", edition="zh",
             notebook="zh/03_rms_norm.ipynb", message_zh="你减去了均值"),
        _row("carol", "01_layer_norm", False, "submission.missing", notebook=""),
        _row("carol", "03_rms_norm", False, "submission.missing", notebook=""),
    ]
    out = tmp_path / "out"
    write_all(rows, out, assignment=assignment, outputs=Outputs(formats=("canvas", "moodle"),
                                                                bom=True))
    raw = (out / "canvas.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")                         # Excel reads it as UTF-8
    canvas = list(csv.reader(raw.decode("utf-8-sig").splitlines()))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                         "01_layer_norm", "03_rms_norm"]
    assert canvas[1][0].strip() == "Points Possible" and canvas[1][5:] == ["20", "10"]
    assert canvas[2] == ["'=cmd|' /C calc'!A0", "", "", "a1", "S1", "10", "0"]   # 2 of 4 checks
    assert canvas[3] == ["李雷", "", "", "l2", "S1", "20", "0"]
    assert canvas[4][3:] == ["c3", "S2", "0", "0"]
    moodle = list(csv.reader((out / "moodle.csv").read_text("utf-8-sig").splitlines()))
    assert moodle[0] == ["student", "name", "SIS Login ID", "section", "01_layer_norm",
                         "03_rms_norm", "total"]
    assert moodle[2][-1] == "20"
    book = list(csv.DictReader((out / "gradebook.csv").read_text("utf-8-sig").splitlines()))
    assert [r["status"] for r in book] == ["failed", "not attempted", "passed", "failed",
                                           "missing", "missing"]
    assert book[0]["late"] == "true" and book[0]["points"] == "10"
    results = json.loads((out / "gradescope" / "alice" / "results.json").read_text())
    assert results["score"] == 10 and results["tests"][0]["tags"] == [
        "layer_norm.unbiased_and_eps_outside"]
    assert results["tests"][0]["max_score"] == 20
    page = (out / "feedback" / "alice.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page
    assert "layer_norm.unbiased_and_eps_outside" in page and "handed in after the deadline" in page
    assert "notebooks/03_layernorm_and_rmsnorm.ipynb" in page              # the lesson to reread
    assert "Which dim does LayerNorm normalize in BERT" in page           # the follow-up
    li = (out / "feedback" / "li.html").read_text()
    assert 'lang="zh-CN"' in li and "你减去了均值" in li and "进一步思考" in li
    assert "notebooks/zh/03_layernorm_and_rmsnorm.ipynb" in li
    assert "nothing was handed in" in (out / "feedback" / "carol.html").read_text()
    for path in out.rglob("*"):
        assert path.stat().st_mode & 0o777 == (0o700 if path.is_dir() else 0o600), path
    report = (out / "report.html").read_text()
    assert "1 of 3 attempted answers passed" in report and "2 missing" in report
    assert "03_layernorm_and_rmsnorm.ipynb" in report and "<a href=\"../" not in report
    write_all(rows, out, assignment=assignment,
              outputs=Outputs(lessons_url="https://slides.example.edu/course"))
    assert ('href="https://slides.example.edu/course/zh/03_layernorm_and_rmsnorm.ipynb#'
            in (out / "feedback" / "li.html").read_text())


def test_feedback_goes_home_and_follows_no_link(tmp_path):
    out = tmp_path / "week1"
    write_all([_row("alice", "01_layer_norm", True), _row("bob", "01_layer_norm", True),
               _row("mallory", "01_layer_norm", True), _row("nobody", "01_layer_norm", True)],
              out)
    homes = tmp_path / "homes"
    for who in ("alice", "bob", "mallory"):
        (homes / f"jupyter-{who}").mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (homes / "jupyter-mallory" / "feedback").symlink_to(target)       # a trap for a root copy
    (homes / "jupyter-bob" / "feedback").mkdir()
    (homes / "jupyter-bob" / "feedback" / "week1.html").symlink_to(target / "planted")
    done = dict(return_feedback(out, homes, prefix="jupyter-"))
    page = homes / "jupyter-alice" / "feedback" / "week1.html"
    assert done["alice"] == str(page) and page.stat().st_mode & 0o777 == 0o600
    assert "alice" in page.read_text()
    bob = homes / "jupyter-bob" / "feedback" / "week1.html"
    assert bob.is_file() and not bob.is_symlink() and not (target / "planted").exists()
    assert done["mallory"].startswith("not returned") and not list(target.iterdir())
    assert done["nobody"].startswith("skipped: no home")
    with pytest.raises(ValueError, match="return --name: .*'../x'"):
        return_feedback(out, homes, name="../x")


@needs_bwrap
def test_an_assignment_collected_graded_and_exported(tmp_path):
    """The lecturer's week: collect at the deadline, grade two exercises for a roster of three."""
    homes, before = tmp_path / "homes", time.time() - 86400
    for path in (_home(homes, "alice", "layer_norm", WRONG_LN),
                 _home(homes, "bob", "layer_norm", HONEST_LN[1]),
                 _home(homes, "bob", "gelu_tanh", solution("gelu_tanh"))):   # not assigned
        os.utime(path, (before, before))
    _home(homes, "alice", "rms_norm", solution("rms_norm"))                  # after the deadline
    v2 = homes / "alice" / "course" / "practice" / "01_layer_norm_v2.ipynb"
    hand_in(tmp_path / "v2", "alice", "layer_norm", PLANTED_COPY)            # a copy of bob's
    (tmp_path / "v2" / "alice" / "01_layer_norm.ipynb").rename(v2)
    os.utime(v2, (before, before))
    (tmp_path / "roster.csv").write_text("student,name\nalice,Alice\nbob,Bob\ncarol,Carol\n")
    deadline = datetime.now().astimezone() - timedelta(hours=1)
    subs, out = tmp_path / "submissions", tmp_path / "graded"
    assert main(["collect", str(homes), "--out", str(subs), "--deadline",
                 deadline.isoformat()]) == 0
    done = subprocess.run([sys.executable, "-m", "normlib.classroom", "grade", str(subs),
                           "--out", str(out), "--exercises", "01_layer_norm,03_rms_norm",
                           "--roster", str(tmp_path / "roster.csv"), "--format", "canvas",
                           "--quiet", "--workers", "2"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "3 of 3 attempted answers passed; 1 not attempted, 2 missing, 1 late" in done.stdout
    rows = {(r["student"], r["exercise"]): r for r in
            map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(rows) == {(s, e) for s in ("alice", "bob", "carol")
                         for e in ("01_layer_norm", "03_rms_norm")}
    assert rows["alice", "01_layer_norm"]["notebook"] == "01_layer_norm_v2.ipynb"
    assert rows["alice", "01_layer_norm"]["passed"]                  # v2 counts, not v1
    assert rows["alice", "03_rms_norm"]["late"] and rows["alice", "03_rms_norm"]["passed"]
    assert rows["carol", "01_layer_norm"]["code"] == "submission.missing"
    canvas = list(csv.reader((out / "canvas.csv").read_text().splitlines()))
    assert [r[0] for r in canvas[2:]] == ["Alice", "Bob", "Carol"]
    report = (out / "report.html").read_text()
    assert "Similar answers" in report and "alice · bob" in report
    assert (out / "feedback" / "carol.html").exists()
