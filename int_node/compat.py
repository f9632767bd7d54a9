"""The few OS calls CPython's os/socket modules have and PyPy's lack (a node may
run under PyPy for speed: ``node_python`` in the testbed), through libc."""
from __future__ import annotations

import ctypes
import os
import socket

_libc = ctypes.CDLL(None, use_errno=True)


def _raise(what: str):
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def sched_setaffinity(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
        return
    mask = ctypes.c_ulong(1 << cpu)
    if _libc.sched_setaffinity(0, ctypes.sizeof(mask), ctypes.byref(mask)) != 0:
        _raise(f"cannot pin to CPU {cpu}")


class _SchedParam(ctypes.Structure):
    _fields_ = [("sched_priority", ctypes.c_int)]


def sched_fifo(priority: int) -> None:
    """This process under SCHED_FIFO at ``priority`` (1-99): root or CAP_SYS_NICE."""
    if hasattr(os, "sched_setscheduler"):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return
    if _libc.sched_setscheduler(0, 1, ctypes.byref(_SchedParam(priority))) != 0:   # 1: SCHED_FIFO
        _raise(f"cannot run under SCHED_FIFO at priority {priority}")


def if_nametoindex(name: str) -> int:
    if hasattr(socket, "if_nametoindex"):
        return socket.if_nametoindex(name)
    index = _libc.if_nametoindex(name.encode())
    if index == 0:
        _raise(f"no interface '{name}'")
    return index
