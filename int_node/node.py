"""Running a node: router + control socket + event loop, clean shutdown."""
from __future__ import annotations

import gc
import json
import logging
import os

from .control import ControlServer
from .eventloop import EventLoop
from .router import Router

log = logging.getLogger("intcc.node")


def run_node(config_text: str, netns=None, control_path=None, counters_path=None,
             cpu=None) -> int:
    """Run until SIGTERM/SIGINT or a 'stop' request; returns an exit code."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    router = Router(config_text, netns=netns, loop=EventLoop())
    control = None
    try:
        router.initialize()
        if control_path:
            control = ControlServer(router, control_path)
        gc.freeze()   # configuration objects are permanent: keep them out of GC scans
        log.info("node running: %d elements%s", len(router.elements),
                 f" in namespace {netns}" if netns else "")
        router.run()
        log.info("node stopping (signal %s)", router.loop.stop_signal)
    finally:
        if control is not None:
            control.close()
        if counters_path:
            with open(counters_path, "w") as f:
                json.dump(router.counters(), f, indent=1)
        router.cleanup()
        router.loop.close()
    return 0
