"""The few bpf(2) commands the node needs on pinned objects, through ctypes.

The programs are loaded and pinned by bpftool; the node then opens the pinned maps, fills
them and reads its counters many times a second, where a bpftool process per read would
cost milliseconds. No new dependency: the syscall's attribute layouts are a handful of
fixed C structs (include/uapi/linux/bpf.h).
"""
from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_BPF = 321      # x86_64
BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM, BPF_MAP_DELETE_ELEM, BPF_MAP_GET_NEXT_KEY = 1, 2, 3, 4
BPF_OBJ_GET = 7
BPF_RAW_TRACEPOINT_OPEN = 17
BPF_ANY = 0


class _MapElem(ctypes.Structure):
    _fields_ = [("map_fd", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("key", ctypes.c_uint64),
                ("value", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


class _ObjGet(ctypes.Structure):
    _fields_ = [("pathname", ctypes.c_uint64), ("bpf_fd", ctypes.c_uint32), ("file_flags", ctypes.c_uint32)]


class _RawTp(ctypes.Structure):
    _fields_ = [("name", ctypes.c_uint64), ("prog_fd", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


def _bpf(cmd: int, attr) -> int:
    # the kernel reads at most sizeof(union bpf_attr); a smaller, zero-padded struct is fine
    buf = (ctypes.c_char * 128).from_buffer_copy(bytes(attr).ljust(128, b"\0"))
    rc = _libc.syscall(_SYS_BPF, cmd, ctypes.byref(buf), ctypes.c_uint(128))
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return rc


def obj_get(path: str) -> int:
    """An fd for a pinned map or program."""
    p = ctypes.create_string_buffer(path.encode())
    try:
        return _bpf(BPF_OBJ_GET, _ObjGet(pathname=ctypes.addressof(p)))
    except OSError as exc:
        raise OSError(exc.errno, f"{exc.strerror}: {path}") from None


def raw_tracepoint_open(prog_fd: int) -> int:
    """Attach a tp_btf program (its attach point is in the program); the fd holds the link."""
    return _bpf(BPF_RAW_TRACEPOINT_OPEN, _RawTp(name=0, prog_fd=prog_fd))


def update(fd: int, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
    k, v = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value, len(value))
    _bpf(BPF_MAP_UPDATE_ELEM, _MapElem(map_fd=fd, key=ctypes.addressof(k), value=ctypes.addressof(v), flags=flags))


def lookup(fd: int, key: bytes, value_size: int):
    """The value's bytes, None if the key is absent."""
    k, v = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value_size)
    try:
        _bpf(BPF_MAP_LOOKUP_ELEM, _MapElem(map_fd=fd, key=ctypes.addressof(k), value=ctypes.addressof(v)))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == 2:
            return None
        raise
    return v.raw


def delete(fd: int, key: bytes) -> bool:
    """False if the key was not there."""
    k = ctypes.create_string_buffer(key, len(key))
    try:
        _bpf(BPF_MAP_DELETE_ELEM, _MapElem(map_fd=fd, key=ctypes.addressof(k)))
    except OSError as exc:
        if exc.errno == 2:
            return False
        raise
    return True


def keys(fd: int, key_size: int):
    """Every key of a hash map (a snapshot walk: keys deleted meanwhile may be skipped)."""
    nxt = ctypes.create_string_buffer(key_size)
    cur = None
    while True:
        attr = _MapElem(map_fd=fd, key=ctypes.addressof(cur) if cur is not None else 0,
                        value=ctypes.addressof(nxt))
        try:
            _bpf(BPF_MAP_GET_NEXT_KEY, attr)
        except OSError as exc:
            if exc.errno == 2:
                return
            raise
        out = nxt.raw
        yield out
        cur = ctypes.create_string_buffer(out, key_size)


def possible_cpus() -> int:
    """Per-CPU maps hold one value per possible CPU (not online)."""
    with open("/sys/devices/system/cpu/possible") as f:
        text = f.read().strip()
    n = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n
