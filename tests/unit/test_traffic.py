"""Flows started together (experiments/traffic.py): no client goes before every server of
its start listens, and one flow's failure frees the others at once."""
import json
import threading
import time
from types import SimpleNamespace

import pytest

from experiments.traffic import BackgroundFlow, RunFailed, iperf


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
