"""The classroom grader (issue 19, items 2, 3 and 5): a class built from the tests' correct, wrong
and garbage implementations and from hostile submissions, graded as a lecturer would grade it."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_exercises_unseen import CANNOT_TELL, CHECKERS

from normlib.classroom import Limits, grade_class, nbgitpuller_link
from normlib.classroom import grade as grade_module
from normlib.classroom.__main__ import main
from normlib.classroom.assignment import status
from normlib.classroom.grade import find_submissions, run_items
from normlib.classroom.sandbox import Sandbox
from normlib.exercises import EXERCISES

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# The grader runs answers only inside bubblewrap; `make test` installs it where it can (as root),
# CI always: there a missing bwrap fails the tests instead of skipping them.
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                 reason="bubblewrap (bwrap) is not installed: the grader needs it")
PRACTICE = ROOT / "notebooks" / "exercises"
STEMS = {e.key: Path(e.notebook).stem for e in EXERCISES.values()}
# Every exercise with a practice notebook (test_exercises.py holds the catalogue to its notebooks).
KEYS = [key for key in EXERCISES if (PRACTICE / f"{STEMS[key]}.ipynb").exists()]


def answer_ids(nb) -> set:
    return {c.id for c in nb.cells if c.cell_type == "code" and "raise NotImplementedError" in
            c.source}


def solution(key: str) -> str:
    """The solution notebook's answer cell, markers removed: a correct answer."""
    name = f"{STEMS[key]}.ipynb"
    ids = answer_ids(nbformat.read(PRACTICE / name, as_version=4))
    cells = nbformat.read(PRACTICE / "solutions" / name, as_version=4).cells
    source = next(c.source for c in cells if c.id in ids)
    return "\n".join(line for line in source.splitlines()
                     if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))


def wrong(key: str, i: int = 0) -> str:
    """An answer cell that is one of test_exercises_unseen's wrong implementations (imported)."""
    name = EXERCISES[key].name
    return (f"# {CHECKERS[key][1][i][0]}\nimport sys\nsys.path.insert(0, {str(TESTS)!r})\n"
            f"from test_exercises_unseen import CANNOT_TELL, CHECKERS as _checkers\n"
            f"{name} = _checkers[{key!r}][1][{i}][1]\n")


def hand_in(root: Path, student: str, key: str, answer: str | None, *, zh: bool = False):
    """The practice notebook as `make exercises` copies it, its answer cell replaced (None: the
    answer cell deleted)."""
    source = (ROOT / "notebooks" / "zh" / "exercises" if zh else PRACTICE) / f"{STEMS[key]}.ipynb"
    nb = nbformat.read(source, as_version=4)
    ids = answer_ids(nb)
    if answer is None:
        nb.cells = [c for c in nb.cells if c.id not in ids]
    for cell in nb.cells:
        if cell.id in ids:
            cell.source = answer
    folder = root / student / ("zh" if zh else "")
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{STEMS[key]}.ipynb")


# Exercises whose checkers run fast on a wrong answer: two students make the same mistake there.
CHEAP = {"layer_norm", "rms_norm", "batch_norm", "deep_norm", "warmup_cosine", "gelu_tanh",
         "swiglu_ffn"}
