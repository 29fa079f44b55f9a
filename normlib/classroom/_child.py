"""Inside a worker sandbox: a server that imported torch and normlib once, one process per student
in namespaces of their own, and one forked process per answer.

The grader starts ``python -I -m normlib.classroom._child`` in each worker's bubblewrap sandbox
(normlib/classroom/sandbox.py). For each student, ``serve`` forks ``_start_student``, which enters
the student's namespaces (_namespaces.py) and forks the student's server, PID 1 there; it reads the
student's jobs, one at a time, as frames on stdin and forks a process per job (milliseconds: torch
is already imported), which limits itself, runs the answer cell and the exercise's checker
(``run``) and sends one JSON record back; the student's server waits at most the job's timeout,
kills what the answer left, and passes the record on, with the job's nonce, on stdout. Nothing
here is trusted: the grader validates every record (sandbox.py), and ISOLATION.md says what the
sandboxes and the limits hold.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import json
import linecache
import os
import resource
import select
import shutil
import signal
import sys
import time

os.environ.setdefault("MPLBACKEND", "Agg")

# What the practice notebooks' setup cells import (the child runs a student's imports again):
# imported once here, in the server the children are forked from.
import ipywidgets  # noqa: E402, F401
import matplotlib.pyplot  # noqa: E402, F401  (after MPLBACKEND: no GUI backend)
import torch  # noqa: E402

import normlib.viz  # noqa: E402, F401
from normlib.exercises import EXERCISES  # noqa: E402
from normlib.exercises._harness import describe_exception  # noqa: E402

from ._frames import FrameBuffer, encode, read_frame  # noqa: E402
from ._namespaces import drop_privileges, enter_student_namespaces, staging_folders  # noqa: E402

__all__ = ["serve", "run", "PREAMBLE", "OutputLimitExceeded"]

# What every practice notebook's setup cell gives the answer cell (torch, nn, F, math, nl).
PREAMBLE = ("import math\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
            "import normlib as nl\n")
OUTPUT_KEPT = 2000           # characters of the answer's own output kept for the report


class OutputLimitExceeded(BaseException):
    """The answer printed more than the grader's output limit."""


class _BoundedOutput:
    """sys.stdout / sys.stderr for the answer: keeps the first OUTPUT_KEPT characters, counts the
    rest, and stops the answer once it printed more than ``limit`` characters in all."""

    def __init__(self, limit: int):
        self.limit, self.count, self.head = limit, 0, []

    def write(self, text: str) -> int:
        text = str(text)
        if self.count < OUTPUT_KEPT:
            self.head.append(text[: OUTPUT_KEPT - self.count])
        self.count += len(text)
        if self.count > self.limit:
            raise OutputLimitExceeded
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _mapped_bytes() -> int:
    """VmSize: the address space this process maps (torch, imported)."""
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize"))


