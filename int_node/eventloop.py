"""Single-threaded event loop: epoll for sockets, a timerfd for timers.

epoll's own timeout has millisecond granularity, far too coarse for a 10 ms
emulated delay that must be accurate to well under a millisecond, so timers are
kept in a heap and the earliest deadline arms a timerfd (CLOCK_MONOTONIC,
absolute, nanoseconds). Timer slack is reduced to 1 ns for the same reason.
Signals reach the loop through ``signal.set_wakeup_fd`` so SIGTERM ends a
blocking wait at once.
"""
from __future__ import annotations

import ctypes
import errno
import heapq
import itertools
import os
import select
import signal
import time
from typing import Callable, Dict, Optional

_libc = ctypes.CDLL(None, use_errno=True)
_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = os.O_CLOEXEC
_TFD_TIMER_ABSTIME = 1
_PR_SET_TIMERSLACK = 29


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _timerfd_create() -> int:
    fd = _libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"timerfd_create: {os.strerror(err)}")
    return fd


class Timer:
    """A one-shot timer; ``schedule_at`` (monotonic ns) arms it, ``cancel`` disarms."""
    __slots__ = ("loop", "callback", "deadline_ns", "_entry")

    def __init__(self, loop: "EventLoop", callback: Callable[[], None]):
        self.loop = loop
        self.callback = callback
        self.deadline_ns: Optional[int] = None
        self._entry = None

    def schedule_at(self, deadline_ns: int) -> None:
        self.cancel()
        self.deadline_ns = deadline_ns
        self._entry = [deadline_ns, next(self.loop._seq), self]
        heapq.heappush(self.loop._heap, self._entry)
        early = deadline_ns - self.loop._lead_ns
        if early < self.loop._armed_ns:
            self.loop._arm(early)

    def schedule_after(self, delay_ns: int) -> None:
        self.schedule_at(time.monotonic_ns() + delay_ns)

    def cancel(self) -> None:
        if self._entry is not None:
            self._entry[2] = None  # lazy deletion from the heap
            self._entry = None
        self.deadline_ns = None

    @property
    def scheduled(self) -> bool:
        return self._entry is not None


class EventLoop:
    """Timers fire up to ``lead`` early, where lead is the learnt wake-up
    lateness (EWMA, capped at MAX_LEAD_NS): on a VM an idle CPU takes 50-300 us
    to wake, which would otherwise add to every emulated delay."""
    _NEVER = 1 << 62
    MAX_LEAD_NS = 500_000

    def __init__(self):
        self._ep = select.epoll()
        self._readers: Dict[int, Callable[[], None]] = {}
        self._heap: list = []
        self._seq = itertools.count()
        self._tfd = _timerfd_create()
        self._armed_ns = self._NEVER
        self._lead_ns = 0
        self._ep.register(self._tfd, select.EPOLLIN)
        self._running = False
        self._sig_r, self._sig_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._ep.register(self._sig_r, select.EPOLLIN)
        self.stop_signal: Optional[int] = None
        _libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)

    # -- sockets ---------------------------------------------------------
    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        self._readers[fd] = callback
        self._ep.register(fd, select.EPOLLIN)

    def remove_reader(self, fd: int) -> None:
        if self._readers.pop(fd, None) is not None:
            try:
                self._ep.unregister(fd)
            except (OSError, ValueError):
                pass

    # -- timers ----------------------------------------------------------
    def timer(self, callback: Callable[[], None]) -> Timer:
        return Timer(self, callback)

    def call_later(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        t = Timer(self, callback)
        t.schedule_after(delay_ns)
        return t

    def _arm(self, deadline_ns: int) -> None:
        self._armed_ns = deadline_ns
        spec = _Itimerspec()
        if deadline_ns < self._NEVER:
            spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(max(deadline_ns, 1), 1_000_000_000)
        if _libc.timerfd_settime(self._tfd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"timerfd_settime: {os.strerror(err)}")

    def _run_timers(self) -> None:
        heap = self._heap
        now = time.monotonic_ns()
        if self._armed_ns < self._NEVER and now >= self._armed_ns:
            # Learn how late wake-ups are; the timerfd is armed that much early.
            late = now - self._armed_ns
            self._lead_ns += (min(late, self.MAX_LEAD_NS) - self._lead_ns) >> 3
            self._armed_ns = self._NEVER
        lead = self._lead_ns
        while heap and heap[0][0] <= now + lead:
            _, _, timer = heapq.heappop(heap)
            if timer is None:
                continue
            timer._entry = None
            timer.deadline_ns = None
            timer.callback()
            if heap and heap[0][0] > now + lead:
                now = time.monotonic_ns()
        while heap and heap[0][2] is None:
            heapq.heappop(heap)
        nxt = heap[0][0] - lead if heap else self._NEVER
        if nxt != self._armed_ns:
            self._arm(nxt)

    # -- running ---------------------------------------------------------
    def stop(self) -> None:
        self._running = False

    def _on_signal(self, signum, _frame) -> None:
        self.stop_signal = signum
        self._running = False

    def run(self, handle_signals=(signal.SIGTERM, signal.SIGINT)) -> None:
        old_fd = signal.set_wakeup_fd(self._sig_w, warn_on_full_buffer=False)
        old = {s: signal.signal(s, self._on_signal) for s in handle_signals}
        self._running = True
        tfd, sig_r, readers = self._tfd, self._sig_r, self._readers
        try:
            while self._running:
                try:
                    events = self._ep.poll(-1)
                except InterruptedError:
                    continue
                for fd, _ in events:
                    if fd == tfd:
                        try:
                            os.read(tfd, 8)
                        except BlockingIOError:
                            pass
                    elif fd == sig_r:
                        try:
                            os.read(sig_r, 64)
                        except BlockingIOError:
                            pass
                    else:
                        cb = readers.get(fd)
                        if cb is not None:
                            cb()
                if self._heap and (self._heap[0][0] - self._lead_ns <= time.monotonic_ns()
                                   or self._heap[0][0] - self._lead_ns != self._armed_ns):
                    self._run_timers()
        finally:
            signal.set_wakeup_fd(old_fd)
            for s, h in old.items():
                signal.signal(s, h)

    def close(self) -> None:
        for fd in (self._tfd, self._sig_r, self._sig_w):
            try:
                os.close(fd)
            except OSError as exc:
                if exc.errno != errno.EBADF:
                    raise
        self._ep.close()
