"""Single-threaded event loop: epoll for sockets, a timerfd for timers.

epoll's own timeout has millisecond granularity, far too coarse for a 10 ms
emulated delay that must be accurate to well under a millisecond, so timers are
kept in a heap and the earliest deadline arms a timerfd (CLOCK_MONOTONIC,
absolute, nanoseconds). Timer slack is reduced to 1 ns for the same reason.
Signals reach the loop through ``signal.set_wakeup_fd`` so SIGTERM ends a
blocking wait at once. ``defer`` runs a callback once after the current round of
socket and timer callbacks, before the loop waits again: a ToDevice hands the kernel
every frame of a receive burst with one system call. ``busy_poll_us`` keeps the loop
polling (epoll with a zero timeout) for that long after each event before it sleeps: a
sleeping vCPU takes tens of microseconds to wake when a packet comes, and a polling loop
keeps the interpreter's code in the caches (the kernel's busy polling, DPDK's poll mode).
"""
from __future__ import annotations

import errno
import heapq
import itertools
import os
import select
import signal
import time
from typing import Callable, Dict, Optional

from .timerfd import TimerFd


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

    def __init__(self, busy_poll_us: int = 0):
        if busy_poll_us < 0:
            raise ValueError(f"busy_poll_us must be >= 0, not {busy_poll_us}")
        self.busy_poll_ns = busy_poll_us * 1000
        self._ep = select.epoll()
        self._readers: Dict[int, Callable[[], None]] = {}
        self._heap: list = []
        self._seq = itertools.count()
        self._timerfd = TimerFd()
        self._tfd = self._timerfd.fileno()
        self._armed_ns = self._NEVER
        self._lead_ns = 0
        self._ep.register(self._tfd, select.EPOLLIN)
        self._running = False
        self._deferred: list = []
        self._sig_r, self._sig_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._ep.register(self._sig_r, select.EPOLLIN)
        self.stop_signal: Optional[int] = None
        self._timerfd.reduce_timer_slack()

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

    def defer(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once, after this round's socket and timer callbacks."""
        self._deferred.append(callback)

    def run_deferred(self) -> None:
        # a deferred callback may defer another (it then runs in this round too)
        deferred = self._deferred
        while deferred:
            self._deferred = []
            for cb in deferred:
                cb()
            deferred = self._deferred

    # -- timers ----------------------------------------------------------
    def timer(self, callback: Callable[[], None]) -> Timer:
        return Timer(self, callback)

    def call_later(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        t = Timer(self, callback)
        t.schedule_after(delay_ns)
        return t

    def _arm(self, deadline_ns: int) -> None:
        self._armed_ns = deadline_ns
        self._timerfd.arm(max(deadline_ns, 1) if deadline_ns < self._NEVER else 0)

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

    def hold_signals(self, signals=(signal.SIGTERM, signal.SIGINT)) -> None:
        """Catch these signals from now on, before run(): a node stopped while it starts up
        (its fast path half in place) still gets to clean up, and run() returns at once."""
        for s in signals:
            signal.signal(s, self._on_signal)

    def _on_signal(self, signum, _frame) -> None:
        self.stop_signal = signum
        self._running = False

    def run(self, handle_signals=(signal.SIGTERM, signal.SIGINT)) -> None:
        old_fd = signal.set_wakeup_fd(self._sig_w, warn_on_full_buffer=False)
        old = {s: signal.signal(s, self._on_signal) for s in handle_signals}
        self._running = self.stop_signal is None      # a signal caught before run() (hold_signals)
        tfd, sig_r, readers = self._tfd, self._sig_r, self._readers
        busy_ns, last_event_ns = self.busy_poll_ns, 0
        monotonic_ns = time.monotonic_ns
        try:
            while self._running:
                spinning = busy_ns and monotonic_ns() - last_event_ns < busy_ns
                try:
                    events = self._ep.poll(0 if spinning else -1)
                except InterruptedError:
                    continue
                if busy_ns and events:
                    last_event_ns = monotonic_ns()
                for fd, _ in events:
                    if fd == tfd:
                        self._timerfd.clear()
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
                if self._deferred:
                    self.run_deferred()
        finally:
            signal.set_wakeup_fd(old_fd)
            for s, h in old.items():
                signal.signal(s, h)

    def close(self) -> None:
        self._timerfd.close()
        for fd in (self._sig_r, self._sig_w):
            try:
                os.close(fd)
            except OSError as exc:
                if exc.errno != errno.EBADF:
                    raise
        self._ep.close()
