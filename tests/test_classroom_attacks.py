"""Every promise of normlib/classroom/ISOLATION.md, as the attack that would break it.

A class of honest students and hostile ones (the attacks of shared/reviews/code-review-2.md,
findings 1-4, 7, 8, 11 and 12, rewritten for the sandboxed grader) is graded as a lecturer grades
it; the honest rows must come out as they would alone, no secret may reach an output, nothing may
outlive the run, and the run always writes its gradebook."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from test_classroom_grader import PRACTICE, STEMS, hand_in, needs_bwrap, solution

from normlib.classroom.grade import find_submissions
from normlib.classroom.sandbox import checked_record, require_bwrap

pytestmark = needs_bwrap

ROOT = Path(__file__).resolve().parents[1]
SECRET = f"lecturer-secret-{uuid.uuid4().hex}"
MARKER = f"normlib-attack-{uuid.uuid4().hex}"
WRONG = "def gelu_tanh(x):\n    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))\n"

# A neighbour who, for 1 s, tries everything on every process it can see: forged frames into
# every pipe, SIGKILL; then plants a module where the
# grader runs, writes into the submissions and the output, and leaves a process in a session of
# its own that would rewrite the gradebook later. It ends with a correct answer.
NEIGHBOUR = '''import json, os, signal, struct, subprocess, time
_frame = json.dumps({"passed": False, "code": "gelu_tanh.shortcut", "message": "forged",
                     "checks": []}).encode()
_frame = struct.pack(">I", len(_frame)) + _frame
_t0, _me = time.time(), os.getpid()
while time.time() - _t0 < 1:
    for _n in os.listdir("/proc"):
        if not _n.isdigit() or int(_n) == _me:
            continue
        try:
            for _fd in os.listdir(f"/proc/{_n}/fd"):
                try:
                    _w = os.open(f"/proc/{_n}/fd/{_fd}", os.O_WRONLY | os.O_NONBLOCK)
                    os.write(_w, _frame)
                    os.close(_w)
                except OSError:
                    pass
        except OSError:
            pass
        if int(_n) > 2:
            try:
                os.kill(int(_n), signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.01)
for _path in (PLANT, SUBMISSIONS + "/b-alice/08_gelu_tanh.ipynb", OUT + "/gradebook.csv"):
    try:
        open(_path, "w").write("pwned")
        print("wrote", _path)
    except OSError as _e:
        print("could not write", _path, type(_e).__name__)
subprocess.Popen(["/bin/sh", "-c", "sleep 60; echo MARKER > " + OUT + "/gradebook.csv"],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
'''
# Forging one's own record: the checker's internals replaced (finding 8). It can only ever reach
# its own row; the report lists it under "needs a look".
SELF_FORGE = '''import normlib.classroom._child as _c
_c._from_result = lambda result, key: {"passed": True, "code": None, "message": "forged",
                                       "message_zh": "", "checks": []}
def gelu_tanh(x):
    return x
'''
# Records the grader must refuse (finding 2): sent on the answer's own pipe, then exit.
RECORD = '''import os, struct, sys
_fd = sys._getframe(2).f_locals["fd"]      # run(fd, job) -> grade(job) -> this cell
_data = {data}
os.write(_fd, struct.pack(">I", len(_data)) + _data)
os._exit(0)
'''
HONEST = ["b-alice", "c-carol", "d-dave", "e-erin"]


def _notebook_with(cells: list[dict]) -> str:
    nb = json.loads((PRACTICE / "08_gelu_tanh.ipynb").read_text())
    nb["cells"] = cells + nb["cells"]
    return json.dumps(nb)


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    require_bwrap()
    root = tmp_path_factory.mktemp("class")
    out = tmp_path_factory.mktemp("graded") / "out"
    workdir = tmp_path_factory.mktemp("grader-cwd")
    plant = workdir / "ipywidgets.py"
    for student in HONEST:
        hand_in(root, student, "gelu_tanh", solution("gelu_tanh"))
    hand_in(root, "f-frank", "gelu_tanh", WRONG)
    hand_in(root, "a-mallory", "gelu_tanh", NEIGHBOUR.replace("PLANT", repr(str(plant)))
            .replace("SUBMISSIONS", repr(str(root))).replace("OUT", repr(str(out)))
            .replace("MARKER", MARKER) + solution("gelu_tanh"))
    hand_in(root, "m-env", "gelu_tanh", 'import os\ntry:\n'
            '    print(open("/proc/self/environ", "rb").read())\n'
            'except OSError as e:\n    print("no /proc/self/environ:", type(e).__name__)\n'
            'print(dict(os.environ), os.listdir("/"), os.listdir("/tmp"), os.listdir("/proc"))\n'
            + solution("gelu_tanh"))
    hand_in(root, "m-selfforge", "gelu_tanh", SELF_FORGE)
    for name, data in {"m-code-int": b'{"passed": false, "code": 1}',
                       "m-deep": b'{"passed": true, "checks": ' + b"[" * 20_000 + b"]" * 20_000
                       + b"}",
                       "m-forged-pass": b'{"passed": true}'}.items():
        hand_in(root, name, "gelu_tanh", RECORD.format(data=repr(data)))
    # finding 4b: a zh folder that links to the answer key, a notebook that links to alice's
    hand_in(root, "m-peeker", "gelu_tanh", WRONG)
    (root / "m-peeker" / "zh").symlink_to(ROOT / "notebooks" / "exercises" / "solutions")
    (root / "m-copycat").mkdir()
    (root / "m-copycat" / "08_gelu_tanh.ipynb").symlink_to(root / "b-alice" / "08_gelu_tanh.ipynb")
    (root / "m-linked-folder").symlink_to(root / "b-alice")
    # findings 11 and 12: a formula and a name that is not UTF-8
    hand_in(root, '=HYPERLINK("evil.example","open me")', "gelu_tanh", solution("gelu_tanh"))
    latin1 = os.fsdecode(b"M\xfcller")
    hand_in(root, latin1, "gelu_tanh", solution("gelu_tanh"))
    # finding 2: notebooks that crashed the old grader's own process
    nb = lambda *cells: _notebook_with(list(cells))     # noqa: E731
    code = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    broken = {
        "n-source-int": nb({**code, "id": "x1", "source": ["x = 1\n", 2]}),
        "n-id-list": nb({**code, "id": ["not", "hashable"], "source": "x = 1"}),
        "n-deep-json": '{"cells": [], "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "n-minus": nb({**code, "id": "x2", "source": "gelu_tanh = " + "-" * 200_000 + "1"}),
        "n-attributes": nb({**code, "id": "x3", "source": "gelu_tanh = a" + ".a" * 100_000}),
        "n-big-cell": nb({**code, "id": "x4", "source": "a=1\n" * 2_000_000}),
        "n-not-utf8": b'{"cells": "\xff"}',
    }
    for student, text in broken.items():
        (root / student).mkdir()
        data = text if isinstance(text, bytes) else text.encode()
        (root / student / "08_gelu_tanh.ipynb").write_bytes(data)
    os.mkfifo(root / "m-peeker" / "01_layer_norm.ipynb")    # a FIFO would hang a plain open()
    env = {**os.environ, "LECTURER_API_TOKEN": SECRET}
    done = subprocess.run([sys.executable, "-m", "normlib.classroom", "grade", str(root), "--out",
                           str(out), "--workers", "2", "--timeout", "30", "--quiet"],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    return root, out, done, plant, latin1


def _orphans() -> list[str]:
    """The command lines of the processes whose parent is PID 1."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, ValueError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == 1:
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace"))
    return found


