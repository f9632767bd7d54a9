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


def if_nametoindex(name: str) -> int:
    if hasattr(socket, "if_nametoindex"):
        return socket.if_nametoindex(name)
    index = _libc.if_nametoindex(name.encode())
    if index == 0:
        _raise(f"no interface '{name}'")
    return index
