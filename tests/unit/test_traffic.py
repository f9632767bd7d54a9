"""Flows started together (experiments/testbed/traffic.py): no client goes before every server of
its start listens, and one flow's failure frees the others at once."""
import json
import threading
import time
from types import SimpleNamespace

import pytest

from experiments.testbed.traffic import BackgroundFlow, RunFailed, iperf


class FakeTestbed:
    """What iperf() asks of a testbed: servers that listen after ``listen_delay_s[port]``,
    clients whose start times are recorded."""

    def __init__(self, listen_delay_s: dict[int, float], fail_ports=()):
        self.listen_delay_s = listen_delay_s
        self.fail_ports = set(fail_ports)
        self.client_start_s: dict[int, float] = {}

    def popen(self, host, argv, **kwargs):
        return SimpleNamespace(kill=lambda: None, wait=lambda: None)

    def wait_listening(self, host, port):
        time.sleep(self.listen_delay_s[port])
        if port in self.fail_ports:
            raise RunFailed(f"nothing listens on {host}:{port}")

    def addr(self, host):
        return "fd00::2"

    def run(self, host, argv, timeout=None):
        port = int(argv[argv.index("-p") + 1])
        self.client_start_s[port] = time.monotonic()
        return SimpleNamespace(stdout=json.dumps({"intervals": []}), stderr="")


def test_clients_of_one_start_wait_for_every_server():
    tb = FakeTestbed({5201: 0.5, 5202: 0.0})      # the competitor's server is ready first
    together = threading.Barrier(2)
    competitor = BackgroundFlow(tb, "s2", "r2", "cubic", 1, 1.0, port=5202, start_together=together)
    iperf(tb, "s1", "r1", "cubic", 1, 1.0, port=5201, start_together=together)
    competitor.join()
    assert abs(tb.client_start_s[5201] - tb.client_start_s[5202]) < 0.25, tb.client_start_s
    # without the barrier the competitor's client goes first, by its server's lead
    tb = FakeTestbed({5201: 0.5, 5202: 0.0})
    competitor = BackgroundFlow(tb, "s2", "r2", "cubic", 1, 1.0, port=5202)
    iperf(tb, "s1", "r1", "cubic", 1, 1.0, port=5201)
    competitor.join()
    assert tb.client_start_s[5201] - tb.client_start_s[5202] > 0.4


def test_a_flow_that_fails_before_the_start_frees_the_others():
    tb = FakeTestbed({5201: 0.0, 5202: 0.0}, fail_ports=[5202])
    together = threading.Barrier(2)
    competitor = BackgroundFlow(tb, "s2", "r2", "cubic", 1, 1.0, port=5202, start_together=together)
    t0 = time.monotonic()
    with pytest.raises(RunFailed, match="did not get ready"):
        iperf(tb, "s1", "r1", "cubic", 1, 1.0, port=5201, start_together=together)
    assert time.monotonic() - t0 < 5                  # not the 30 s timeout
    with pytest.raises(RunFailed, match="nothing listens"):
        competitor.join()
    assert 5201 not in tb.client_start_s


class LossySetupTestbed(FakeTestbed):
    """A UDP client whose stream setup is lost ``lost_setups`` times, as iperf3 reports it."""

    def __init__(self, lost_setups: int, error: str = "unable to read from stream socket: Resource temporarily "
                                                      "unavailable"):
        super().__init__({5300: 0.0})
        self.lost_setups = lost_setups
        self.error = error
        self.client_seconds: list[float] = []

    def run(self, host, argv, timeout=None):
        self.client_seconds.append(int(argv[argv.index("-t") + 1]))
        if len(self.client_seconds) <= self.lost_setups:
            time.sleep(0.2)
            return SimpleNamespace(stdout=json.dumps({"error": f"error - {self.error}"}), stderr="")
        return SimpleNamespace(stdout=json.dumps({"intervals": []}), stderr="")


def test_a_udp_flow_whose_setup_was_lost_starts_again_to_end_when_it_would_have():
    tb = LossySetupTestbed(lost_setups=2)
    out = iperf(tb, "s2", "r2", "udp", 10, 1.0, port=5300, udp_mbps=1.0)
    assert out["intcc_setup_retries"] == 2 and len(tb.client_seconds) == 3
    assert tb.client_seconds == [10, 9, 9]       # the time the lost setups took, in iperf3's whole seconds
    with pytest.raises(RunFailed, match="stream socket"):                        # three lost: the run fails
        iperf(LossySetupTestbed(lost_setups=3), "s2", "r2", "udp", 10, 1.0, port=5300, udp_mbps=1.0)
    tcp = LossySetupTestbed(lost_setups=1)                                       # TCP: iperf3's own error, once
    with pytest.raises(RunFailed, match="stream socket"):
        iperf(tcp, "s1", "r1", "cubic", 10, 1.0, port=5300)
    assert len(tcp.client_seconds) == 1
    # the server gave up on the setup first: the client reads its control socket closed
    closed = LossySetupTestbed(lost_setups=1, error="control socket has closed unexpectedly")
    assert iperf(closed, "s2", "r2", "udp", 10, 1.0, port=5300, udp_mbps=1.0)["intcc_setup_retries"] == 1
