import os
import signal

import pytest

from experiments.signals import unwind_on_sigterm


class Unwound(Exception):
    pass


def _raise(signum):
    raise Unwound(signum)


def test_sigterm_unwinds_the_owner_and_ends_a_forked_copy_at_once():
    previous = unwind_on_sigterm(_raise)
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
        signal.signal(signal.SIGTERM, previous)