XSS = "<script>alert('x')</script>"
HOSTILE = {   # student: (exercise, answer cell, expected code)
    "sys-exit": ("gelu_tanh", "import sys\nsys.exit(3)", "submission.crashed"),
    "os-exit": ("gelu_tanh", "import os\nos._exit(3)", "submission.crashed"),
    "memory-20gb": ("gelu_tanh", "import torch\nx = torch.ones(20 * 2**30, dtype=torch.uint8)",
                    "submission.memory"),
    "prints-100mb": ("gelu_tanh", "for _ in range(10**6):\n    print('x' * 100)",
                     "submission.output_limit"),
    "writes-a-file": ("gelu_tanh", "with open('big.bin', 'wb') as f:\n"
                      "    f.write(bytes(100 * 2**20))\n", "submission.error"),
    "reads-others": ("gelu_tanh", "import os\nstolen = os.listdir('..')\n"
                     "open('../ok-gelu_tanh/08_gelu_tanh.ipynb').read()", "submission.error"),
    "syntax-error": ("gelu_tanh", "def gelu_tanh(x)\n    return x", "submission.error"),
    "defines-nothing": ("gelu_tanh", "x = 1", "submission.no_answer"),
    "spins-in-except": ("gelu_tanh", "def gelu_tanh(x):\n    while True:\n        try:\n"
                        "            pass\n        except BaseException:\n            pass",
                        "gelu_tanh.time_limit"),
    "script-in-error": ("gelu_tanh", f"def gelu_tanh(x):\n    raise ValueError({XSS!r})",
                        "gelu_tanh.raised"),
}
FORKS = ("import os\nif os.fork() == 0:\n    while True:\n        pass\n")
KILLS_SERVER = "import os\nimport signal\nos.kill(os.getppid(), signal.SIGKILL)\n"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("submissions")
    expected = {}                              # (student, key) -> True (passed) or the code
    for key in KEYS:
        hand_in(root, f"ok-{key}", key, solution(key))
        expected[f"ok-{key}", key] = True
        if key not in CHECKERS:                # no wrong implementations written for it yet
            continue
        for who in ("a", "b") if key in CHEAP else ("a",):     # the same mistake, two students
            hand_in(root, f"wrong-{key}-{who}", key, wrong(key))
            expected[f"wrong-{key}-{who}", key] = "wrong"
    hand_in(root, "ok-zh", "layer_norm", solution("layer_norm"), zh=True)
    expected["ok-zh", "layer_norm"] = True
    hand_in(root, "forks-then-correct", "gelu_tanh", FORKS + solution("gelu_tanh"))
    expected["forks-then-correct", "gelu_tanh"] = True
    hand_in(root, "kills-the-server", "rope", KILLS_SERVER + solution("rope"))   # its parent
    # its parent is PID 1 of the student's namespace, which the kernel keeps from such a kill
    expected["kills-the-server", "rope"] = True
    for student, (key, answer, code) in HOSTILE.items():
        hand_in(root, student, key, answer)
        expected[student, key] = code
    (root / "left-the-stub").mkdir()
    nbformat.write(nbformat.read(PRACTICE / "03_rms_norm.ipynb", as_version=4),
                   root / "left-the-stub" / "03_rms_norm.ipynb")
    expected["left-the-stub", "rms_norm"] = "rms_norm.not_implemented"
    hand_in(root, "deleted-the-cell", "rms_norm", None)
    expected["deleted-the-cell", "rms_norm"] = "submission.no_answer"
    (root / "not-json").mkdir()
    (root / "not-json" / "01_layer_norm.ipynb").write_text('{"cells": [{"cell_ty')
    expected["not-json", "layer_norm"] = "submission.not_json"
    evil = "<b onmouseover=alert(1)>evil"
    hand_in(root, evil, "layer_norm", solution("layer_norm"))
    expected[evil, "layer_norm"] = True
    out = tmp_path_factory.mktemp("out")
    # the wrong answers import test_exercises_unseen: the sandboxes see tests/, and import it once
    rows = grade_class(root, out, limits=Limits(timeout=120, time_limit=2.0, memory_mb=1024),
                       workers=2, progress=False, extra_paths=[TESTS],
                       preload=["test_exercises_unseen"])
    return root, out, rows, expected


def by_student(rows):
    return {(r["student"], r["exercise"]): r for r in rows}


@needs_bwrap
def test_the_class_is_graded(graded):
    root, out, rows, expected = graded
    students = {s for s, _ in expected}
    assert len(students) >= 30
    assert {k for _, k in expected} == set(KEYS)               # every exercise handed in
    table = by_student(rows)
    assert len(rows) == len(students) * len(KEYS)              # one row per student and exercise
    codes_of = {}
    for (student, key), want in expected.items():
        row = table[student, STEMS[key]]
        if want is True:
            assert row["passed"] and row["code"] is None, row
        elif want == "wrong":
            accepted = CHECKERS[key][1][0][2] | CANNOT_TELL      # what names this mistake
            assert not row["passed"] and row["code"].split(".", 1)[1] in accepted, row
            assert row["code"].startswith(f"{key}.") and row["message"], row
            codes_of.setdefault(key, set()).add(row["code"])
        else:
            assert not row["passed"] and row["code"] == want, row
    assert all(len(codes) == 1 for codes in codes_of.values()), codes_of   # same mistake, same code
    missing = [r for (s, _), r in table.items() if (s, r["exercise"]) not in
               {(s2, STEMS[k]) for s2, k in expected}]
    assert missing and all(r["code"] == "submission.no_answer" for r in missing)
    assert table["ok-zh", "01_layer_norm"]["edition"] == "zh"
    assert "File too large" in table["writes-a-file", "08_gelu_tanh"]["message"]
    assert "FileNotFoundError" in table["reads-others", "08_gelu_tanh"]["message"]


@needs_bwrap
def test_the_gradebook_and_results(graded):
    _, out, rows, _ = graded
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        book = list(csv.reader(f))
    assert book[0] == ["student", "exercise", "passed", "code", "message", "status", "points",
                       "max_points", "submitted_at", "late"]
    assert len(book) == len(rows) + 1
    for line in book[1:]:
        assert line[2] in ("true", "false") and (line[3] == "") == (line[2] == "true"), line
        assert "\n" not in line[4] and line[4], line
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["student"], r["exercise"]) for r in records] == \
        [(r["student"], r["exercise"]) for r in rows]


