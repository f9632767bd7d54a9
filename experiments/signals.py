"""SIGTERM (kill, a job scheduler, timeout) unwinding a long run like Ctrl-C, so that
its finally blocks stop agents, datapath, broker and testbeds: a leftover namespace
breaks the next run.

Only in the process that installed the handler. Processes it forks inherit the handler
(pyroute2's netns helpers, which pyroute2 itself ends with SIGTERM): an exception raised
there unwinds the parent's code in a copy of it, which broke the testbed's namespaces
(lost interfaces, a hung bring-up). A forked copy exits at once instead.
"""
from __future__ import annotations

import os
import signal


def unwind_on_sigterm(raise_in_owner):
    """Install the handler; ``raise_in_owner(signum)`` raises in the installing process.
    Returns the previous handler (for signal.signal to restore)."""
    owner_pid = os.getpid()

    def on_sigterm(signum, _frame):
        if os.getpid() != owner_pid:
            os._exit(128 + signum)
        raise_in_owner(signum)
    return signal.signal(signal.SIGTERM, on_sigterm)
