"""A grading worker, as the grader sees it: bubblewrap around a server that runs students' answers.

Each worker (one per core) is a bubblewrap (``bwrap``) sandbox: new user, PID, network, IPC, UTS
and mount namespaces; uid 65534 inside; an empty environment; a read-only view of the system
(``/usr``), of the Python installation and of normlib, and nothing else of the machine (no home
folder, no submissions folder, no output folder, no repository); no network; every process in it
killed when the sandbox ends or the grader dies (``--die-with-parent``, and a PID namespace ends
with its init). Inside, ``normlib.classroom._child`` imports torch once and, for each student in
turn, forks namespaces of that student's own (``_namespaces.py``: user, PID, mount, network, IPC;
a private ``/tmp``; no capability), where one process per answer runs.

The grader talks to it through frames (``_frames.py``): ``{"student": true}`` opens a student,
their jobs go in one at a time and records come out, ``{"end": true}`` closes the student. A
record is untrusted data: ``checked_record`` accepts only the fields, types, sizes and mistake
codes a checker can produce, and only with the nonce of the job in flight, so an answer can at
most write its own row; anything else is ``submission.tampered``, and the worker is replaced.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ._frames import MAX_JOB, FrameBuffer, encode

__all__ = ["Sandbox", "SandboxUnavailable", "bwrap_command", "checked_record", "require_bwrap"]

TMP_BYTES = 512 * 2**20          # a student's /tmp (their answers' working folders)
START_SECONDS = 120.0            # importing torch in a new worker, on a busy machine
OPEN_SECONDS = 30.0              # a student's namespaces opened, or closed
GRACE_SECONDS = 10.0             # past a job's own timeout, before the grader kills the sandbox
_CODE = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here."""


def require_bwrap() -> str:
    """The path of ``bwrap``, or SandboxUnavailable saying how to get it."""
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(
            "grade: the grader runs every answer in a bubblewrap sandbox, and `bwrap` is not "
            "installed (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)")
    return path


def _dirs_to_bind(exclude: list[Path]) -> list[str]:
    """The folders the sandbox sees, read-only, at their own paths: the Python installation, the
    virtual environment and normlib's package folder (an editable install points outside the
    environment). A folder that holds one of ``exclude`` (the submissions, the output) is refused:
    binding it would show it to every answer."""
    import normlib
    wanted = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              str(Path(normlib.__file__).parent)}
    dirs = set()
    for d in wanted:
        for form in (os.path.abspath(d), os.path.realpath(d)):
            if not form.startswith("/usr/") and form != "/usr":
                dirs.add(form)
    for d in dirs:
        for other in exclude:
            other = os.path.realpath(other)
            if d == "/" or other == d or other.startswith(d.rstrip("/") + "/"):
                raise SandboxUnavailable(
                    f"grade: the Python environment's folder {d} holds {other}; the sandbox would "
                    "show it to every answer: keep the submissions and the output elsewhere")
    return sorted(dirs)


def bwrap_command(*, exclude: list[Path] = (), extra_paths: list[Path] = (),
                  preload: list[str] = ()) -> list[str]:
    """The command that starts one student's sandbox and its server (see the module docstring).
    ``extra_paths`` (read-only, on the server's sys.path) and ``preload`` are for tests."""
    cmd = [require_bwrap(), "--unshare-all", "--unshare-user",
           "--uid", "65534", "--gid", "65534", "--hostname", "sandbox",
           "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL",
           "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            cmd += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            cmd += ["--ro-bind", str(path), str(path)]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/fonts",
                "/etc/localtime"):
        if os.path.exists(etc):
            cmd += ["--ro-bind", etc, etc]
    # /tmp first: an environment that lives under /tmp (a clone in a temporary folder) is bound
    # over it, and each student's own /tmp keeps it visible (_namespaces.py)
    cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(2**20), "--tmpfs", "/tmp"]
    extra = [os.path.realpath(p) for p in extra_paths]
    binds = [*_dirs_to_bind(list(exclude)), *extra]
    for d in binds:
        cmd += ["--ro-bind", d, d]
    cmd += ["--chdir", "/"]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
           "MPLCONFIGDIR": "/tmp/mpl", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    cmd += ["--", sys.executable, "-I", "-B", "-m", "normlib.classroom._child",
            "--tmp-bytes", str(TMP_BYTES)]
    for d in binds:
        if d.startswith("/tmp/"):
            cmd += ["--keep", d]
    for p in extra:
        cmd += ["--path", p]
    for module in preload:
        cmd += ["--preload", module]
    return cmd


