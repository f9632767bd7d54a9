"""Entering a network namespace for one operation (sockets keep their namespace)."""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import socket
import struct

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
NETNS_RUN_DIR = "/run/netns"
_SIOCGIFMTU = 0x8921


class NetnsError(OSError):
    pass


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NetnsError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def netns(name):
    """Run the body inside network namespace ``name`` (an ``ip netns`` name);
    ``None`` or "" means the current namespace. Only the calling thread moves."""
    if not name:
        yield
        return
    path = os.path.join(NETNS_RUN_DIR, name)
    try:
        target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NetnsError(2, f"network namespace '{name}' does not exist ({path})") from None
    current = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(current)
    finally:
        os.close(target)
        os.close(current)


def interface_mtu(sock: socket.socket, ifname: str) -> int:
    """MTU of ``ifname`` in the namespace ``sock`` was created in."""
    req = struct.pack("16si", ifname.encode()[:15], 0)
    return struct.unpack("16si", fcntl.ioctl(sock.fileno(), _SIOCGIFMTU, req))[1]
