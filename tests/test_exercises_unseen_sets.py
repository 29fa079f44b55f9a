"""The bar for every set of unseen answers written in the tests/unseen.py form (exercises 13-21):
each set's module holds its answers as data (CHECKERS, GARBAGE, CANNOT_TELL) and its own tests;
the three checks every set must pass are here, once, per exercise so that xdist spreads them."""

import pytest
import test_exercises_unseen_20_21
import test_exercises_unseen_2025
import test_exercises_unseen_loss_dyt
import test_exercises_unseen_softcap_gqa
import unseen

SETS = [test_exercises_unseen_2025, test_exercises_unseen_softcap_gqa,
        test_exercises_unseen_loss_dyt, test_exercises_unseen_20_21]
CHECKERS = {key: (s, value) for s in SETS for key, value in s.CHECKERS.items()}


@pytest.mark.parametrize("key", list(CHECKERS))
def test_unseen_mistakes_are_caught_never_misnamed_and_named_at_90_percent(key):
    s, _ = CHECKERS[key]
    found = unseen.problems(s.CHECKERS, key, s.CANNOT_TELL)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("key, name, fn", [(key, name, fn) for key, (_, (_, _, ok)) in
                                           CHECKERS.items() for name, fn in ok])
def test_every_correct_variant_passes(key, name, fn):
    result = CHECKERS[key][1][0](fn)
    assert result.passed, result


@pytest.mark.parametrize("key, i", [(key, i) for s in SETS for key, g in s.GARBAGE.items()
                                   for i in range(len(g))])
def test_garbage_gets_a_clean_result(key, i):
    s, (check, _, _) = CHECKERS[key]
    unseen.assert_clean(check(s.GARBAGE[key][i]))
