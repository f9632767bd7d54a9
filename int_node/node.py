"""Running a node: router + control socket + event loop, clean shutdown."""
from __future__ import annotations

import gc
import json
import logging

from .compat import sched_fifo, sched_setaffinity
from .control import ControlServer
from .eventloop import EventLoop
from .router import Router
from .runtime import RT_WITH_BUSY_POLL, hold_poll_idle, release_poll_idle

log = logging.getLogger("intcc.node")


def run_node(config_text: str, netns=None, control_path=None, counters_path=None,
             cpu=None, poll_idle: bool = False, busy_poll_us: int = 0, rt_priority: int = 0,
             fast_path: bool = False) -> int:
    """Run until SIGTERM/SIGINT or a 'stop' request; returns an exit code.
    ``poll_idle`` keeps the node's CPU (``cpu`` required) from halting when idle;
    ``busy_poll_us`` keeps the event loop polling that long after each event;
    ``rt_priority`` (1-99) runs the node under SCHED_FIFO: an emulated link's timers then
    wait for no host process (0: the normal scheduler); ``fast_path`` compiles what it can of
    the configuration to tc BPF programs (int_node/fastpath), else runs as without it."""
    if poll_idle and cpu is None:
        raise ValueError("poll_idle needs the node pinned to a CPU (cpu)")
    if rt_priority and busy_poll_us:
        raise ValueError(f"rt_priority with busy_poll_us: {RT_WITH_BUSY_POLL}")
    if cpu is not None:
        sched_setaffinity(cpu)
    router = Router(config_text, netns=netns, loop=EventLoop(busy_poll_us))
    router.loop.hold_signals()      # a SIGTERM while starting still cleans up (the fast path's BPF)
    control = qos_before = fast = None
    try:
        if poll_idle:
            qos_before = hold_poll_idle(cpu)
        if rt_priority:     # before the control socket: a node that answers runs as asked
            sched_fifo(rt_priority)
        router.initialize()
        if fast_path:
            from .fastpath import start_fast_path
            fast = start_fast_path(router)
        if control_path:
            control = ControlServer(router, control_path)
        if hasattr(gc, "freeze"):   # CPython (PyPy has no such call)
            gc.freeze()   # configuration objects are permanent: keep them out of GC scans
        log.info("node running: %d elements%s", len(router.elements),
                 f" in namespace {netns}" if netns else "")
        router.run()
        log.info("node stopping (signal %s)", router.loop.stop_signal)
    finally:
        if control is not None:
            control.close()
        if counters_path:
            try:
                with open(counters_path, "w") as f:
                    json.dump(router.counters(), f, indent=1)
            except Exception:   # an element that never initialized: keep the error that stopped us
                log.exception("could not write the final counters to %s", counters_path)
        if fast is not None:
            fast.detach()
        router.cleanup()
        router.loop.close()
        if qos_before is not None:
            release_poll_idle(cpu, qos_before)
    return 0
