"""A graded week of a class on a real JupyterHub, in a real browser (`make e2e-classroom`).

The trial hub (classroom/jupyterhub_config_trial.py: JupyterHub 6.1, dummy authenticator, simple
spawner, the npm configurable-http-proxy) starts on a free port of 127.0.0.1 with two students,
ana and ben; the roster lists a third, cai, who never logs in. The course repository is built as
docs/classroom.md says (`python -m tools.course`, then pushed to a bare repository whose path ends
in `.git`, as a GitHub clone URL does). Both students log in in Debian's Chromium (every request
off the loopback refused) and open nbgitpuller links made from that `.git` URL: the course lands
in ~/course, the folder the link opens. ana writes the usual wrong LayerNorm into her practice
notebook and saves it; ben's answers (a renamed copy of ana's, and an RMSNorm) are saved in his
home, and he edits one after the deadline. The instructor commits a change to a lesson and adds a
notebook; both follow a link again: ana's answer is still there, the lesson change and the new
notebook reached both. ana cannot open ben's files through the hub.

Then the lecturer's week, with the commands of docs/classroom.md: collect the homes at the
deadline, grade the two assigned exercises for the roster of three, with a Canvas CSV, and return
the feedback. The gradebook names ana's mistake by its code; cai has `submission.missing` rows;
ben's late edit is marked late; the report lists ana and ben as a similar pair; each student has a
feedback page, and ana's reached her home. Printed, never asserted: the memory of ben's server
with a lesson run, then with one and two more links open (server and kernels, resident set),
which sizes a real hub (docs/classroom.md).

Whatever happens, the hub is stopped with SIGINT (it stops the proxy and the students' servers),
then anything left of the processes this test recorded is killed by PID.
"""

from __future__ import annotations

import csv
import datetime
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import psutil
import pytest
from e2e_support import CHROMIUM_ARGS, ROOT, block_non_loopback

from normlib.classroom import nbgitpuller_link

CLASSROOM = ROOT / "classroom"
PROXY = CLASSROOM / "node_modules" / ".bin" / "configurable-http-proxy"
HUB_START_TIMEOUT_S = 120
PAGE_TIMEOUT_MS = 180_000          # a first spawn imports JupyterLab on a loaded machine
STUDENTS = ("ana", "ben")
ROSTER = ("ana", "ben", "cai")     # cai is on the class list and never logs in
REPO_DIR = "course"                # the folder the links open: the URL's name without .git
# The course repository, as `make course` builds it: editable practice notebooks in practice/.
PRACTICE_DIR = "practice"
PRACTICE = f"{PRACTICE_DIR}/01_layer_norm.ipynb"
RMS = f"{PRACTICE_DIR}/03_rms_norm.ipynb"
ASSIGNED = "01_layer_norm,03_rms_norm"
LESSON = "notebooks/03_layernorm_and_rmsnorm.ipynb"
NEW_NOTEBOOK = "notebooks/11_week_two.ipynb"
# ana's answer: the mistake the collection is about, x.std(-1) + eps (unbiased, eps outside the root)
WRONG_ANSWER = '''def layer_norm(x, weight, bias, eps=1e-5):
    """LayerNorm over the last dim of x (..., d); weight, bias: (d,)."""
    mean = x.mean(-1, keepdim=True)  # ana-was-here
    return (x - mean) / (x.std(-1, keepdim=True) + eps) * weight + bias'''
EXPECTED_CODE = "layer_norm.unbiased_and_eps_outside"   # the checker's code for that mistake
# ben's: ana's answer with every name changed and a comment (the similarity report's planted copy)
COPIED_ANSWER = '''def layer_norm(inputs, gamma, beta, eps=1e-5):
    # ben's own LayerNorm
    mu = inputs.mean(-1,  keepdim=True)
    return (inputs - mu) / (inputs.std(-1, keepdim=True) + eps) * gamma + beta'''
RMS_ANSWER = '''def rms_norm(x, weight, eps=1e-6):
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return h.type_as(x) * weight'''
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Instructor", "GIT_AUTHOR_EMAIL": "teacher@example.org",
                "GIT_COMMITTER_NAME": "Instructor", "GIT_COMMITTER_EMAIL": "teacher@example.org"}
