"""Run intcc algorithms on pyportus 0.6.1 under Python 3.11.

pyportus's own ``start()`` checks an algorithm with ``inspect.getargspec`` (removed
in Python 3.11) and by parsing its source for literal program strings. We wrap
rather than fork: the same checks with ``inspect.signature`` and by compiling
each datapath program with pyportus's own compiler, then ``start_inner``.
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

IPC_CHOICES = ("unix", "netlink")
#: Where portus binds its unix IPC socket (the datapath sends there).
PORTUS_SOCKET = "/tmp/ccp/portus"


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
    if ipc == "unix":
        remove_socket_when_gone(PORTUS_SOCKET)
    return _pyportus().start_inner(ipc, alg)


_JANITOR = """
import os, signal, socket, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
fd, path = int(sys.argv[1]), sys.argv[2]
while os.read(fd, 1):
    pass
# The pipe may close before the dying agent's socket does: give it a moment.
for _ in range(100):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)
        break
    except OSError:
        break
    finally:
        s.close()
    time.sleep(0.01)
"""


def remove_socket_when_gone(path: str) -> None:
    """portus ends the process from its own signal handler (no Python cleanup runs) and
    leaves its socket file behind. A small process of its own (not named like the agent,
    so that 'pkill -f "alg run"' spares it) waits for this one to end, by any signal,
    SIGKILL included (its pipe closes), and removes the file unless another agent has
    bound it since."""
    r, w = os.pipe()
    # its own session: a Ctrl-C to the agent's process group is not for it
    subprocess.Popen([sys.executable, "-c", _JANITOR, str(r), path], pass_fds=(r,), start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(r)                 # the write end stays open, unread, for this process's life
