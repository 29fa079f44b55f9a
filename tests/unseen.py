"""Scoring wrong answers that a checker's catalogue never saw (issue 33, item 5; issue 35), shared
by the tests/test_exercises_unseen_*.py files (tests/test_exercises_unseen_sets.py runs the bar
below on each set of exercises 13-21). Each set holds its answers as data:

    CHECKERS = {exercise key: (checker, wrong, correct)}
        wrong: [(name, fn, the mistake keys that describe it correctly)], written the way learners
        err; correct: [(name, fn)], right answers in other styles
    GARBAGE = {exercise key: [answers that are no answer at all]}
    CANNOT_TELL = the keys that name no mistake (the checker says what it measured instead)

An outcome is "correct" (a key that describes the mistake), "cannot tell", "wrong" (any other
key), "passed" (the checker missed it) or "crashed" (the checker itself failed). The bar: at least
90% correct per exercise, none wrong, passed or crashed, every code registered, never a bare "I
cannot tell" without what was measured; every correct variant passes; every garbage answer gets a
clean result. ``python tests/test_exercises_unseen_X.py`` prints the table.
"""

from __future__ import annotations

from collections import Counter

from normlib.exercises.codes import registry

__all__ = ["verdict", "problems", "assert_clean", "print_table"]

REGISTRY = registry()
BAD = ("passed", "wrong", "crashed")


def verdict(check, fn, accepted: set, cannot_tell: set) -> tuple[str, object]:
    """(outcome, the CheckResult, or the exception when the checker crashed)."""
    try:
        result = check(fn)
    except Exception as exc:          # the checker itself failed: the worst outcome
        return "crashed", exc
    if result.passed:
        return "passed", result
    if result.mistake in accepted:
        return "correct", result
    if result.mistake in cannot_tell:
        return "cannot tell", result
    return "wrong", result


def _found(checkers: dict, key: str, cannot_tell: set) -> list[tuple[str, set, str, object]]:
    check, wrong, _ = checkers[key]
    return [(name, accepted, *verdict(check, fn, accepted, cannot_tell))
            for name, fn, accepted in wrong]


def problems(checkers: dict, key: str, cannot_tell: set, rate: float = 0.9) -> list[str]:
    """What fails the bar for exercise ``key``, one line each (empty when it meets it)."""
    found = _found(checkers, key, cannot_tell)
    out = [f"{key}: {name}: {outcome}, mistake {getattr(result, 'mistake', None)!r}, accepted "
           f"{sorted(accepted)}: {getattr(result, 'message', result)}"
           for name, accepted, outcome, result in found if outcome in BAD]
    for name, _, outcome, result in found:
        if outcome == "crashed":
            continue
        if result.code not in REGISTRY:
            out.append(f"{key}: {name}: code {result.code!r} is not registered")
        if outcome == "cannot tell" and "I cannot tell exactly" in result.message:
            out.append(f"{key}: {name}: a bare 'I cannot tell', nothing measured: {result.message}")
    count = Counter(outcome for _, _, outcome, _ in found)
    if count["correct"] < rate * len(found):
        out.append(f"{key}: {count['correct']} of {len(found)} named correctly: {dict(count)}")
    return out


def assert_clean(result) -> None:
    """A garbage answer's result: failed, with a registered code and both messages."""
    assert not result.passed and result.code in REGISTRY, result
    assert result.message and result.message_zh, result


def print_table(checkers: dict, cannot_tell: set) -> None:
    print(f"{'exercise':26} cases correct wrong cannot-tell passed crashed")
    lines = []
    for key, (check, _, correct) in checkers.items():
        found = _found(checkers, key, cannot_tell)
        c = Counter(outcome for _, _, outcome, _ in found)
        print(f"{key:26} {len(found):5} {c['correct']:7} {c['wrong']:5} {c['cannot tell']:11} "
              f"{c['passed']:6} {c['crashed']:7}")
        for name, accepted, outcome, result in found:
            if outcome == "crashed":
                lines.append(f"  {key}: {name}: crashed: {result!r:.160}")
            elif outcome != "correct":
                lines.append(f"  {key}: {name}: {outcome} ({result.mistake}; expected "
                             f"{sorted(accepted)})\n      {result.message[:160]}")
        ok = sum(check(fn).passed for _, fn in correct)
        lines.append(f"  {key}: {ok} of {len(correct)} correct variants pass")
    print("\n".join(lines))
