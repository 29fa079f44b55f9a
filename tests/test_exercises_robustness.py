"""Nothing a learner writes breaks a checker (issue 12, item 2): torch's global state is put back
after every call of learner code, and SystemExit, KeyboardInterrupt or any BaseException raised by
that code becomes one ✗ line; the stop button (SIGINT) still stops the checker."""

import os
import signal
import sys
import time

import pytest
import torch

from normlib import exercises as ex


def good_ln(x, weight, bias, eps=1e-5):
    h = x.float()
    y = (h - h.mean(-1, keepdim=True)) * torch.rsqrt(h.var(-1, unbiased=False, keepdim=True) + eps)
    return (y * weight + bias).to(x.dtype)


def with_side_effect(effect):
    def fn(x, weight, bias, eps=1e-5):
        effect()
        return good_ln(x, weight, bias, eps)
    return fn


def state():
    return (torch.is_grad_enabled(), torch.get_default_dtype(), torch.get_rng_state(),
            torch.get_num_threads(), torch.is_anomaly_enabled())


def same(a, b):
    return a[:2] == b[:2] and torch.equal(a[2], b[2]) and a[3:] == b[3:]


@pytest.mark.parametrize("effect", [
    lambda: torch.set_grad_enabled(False),
    lambda: torch.set_default_dtype(torch.float64),
    lambda: torch.manual_seed(123),
    lambda: torch.set_num_threads(1),
    lambda: torch.autograd.set_detect_anomaly(True),
], ids=["grad mode", "default dtype", "rng", "threads", "anomaly mode"])
def test_global_state_is_restored_after_every_call(effect):
    before = state()
    result = ex.check_layer_norm(with_side_effect(effect))
    assert same(state(), before), result
    assert "Traceback" not in str(result)


def test_grad_mode_switched_off_by_the_learner_cannot_break_the_reference_backward():
    result = ex.check_layer_norm(with_side_effect(lambda: torch.set_grad_enabled(False)))
    assert not result.passed and result.mistake == "no_autograd", result
    assert torch.is_grad_enabled()


def test_state_changes_that_keep_the_answer_right_still_pass():
    for effect in (lambda: torch.set_default_dtype(torch.float64), lambda: torch.manual_seed(0),
                   lambda: torch.set_num_threads(1)):
        assert ex.check_layer_norm(with_side_effect(effect)).passed


class Escape(BaseException):
    pass


def _raise(exc):
    raise exc


@pytest.mark.parametrize("exc, name", [(SystemExit(3), "SystemExit"),
                                       (KeyboardInterrupt(), "KeyboardInterrupt"),
                                       (Escape("out"), "Escape")])
def test_base_exceptions_raised_by_the_code_become_one_line(exc, name):
    result = ex.check_layer_norm(with_side_effect(lambda: _raise(exc)))
    assert not result.passed and result.mistake == "raised", result
    failed = result.failed_messages
    assert len(failed) == 1 and name in failed[0], result
    assert "Traceback" not in str(result)


def test_sys_exit_in_a_module_constructor_is_one_line():
    class Exits(torch.nn.Module):
        def __init__(self, num_features, eps=1e-5, momentum=0.1):
            super().__init__()
            sys.exit(0)

    result = ex.check_batch_norm(Exits)
    assert not result.passed and len(result.failed_messages) == 1, result
    assert "SystemExit" in result.failed_messages[0]


def test_the_stop_button_still_stops_the_checker():
    def pressed_stop(x, weight, bias, eps=1e-5):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
        return good_ln(x, weight, bias, eps)

    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        ex.check_layer_norm(pressed_stop)
    assert signal.getsignal(signal.SIGINT) == handler


def test_time_limit_still_applies():
    def spins(x, weight, bias, eps=1e-5):
        while True:
            pass

    result = ex.check_layer_norm(spins, time_limit=0.2)
    assert result.mistake == "time_limit", result