def _processes() -> list[str]:
    cmdlines = []
    for pid in os.listdir("/proc"):
        try:
            cmdlines.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace"))
        except OSError:
            pass
    return cmdlines


def _rows(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {(r["student"], r["exercise"]): r for r in rows}


def test_the_run_survives_and_writes_everything(attacked):
    _, out, done, *_ = attacked
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("gradebook.csv", "results.jsonl", "report.html"):
        assert (out / name).stat().st_mode & 0o777 == 0o600
    assert out.stat().st_mode & 0o777 == 0o700


def test_honest_rows_are_untouched(attacked):
    _, out, *_ = attacked
    rows = _rows(out)
    for student in HONEST:
        row = rows[student, "08_gelu_tanh"]
        assert row["passed"] and row["code"] is None and not row["flags"], row
    assert rows["f-frank", "08_gelu_tanh"]["code"] == "gelu_tanh.exact_erf"
    # it sees no process but its own (/proc is covered), so its forged records reach no one
    mallory = rows["a-mallory", "08_gelu_tanh"]
    assert mallory["passed"] and mallory["output"].count("could not write") == 3, mallory


def test_no_secret_and_no_path_reaches_an_answer(attacked):
    root, out, _, plant, *_ = attacked
    everything = "".join(p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file())
    assert SECRET not in everything
    printed = _rows(out)["m-env", "08_gelu_tanh"]["output"]
    assert "LECTURER" not in printed and str(root) not in printed and "/usr/bin:/bin" in printed
    assert "home" not in printed and "'answer-0'" in printed               # its own /tmp
    assert "no /proc/self/environ: FileNotFoundError" in printed and "['cpuinfo']" in printed


def test_nothing_is_planted_and_nothing_outlives_the_run(attacked):
    root, out, _, plant, _ = attacked
    assert not plant.exists()
    assert "pwned" not in (root / "b-alice" / "08_gelu_tanh.ipynb").read_text()
    # the process that would rewrite the gradebook after its 60 s sleep is gone already
    assert not [c for c in _processes() if MARKER in c]
    assert MARKER not in (out / "gradebook.csv").read_text()
    # a sandbox's process that outlived its grader would be an orphan, adopted by PID 1 (other
    # graders' workers may run beside this test: theirs have a live bubblewrap parent)
    assert not [c for c in _orphans() if "normlib.classroom._child" in c]


def test_forged_and_malformed_records_are_refused(attacked):
    _, out, *_ = attacked
    rows = _rows(out)
    for student in ("m-code-int", "m-deep"):
        row = rows[student, "08_gelu_tanh"]
        assert row["code"] == "submission.tampered" and not row["passed"], row
        assert row["flags"], row
    # A well-formed record written on its own pipe passes (ISOLATION.md: a student can forge their
    # own row), and so does nothing else: it is flagged, as is a try at the checker's internals.
    assert rows["m-forged-pass", "08_gelu_tanh"]["passed"]
    assert any("_getframe" in f for f in rows["m-forged-pass", "08_gelu_tanh"]["flags"])
    forged = rows["m-selfforge", "08_gelu_tanh"]
    assert any("internals" in f for f in forged["flags"]), forged
    page = (out / "report.html").read_text(encoding="utf-8")
    look = page.split("Needs a look")[1].split("<h2>")[0]
    assert all(s in look for s in ("m-selfforge", "m-forged-pass", "m-deep", "a-mallory"))
    assert not any(s in look for s in HONEST)


def test_symlinks_are_never_followed(attacked):
    _, out, *_ = attacked
    rows = _rows(out)
    assert rows["m-copycat", "08_gelu_tanh"]["code"] == "submission.symlink"
    assert rows["m-linked-folder", "08_gelu_tanh"]["code"] == "submission.symlink"
    peeker = rows["m-peeker", "08_gelu_tanh"]
    assert peeker["code"] == "submission.symlink" and not peeker["passed"]
    assert not any(r["passed"] for (s, _), r in rows.items() if s == "m-peeker")
    assert rows["m-peeker", "01_layer_norm"]["code"] in ("submission.symlink",
                                                         "submission.not_json")


def test_broken_notebooks_are_one_row_each(attacked):
    _, out, *_ = attacked
    rows = _rows(out)
    # a cell the grader will not parse is no answer: the stub cell below it is what runs
    for student, code in {"n-source-int": "submission.not_json", "n-id-list": "submission.not_json",
                          "n-deep-json": "submission.not_json", "n-not-utf8": "submission.not_json",
                          "n-minus": "gelu_tanh.not_implemented",
                          "n-attributes": "gelu_tanh.not_implemented",
                          "n-big-cell": "gelu_tanh.not_implemented"}.items():
        assert rows[student, "08_gelu_tanh"]["code"] == code, rows[student, "08_gelu_tanh"]


def test_the_gradebook_is_safe_in_a_spreadsheet(attacked):
    _, out, _, _, latin1 = attacked
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        book = list(csv.reader(f))
    for line in book[1:]:
        assert all(cell[:1] not in ("=", "+", "-", "@") for cell in line), line
    assert ["'=HYPERLINK(\"evil.example\",\"open me\")", "08_gelu_tanh", "true", ""] in \
        [c[:4] for c in book]
    assert ["M\\xfcller", "08_gelu_tanh", "true"] in [c[:3] for c in book]
    assert latin1.encode("utf-8", "surrogateescape") == b"M\xfcller"


def test_records_are_checked_field_by_field():
    known = {"gelu_tanh.exact_erf", "submission.crashed", "layer_norm.shortcut"}
    good = {"nonce": "n1", "passed": False, "code": "gelu_tanh.exact_erf", "message": "m",
            "checks": ["✗ a"], "output": "", "cpu_seconds": 0.1}
    assert checked_record(json.dumps(good).encode(), "n1", "gelu_tanh", known)["code"]
    for bad, why in [({**good, "nonce": "n2"}, "nonce"), ({**good, "code": "layer_norm.shortcut"},
                     "code"), ({**good, "passed": "yes"}, "passed"),
                     ({**good, "passed": True}, "passed record with a mistake code"),
                     ({**good, "checks": ["x" * 2000]}, "checks"), ({**good, "extra": 1}, "fields"),
                     ({**good, "message": ["m"]}, "message")]:
        with pytest.raises(ValueError, match=why):
            checked_record(json.dumps(bad).encode(), "n1", "gelu_tanh", known)


def test_ctrl_c_stops_every_sandbox_and_writes_what_was_graded(tmp_path):
    require_bwrap()
    for i in range(4):
        hand_in(tmp_path / "class", f"spin-{i}", "gelu_tanh", "while True:\n    pass")
    hand_in(tmp_path / "class", "z-last", "gelu_tanh", solution("gelu_tanh"))
    out = tmp_path / "out"
    grader = subprocess.Popen([sys.executable, "-m", "normlib.classroom", "grade",
                               str(tmp_path / "class"), "--out", str(out), "--workers", "2",
                               "--timeout", "120", "--quiet"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180         # torch imported in both sandboxes, on a busy machine
    while time.monotonic() < deadline and _answers_running(grader.pid) < 2:
        time.sleep(0.2)
    time.sleep(1)
    tree = _descendants(grader.pid)
    assert _answers_running(grader.pid) == 2, "the grader did not run two answers at once"
    grader.send_signal(signal.SIGINT)
    _, err = grader.communicate(timeout=30)
    assert grader.returncode == 130, err
    alive = [_state(pid) for pid in tree if _state(pid) and "zombie" not in _state(pid)]
    assert not alive, f"left running after Ctrl-C: {alive}"
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        book = list(csv.DictReader(f))
    assert len(book) == 5 and {r["code"] for r in book} <= {"submission.not_graded",
                                                             "submission.timeout"}
    assert "Incomplete" in (out / "report.html").read_text(encoding="utf-8")


def _answers_running(grader: int) -> int:
    """How many answers are running: the worker's server forks a student's process, which forks
    the student's server, which forks each answer (three of the sandbox's Pythons above it)."""
    pythons, parents = set(), {}
    for pid in _descendants(grader):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"normlib.classroom._child" in argv and not argv[0].endswith(b"bwrap"):
                pythons.add(pid)
                parents[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
                                   .split()[1])

    def depth(pid):
        return 1 + depth(parents[pid]) if parents.get(pid) in pythons else 0
    return sum(depth(pid) == 3 for pid in pythons)


def _state(pid: int) -> str:
    """'name (state)' of a process, '' once it is gone."""
    try:
        status = dict(line.split(":\t", 1) for line in
                      Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
    except OSError:
        return ""
    return f"{status['Name']} ({status['State'].strip()})"


def _descendants(pid: int) -> list[int]:
    children = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def test_the_submissions_folder_is_read_as_data(tmp_path):
    """find_submissions never runs or follows anything: a FIFO, a link and a folder it cannot read
    are rows, not a hang or a crash."""
    hand_in(tmp_path, "alice", "gelu_tanh", solution("gelu_tanh"))
    os.mkfifo(tmp_path / "alice" / "01_layer_norm.ipynb")
    nbformat.write(nbformat.read(PRACTICE / "08_gelu_tanh.ipynb", as_version=4),
                   tmp_path / "stub.ipynb")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "08_gelu_tanh.ipynb").symlink_to(tmp_path / "stub.ipynb")
    students, stems, items = find_submissions(tmp_path)
    codes = {(i["student"], i.get("stem", i["exercise"])): i.get("code") for i in items}
    assert students == ["alice", "bob"] and stems == [STEMS["layer_norm"], STEMS["gelu_tanh"]]
    assert codes["alice", "01_layer_norm"] == "submission.not_json"
    assert codes["bob", "08_gelu_tanh"] == "submission.symlink"
    assert codes["alice", "08_gelu_tanh"] is None                         # a job
