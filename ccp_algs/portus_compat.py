"""Run intcc algorithms on pyportus 0.6.1 under Python 3.11.

pyportus's own ``start()`` checks an algorithm with ``inspect.getargspec`` (removed
in Python 3.11) and by parsing its source for literal program strings. We wrap
rather than fork: the same checks with ``inspect.signature`` and by compiling
each datapath program with pyportus's own compiler, then ``start_inner``.
"""
from __future__ import annotations

import inspect

IPC_CHOICES = ("unix", "netlink")


class AlgorithmError(ValueError):
    """An algorithm that portus would reject, named and explained."""


def _pyportus():
    try:
        import pyportus
    except ImportError as e:   # the Rust extension is built by 'make setup'
        raise AlgorithmError("pyportus is not installed: run 'make setup' "
                             "(pip install pyportus==0.6.1 with RUSTFLAGS='--cap-lints warn')") from e
    return pyportus


REQUIRED = {"datapath_programs": ["self"], "new_flow": ["self", "datapath", "datapath_info"]}


def check(alg) -> dict[str, str]:
    """Validate an algorithm object as portus would; returns its datapath programs."""
    cls = type(alg)
    for name, params in REQUIRED.items():
        method = getattr(cls, name, None)
        if method is None:
            raise AlgorithmError(f"{cls.__name__} does not implement {name}{tuple(params)}")
        got = list(inspect.signature(method).parameters)
        if got != params:
            raise AlgorithmError(f"{cls.__name__}.{name} takes ({', '.join(got)}), "
                                 f"portus calls it with ({', '.join(params)})")
    programs = alg.datapath_programs()
    if not isinstance(programs, dict) or not programs:
        raise AlgorithmError(f"{cls.__name__}.datapath_programs() must return a non-empty dict name -> program")
    compile_ = _pyportus().pyportus.try_compile
    for name, prog in programs.items():
        if not isinstance(name, str) or not isinstance(prog, str):
            raise AlgorithmError(f"{cls.__name__}.datapath_programs(): {name!r} must map a str to a str")
        err = compile_(prog)
        if err:
            raise AlgorithmError(f"{cls.__name__} datapath program {name!r} does not compile: {err[:300]}")
    return programs


def start(alg, ipc: str = "unix") -> int:
    """Check ``alg`` and hand it to portus; blocks for the agent's lifetime.

    ipc 'unix': the intcc BPF datapath (or any libccp datapath on /tmp/ccp);
    'netlink': ccp-kernel. SIGINT/SIGTERM end the process (portus's handler).
    """
    if ipc not in IPC_CHOICES:
        raise AlgorithmError(f"ipc must be one of {', '.join(IPC_CHOICES)}, not {ipc!r}")
    check(alg)
    return _pyportus().start_inner(ipc, alg)
