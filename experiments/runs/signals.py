"""SIGTERM (kill, a job scheduler, timeout) and SIGINT (Ctrl-C) unwinding a long run, so
that its finally blocks stop agents, datapath, broker and testbeds: a leftover namespace
breaks the next run.

The first signal unwinds; a second one while the run is tearing down is noted and
ignored, or it would cut the teardown short and leave namespaces behind (SIGKILL still
ends the process; ``intcc testbed down`` then removes what it left).

Only in the process that installed the handler. Processes it forks inherit the handler
(pyroute2's netns helpers, which pyroute2 itself ends with SIGTERM): an exception raised
there unwinds the parent's code in a copy of it, which broke the testbed's namespaces
(lost interfaces, a hung bring-up). A forked copy exits at once instead.
"""
from __future__ import annotations

import os
import signal
import sys

UNWOUND_BY = (signal.SIGTERM, signal.SIGINT)


def unwind_on_signals(raise_in_owner, signals=UNWOUND_BY) -> dict:
    """Install the handler for ``signals``; ``raise_in_owner(signum)`` raises in the
    installing process at the first one. Returns {signal: previous handler}, for
    ``restore``."""
    owner_pid = os.getpid()
    unwinding = []

    def on_signal(signum, _frame):
        if os.getpid() != owner_pid:
            os._exit(128 + signum)
        if unwinding:
            print(f"{signal.Signals(signum).name}: still tearing down, please wait (SIGKILL would leave the "
                  f"testbed behind: 'intcc testbed down' removes it)", file=sys.stderr, flush=True)
            return
        unwinding.append(signum)
        raise_in_owner(signum)
    return {s: signal.signal(s, on_signal) for s in signals}


def restore(previous: dict) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)

