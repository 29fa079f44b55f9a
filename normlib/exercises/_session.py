"""One checking session: run the checks, call the learner's code safely, compare, name the mistake.

A checker builds a ``Session`` with its catalogue of mistakes ({key: Mistake}),
then runs checks: ``session.run(label, check)``. Inside a check, ``session.call(fn, ...)`` calls the
learner's code (time limit, forbidden built-ins, in-place changes, exceptions -> one line) and
``session.expect_close(got, want, mutants=...)`` compares; on a mismatch it tries each *mutant*, a
deliberately wrong implementation of the same function, that the learner's output matches.

A catalogue match is only a candidate: it names the diagnosis only when the learner's code behaves
like that mutant on *every* check where the mutant differs from the reference (otherwise it is
refuted and its "looks like" hints are dropped). After a failure, ``session.probe(...)`` runs the
exercise's property probes: inputs that isolate one property at a time (a row shifted by a
constant, a row scaled, one token perturbed, weight = 2, bias = 1, ...). Each failing property
gives a plain sentence: what fails and what it implies. The diagnosis is, in this order: a
stopping problem (time limit, forbidden built-in), a confirmed catalogue mistake, a structural
problem (None, shape, dtype, in-place, no autograd), the first failing property, an exception
(or NaN, or wrong gradients), and otherwise what a probe measured ("cannot_tell" with its
sentence), or "I cannot tell exactly".
"""

from __future__ import annotations

import re

import torch

from ._code import code_of
from ._compare import close, grad_output, max_error, tolerance
from ._generic import CANNOT_TELL, GENERIC_MISTAKES, OUTCOMES, catalogue
from ._harness import (
    Spy,
    TimeLimitExceeded,
    UserInterrupt,
    changed,
    describe_exception,
    interrupt_guard,
    one_thread,
    preserved_state,
    quiet,
    run_limited,
    snapshot,
)
from .result import FAIL, PASS, CheckResult
from .spec import text

__all__ = ["Session", "Fail", "GENERIC_MISTAKES"]


# True, but they do not say what to change: a property or "cannot tell" is preferred to them.
_UNSPECIFIC = {"wrong_values", "wrong_grad", "nan", "raised", "running_wrong"}
_TRUE_BUT_VAGUE = ("raised", "nan", "wrong_grad")
# Named after the probes when these come with other mistakes: they show on one float16 line only.
_SECONDARY = {"no_upcast"}



class Fail(Exception):
    """A failed check: one line of detail and, when known, the key of the mistake."""

    def __init__(self, detail: str, mistake: str | None = None):
        super().__init__(detail)
        self.detail, self.mistake = detail, mistake


class _Stop(Exception):
    """Stops the session: not implemented yet, time limit, or a forbidden shortcut."""

    def __init__(self, mistake: str, detail: str, explanation: str = ""):
        super().__init__(detail)
        self.mistake, self.detail, self.explanation = mistake, detail, explanation


