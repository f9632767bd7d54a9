"""Reports at a flow's own pace, not the datapath program's.

The program reports once a round trip (ccp_algs/programs.py). An algorithm whose
commands follow a clock of its own (the probe's rate pulses, a fraction of the min RTT)
gets one command a round: beside competitors that keep a deep buffer full the RTT is
seconds, and each rate was held for seconds whatever the pulse's schedule said. The
intcc datapath reports a flow at its next ACK on request (ReportRequester); this helper
asks at the interval an algorithm sets for each of its flows.

pyportus holds the agent's GIL between reports, so the clock runs in a child process
(child.py). A flow's interval lasts ``LEASE_S`` unless set again: a flow that ends, or
leaves its algorithm without saying so, stops being asked for within that.

    cadence = ReportCadence().start()
    cadence.every(sid, 0.025)     # a report at least every 25 ms; 0 stops
"""
from __future__ import annotations

import os
import socket
import time

from .child import fork_child, stop_child
from .datapath import DATAPATH_SOCKET, ReportRequester

LEASE_S = 2.0
MIN_INTERVAL_S = 0.002        # the daemon's wake-ups share reports about every 2 ms anyway
IDLE_WAKE_S = 0.5             # with no flow to ask for: how often the child checks its parent


class Schedule:
    """When each flow's next report is due: sid -> (interval s, next due, lease end)."""

    def __init__(self, lease_s: float = LEASE_S):
        self.lease_s = lease_s
        self.flows: dict[int, tuple[float, float, float]] = {}

    def set(self, sid: int, interval_s: float, now: float) -> None:
        if interval_s <= 0:
            self.flows.pop(sid, None)
            return
        interval_s = max(interval_s, MIN_INTERVAL_S)
        held = self.flows.get(sid)
        # a renewal keeps the running clock (the next due stays), a new interval starts it now
        next_due = held[1] if held is not None and held[0] == interval_s else now + interval_s
        self.flows[sid] = (interval_s, next_due, now + self.lease_s)

    def due(self, now: float) -> list[int]:
        """The flows whose report is due at ``now`` (each once, however late: the next is
        an interval from now); flows whose lease ran out are dropped."""
        out = []
        for sid, (interval_s, next_due, lease_end) in list(self.flows.items()):
            if now >= lease_end:
                del self.flows[sid]
            elif now >= next_due:
                out.append(sid)
                following = next_due + interval_s
                self.flows[sid] = (interval_s, following if following > now else now + interval_s, lease_end)
        return out

    def next_wake(self, now: float) -> float:
        """Seconds until the next due report or lease end (IDLE_WAKE_S at most)."""
        soonest = min((min(d, e) for _, d, e in self.flows.values()), default=now + IDLE_WAKE_S)
        return min(max(soonest - now, 0.0), IDLE_WAKE_S)


def parse(msg: bytes) -> tuple[int, float] | None:
    """'every SID INTERVAL_US' -> (sid, interval s); None for anything else."""
    try:
        verb, sid, interval_us = msg.decode().split(" ")
        if verb != "every":
            return None
        return int(sid), int(interval_us) / 1e6
    except (UnicodeDecodeError, ValueError):
        return None


def _serve(sock_fd: int, parent_pid: int, datapath_path: str):
    sock = socket.socket(fileno=sock_fd)
    schedule = Schedule()
    requester = ReportRequester(datapath_path)
    while os.getppid() == parent_pid:       # die with the agent
        sock.settimeout(schedule.next_wake(time.monotonic()))
        try:
            got = parse(sock.recv(64))
            if got is not None:
                schedule.set(*got, time.monotonic())
        except socket.timeout:
            pass
        except OSError:
            break
        for sid in schedule.due(time.monotonic()):
            requester.request(sid)


class ReportCadence:
    """The agent's end: ``every(sid, interval_s)`` never blocks and never raises."""

    def __init__(self, datapath_path: str = DATAPATH_SOCKET):
        self.datapath_path = datapath_path
        self._sock = None
        self._proc = None

    def start(self) -> "ReportCadence":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._proc = fork_child(_serve, (theirs.fileno(), os.getpid(), self.datapath_path), "intcc-report-cadence")
        theirs.close()
        ours.setblocking(False)
        self._sock = ours
        return self

    def every(self, sid: int, interval_s: float) -> None:
        """A report of flow ``sid`` at least every ``interval_s`` for the next LEASE_S
        (set it again to keep it; 0 stops)."""
        if self._sock is None:
            return
        try:
            self._sock.send(f"every {int(sid)} {max(int(interval_s * 1e6), 0)}".encode())
        except OSError:
            pass            # the child is gone: the program's own reports go on

    def stop(self):
        stop_child(self._proc)
