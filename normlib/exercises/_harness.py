"""Run a learner's code safely: a time limit, a spy for forbidden built-ins, quiet output, and
one-line descriptions of whatever went wrong.

- ``run_limited(thunk, seconds)`` raises ``TimeLimitExceeded`` when ``thunk`` runs too long. What
  this in-process limit promises:

  * a call that returns after its deadline fails with ``TimeLimitExceeded``, whatever the code
    caught on the way (a flag set when the time is up, not the exception, decides);
  * code that does not catch ``BaseException`` is stopped at the deadline: in the main thread by
    ``SIGALRM`` (which also interrupts ``time.sleep``), elsewhere (a thread; Windows, which has no
    ``setitimer``) by a trace function that checks the clock on every line of Python;
  * once the time is up, ``TimeLimitExceeded`` is raised again at the next line of Python (a
    tracer), and again after each one the code swallows, which stops a loop whose ``except:``
    swallows each one when the loop has a line outside its ``try`` (nested ``try`` blocks that
    catch everything at every level can still keep it away);
  * a timer set outside (pytest-timeout's ``SIGALRM``) is put back afterwards with the time it had
    left, minus the time the call took (it fires at once if it expired meanwhile);
  * the limit never stops an import half way: a module stopped while it is being imported stays
    half-made in ``sys.modules``, and every later import of it in that kernel fails (the first
    ``torch.use_deterministic_algorithms(True)`` imports 822 modules, 2 s here; a broken
    ``torch._dynamo`` then breaks every ``torch.optim`` optimizer). When the time is up inside an
    import, the import finishes and the call gets its time again from there; imports may take
    ``IMPORT_GRACE`` seconds of such extra time in all, after which they are stopped too (a module
    that never finishes loading cannot hang the checker).

  It does not promise to stop one long C call (a single huge matmul) or code that catches every
  exception at every level of an endless loop: only a separate process that is killed gives a
  hard limit, and the classroom grader (``normlib.classroom``) runs each submission in one.
- ``Spy`` records calls of torch built-ins by name (a ``TorchFunctionMode`` sees ``F.layer_norm``,
  ``nn.LayerNorm``, ``torch.layer_norm`` alike) and calls of normlib's reference functions.
- ``describe_exception`` turns an exception into one line that names the learner's line of code.
- ``preserved_state()`` saves torch's global state (grad mode, default dtype, default device, the
  torch-function mode stack, RNG, number of threads, anomaly mode, deterministic algorithms, float32
  matmul precision, print options) and puts it back after the learner's code, whatever it did.
- ``interrupt_guard()``: the stop button (SIGINT) while learner code runs in the main thread becomes
  ``UserInterrupt``, told apart from a ``KeyboardInterrupt`` the code raises itself by a flag that
  the handler sets (not by the exception's type): a press the code swallowed, or one that lands
  while the checker tidies up after the call, still ends in ``UserInterrupt`` when the guard exits.
"""

from __future__ import annotations

import contextlib
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
           "describe_exception", "snapshot", "changed", "preserved_state", "interrupt_guard",
           "one_thread", "NO_THREADS"]


class TimeLimitExceeded(BaseException):
    """Raised inside the learner's code when its time is up (a BaseException, so that a learner's
    ``except Exception`` cannot swallow it)."""


class UserInterrupt(KeyboardInterrupt):
    """The user pressed stop (SIGINT) while the learner's code ran: not the code's own doing."""


@contextlib.contextmanager
def preserved_state():
    """Restore torch's global state (see the module docstring) after the block, whatever it did."""
    grad, dtype = torch.is_grad_enabled(), torch.get_default_dtype()
    device_context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
    modes = torch._C._len_torch_function_stack()
    rng, threads = torch.get_rng_state(), torch.get_num_threads()
    anomaly, anomaly_nan = torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()
    deterministic = (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled())
    precision = torch.get_float32_matmul_precision()
    printing = dict(vars(torch._tensor_str.PRINT_OPTS))
    try:
        yield
    finally:
        if getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is not device_context:
            torch.set_default_device(None if device_context is None else device_context.device)
        while torch._C._len_torch_function_stack() > modes:    # modes the code entered, not left
            torch._C._pop_torch_function_stack()
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        torch.set_rng_state(rng)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        torch.set_anomaly_enabled(anomaly, anomaly_nan)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        if torch.get_float32_matmul_precision() != precision:
            torch.set_float32_matmul_precision(precision)
        vars(torch._tensor_str.PRINT_OPTS).update(printing)