LESSON_MARKER = "Instructor's note for week two: read section 4 again before the quiz."


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _git(*args: str, cwd: pathlib.Path) -> str:
    return subprocess.run(["git", "-c", "user.name=Instructor", "-c", "user.email=teacher@example.org",
                           *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


class Hub:
    def __init__(self, base: str, state: pathlib.Path, proc: subprocess.Popen, log: pathlib.Path,
                 password: str, upstream: pathlib.Path, remote: pathlib.Path, branch: str):
        self.base, self.state, self.proc, self.log = base, state, proc, log
        self.password, self.upstream, self.remote = password, upstream, remote
        self.branch = branch
        self.pids: set[int] = set()          # every process seen under the hub, for the cleanup

    def home(self, user: str) -> pathlib.Path:
        return self.state / "homes" / user

    def link(self, path: str) -> str:
        """The nbgitpuller link of ``path`` in the course repository, as the lecturer's
        `python -m normlib.classroom link` prints it."""
        return nbgitpuller_link(str(self.remote), path, self.base, branch=self.branch)

    def record(self) -> list[psutil.Process]:
        """The processes under the hub now (proxy, servers, kernels); their PIDs are kept."""
        try:
            procs = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        self.pids.update(p.pid for p in procs)
        return procs

    def server_of(self, user: str) -> psutil.Process:
        for p in self.record():
            try:
                if (any("singleuser" in part for part in p.cmdline())
                        and p.environ().get("JUPYTERHUB_USER") == user):
                    return p
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        raise LookupError(f"no single-user server of {user} under the hub")

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def _stop(hub: Hub) -> None:
    """SIGINT to the hub (it stops its proxy and the servers), then kill what is left by PID."""
    hub.record()
    proxy_pid = hub.state / "proxy.pid"
    if proxy_pid.exists():
        hub.pids.add(int(proxy_pid.read_text().strip()))
    if hub.proc.poll() is None:
        hub.proc.send_signal(signal.SIGINT)
        try:
            hub.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            hub.proc.kill()
            hub.proc.wait()
    left = []
    for pid in hub.pids:
        try:
            p = psutil.Process(pid)
            p.terminate()
            left.append(p)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(left, timeout=10)
    for p in alive:
        p.kill()


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    if not PROXY.exists():
        pytest.fail(f"{PROXY.relative_to(ROOT)} is missing: run `make e2e-classroom` (it runs "
                    "npm ci in classroom/ first)")
    tmp = tmp_path_factory.mktemp("classroom")
    # The course repository, built as docs/classroom.md says (make course DEST=...), and the
    # address students clone it from: a bare repository whose name ends in .git.
    upstream, remote, branch = tmp / "build" / REPO_DIR, tmp / "remote" / f"{REPO_DIR}.git", "main"
    subprocess.run([sys.executable, "-m", "tools.course", str(upstream)], cwd=ROOT, check=True,
                   capture_output=True, env={**os.environ, **GIT_IDENTITY})
    _git("clone", "--quiet", "--bare", str(upstream), str(remote), cwd=tmp)
    _git("remote", "add", "origin", str(remote), cwd=upstream)
    state, port, password = tmp / "hub", _free_port(), secrets.token_hex(12)
    state.mkdir()
    env = dict(os.environ, NORMLIB_HUB_DIR=str(state), NORMLIB_HUB_PORT=str(port),
               NORMLIB_HUB_USERS=",".join(STUDENTS), NORMLIB_HUB_PASSWORD=password,
               # the browser test's JupyterLab settings: no autosave, the app visible to the page
               NORMLIB_HUB_LAB_ARGS="--LabApp.expose_app_in_browser=True")
    # The students' servers keep their Jupyter state in their homes, not in the project's .jupyter/
    for key in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR",
                "MPLCONFIGDIR"):
        env.pop(key, None)
    log = state / "hub.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f",
                                 str(CLASSROOM / "jupyterhub_config_trial.py")],
                                cwd=state, env=env, stdout=out, stderr=subprocess.STDOUT)
    h = Hub(f"http://127.0.0.1:{port}", state, proc, log, password, upstream, remote, branch)
    try:
        deadline = time.monotonic() + HUB_START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{h.base}/hub/health", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the hub did not start within {HUB_START_TIMEOUT_S} s (exit "
                                f"code {proc.poll()}); its log:\n{h.log_tail()}")
                time.sleep(0.3)
        h.record()
        yield h
    finally:
        _stop(h)


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium")
    if chromium is None:
        msg = ("Chromium not found on PATH: the classroom test drives Debian's Chromium "
               "(apt-get install -y chromium) and never downloads a browser")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; CI=true, so this is a failure, not a skip.")
        pytest.skip(msg + ".")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Student:
    """One student's browser: a context of its own (its own cookies), requests off-machine refused."""

    def __init__(self, browser, hub: Hub, name: str):
        self.name, self.hub = name, hub
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.refused = block_non_loopback(self.context)
        self.page = self.context.new_page()
        self.page.set_default_timeout(PAGE_TIMEOUT_MS)

    def log_in(self) -> None:
        page = self.page
        page.goto(f"{self.hub.base}/hub/login")
        page.fill("#username_input", self.name)
        page.fill("#password_input", self.hub.password)
        page.click("#login_submit")
        page.wait_for_url("**/hub/**")
        assert "/hub/login" not in page.url, f"{self.name} could not log in: {page.url}"

    def follow(self, path: str) -> None:
        """Open the nbgitpuller link of ``path``; return once its notebook is open in JupyterLab."""
        self.page.goto(self.hub.link(path))
        # spawn page, then nbgitpuller's progress page, then JupyterLab with the notebook's tab
        self.page.wait_for_url(f"**/user/{self.name}/lab/**")
        name = pathlib.PurePosixPath(path).name
        self.page.wait_for_function(
            """(name) => !!window.jupyterapp && [...window.jupyterapp.shell.widgets('main')]
                 .some(w => w.context && w.context.path.endsWith(name)
                            && w.context.isReady && w.content && w.content.widgets.length > 0)""",
            arg=name)

    def wait_kernel_idle(self) -> None:
        self.page.wait_for_function(
            """() => { const w = window.jupyterapp.shell.currentWidget;
                       const k = w && w.sessionContext && w.sessionContext.session
                                 && w.sessionContext.session.kernel;
                       return !!k && k.connectionStatus === 'connected' && k.status === 'idle'; }""")


