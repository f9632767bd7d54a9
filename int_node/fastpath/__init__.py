"""The node's fast path: the eligible part of a Click-style configuration compiled to tc BPF
programs over the kernel's qdiscs (``intcc node run CONFIG --fast-path``).

plan.py decides what compiles and says why not; layout.py generates the wire format's C
header from int_node/ioam.py; build.py builds the object; loader.py puts it on the
interfaces and takes it off; mirror.py feeds the sink's exporters; bpf/ holds the programs.
"""
from __future__ import annotations

import logging

log = logging.getLogger("intcc.node.fastpath")


def start_fast_path(router):
    """Put the router's configuration on the fast path where it compiles; None (and one line
    saying why) where it does not: the node then forwards in Python as without the option."""
    from .build import BuildError
    from .loader import FastPath, FastPathError
    from .plan import plan_for
    plan = plan_for(router)
    if not plan.compiled:
        log.warning("fast path: not used, the node forwards in Python: %s", "; ".join(plan.reasons))
        return None
    try:
        fast = FastPath(router, plan).attach()
    except (FastPathError, BuildError, OSError) as exc:
        log.warning("fast path: not used, the node forwards in Python: %s", exc)
        return None
    router.counter_sources.append(fast.counters)
    router.write_listeners.append(fast.on_write)
    return fast