class Sandbox:
    """One worker's sandbox: started, told to open a student, fed one job at a time, killed.
    Non-blocking: the grader waits on ``fileno()`` for many workers at once, then ``read()``s."""

    def __init__(self, command: list[str]):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env={}, close_fds=True,
                                        start_new_session=True)
        os.set_blocking(self.process.stdout.fileno(), False)
        os.set_blocking(self.process.stdin.fileno(), False)
        self.frames = FrameBuffer()
        self.outbox = bytearray()             # a job not yet written: a sandbox may stop reading
        self.state = "starting"               # then: idle, opening, serving, closing
        self.job: dict | None = None          # the job in flight: nonce, item, started
        self.deadline = time.monotonic() + START_SECONDS

    def fileno(self) -> int:
        return self.process.stdout.fileno()

    def send(self, item: dict, job: dict) -> None:
        """A job for the student in the sandbox; its record is expected by ``deadline``."""
        nonce = secrets.token_hex(16)
        self.job = {"item": item, "nonce": nonce, "started": time.monotonic()}
        self.deadline = self.job["started"] + job["timeout"] + GRACE_SECONDS
        self.outbox += encode({**job, "nonce": nonce}, MAX_JOB)
        self.flush()

    def command(self, message: dict, seconds: float) -> None:
        """``{"student": true}`` or ``{"end": true}``, answered by a ready frame in ``seconds``."""
        self.deadline = time.monotonic() + seconds
        self.outbox += encode(message)
        self.flush()

    def flush(self) -> None:
        """Write what the pipe takes now of the job not yet written (never blocks)."""
        while self.outbox:
            try:
                n = os.write(self.process.stdin.fileno(), self.outbox)
            except (BlockingIOError, BrokenPipeError):
                return
            del self.outbox[:n]

    def read(self) -> tuple[list[bytes], bool]:
        """(whole frames read so far, whether the sandbox closed its end); ValueError on a frame
        larger than allowed."""
        frames, closed = [], False
        while True:
            try:
                chunk = os.read(self.fileno(), 65536)
            except BlockingIOError:
                break
            if not chunk:
                closed = True
                break
            frames += self.frames.feed(chunk)
        return frames, closed

    def kill(self) -> None:
        """SIGKILL to bwrap and its process group: its PID namespace, and everything in it, ends."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.process.wait()


def checked_record(data: bytes, nonce: str, exercise: str, known: set[str]) -> dict:
    """A record from the sandbox, accepted only in the shape a checker produces: ``passed`` a bool,
    ``code`` None (passed) or a known code of this exercise or of the grader, strings and lists of
    bounded size, and the nonce of the job in flight. ValueError (the reason) otherwise."""
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"not a JSON record ({type(exc).__name__})") from None
    if not isinstance(record, dict):
        raise ValueError(f"a record must be an object, got {type(record).__name__}")
    if not secrets.compare_digest(str(record.get("nonce", "")), nonce):
        raise ValueError("a record without the nonce of the job in flight")
    allowed = {"nonce", "passed", "code", "message", "message_zh", "checks", "output",
               "cpu_seconds"}
    if set(record) - allowed:
        raise ValueError(f"unexpected fields {sorted(set(record) - allowed)[:5]}")
    passed, code = record.get("passed"), record.get("code")
    if not isinstance(passed, bool):
        raise ValueError(f"passed must be true or false, got {passed!r:.40}")
    if passed and code is not None:
        raise ValueError("a passed record with a mistake code")
    if not passed:
        if not isinstance(code, str) or not _CODE.match(code) or code not in known or not (
                code.startswith(f"{exercise}.") or code.startswith("submission.")):
            raise ValueError(f"the code {code!r:.60} is not one of {exercise}'s codes")
    for field, most in (("message", 4000), ("message_zh", 4000), ("output", 4000)):
        value = record.get(field)
        if value is not None and (not isinstance(value, str) or len(value) > most):
            raise ValueError(f"{field} must be a string of at most {most} characters")
    checks = record.get("checks", [])
    if not isinstance(checks, list) or len(checks) > 200 or not all(
            isinstance(c, str) and len(c) <= 1000 for c in checks):
        raise ValueError("checks must be a list of at most 200 strings of at most 1000 characters")
    cpu = record.get("cpu_seconds")
    if cpu is not None and (not isinstance(cpu, int | float) or isinstance(cpu, bool)):
        raise ValueError("cpu_seconds must be a number")
    return record
