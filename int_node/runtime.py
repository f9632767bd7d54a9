"""Which Python runs a node, how its core idles, and where intcc keeps run-time state.

A node is pure Python per packet, so the interpreter decides its speed. Once its
JIT is warm, PyPy forwards ~3x the packets of CPython on the same core (``make
bench``); until then (the first thousand or so packets through each path) it
interprets slower than CPython and pauses for milliseconds to compile, which
would distort an emulated link's delay in the first seconds of an experiment. So
CPython is the default, predictable from the first packet, and PyPy the choice
for forwarding rate. ``make setup`` makes a PyPy virtualenv at ``PYPY_VENV`` with
the node's two dependencies (click, paho-mqtt); the node code itself comes from
this checkout through PYTHONPATH.

Choices (topology ``python = ...`` per node, ``intcc testbed up --node-python``,
or the INTCC_NODE_PYTHON environment variable): ``cpython`` (default, this
interpreter), ``pypy``, or a path to an interpreter.
"""
from __future__ import annotations

import os
import sys

#: Where every intcc process keeps its run-time state (testbeds, the datapath's stats and
#: flows, brokers' private files): one place, $INTCC_RUN_DIR overrides it for all of them.
RUN_ROOT = os.environ.get("INTCC_RUN_DIR", "/run/intcc")


def run_path(*parts: str) -> str:
    """A path under RUN_ROOT, e.g. run_path("datapath")."""
    return os.path.join(RUN_ROOT, *parts)


PYPY_VENV = "/opt/intcc-pypy"
PYPY_PYTHON = os.path.join(PYPY_VENV, "bin", "python")
CHOICES = ("cpython", "pypy")
ENV_VAR = "INTCC_NODE_PYTHON"
#: why a node is not both real-time (rt_priority) and busy-polling (busy_poll_us)
RT_WITH_BUSY_POLL = "a real-time loop that polls keeps its CPU from everything else"
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class InterpreterError(ValueError):
    pass


def node_python(choice: str | None = None) -> str:
    """The interpreter path for ``choice`` (None: $INTCC_NODE_PYTHON, else cpython)."""
    choice = (choice or os.environ.get(ENV_VAR) or "cpython").strip()
    if choice == "cpython":
        return sys.executable
    path = PYPY_PYTHON if choice == "pypy" else choice
    if not os.access(path, os.X_OK):
        hint = " (run 'make setup' to install it)" if choice == "pypy" else ""
        raise InterpreterError(f"node interpreter '{choice}': {path} is not an executable{hint}; "
                               f"choose one of {', '.join(CHOICES)} or a path")
    return path


def node_env(interpreter: str) -> dict:
    """Environment for a node under ``interpreter``: another interpreter finds
    int_node in this checkout."""
    env = dict(os.environ)
    if os.path.realpath(interpreter) != os.path.realpath(sys.executable):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PROJECT_ROOT, env.get("PYTHONPATH")) if p)
    return env


# -- a core that never halts ------------------------------------------------------
# On a VM an idle vCPU halts and the host takes 50-300 us to run it again when a
# packet arrives: at low load that wake-up is most of a node's added latency. A
# per-CPU PM QoS resume latency of "n/a" keeps that CPU in the polling idle state
# (it spins when idle) - the usual setting for a router's forwarding core.

def _qos_path(cpu: int) -> str:
    return f"/sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"


def hold_poll_idle(cpu: int) -> str:
    """Keep ``cpu`` polling when idle; returns the previous setting (for release)."""
    path = _qos_path(cpu)
    try:
        with open(path) as f:
            previous = f.read().strip()
        with open(path, "w") as f:
            f.write("n/a")
    except OSError as exc:
        raise OSError(exc.errno, f"poll_idle: cannot set {path}: {exc.strerror}") from None
    return previous


def release_poll_idle(cpu: int, previous: str = "0") -> None:
    try:
        with open(_qos_path(cpu), "w") as f:
            f.write(previous or "0")
    except OSError:
        pass
