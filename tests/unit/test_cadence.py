"""Reports at an algorithm's own pace (ccp_agent/cadence.py): the schedule, the message,
and the child asking a datagram socket in the daemon's place."""
import os
import socket
import time

import pytest

from ccp_agent.cadence import LEASE_S, MIN_INTERVAL_S, ReportCadence, Schedule, parse
from ccp_algs.contract import REPORT_REQUEST_MAGIC


def test_a_flow_is_due_once_per_interval():
    s = Schedule()
    s.set(7, 0.1, now=0.0)
    assert s.due(0.05) == []
    assert s.due(0.1) == [7]
    assert s.due(0.15) == []
    assert s.due(0.2) == [7]
    assert s.next_wake(0.2) == pytest.approx(0.1)


def test_a_late_wake_asks_once_and_the_clock_restarts_from_it():
    s = Schedule()
    s.set(7, 0.1, now=0.0)
    assert s.due(0.55) == [7]                # five intervals missed: one report, not five
    assert s.due(0.6) == []
    assert s.due(0.65) == [7]


def test_a_renewal_keeps_the_clock_a_new_interval_restarts_it_and_zero_stops():
    s = Schedule()
    s.set(7, 0.1, now=0.0)
    s.set(7, 0.1, now=0.09)                  # renewed: still due at 0.1
    assert s.due(0.1) == [7]
    s.set(7, 0.05, now=0.12)
    assert s.due(0.16) == []
    assert s.due(0.17) == [7]
    s.set(7, 0, now=0.18)
    assert s.due(10.0) == [] and not s.flows


def test_a_lease_not_renewed_ends():
    s = Schedule()
    s.set(7, 0.1, now=0.0)
    s.set(8, 0.1, now=1.5)
    assert s.due(LEASE_S + 0.01) == [8]      # 7's lease ran out: dropped, not asked
    assert set(s.flows) == {8}


def test_intervals_below_the_floor_are_raised_to_it():
    s = Schedule()
    s.set(7, 1e-6, now=0.0)
    assert s.flows[7][0] == MIN_INTERVAL_S


def test_only_well_formed_messages_parse():
    assert parse(b"every 12 25000") == (12, 0.025)
    assert parse(b"every 12") is None
    assert parse(b"often 12 25000") is None
    assert parse(b"every x 25000") is None
    assert parse(b"\xff\xfe") is None


def test_the_child_asks_the_daemon_socket_at_the_interval(tmp_path):
    path = str(tmp_path / "daemon")
    daemon = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    daemon.bind(path)
    daemon.settimeout(2.0)
    cadence = ReportCadence(path).start()
    try:
        cadence.every(42, 0.05)
        t0 = time.monotonic()
        got = [daemon.recv(64) for _ in range(6)]
        elapsed = time.monotonic() - t0
        assert all(g == REPORT_REQUEST_MAGIC + (42).to_bytes(4, "little") for g in got)
        assert elapsed >= 5 * 0.05 * 0.8     # paced, not a burst (a slow machine only stretches it)
        cadence.every(42, 0)
        daemon.settimeout(3 * 0.05)
        while True:                          # until three intervals pass without one: the stop is read
            try:
                daemon.recv(64)
            except socket.timeout:
                break
        daemon.settimeout(0.3)
        with pytest.raises(socket.timeout):
            daemon.recv(64)
    finally:
        cadence.stop()
        daemon.close()
        os.unlink(path)


def test_without_a_started_child_every_does_nothing():
    ReportCadence("/nonexistent").every(1, 0.1)
