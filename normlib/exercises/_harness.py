"""Run a learner's code safely: a time limit, a spy for forbidden built-ins, quiet output, and
one-line descriptions of whatever went wrong.

- ``run_limited(thunk, seconds)`` raises ``TimeLimitExceeded`` when ``thunk`` runs too long. In the
  main thread (a Jupyter kernel runs cells there, and so does pytest) it uses ``SIGALRM``, which also
  interrupts ``time.sleep``; elsewhere it uses a trace function that checks a deadline on every
  line of Python. Neither can interrupt one long C call (a single huge matmul).
- ``Spy`` records calls of torch built-ins by name (a ``TorchFunctionMode`` sees ``F.layer_norm``,
  ``nn.LayerNorm``, ``torch.layer_norm`` alike) and calls of normlib's reference functions.
- ``describe_exception`` turns an exception into one line that names the learner's line of code.
- ``preserved_state()`` saves torch's global state (grad mode, default dtype, RNG, number of
  threads, anomaly mode) and puts it back after the learner's code, whatever that code did.
- ``UserInterrupt``: the stop button (SIGINT) while learner code runs in the main thread, told
  apart from a ``KeyboardInterrupt`` the code raises itself.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import os
import signal
import sys
import threading
import time
import traceback
import warnings

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["TimeLimitExceeded", "UserInterrupt", "run_limited", "Spy", "quiet",
           "describe_exception", "snapshot", "changed", "preserved_state"]


class TimeLimitExceeded(BaseException):
    """Raised inside the learner's code when its time is up (a BaseException, so that a learner's
    ``except Exception`` cannot swallow it)."""


class UserInterrupt(KeyboardInterrupt):
    """The user pressed stop (SIGINT) while the learner's code ran: not the code's own doing."""


@contextlib.contextmanager
def preserved_state():
    """Restore torch's grad mode, default dtype, RNG state, thread count and anomaly mode."""
    grad, dtype = torch.is_grad_enabled(), torch.get_default_dtype()
    rng, threads = torch.get_rng_state(), torch.get_num_threads()
    anomaly, anomaly_nan = torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()
    try:
        yield
    finally:
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        torch.set_rng_state(rng)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        torch.set_anomaly_enabled(anomaly, anomaly_nan)


def run_limited(thunk, seconds: float):
    """Return ``thunk()``, or raise TimeLimitExceeded after ``seconds`` of wall-clock time."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        return _run_with_alarm(thunk, seconds)
    return _run_with_trace(thunk, seconds)


def _run_with_alarm(thunk, seconds: float):
    armed = [True]

    def on_alarm(signum, frame):
        if armed[0]:
            raise TimeLimitExceeded

    def on_interrupt(signum, frame):
        raise UserInterrupt

    old = signal.signal(signal.SIGALRM, on_alarm)
    old_int = signal.signal(signal.SIGINT, on_interrupt)
    try:
        # The timer fires again every 50 ms, so a learner's bare ``except:`` cannot keep it away.
        signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
        try:
            return thunk()
        finally:
            armed[0] = False                       # a signal arriving now is ignored
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)
        signal.signal(signal.SIGINT, old_int)


def _run_with_trace(thunk, seconds: float):
    deadline = time.monotonic() + seconds
    old = sys.gettrace()

    def tracer(frame, event, arg):
        if time.monotonic() > deadline:
            raise TimeLimitExceeded
        return tracer

    sys.settrace(tracer)
    try:
        return thunk()
    finally:
        sys.settrace(old)


class Spy(TorchFunctionMode):
    """Records forbidden calls made while it is active (``with Spy(...) as spy: ...; spy.used``).

    Args:
        torch_names: {name of a torch function: what to call it in a message}, e.g.
            {"layer_norm": "F.layer_norm / nn.LayerNorm"}. Only torch functions reach a
            TorchFunctionMode, so a learner's own function called ``layer_norm`` is never flagged.
        references: {python function: its name in messages}, e.g. {nl.layer_norm: "nl.layer_norm"}.
    """

    def __init__(self, torch_names: dict[str, str], references: dict | None = None):
        super().__init__()
        self.torch_names = torch_names
        self.codes = {f.__code__: name for f, name in (references or {}).items()}
        self.used: list[str] = []
        self._old_profile = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        label = self.torch_names.get(getattr(func, "__name__", ""))
        if label and label not in self.used:
            self.used.append(label)
        return func(*args, **(kwargs or {}))

    def _profile(self, frame, event, arg):
        if event == "call" and frame.f_code in self.codes:
            name = self.codes[frame.f_code]
            if name not in self.used:
                self.used.append(name)

    def __enter__(self):
        if self.codes:
            self._old_profile = sys.getprofile()
            sys.setprofile(self._profile)
        return super().__enter__()

    def __exit__(self, *exc):
        if self.codes:
            sys.setprofile(self._old_profile)
        return super().__exit__(*exc)


@contextlib.contextmanager
def quiet():
    """Hide what the learner's code prints and warns while the checks run."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def snapshot(values):
    """Copies of the tensors among ``values`` (None for the rest), to detect in-place changes."""
    return [v.detach().clone() if isinstance(v, torch.Tensor) else None for v in values]


def changed(values, copies) -> list[int]:
    """Indices of the tensors that differ from their snapshot (NaN equals NaN)."""
    out = []
    for i, (v, c) in enumerate(zip(values, copies, strict=True)):
        if c is None:
            continue
        v = v.detach()
        if v.shape != c.shape or v.dtype != c.dtype or not bool(
                ((v == c) | (v.isnan() & c.isnan())).all()):
            out.append(i)
    return out


# Frames in these directories are not the learner's: normlib, torch and the standard library.
_NOT_LEARNER = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (
    os.path.dirname(__file__), torch.__file__, os.__file__))        # normlib/, torch/, stdlib


def describe_exception(exc: BaseException, limit: int = 100) -> str:
    """'RuntimeError: <first line of the message> (line 4: `mu = x.mean(-1)`)'.

    The line is the innermost frame that belongs to the learner (not to torch or this checker).
    """
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(msg) > limit:
        msg = msg[: limit - 1] + "…"
    text = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if not frame.filename.startswith(_NOT_LEARNER):
            where = frame
    if where is not None and where.lineno:
        line = (where.line or linecache.getline(where.filename, where.lineno)).strip()
        if line:
            text += f" (line {where.lineno}: `{line if len(line) <= 60 else line[:59] + '…'}`)"
    return text
