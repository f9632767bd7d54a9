"""A CLOCK_MONOTONIC timerfd armed at absolute nanosecond deadlines.

Python before 3.13 has no timerfd, so this calls libc: under PyPy through cffi
(its JIT makes the call ~1 us; PyPy's ctypes takes ~40 us per call, which at one
or two arms per packet made a PyPy node slower than CPython on shaped links),
under CPython through ctypes (~3 us there, a little faster than cffi).
"""
from __future__ import annotations

import os
import platform

CLOCK_MONOTONIC = 1
TFD_TIMER_ABSTIME = 1
PR_SET_TIMERSLACK = 29

try:
    from cffi import FFI
except ImportError:       # PyPy always has cffi; CPython uses ctypes anyway
    FFI = None


class _CffiCalls:
    def __init__(self):
        ffi = FFI()
        ffi.cdef("""
            struct timespec { long tv_sec; long tv_nsec; };
            struct itimerspec { struct timespec it_interval; struct timespec it_value; };
            int timerfd_create(int clockid, int flags);
            int timerfd_settime(int fd, int flags, const struct itimerspec *new_value,
                                struct itimerspec *old_value);
            int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5);
        """)
        self.ffi, self.lib = ffi, ffi.dlopen(None)
        self._spec = ffi.new("struct itimerspec *")

    def create(self, flags: int) -> int:
        return self.lib.timerfd_create(CLOCK_MONOTONIC, flags)

    def settime_abs(self, fd: int, sec: int, nsec: int) -> int:
        v = self._spec.it_value
        v.tv_sec, v.tv_nsec = sec, nsec
        return self.lib.timerfd_settime(fd, TFD_TIMER_ABSTIME, self._spec, self.ffi.NULL)

    def prctl(self, option: int, value: int) -> int:
        return self.lib.prctl(option, value, 0, 0, 0)

    def errno(self) -> int:
        return self.ffi.errno


class _CtypesCalls:
    def __init__(self):
        import ctypes

        class Timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

        class Itimerspec(ctypes.Structure):
            _fields_ = [("it_interval", Timespec), ("it_value", Timespec)]

        self.ctypes = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self._spec = Itimerspec()
        self._ref = ctypes.byref(self._spec)

    def create(self, flags: int) -> int:
        return self.libc.timerfd_create(CLOCK_MONOTONIC, flags)

    def settime_abs(self, fd: int, sec: int, nsec: int) -> int:
        v = self._spec.it_value
        v.tv_sec, v.tv_nsec = sec, nsec
        return self.libc.timerfd_settime(fd, TFD_TIMER_ABSTIME, self._ref, None)

    def prctl(self, option: int, value: int) -> int:
        return self.libc.prctl(option, value, 0, 0, 0)

    def errno(self) -> int:
        return self.ctypes.get_errno()


ON_PYPY = platform.python_implementation() == "PyPy"


class TimerFd:
    """``arm(deadline_ns)`` (monotonic, absolute; 0 disarms), ``fileno()``, ``clear()``."""

    def __init__(self, prefer_cffi: bool = ON_PYPY):
        self._c = _CffiCalls() if prefer_cffi and FFI is not None else _CtypesCalls()
        self.fd = self._c.create(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            err = self._c.errno()
            raise OSError(err, f"timerfd_create: {os.strerror(err)}")

    def fileno(self) -> int:
        return self.fd

    def arm(self, deadline_ns: int) -> None:
        sec, nsec = divmod(deadline_ns, 1_000_000_000) if deadline_ns > 0 else (0, 0)
        if self._c.settime_abs(self.fd, sec, nsec) < 0:
            err = self._c.errno()
            raise OSError(err, f"timerfd_settime: {os.strerror(err)}")

    def clear(self) -> None:
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass

    def reduce_timer_slack(self) -> None:
        """Timer slack 1 ns for this thread: the kernel would otherwise batch wake-ups by 50 us."""
        self._c.prctl(PR_SET_TIMERSLACK, 1)

    def close(self) -> None:
        os.close(self.fd)