@contextlib.contextmanager
def interrupt_guard():
    """SIGINT inside the block raises ``UserInterrupt``; if the block swallowed it (or it came while
    the block was finishing), ``UserInterrupt`` is raised when the block exits. Outside the main
    thread (no signal handlers there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = [False]

    def on_interrupt(signum, frame):
        pressed[0] = True
        raise UserInterrupt

    old = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if pressed[0]:
            raise UserInterrupt


def run_limited(thunk, seconds: float):
    """Return ``thunk()``, or raise TimeLimitExceeded after ``seconds`` of wall-clock time (see the
    module docstring for what this promises and what it does not)."""
    if not seconds > 0:
        raise ValueError(f"run_limited: seconds must be > 0, got {seconds!r}")
    limit = _Limit(seconds)
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        return limit.run_with_alarm(thunk)
    return limit.run_with_trace(thunk)


_HERE = os.path.abspath(__file__)
IMPORT_GRACE = 30.0          # seconds past the deadline that imports may take, in all, per call


def _importing(frame, runner) -> bool:
    """Whether ``frame`` runs inside an import that started within the limited call (importlib's
    frames are on the stack between it and ``runner``, the call's own frame)."""
    while frame is not None and frame is not runner:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


class _Expired(TimeLimitExceeded):
    """The TimeLimitExceeded raised in learner code. Python stops tracing when a tracer raises; if
    the code swallows this one, freeing it turns the tracing back on, so the next line raises
    again."""

    def __init__(self, limit: _Limit):
        super().__init__()
        self.limit = limit

    def __del__(self):
        if self.limit.active and self.limit.thread == threading.get_ident():
            self.limit.trace(sys._getframe(1))


class _Limit:
    """One limited call: its deadline, whether it passed, and the tracer that enforces it."""

    def __init__(self, seconds: float):
        self.seconds, self.deadline = seconds, time.monotonic() + seconds
        self.expired, self.active = False, True
        self.thread, self.runner = threading.get_ident(), None
        self.import_started, self.granted = None, 0.0     # the deadline fell in an import then

    def due(self, frame) -> bool:
        """Whether to stop the code running at ``frame``: once the time is up, and again at every
        check after that; but never inside an import (``IMPORT_GRACE`` in all). An import that the
        deadline fell in is let finish, and the deadline then starts again from its end."""
        now = time.monotonic()
        if not self.expired and self.import_started is None and now < self.deadline:
            return False
        if _importing(frame, self.runner):
            if self.import_started is None:
                self.import_started = now
            return self.granted + (now - self.import_started) > IMPORT_GRACE
        if self.import_started is not None:           # the import the deadline fell in is done
            self.granted += now - self.import_started
            self.import_started = None
            if not self.expired:
                self.deadline = now + self.seconds
                return False
        return True

    def tracer(self, frame, event, arg):
        """Before the deadline: check the clock. After it: raise at every line of learner code."""
        if not self.active or frame.f_code.co_filename == _HERE:
            return self.tracer
        if self.due(frame):
            self.expired = True
            raise _Expired(self)
        return self.tracer

    def trace(self, frame) -> None:
        """Trace ``frame`` and its callers up to run_limited's, and every frame they call."""
        while frame is not None and frame is not self.runner:
            frame.f_trace, frame.f_trace_lines = self.tracer, True
            frame = frame.f_back
        sys.settrace(self.tracer)

    def _result(self, out):
        if self.expired:
            raise TimeLimitExceeded
        return out

    def run_with_trace(self, thunk):
        old = sys.gettrace()
        self.runner = sys._getframe()
        sys.settrace(self.tracer)
        try:
            out = thunk()
        finally:
            self.active = False
            sys.settrace(old)
        return self._result(out)

    def run_with_alarm(self, thunk):
        old_trace = sys.gettrace()
        self.runner = sys._getframe()

        def on_alarm(signum, frame):      # at the deadline, then every 50 ms
            if self.active and self.due(frame):
                self.expired = True
                self.trace(frame)           # so that a swallowed alarm is raised again
                raise _Expired(self)

        started = time.monotonic()
        old_handler = signal.signal(signal.SIGALRM, on_alarm)
        outer, outer_interval = signal.setitimer(signal.ITIMER_REAL, self.seconds, 0.05)
        try:
            try:            # after the deadline the timer fires again every 50 ms
                out = thunk()
            finally:
                self.active = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                sys.settrace(old_trace)
        finally:
            signal.signal(signal.SIGALRM, old_handler)
            if outer > 0:            # an outer timer (pytest-timeout): re-armed with its time left
                left = outer - (time.monotonic() - started)
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), outer_interval)
        return self._result(out)


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


class _Discard:
    """A text stream that keeps nothing: a learner's 100 MB of prints cost no memory."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


NO_THREADS = "start no thread: the checker's time limit and built-in check see only this one"


@contextlib.contextmanager
def one_thread():
    """Starting a Python thread raises RuntimeError(NO_THREADS) inside the block: the time limit
    and the ``Spy`` are per thread, so ``F.gelu`` called in a thread would pass unseen (code review
    2, finding 7). torch's own C++ threads are not Python threads and run as usual."""
    import _thread

    def refuse(*args, **kwargs):
        raise RuntimeError(NO_THREADS)

    saved = (threading.Thread.start, _thread.start_new_thread, threading._start_new_thread)
    threading.Thread.start = refuse
    _thread.start_new_thread = threading._start_new_thread = refuse
    try:
        yield
    finally:
        threading.Thread.start, _thread.start_new_thread, threading._start_new_thread = saved


@contextlib.contextmanager
def quiet():
    """Hide (discard) what the learner's code prints and warns while the checks run."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(_Discard()):
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
