"""One more kernel start when a notebook's kernel dies before it answers (notebooks/conftest.py).

Strict nbval starts one kernel per notebook, and ``make test`` runs two pytest-xdist workers. Each
worker picks five free TCP ports for its next kernel by binding to port 0 and closing the socket;
the kernel binds them again about a second later, when it has started. If the other worker's kernel
took one of those ports in that second, the new kernel exits with ``ZMQError: Address already in
use`` and jupyter_client reports "Kernel died before replying to kernel_info": the notebook fails
before any of its cells ran (CI failed this way once, on exercises/05_swiglu_ffn). nbval sends the
kernel's stderr to /dev/null, so the reason was invisible.

``retrying(start)`` wraps nbval's ``start_new_kernel``: the kernel's stderr goes to a temporary file,
and a start that fails is tried once more on fresh ports, with a warning that quotes the stderr (it
shows in pytest's summary). A second failure raises with the stderr. Only the start is repeated: no
cell has run when it fails, and every cell is then run and compared as before.
"""

from __future__ import annotations

import functools
import tempfile
import warnings

ATTEMPTS = 2
STDERR_TAIL = 2000   # characters of the dead kernel's stderr quoted in the warning or error


def retrying(start, attempts: int = ATTEMPTS):
    """``start`` (nbval.kernel.start_new_kernel), with up to ``attempts`` tries."""
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"retrying: attempts must be a positive int, got {attempts!r}")
    @functools.wraps(start)
    def start_new_kernel(*args, **kwargs):
        for attempt in range(1, attempts + 1):
            # The kernel keeps its own descriptor: closing ours below never cuts it off.
            with tempfile.TemporaryFile("w+") as stderr:
                try:
                    return start(*args, **{**kwargs, "stderr": stderr})
                except RuntimeError as e:
                    stderr.seek(0)
                    said = stderr.read()[-STDERR_TAIL:].strip() or "(nothing)"
                    if attempt == attempts:
                        raise RuntimeError(f"{e} (kernel start tried {attempts} times); the last "
                                           f"kernel's stderr:\n{said}") from e
                    warnings.warn(f"kernel start {attempt} of {attempts} failed ({e}); starting it "
                                  f"again. The kernel's stderr:\n{said}", stacklevel=2)
    return start_new_kernel