class Session:
    """Runs the checks of one exercise and collects the report (see the module docstring)."""

    def __init__(self, name: str, mistakes: dict, *, exercise: str, time_limit: float = 3.0,
                 forbidden: dict[str, str] | None = None, references: dict | None = None,
                 error_hints: tuple = (), vague: tuple = ()):
        self.name, self.exercise, self.time_limit = name, exercise, time_limit
        self.mistakes = {**OUTCOMES, **GENERIC_MISTAKES, **catalogue(exercise, mistakes)}
        self.title_zh = text(exercise).title_zh   # the exercise's title in the Chinese report
        self.vague = _UNSPECIFIC | set(vague)     # keys that name no mistake a learner can fix
        self.specific = set(mistakes)
        self.forbidden, self.references = forbidden or {}, references or {}
        self.error_hints = error_hints          # ((regex, mistake key), ...) for exceptions
        self.lines: list[str] = []
        self.found: list[str] = []
        self.stop: _Stop | None = None
        self.refuted: set[str] = set()          # catalogue keys the learner's code contradicts
        self.properties: list[tuple[str, str]] = []     # (key, sentence) of failing properties

    # ------------------------------------------------------------------ running checks
    def run(self, label: str, check) -> bool:
        """Run one check; a failure becomes a ✗ line, a check that returns a string adds it to its
        ✓ line. Does nothing once the session stopped."""
        if self.stop is not None:
            return False
        try:
            note = check()
        except Fail as f:
            seen = any(line.endswith(f": {f.detail}") for line in self.lines)
            detail = "the same error as above" if seen and f.detail.startswith("raised") \
                else f.detail
            self.lines.append(f"{FAIL} {label}: {detail}")
            if f.mistake:
                self.found.append(f.mistake)
            return False
        except _Stop as s:
            self.stop = s
            if s.mistake != "not_implemented":
                self.lines.append(f"{FAIL} {label}: {s.detail}")
                self.found.insert(0, s.mistake)
            return False
        self.lines.append(f"{PASS} {label}: {note}" if isinstance(note, str) else f"{PASS} {label}")
        return True

    def require_callable(self, obj, what: str = "your function") -> bool:
        """False (and a ✗ line) unless ``obj`` can be called."""
        if callable(obj):
            return True
        self.lines.append(f"{FAIL} {what}: got {type(obj).__name__} {obj!r:.40}, expected "
                          "something callable (pass the function or class itself)")
        self.found.append("not_callable")
        return False

    @property
    def failed(self) -> bool:
        return any(line.startswith(FAIL) for line in self.lines)

    def probe(self, *probes) -> None:
        """After a failure, run property probes: each returns None (the property holds) or
        (key, sentence). A probe that cannot run on the learner's code (an exception, a wrong
        shape) is skipped: the ✗ lines already report that."""
        if not self.failed or self.stop is not None:
            return
        for p in probes:
            try:
                with quiet():
                    out = p()
            except Exception:            # Fail, _Stop, or a probe that does not apply
                continue
            if out and out[0] not in (k for k, _ in self.properties):
                self.properties.append(out)

    def result(self) -> CheckResult:
        """The CheckResult, with its stable code and one-line messages (English, Chinese)."""
        result = self._result()
        result.exercise, result.title_zh = self.exercise, self.title_zh
        n = len(result.messages)
        if result.passed:
            result.message = f"{self.name}: all {n} checks passed"
            result.message_zh = f"{result.title_zh or self.name}：全部 {n} 项检查通过"
            return result
        key = result.mistake or "not_implemented"
        result.code = code_of(self.exercise, key)
        result.message = result.diagnosis or self.explain(key)
        result.message_zh = self.mistakes.get(key, GENERIC_MISTAKES["wrong_values"]).zh
        return result

    def _result(self) -> CheckResult:
        if self.stop is not None and self.stop.mistake == "not_implemented":
            return CheckResult(self.name, False, ["not implemented yet"], implemented=False)
        failed = self.failed
        confirmed = [k for k in self.found if k in self.specific and k not in self.refuted
                     and k not in self.vague]
        lines = [self._drop_refuted_hints(line) for line in self.lines]
        key, diagnosis = None, None
        if failed:
            # a probe's "cannot_tell" sentence says what it measured: used only when nothing else
            # names the mistake
            named = [(k, text) for k, text in self.properties if k != "cannot_tell"]
            measured = [text for k, text in self.properties if k == "cannot_tell"]
            structural = [k for k in self.found if k in GENERIC_MISTAKES and k not in _UNSPECIFIC]
            stopping = [k for k in self.found if k in ("shortcut", "time_limit")]
            # a mistake that often comes with another (no float32 upcast) yields to the probes
            if confirmed and named and all(k in _SECONDARY for k in confirmed) and \
                    not (stopping or structural):
                key = named[0][0]
                diagnosis = " ".join(text for _, text in named[:2])
                diagnosis += " Also, " + self.explain(confirmed[0])
            elif stopping or confirmed or structural:
                key = (stopping or confirmed or structural)[0]
                diagnosis = self.explain(key)
                extra = [text for k, text in named if k != key]
                if extra and key in self.specific:
                    diagnosis += " The probes also find: " + " ".join(extra[:2])
            elif named:
                key = named[0][0]
                diagnosis = " ".join(text for _, text in named[:3])
            elif any(k in self.specific or k in _TRUE_BUT_VAGUE for k in self.found):
                # an exception, NaN, wrong gradients, or a catalogue's own "wrong values"
                key = next(k for k in self.found if k in self.specific or k in _TRUE_BUT_VAGUE)
                diagnosis = self.explain(key)
            elif measured:
                key, diagnosis = "cannot_tell", measured[0]
            else:
                key, diagnosis = "cannot_tell", CANNOT_TELL
        return CheckResult(self.name, not failed, lines, diagnosis, key)

    def _drop_refuted_hints(self, line: str) -> str:
        for key in self.refuted:
            short = re.escape(self.short(key))
            line = re.sub(rf" \(looks like: {short}(; [^)]*)?\)", "", line)
        return line

    def explain(self, key: str) -> str:
        if key == "shortcut" and self.stop is not None:
            return self.stop.explanation
        return self.mistakes.get(key, GENERIC_MISTAKES["wrong_values"]).en

    def short(self, key: str) -> str:
        return self.mistakes[key].label if key in self.mistakes else key

    # ------------------------------------------------------------------ calling learner code
    def call(self, fn, *args, **kwargs):
        """Call the learner's ``fn`` safely; raise Fail (one line) or _Stop on trouble. A stop press
        (SIGINT) anywhere in here raises UserInterrupt, even one the code swallowed."""
        with interrupt_guard():
            return self._call(fn, *args, **kwargs)

    def _call(self, fn, *args, **kwargs):
        values = [*args, *kwargs.values()]
        copies = snapshot(values)
        spy = Spy(self.forbidden, self.references)
        try:
            with preserved_state(), quiet(), one_thread(), spy:
                out = run_limited(lambda: fn(*args, **kwargs), self.time_limit)
        except NotImplementedError:
            raise _Stop("not_implemented", "not implemented yet") from None
        except TimeLimitExceeded:
            raise _Stop("time_limit", f"stopped: ran longer than the time limit "
                                      f"({self.time_limit:g} s per call)") from None
        except UserInterrupt:          # the stop button: stop the checker too
            raise KeyboardInterrupt from None
        except (_Stop, Fail):          # a checker's own signal from a nested call
            raise
        except Exception as exc:       # the learner's bug, reported in one line
            self._check_spy(spy)
            raise Fail(f"raised {describe_exception(exc)}", self._classify(exc)) from None
        except BaseException as exc:   # sys.exit(), KeyboardInterrupt raised by the code, ...
            self._check_spy(spy)
            raise _Stop("raised", f"raised {describe_exception(exc)}: a checker cannot go on after "
                                  f"{type(exc).__name__}; raise an ordinary exception "
                                  "instead") from None
        self._check_spy(spy)
        bad = changed(values, copies)
        if bad:
            raise Fail("modifies its input in place", "in_place")
        return out

    def _check_spy(self, spy: Spy) -> None:
        if spy.used:
            raise _Stop("shortcut", f"calls {spy.used[0]}, the built-in being practised",
                        f"you call {spy.used[0]}: the very thing this exercise asks you to write "
                        "by hand. Build it from tensor operations instead.")

    def _classify(self, exc: Exception) -> str:
        text = str(exc)
        if "in-place operation" in text or "modified by an inplace operation" in text:
            return "in_place"
        for pattern, key in self.error_hints:
            if re.search(pattern, text):
                return key
        return "raised"

    # ------------------------------------------------------------------ comparing
    def match(self, got, want, mutants, tol) -> str | None:
        """The mutant closest to the learner's output among those it matches (and the reference
        does not); the first in the list wins a tie. A catalogue key none of whose mutants is
        consistent with the learner's output here (it differs from the reference, and from the
        learner's output) is refuted for the whole session."""
        best, seen, consistent = self.judge(got, want, mutants, tol)
        self.refuted |= seen - consistent
        return best

    def judge(self, got, want, mutants, tol) -> tuple[str | None, set, set]:
        """(the closest matching mutant's key, the keys tried, the keys consistent with ``got``):
        ``match`` without refuting, for a checker that weighs several references (RoPE)."""
        loose = (tol[0] * 3, tol[1] * 3)
        best, best_error = None, float("inf")
        consistent, seen = set(), set()
        for key, make in mutants:
            try:
                with quiet():
                    m = make()
            except Exception:            # a mutant may not apply to this input
                continue
            seen.add(key)
            if isinstance(m, torch.Tensor) and m.shape != torch.as_tensor(got).shape:
                continue
            if close(m, want, tol):
                consistent.add(key)      # this input cannot tell the mutant from the reference
            elif close(got, m, loose):
                consistent.add(key)
                error = max_error(got, m)
                if error < best_error:
                    best, best_error = key, error
        return best, seen, consistent

    def expect_tensor(self, got, want: torch.Tensor, mutants=(), tol=None, what="output") -> None:
        """Type, shape and dtype of a tensor output (before its values)."""
        if got is None:
            raise Fail(f"{what} is None", "returned_none")
        if not isinstance(got, torch.Tensor):
            raise Fail(f"{what} is a {type(got).__name__}, expected a torch.Tensor", "not_a_tensor")
        if got.shape != want.shape:
            key = self.match(got, want, mutants, tol or tolerance(want.dtype)) if mutants else None
            hint = f" (looks like: {self.short(key)})" if key else ""
            raise Fail(f"{what} has shape {tuple(got.shape)}, expected {tuple(want.shape)}{hint}",
                       key or "wrong_shape")
        if got.dtype != want.dtype:
            raise Fail(f"{what} has dtype {got.dtype}, expected {want.dtype}", "wrong_dtype")

    def expect_close(self, got, want, *, mutants=(), tol=None, what="output") -> None:
        """Values of ``got`` against ``want``; on a mismatch, name the mutant it matches."""
        if isinstance(want, torch.Tensor):
            self.expect_tensor(got, want, mutants, tol, what)
            scale = float(want.detach().abs().nan_to_num(0, 0, 0).max()) if want.numel() else 1.0
            tol = tol or tolerance(want.dtype, scale)
        if close(got, want, tol):
            self.match(got, want, mutants, tol)      # refutes the mutants this input shows
            return
        key = self.match(got, want, mutants, tol)
        bad_nan = bool((~torch.as_tensor(got).isfinite() & torch.as_tensor(want).isfinite()).any())
        if key:
            detail = f"wrong values (looks like: {self.short(key)})"
        elif bad_nan:
            detail, key = "NaN or inf where the reference is finite", "nan"
        else:
            detail, key = f"wrong values, max |error| {max_error(got, want):.3g}", "wrong_values"
        raise Fail(f"{what}: {detail}" if what != "output" else detail, key)

    def expect_grads(self, forward, reference, inputs: dict, *, mutants=(), tol=None) -> None:
        """Backward: the gradients of sum(out * g), g fixed and random, with respect to every input.

        ``forward(*leaves)`` is the learner's code (called safely); ``reference(*leaves)`` and each
        mutant ``make(*leaves)`` (in ``mutants``: (key, make) pairs) are the checker's.
        """
        want_out, want = _grads(reference, inputs, None)
        g = grad_output(want_out.shape, want_out.dtype)
        want_out, want = _grads(reference, inputs, g)
        leaves = [t.detach().clone().requires_grad_(True) for t in inputs.values()]
        got_out = self.call(forward, *leaves)
        self.expect_close(got_out, want_out, tol=tol, mutants=[
            (k, (lambda make=make: make(*inputs.values()))) for k, make in mutants])
        if not got_out.requires_grad or got_out.grad_fn is None:
            raise Fail("the output has no grad_fn (cut off from autograd)", "no_autograd")
        self.call(lambda: (got_out * g).sum().backward())
        for name, leaf, w in zip(inputs, leaves, want, strict=True):
            if leaf.grad is None:
                raise Fail(f"no gradient reaches {name}", "no_autograd")
            t = tol or tolerance(w.dtype, float(w.abs().max()) if w.numel() else 1.0)
            if close(leaf.grad, w, t):
                continue
            got = [leaf.grad for leaf in leaves]
            key = None
            for k, make in mutants:
                try:
                    with quiet():
                        _, m = _grads(make, inputs, g)
                except Exception:
                    continue
                if not all(close(a, b, t) for a, b in zip(m, want, strict=True)) and all(
                        b is not None and close(a, b, (t[0] * 3, t[1] * 3))
                        for a, b in zip(got, m, strict=True)):
                    key = k
                    break
            hint = f" (looks like: {self.short(key)})" if key else \
                f", max |error| {max_error(leaf.grad, w):.3g}"
            raise Fail(f"gradient w.r.t. {name}: wrong values{hint}", key or "wrong_grad")


def _grads(f, inputs: dict, g):
    """f's output and the gradients of sum(out * g) w.r.t. fresh copies of ``inputs``."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs.values()]
    out = f(*leaves)
    if g is None:
        return out, None
    (out * g).sum().backward()
    return out, [leaf.grad for leaf in leaves]

