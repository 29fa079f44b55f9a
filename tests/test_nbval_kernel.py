"""tools/nbval_kernel.py: a notebook kernel that dies at start is started once more, and why is said."""

import pytest

from tools.nbval_kernel import retrying


def _start_failing(times: int):
    """A stand-in for nbval's start_new_kernel that fails ``times`` times as a port clash does."""
    calls = []

    def start(startup_timeout=60, kernel_name="python", **kwargs):
        calls.append(kwargs)
        if len(calls) <= times:
            kwargs["stderr"].write(f"zmq.error.ZMQError: Address already in use (try {len(calls)})\n")
            kwargs["stderr"].flush()
            raise RuntimeError("Kernel died before replying to kernel_info")
        return "km", "kc"
    return start, calls


def test_a_kernel_that_dies_once_is_started_again_with_a_warning_quoting_its_stderr():
    start, calls = _start_failing(1)
    with pytest.warns(UserWarning, match=r"(?s)kernel start 1 of 2 failed.*Address already in use"):
        assert retrying(start)(startup_timeout=5, kernel_name="k", cwd="/x") == ("km", "kc")
    assert len(calls) == 2 and all(c["cwd"] == "/x" for c in calls)
    assert calls[0]["stderr"] is not calls[1]["stderr"]      # a fresh file for each try


def test_a_kernel_that_dies_every_time_fails_with_its_stderr():
    start, calls = _start_failing(5)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match=r"(?s)tried 2 times.*try 2"):
        retrying(start)()
    assert len(calls) == 2


def test_a_kernel_that_starts_is_started_once():
    start, calls = _start_failing(0)
    assert retrying(start)() == ("km", "kc") and len(calls) == 1


@pytest.mark.parametrize("attempts", [0, -1, 1.5, True])
def test_attempts_must_be_a_positive_int(attempts):
    with pytest.raises(ValueError, match="attempts must be a positive int"):
        retrying(lambda: None, attempts=attempts)