def _limit(job: dict) -> None:
    """This process's limits: memory, file size, processes, no core files."""
    memory = job["mapped"] + job["memory_mb"] * 2**20   # what torch maps + the allowance
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (job["file_bytes"], job["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(job["timeout"]) + 5                      # a kernel limit besides the server's clock
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    with contextlib.suppress(ValueError, OSError):     # not lowerable everywhere
        resource.setrlimit(resource.RLIMIT_NPROC, (job["processes"], job["processes"]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # an oversize write fails, not the process


def _isolate(job: dict) -> None:
    """An empty working directory, a clean environment, its own process group, output to a file."""
    os.setsid()                                        # the server kills the whole group
    os.chdir(job["workdir"])
    os.environ.clear()
    os.environ.update({"PATH": "/usr/bin:/bin", "HOME": job["workdir"], "LANG": "C.UTF-8",
                       "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"})
    out = os.open("output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    torch.set_num_threads(1)                           # one core per child; the pool uses them all
    # A fork in Python (os.fork, multiprocessing) ends at once in the new process.
    os.register_at_fork(after_in_child=lambda: os._exit(70))


def _imports(cells: list[str]) -> str:
    """The top-level import statements of the student's cells before the answer (an import they
    added to the setup cell), and nothing else of those cells."""
    lines = []
    for source in cells:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        lines += [ast.get_source_segment(source, node) for node in tree.body
                  if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(line for line in lines if line)


def _memory_error(text: str) -> bool:
    return "MemoryError" in text or "can't allocate memory" in text


def grade(job: dict) -> dict:
    """Run the answer and the checker in this process; the record the grader writes."""
    exercise = EXERCISES[job["exercise"]]
    namespace = {"__name__": "__main__"}
    stdout = _BoundedOutput(job["output_chars"])
    sys.stdout = sys.stderr = stdout
    record = {}
    stage = "the answer cell"
    try:
        exec(compile(PREAMBLE + _imports(job["before"]), "<setup>", "exec"), namespace)
        filename = f"<answer {job['notebook']}>"
        linecache.cache[filename] = (len(job["answer"]), None,
                                     job["answer"].splitlines(True), filename)
        exec(compile(job["answer"], filename, "exec"), namespace)
        answer = namespace.get(exercise.name)
        if answer is None:
            record.update(passed=False, code="submission.no_answer",
                          message=f"the answer cell defines no {exercise.name}")
        else:
            stage = "the checker"
            result = exercise.checker(answer, time_limit=job["time_limit"])
            record.update(_from_result(result, exercise.key))
    except OutputLimitExceeded:
        record.update(passed=False, code="submission.output_limit",
                      message=f"printed more than {job['output_chars']:,} characters")
    except SystemExit as exc:
        record.update(passed=False, code="submission.crashed",
                      message=f"{stage} called sys.exit({exc.code!r})")
    except BaseException as exc:          # raised by the answer cell, or the checker failed
        text = describe_exception(exc)
        code = "submission.memory" if _memory_error(text) else "submission.error"
        verb = "raised" if stage == "the answer cell" else "failed on this answer:"
        record.update(passed=False, code=code, message=f"{stage} {verb} {text}")
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    record["output"] = "".join(stdout.head)
    return record


def _from_result(result, key: str) -> dict:
    """passed, code, message, message_zh and the ✓/✗ lines of a CheckResult."""
    code = getattr(result, "code", None)
    message = getattr(result, "message", None)
    if code is None and not result.passed:      # before the checkers had stable codes
        mistake = result.mistake or ("not_implemented" if not result.implemented else "cannot_tell")
        code = f"{key}.{mistake}"
    if not message:
        message = result.diagnosis or (result.report().splitlines()[0] if result.passed else
                                       "not implemented yet")
    record = {"passed": bool(result.passed), "code": None if result.passed else code,
              "message": message, "message_zh": getattr(result, "message_zh", None),
              "checks": list(result.messages)}
    if not result.passed and any(_memory_error(line) for line in result.messages):
        record["code"] = "submission.memory"
        record["message"] = "ran out of memory (the grader's limit): " + message
    return record


def run(fd: int, job: dict) -> None:
    """One answer's process (forked by ``serve``): isolate, limit, grade, send one frame, exit."""
    try:
        _isolate(job)
        _limit(job)
        record = grade(job)
    except BaseException as exc:           # the grader's own failure in this child
        record = {"passed": False, "code": "submission.error",
                  "message": f"the grader failed on this submission: {describe_exception(exc)}"}
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record["cpu_seconds"] = round(usage.ru_utime + usage.ru_stime, 3)
    try:
        data = encode(record)
        while data:
            data = data[os.write(fd, data):]
    finally:
        os._exit(0)


def _kill_the_rest() -> None:
    """Every process of the student's namespace but this server (its PID 1): what an answer
    started (a subprocess in a session of its own included) ends with the answer; then reap."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _status(status: int) -> dict:
    """Why a child that sent no record ended."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        return {"passed": False, "code": "submission.crashed",
                "message": f"the process died of {name} before the checker finished (the "
                           "system's memory killer, a crash, or the answer's own kill)"}
    return {"passed": False, "code": "submission.crashed",
            "message": f"the process exited with status {os.waitstatus_to_exitcode(status)} "
                       "before the checker finished (os._exit or a crash)"}


def _answer_once(job: dict, workdir: str) -> dict:
    """Fork one answer's process, wait for its record (at most ``timeout`` seconds), then end every
    process it left."""
    os.mkdir(workdir, 0o700)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                           # the answer's process: only its own pipe stays open
        os.close(r)
        os.closerange(3, w)
        os.closerange(w + 1, 1024)
        run(w, {**job, "workdir": workdir})
    os.close(w)
    deadline = time.monotonic() + job["timeout"]
    frames, record = FrameBuffer(), None
    try:
        while record is None:
            left = deadline - time.monotonic()
            if left <= 0:
                record = {"passed": False, "code": "submission.timeout",
                          "message": f"killed after {job['timeout']:g} s (wall clock): an endless "
                                     "loop outside any function, or far too slow"}
                break
            if not select.select([r], [], [], left)[0]:
                continue
            chunk = os.read(r, 65536)
            if not chunk:
                break
            got = frames.feed(chunk)
            if got:
                record = json.loads(got[0].decode("utf-8"))
    except (ValueError, OSError, RecursionError, MemoryError) as exc:
        record = {"passed": False, "code": "submission.tampered",
                  "message": f"the answer's process sent a malformed record "
                             f"({type(exc).__name__})"}
    finally:
        os.close(r)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        _kill_the_rest()
    if not isinstance(record, dict):
        record = _status(status)
    if not record.get("output"):
        with contextlib.suppress(OSError), open(os.path.join(workdir, "output.txt"), "rb") as f:
            record["output"] = f.read(OUTPUT_KEPT).decode("utf-8", "replace")
    shutil.rmtree(workdir, ignore_errors=True)
    return record


def _sender(fd: int):
    def send(message: dict) -> None:
        data = encode(message)
        while data:
            data = data[os.write(fd, data):]
    return send


def _student(jobs_in: int, send, mapped: int) -> None:
    """PID 1 of one student's namespaces: each job frame on ``jobs_in`` becomes a forked answer
    process, its record goes back with the job's nonce; ``{"end": true}`` (or EOF) ends it."""
    send({"opened": True})
    for n in itertools.count():
        job = read_frame(jobs_in)
        if job is None or job.get("end"):
            return
        record = _answer_once({**job, "mapped": mapped}, f"/tmp/answer-{n}")
        record["nonce"] = job["nonce"]
        try:
            send(record)
        except ValueError:                 # larger than a frame: the grader flags it
            send({"nonce": job["nonce"], "passed": False, "code": "submission.tampered",
                  "message": "the record was larger than a frame"})


def _start_student(jobs_in: int, records_out: int, tmp_bytes: int, keep: list[str]) -> None:
    """The forked process for one student (never returns): its own namespaces (_namespaces.py),
    no privileges, then a child that is PID 1 there and serves the student's jobs."""
    status = 70
    try:
        mapped = _mapped_bytes()
        enter_student_namespaces(tmp_bytes, keep)
        drop_privileges()
        pid = os.fork()
        if pid == 0:                       # PID 1 of the student's namespace
            try:
                _student(jobs_in, _sender(records_out), mapped)
            finally:
                os._exit(0)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        os._exit(status)


def serve(argv: list[str] | None = None) -> None:
    """A worker's server (``python -I -m normlib.classroom._child`` inside bubblewrap): it has
    imported torch and normlib once; for each ``{"student": ...}`` frame on stdin it forks that
    student's namespaces (``_start_student``), which read the student's jobs from the same pipe,
    and says ``{"ready": true}`` again when the student's process has ended. The server itself
    never reads a job, so no student's answer is in the memory the next student is forked from."""
    import argparse

    parser = argparse.ArgumentParser(prog="normlib.classroom._child")
    parser.add_argument("--path", action="append", default=[], help="prepend to sys.path")
    parser.add_argument("--preload", action="append", default=[], help="import once")
    parser.add_argument("--tmp-bytes", type=int, required=True, help="each student's /tmp")
    parser.add_argument("--keep", action="append", default=[],
                        help="a read-only folder under /tmp that each student's /tmp keeps")
    args = parser.parse_args(argv)
    sys.path[:0] = args.path
    for module in args.preload:
        __import__(module)
    jobs_in, records_out = os.dup(0), os.dup(1)     # the protocol; 0, 1 and 2 go nowhere
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    send = _sender(records_out)
    while True:
        send({"ready": True})
        command = read_frame(jobs_in)
        if command is None:
            return
        pid = os.fork()
        if pid == 0:
            _start_student(jobs_in, records_out, args.tmp_bytes, args.keep)
        os.waitpid(pid, 0)
        for folder in staging_folders(pid):
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    serve()