@needs_bwrap
def test_the_report_is_offline_and_escaped(graded):
    _, out, rows, _ = graded
    page = (out / "report.html").read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"<script|<link|@import|url\(", page, re.I)
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page        # the error message
    assert "&lt;b onmouseover=alert(1)&gt;evil" in page and "<b onmouseover" not in page
    assert "Noto Sans CJK SC" in page and "层归一化" in page
    # a chart per exercise that someone failed (not attempting it is not a mistake to chart)
    assert page.count("<svg") == len({r["exercise"] for r in rows if status(r) == "failed"}) > 10
    assert "03_layernorm_and_rmsnorm.ipynb" in page      # the lesson that teaches it


@needs_bwrap
def test_a_submission_that_never_ends_is_killed(tmp_path):
    hand_in(tmp_path, "endless", "gelu_tanh", "while True:\n    pass")
    hand_in(tmp_path, "sleeps-in-a-subprocess", "gelu_tanh",
            "import subprocess\nsubprocess.run(['sleep', '600'])")
    _, _, items = find_submissions(tmp_path)
    rows, complete = run_items(items, Limits(timeout=3.0), workers=2, progress=False)
    assert complete and [r["code"] for r in rows] == ["submission.timeout"] * 2
    left = subprocess.run(["pgrep", "-f", "sleep 600"], capture_output=True, text=True).stdout
    assert not left.strip(), "the submission's own subprocess outlived it"


@needs_bwrap
def test_one_worker_serves_student_after_student(tmp_path, monkeypatch):
    """Each student gets namespaces of their own inside the same worker: one torch import for
    the class, not one per student (a leftover folder once made every second student fail to
    open, and a new worker was started for each)."""
    for student in ("alice", "bob", "carol"):
        hand_in(tmp_path, student, "gelu_tanh", solution("gelu_tanh"))
    started = []
    monkeypatch.setattr(grade_module, "Sandbox",
                        lambda command: started.append(1) or Sandbox(command))
    _, _, items = find_submissions(tmp_path)
    rows, complete = run_items(items, Limits(), workers=1, progress=False)
    assert complete and all(r["passed"] for r in rows) and len(started) == 1


def test_a_worker_that_cannot_start_is_a_row_not_a_hang(tmp_path):
    for student in ("alice", "bob"):
        hand_in(tmp_path, student, "gelu_tanh", solution("gelu_tanh"))
    _, _, items = find_submissions(tmp_path)
    rows, complete = run_items(items, Limits(), workers=1, progress=False,
                               command=["/bin/false"])          # a worker that dies at once
    assert complete and [r["code"] for r in rows] == ["submission.sandbox"] * 2


def test_misuse_is_one_line_and_a_nonzero_exit(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere" in err
    (tmp_path / "empty").mkdir()
    assert main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) == 2
    assert "no student folders" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("")
    assert main(["grade", str(tmp_path), "--out", str(tmp_path / "a-file")]) == 2
    assert "must be a folder" in capsys.readouterr().err


def test_the_nbgitpuller_link():
    link = nbgitpuller_link("https://github.com/example/normlib.git",
                            "notebooks/exercises/01_layer_norm.ipynb", "https://hub.example.edu/")
    assert link == ("https://hub.example.edu/hub/user-redirect/git-pull?"
                    "repo=https%3A%2F%2Fgithub.com%2Fexample%2Fnormlib.git&branch=main&"
                    "targetPath=normlib&"       # always: nbgitpuller would clone into normlib.git
                    "urlpath=lab%2Ftree%2Fnormlib%2Fnotebooks%2Fexercises%2F01_layer_norm.ipynb")
    cli = subprocess.run([sys.executable, "-m", "normlib.classroom", "link", "--repo",
                          "https://github.com/example/normlib.git", "--branch", "main", "--path",
                          "notebooks/exercises/01_layer_norm.ipynb", "--hub",
                          "https://hub.example.edu"], capture_output=True, text=True, check=True)
    assert cli.stdout.strip() == link
    with pytest.raises(ValueError, match="hub"):
        nbgitpuller_link("repo", "a.ipynb", "hub.example.edu")


def test_without_bubblewrap_the_grader_refuses_and_says_how(tmp_path, monkeypatch, capsys):
    """No answer ever runs outside the sandbox: without bwrap the grader stops before anything."""
    hand_in(tmp_path / "class", "alice", "gelu_tanh", solution("gelu_tanh"))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["grade", str(tmp_path / "class"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apt-get install bubblewrap" in err
    assert not (tmp_path / "out").exists()
