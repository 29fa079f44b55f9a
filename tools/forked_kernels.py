"""nbval's kernels forked from a server that has already imported torch (notebooks/conftest.py).

Strict nbval starts a fresh kernel for each of the 43 notebooks, and each kernel spent about 3 s of
CPU importing ipykernel, torch, matplotlib, ipywidgets and normlib before its first cell did any
work: over two minutes of CPU in every ``make test``. Here each pytest worker starts one fork server
(``multiprocessing``'s forkserver) that imports those modules once (tools/kernel_preload.py), and
every kernel is a child forked from it: it answers about 0.25 s after it was asked for.

A forked kernel gives a notebook what a fresh ``python -m ipykernel_launcher`` process gives it: its
own process and IPython namespace, the environment, working directory and stderr jupyter_client
hands it, its own process group (interrupts and kills reach it as before), and fresh random states
(``random``, numpy and torch are reseeded from the OS, as a new process seeds them). What differs:
the preloaded modules are already in ``sys.modules`` (importing them again is free and does
nothing), and the kernels of one worker share Python's string-hash seed. As with any forkserver
child, a main module run from a file is imported again in the child (pytest's own is guarded).

``ForkedKernelManager`` is jupyter_client's ``KernelManager`` with a provisioner that forks instead of
executing the kernel command. Anything else (another kernel's command, a captured stdout, a system
other than Linux) is started the usual way.
"""

from __future__ import annotations

import atexit
import importlib.util
import multiprocessing
import multiprocessing.process
import os
import random
import signal
import sys
import uuid
from multiprocessing import reduction

from jupyter_client.blocking import BlockingKernelClient
from jupyter_client.manager import KernelManager
from jupyter_client.provisioning import LocalProvisioner
from traitlets import DottedObjectName

PRELOAD = ["tools.kernel_preload"]
# Linux only: elsewhere (macOS) forking a process that has loaded torch's and the system's native
# libraries is not known to be safe, and kernels start as jupyter_client starts them.
FORKS = sys.platform == "linux"
_LAUNCHER = ["-m", "ipykernel_launcher"]   # the command ipykernel's kernel spec runs, after python


def _forkserver():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


class _Fd:
    """A file descriptor handed to the forked child (multiprocessing sends it over the server's socket)."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self):
        return _Fd._in_child, (reduction.DupFd(self.fd),)

    @staticmethod
    def _in_child(dup) -> int:
        return dup.detach()


def _run_kernel(argv: list[str], cwd: str, env: dict[str, str], stderr: int | None) -> None:
    """In the forked child: become what ``python -m ipykernel_launcher *argv`` would be, and exit."""
    os.setsid()                              # its own process group, as jupyter_client starts kernels
    if stderr is not None:
        os.dup2(stderr, 2)
        os.close(stderr)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin, *argv]
    multiprocessing.current_process().daemon = False   # a notebook may start processes of its own
    random.seed()                            # a new process seeds these from the OS
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()
    from ipykernel.kernelapp import IPKernelApp
    code = 0
    try:
        # ipykernel reads JPY_PARENT_PID when it is imported, which was in the server: read it now.
        app = IPKernelApp.instance(parent_handle=int(os.environ.get("JPY_PARENT_PID") or 0))
        app.initialize(argv)
        if "ipywidgets" in sys.modules:      # what importing it inside a kernel does
            sys.modules["ipywidgets"].register_comm_target()
        app.start()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        atexit._run_exitfuncs()              # as the interpreter does at exit
        sys.__stdout__.flush()
        sys.__stderr__.flush()
    os._exit(code)


class _Forked:
    """The part of ``subprocess.Popen`` jupyter_client uses, for a process forked by the server."""

    stdin = stdout = stderr = None

    def __init__(self, process: multiprocessing.process.BaseProcess):
        self._process = process
        self.pid = process.pid

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int | None:
        self._process.join(timeout)
        return self._process.exitcode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:              # as Popen: nothing is sent to a process that has ended
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def forkable(cmd: list[str], **kwargs) -> bool:
    """Whether the kernel ``cmd`` (with jupyter_client's launch arguments) can be forked: this
    Python's ipykernel on Linux, its stdout not captured, its stderr a file or inherited."""
    stderr = kwargs.get("stderr")
    return (FORKS and cmd[1:3] == _LAUNCHER and kwargs.get("stdout") is None
            and (stderr is None or hasattr(stderr, "fileno"))
            # the same path: a venv's python is a link to the Python it was made from
            and os.path.abspath(cmd[0]) == os.path.abspath(sys.executable))


class ForkingProvisioner(LocalProvisioner):
    """Starts ipykernel by forking the server; jupyter_client's local provisioner otherwise."""

    async def launch_kernel(self, cmd: list[str], **kwargs):
        if not forkable(cmd, **kwargs):
            return await super().launch_kernel(cmd, **kwargs)     # started the usual way
        stderr = kwargs.get("stderr")
        fd = None if stderr is None else _Fd(stderr.fileno())
        cwd = str(kwargs.get("cwd") or os.getcwd())
        env = dict(kwargs["env"])
        if not kwargs.get("independent"):
            env["JPY_PARENT_PID"] = str(os.getpid())   # as jupyter_client's launcher sets it
        process = _forkserver().Process(target=_run_kernel, daemon=True, args=(cmd[3:], cwd, env, fd))
        process.start()
        self.process = _Forked(process)
        self.pid = self.pgid = process.pid    # the child leads its own process group (setsid)
        self.cwd = cwd
        return self.connection_info


class ForkedKernelClient(BlockingKernelClient):
    """jupyter_client's blocking client, whose ``wait_for_ready`` waits 20 ms for IOPub messages
    where jupyter_client waits 200 ms (to see IOPub connected, then until it is quiet). A forked
    kernel answers in a few ms, and that last wait, which always runs out, made a kernel ready
    after 0.43 s instead of 0.25 s. Missing a late status message changes nothing: nbval and
    ``execute_interactive`` keep only the messages whose parent is their own request."""

    def wait_for_ready(self, timeout: float | None = None) -> None:
        channel = self.iopub_channel
        get_msg = channel.get_msg

        def short(*args, timeout=None, **kwargs):
            return get_msg(*args, timeout=None if timeout is None else min(timeout, 0.02), **kwargs)

        channel.get_msg = short
        try:
            super().wait_for_ready(timeout)
        finally:
            del channel.get_msg                  # the class's method again


class ForkedKernelManager(KernelManager):
    """jupyter_client's ``KernelManager``, whose kernels are forked (``ForkingProvisioner``)."""

    client_class = DottedObjectName("tools.forked_kernels.ForkedKernelClient")

    async def _async_pre_start_kernel(self, **kw):
        if self.provisioner is None:
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
            self.provisioner = ForkingProvisioner(kernel_id=self.kernel_id,
                                                  kernel_spec=self.kernel_spec, parent=self)
        return await super()._async_pre_start_kernel(**kw)

    async def _async_wait(self, pollinterval: float = 0.01) -> None:
        # jupyter_client polls a killed kernel every 100 ms; a forked one is gone within a few
        await super()._async_wait(pollinterval)
