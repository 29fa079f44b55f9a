"""tools/forked_kernels.py: nbval's kernels, forked from a server that has imported torch, are what a
kernel started by ``python -m ipykernel_launcher`` is to a notebook."""

import os
import subprocess
import sys
import tempfile
import time

import nbval.kernel
import pytest

from tools import forked_kernels
from tools.forked_kernels import ForkedKernelManager

pytestmark = pytest.mark.skipif(not forked_kernels.FORKS, reason="kernels are forked on Linux only")


def _start(cwd, stderr):
    """A kernel as nbval starts one (its kernel spec: this Python's ipykernel), forked."""
    km = ForkedKernelManager(kernel_name=nbval.kernel.CURRENT_ENV_KERNEL_NAME,
                             kernel_spec_manager=nbval.kernel.NbvalKernelspecManager())
    km.start_kernel(cwd=str(cwd), stderr=stderr)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    assert "get_msg" not in vars(kc.iopub_channel), "wait_for_ready left its shorter wait in place"
    return km, kc


def _run(kc, code: str, timeout: float = 30) -> tuple[str, list[dict]]:
    """stdout of ``code`` run in the kernel, and its error outputs."""
    out, errors = [], []

    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            errors.append(msg["content"])
    kc.execute_interactive(code, output_hook=hook, timeout=timeout)
    return "".join(out), errors


PROBE = """
import os, random, sys, torch
print(os.getcwd(), os.getpgid(0) == os.getpid(), os.environ.get("FORKED_KERNEL_PROBE"),
      sys.argv[0].endswith("ipykernel_launcher.py"), os.environ["JPY_PARENT_PID"])
print(random.random(), torch.rand(1).item())
"""


def test_forked_kernels_are_fresh_kernels_that_can_be_interrupted_and_stopped(monkeypatch, tmp_path):
    monkeypatch.setenv("FORKED_KERNEL_PROBE", "seen")
    kernels = []
    with tempfile.TemporaryFile("w+") as stderr:
        try:
            for _ in range(2):
                km, kc = _start(tmp_path, stderr)
                kernels.append((km, kc))
                assert isinstance(km.provisioner.process, forked_kernels._Forked), "not forked"
            seen = [_run(kc, PROBE) for _, kc in kernels]
            assert not any(errors for _, errors in seen), seen
            lines = [out.split("\n") for out, _ in seen]
            for first, _, _ in lines:
                # its cwd, its own process group, the environment it was given, the launcher's argv
                assert first == f"{tmp_path} True seen True {os.getpid()}"
            draws = [line[1].split() for line in lines]   # random.random(), torch.rand(1)
            assert all(a != b for a, b in zip(*draws, strict=True)), f"the same draws: {draws}"

            km, kc = kernels[0]
            # stop_on_error=False: else ipykernel aborts what it receives just after the error
            # (the interrupt), and under load that can be the next request.
            sleeping = kc.execute("import time; time.sleep(60)", stop_on_error=False)
            while not (msg := kc.get_iopub_msg(timeout=10))["parent_header"].get("msg_id") == sleeping \
                    or msg["content"].get("execution_state") != "busy":
                pass
            time.sleep(0.2)                                  # inside the sleep
            km.interrupt_kernel()
            reply = kc.get_shell_msg(timeout=10)
            assert reply["parent_header"]["msg_id"] == sleeping
            assert reply["content"]["ename"] == "KeyboardInterrupt"
            assert _run(kc, "print('still here')") == ("still here\n", [])
            _run(kc, "import os; os.write(2, b'to stderr\\n')")     # its stderr, below
            pids = [km.provisioner.pid for km, _ in kernels]
        finally:
            for km, kc in kernels:
                kc.stop_channels()
                km.shutdown_kernel(now=True)
        stderr.seek(0)
        assert "to stderr" in stderr.read(), "the kernel's stderr is not the file it was given"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_only_this_pythons_ipykernel_is_forked_and_anything_else_starts_as_usual(tmp_path):
    launcher = [sys.executable, "-m", "ipykernel_launcher", "-f", "kernel.json"]
    with open(tmp_path / "err", "w") as stderr:
        assert forked_kernels.forkable(launcher)
        assert forked_kernels.forkable(launcher, stderr=stderr, cwd=str(tmp_path))
        assert not forked_kernels.forkable(launcher, stdout=subprocess.PIPE)     # captured output
        assert not forked_kernels.forkable(launcher, stderr=subprocess.DEVNULL)  # not a file
        assert not forked_kernels.forkable(["/usr/bin/python3", *launcher[1:]])  # another Python
        if sys.prefix != sys.base_prefix:      # in a venv: the Python it was made from is another
            base = os.path.realpath(sys.executable)
            assert not forked_kernels.forkable([base, *launcher[1:]])
        assert not forked_kernels.forkable([sys.executable, "-m", "other_kernel", "-f", "k.json"])