def _cell_source(path: pathlib.Path, index: int) -> str:
    return nbformat.read(path, as_version=4).cells[index].source


def _answer_cell(path: pathlib.Path) -> int:
    nb = nbformat.read(path, as_version=4)
    return next(i for i, c in enumerate(nb.cells)
                if c.cell_type == "code" and "YOUR CODE HERE" in c.source)


def _rss_mb(proc: psutil.Process) -> tuple[float, int]:
    procs = [proc, *proc.children(recursive=True)]
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20, len(procs)


def _answer_in(path: pathlib.Path, answer: str, index: int) -> None:
    """Write ``answer`` into the notebook's cell ``index`` and save it, as a student's Ctrl+S
    does."""
    nb = nbformat.read(path, as_version=4)
    nb.cells[index].source = answer
    nbformat.write(nb, path)


def _measure(student: Student, hub: Hub, what: str, record_property) -> None:
    student.wait_kernel_idle()
    student.page.wait_for_timeout(3000)
    mb, n = _rss_mb(hub.server_of(student.name))
    print(f"\n{student.name}'s server, {what}: {mb:.0f} MB resident ({n} processes)")
    record_property(what, round(mb))


def test_a_graded_week(browser, hub, record_property, tmp_path):
    ana, ben = Student(browser, hub, "ana"), Student(browser, hub, "ben")
    try:
        for s in (ana, ben):
            s.log_in()

        # 1. Both open their links, made from the .git URL: ana the practice notebook, ben a lesson.
        ana.follow(PRACTICE)
        ben.follow(LESSON)
        practice_a = hub.home("ana") / REPO_DIR / PRACTICE
        lesson_b = hub.home("ben") / REPO_DIR / LESSON
        assert practice_a.exists() and lesson_b.exists(), "nbgitpuller did not clone the course"
        assert not (hub.home("ana") / f"{REPO_DIR}.git").exists(), "cloned into course.git/"

        # 2. ana writes the wrong LayerNorm into the answer cell and saves (Ctrl+S), as a student.
        answer = _answer_cell(practice_a)
        editor = ana.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").nth(answer) \
            .locator(".cm-content")
        editor.click()
        ana.page.keyboard.press("Control+a")
        ana.page.keyboard.press("Delete")
        # typed line by line as a student types: the editor indents each new line itself
        for i, line in enumerate(WRONG_ANSWER.splitlines()):
            if i:
                ana.page.keyboard.press("Enter")
            ana.page.keyboard.type(line.lstrip())
        ana.page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        while "ana-was-here" not in _cell_source(practice_a, answer):
            assert time.monotonic() < deadline, "ana's save did not reach her notebook on disk"
            ana.page.wait_for_timeout(300)   # not time.sleep: requests pass only while Playwright runs
        assert _cell_source(practice_a, answer).strip() == WRONG_ANSWER.strip()

        # 3. Memory of ben's server: the lesson's kernel started, then after the lesson's imports
        #    (torch, matplotlib, normlib: the first code cell that imports normlib), then with one
        #    more link open (the practice notebook, a kernel of its own).
        _measure(ben, hub, "lesson open", record_property)
        errors = ben.page.evaluate("""async () => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            nb.activeCellIndex = nb.widgets.findIndex(c => c.model.type === 'code'
                && c.model.sharedModel.getSource().includes('import normlib'));
            await window.jupyterapp.commands.execute('notebook:run-cell');
            const outputs = nb.activeCell.model.outputs.toJSON();
            return outputs.filter(o => o.output_type === 'error').map(o => o.evalue); }""")
        assert not errors, f"{LESSON}'s imports failed on ben's server: {errors}"
        _measure(ben, hub, "lesson run", record_property)
        ben.follow(PRACTICE)
        _measure(ben, hub, "lesson run + practice link", record_property)

        # 4. ben's answers are saved in his home (a renamed copy of ana's; an RMSNorm); the
        #    deadline passes; ben edits his RMSNorm again: a late edit.
        course_b = hub.home("ben") / REPO_DIR
        rms_cell = _answer_cell(course_b / RMS)
        _answer_in(course_b / PRACTICE, COPIED_ANSWER, _answer_cell(course_b / PRACTICE))
        _answer_in(course_b / RMS, RMS_ANSWER, rms_cell)
        time.sleep(1.1)
        due = datetime.datetime.now().astimezone()
        time.sleep(1.1)
        _answer_in(course_b / RMS, RMS_ANSWER + "  # tidied after the deadline", rms_cell)

        # 5. The instructor changes the lesson and adds a notebook, in the course repository.
        lesson_up = hub.upstream / LESSON
        nb = nbformat.read(lesson_up, as_version=4)
        nb.cells.append(nbformat.v4.new_markdown_cell(LESSON_MARKER))
        nbformat.write(nb, lesson_up)
        new = nbformat.v4.new_notebook(metadata={"kernelspec": nb.metadata.kernelspec})
        new.cells.append(nbformat.v4.new_markdown_cell("# Week two\n\nNext week's notes."))
        nbformat.write(new, hub.upstream / NEW_NOTEBOOK)
        _git("add", LESSON, NEW_NOTEBOOK, cwd=hub.upstream)
        _git("commit", "--quiet", "-m", "Week two: a note in lesson 03, a new notebook",
             cwd=hub.upstream)
        _git("push", "--quiet", "origin", hub.branch, cwd=hub.upstream)

        # 6. Both follow a link again: ana the same one, ben next week's new notebook.
        ana.follow(PRACTICE)
        ben.follow(NEW_NOTEBOOK)
        _measure(ben, hub, "lesson run + practice + one more link", record_property)
        assert _cell_source(practice_a, answer).strip() == WRONG_ANSWER.strip(), \
            "ana's answer was lost when she followed the link again"
        for user in STUDENTS:
            home = hub.home(user) / REPO_DIR
            assert LESSON_MARKER in (home / LESSON).read_text(), \
                f"the instructor's change to {LESSON} did not reach {user}"
            assert (home / NEW_NOTEBOOK).exists(), f"{NEW_NOTEBOOK} did not reach {user}"
        assert "ana-was-here" not in (course_b / PRACTICE).read_text()

        # 7. ana cannot read ben's files through the hub.
        for url in (f"{hub.base}/user/ben/api/contents/{REPO_DIR}/{PRACTICE}",
                    f"{hub.base}/user/ben/files/{REPO_DIR}/{PRACTICE}"):
            resp = ana.page.request.get(url)
            assert resp.status in (403, 404), f"ana got {resp.status} for ben's {url}"
            assert "YOUR CODE HERE" not in resp.text()

        for s in (ana, ben):
            assert not s.refused, f"{s.name}'s browser asked for the internet: {s.refused}"
    except Exception:
        for s in (ana, ben):
            shots = ROOT / "build" / "screenshots"
            shots.mkdir(parents=True, exist_ok=True)
            s.page.screenshot(path=str(shots / f"classroom_{s.name}.png"))
        print(f"hub log (last lines):\n{hub.log_tail()}")
        raise
    finally:
        for s in (ana, ben):
            s.context.close()

    # 8. The lecturer's week, as docs/classroom.md runs it: collect at the deadline, grade the
    #    assigned exercises for the roster, a Canvas CSV, feedback returned to the homes.
    grading = tmp_path / "grading"            # outside any git work tree, as the grader asks
    grading.mkdir()
    roster = grading / "roster.csv"
    roster.write_text("student,name\n" + "".join(f"{s},{s.title()}\n" for s in ROSTER))
    submissions, out = grading / "submissions", grading / "week1"

    def run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "normlib.classroom", *args],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout[-2000:]}\n" \
                                     f"{done.stderr[-2000:]}"
        return done

    run("collect", str(hub.state / "homes"), "--out", str(submissions),
        "--deadline", due.isoformat())
    run("grade", str(submissions), "--out", str(out), "--exercises", ASSIGNED,
        "--roster", str(roster), "--format", "canvas", "--quiet")
    returned = run("return", str(out), str(hub.state / "homes"))
    assert "cai: skipped: no home" in returned.stderr        # never logged in: nothing to return
    with open(out / "gradebook.csv", newline="") as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    assert set(rows) == {(s, e) for s in ROSTER for e in ASSIGNED.split(",")}
    assert rows["ana", "01_layer_norm"]["code"] == EXPECTED_CODE, rows["ana", "01_layer_norm"]
    assert rows["ana", "03_rms_norm"]["status"] == "not attempted"
    assert rows["ben", "01_layer_norm"]["code"] == EXPECTED_CODE
    assert rows["ben", "03_rms_norm"]["passed"] == "true" and rows["ben", "03_rms_norm"]["late"] \
        == "true"
    assert rows["ana", "01_layer_norm"]["late"] == "false"
    assert all(rows["cai", e]["code"] == "submission.missing" for e in ASSIGNED.split(","))
    with open(out / "canvas.csv", newline="") as f:
        canvas = list(csv.reader(f))
    assert canvas[0][-2:] == ASSIGNED.split(",") and [r[0] for r in canvas[2:]] == \
        [s.title() for s in ROSTER]
    assert canvas[4][-2:] == ["0", "0"] and canvas[3][-1] == "10"
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Similar answers" in report and "ana · ben" in report
    for s in ROSTER:
        assert (out / "feedback" / f"{s}.html").exists()
    page = hub.home("ana") / "feedback" / "week1.html"
    assert EXPECTED_CODE in page.read_text(encoding="utf-8")
