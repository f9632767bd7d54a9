import os
import signal

import pytest

from experiments.runs.signals import restore, unwind_on_signals


class Unwound(Exception):
    pass


def _raise(signum):
    raise Unwound(signum)


def test_sigterm_unwinds_the_owner_and_ends_a_forked_copy_at_once():
    previous = unwind_on_signals(_raise, (signal.SIGTERM,))
    try:
        pid = os.fork()
        if pid == 0:                                  # a forked helper inherits the handler
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except BaseException:
                os._exit(1)                           # unwound into the parent's code: the bug
            os._exit(2)                               # not reached: the handler exits first
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 128 + signal.SIGTERM
        with pytest.raises(Unwound):
            os.kill(os.getpid(), signal.SIGTERM)
    finally:
        restore(previous)


def test_sigint_unwinds_like_sigterm_and_a_second_signal_does_not_cut_the_teardown_short():
    before = signal.getsignal(signal.SIGINT)
    previous = unwind_on_signals(_raise)
    torn_down = []
    try:
        with pytest.raises(Unwound):
            try:
                os.kill(os.getpid(), signal.SIGINT)
            finally:
                os.kill(os.getpid(), signal.SIGTERM)     # during the teardown: noted, not raised
                torn_down.append(True)
        assert torn_down == [True]
    finally:
        restore(previous)
    assert signal.getsignal(signal.SIGINT) is before
