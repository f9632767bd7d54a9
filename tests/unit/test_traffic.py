"""A run's flows (experiments/testbed/traffic.py): no client goes before every server of its
start listens, one flow's failure frees the others at once; UDP flows need no setup."""
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from experiments.testbed import traffic
from experiments.testbed.traffic import BackgroundFlow, RunFailed, iperf, udp_flow


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
        self.client_argv = argv
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


def test_an_application_limited_flow_asks_iperf3_for_its_rate():
    tb = FakeTestbed({5202: 0.0})
    BackgroundFlow(tb, "s2", "r2", "cubic", 1, 1.0, port=5202, rate_mbps=1.25).join()
    assert tb.client_argv[tb.client_argv.index("-b") + 1] == "1.25M"
    BackgroundFlow(tb, "s2", "r2", "cubic", 1, 1.0, port=5202).join()
    assert "-b" not in tb.client_argv


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


class LocalHost:
    """A testbed of one host, this one: udp_flow's commands run here, over loopback.
    ``receiver_port`` moves the receiver off the sender's port (every datagram lost)."""

    def __init__(self, receiver_port: int | None = None, sigint_ignored: bool = False):
        self.receiver_port = receiver_port
        self.sigint_ignored = sigint_ignored     # as under a shell's background job (`make test &`)

    def _argv(self, argv):
        if self.receiver_port is not None and argv[2] == "recv":
            argv = [*argv[:3], str(self.receiver_port), *argv[4:]]
        return argv

    def popen(self, host, argv, **kwargs):
        if self.sigint_ignored:
            kwargs["preexec_fn"] = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)
        return subprocess.Popen(self._argv(argv), **kwargs)

    def run(self, host, argv, timeout=None):
        return subprocess.run(self._argv(argv), capture_output=True, text=True, timeout=timeout)

    def addr(self, host):
        return "::1"


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


def test_a_udp_flow_sends_at_its_rate_with_no_setup_to_lose(monkeypatch):
    monkeypatch.setattr(traffic, "UDP_LAST_WAIT_S", 0.5)
    out = udp_flow(LocalHost(), "h1", "h2", rate_mbps=2.24, seconds=1.0, port=free_udp_port(), length=1400)
    assert out["sent"] == 200 and out["received"] == 200 and out["loss_fraction"] == 0.0      # 200 per s
    assert out["received_mbps"] == pytest.approx(2.24)
    # nothing arrives (all lost): the receiver, still waiting for a first datagram, is told
    # to stop and counts none; the flow is a result, not a hang or an error
    lost = udp_flow(LocalHost(receiver_port=free_udp_port()), "h1", "h2", 1.0, 0.3, port=free_udp_port())
    assert lost["sent"] > 0 and lost["received"] == 0 and lost["loss_fraction"] == 1.0
    # ... also where the receiver inherits SIGINT ignored (a runner started in the background)
    lost = udp_flow(LocalHost(receiver_port=free_udp_port(), sigint_ignored=True), "h1", "h2", 1.0, 0.3,
                    port=free_udp_port())
    assert lost["received"] == 0 and lost["loss_fraction"] == 1.0


def test_a_background_udp_flow_is_cross_traffic_beside_tcp_ones():
    flow = BackgroundFlow(LocalHost(), "h1", "h2", "udp", 0.5, 0.5, port=free_udp_port(), udp_mbps=1.12)
    out = flow.join()
    assert out["received"] == out["sent"] == 50


def test_udp_cross_traffic_starts_with_the_flows_it_joins_and_after_their_handshakes():
    together = threading.Barrier(2)
    t0 = time.time()
    flow = BackgroundFlow(LocalHost(), "h1", "h2", "udp", 0.3, 0.3, port=free_udp_port(), udp_mbps=1.12,
                          start_together=together, udp_after_start_s=0.4)
    time.sleep(0.5)                      # the other flow gets ready late: the UDP one waits for it
    together.wait(5)
    ready = time.time()
    out = flow.join()
    assert out["started_at"] - ready == pytest.approx(0.4, abs=0.15)
    assert out["started_at"] - t0 > 0.85
    assert out["send_s"] == pytest.approx(0.3, abs=0.1)


def test_a_udp_sender_that_falls_behind_stops_at_the_end_of_its_window():
    # 10 Gbit/s is far above what a Python sender can pace: it is behind from the start, and
    # must stop after its 0.3 s, not go on until it has sent rate x seconds
    res = subprocess.run([sys.executable, traffic.UDPGEN, "send", "::1", str(free_udp_port()), "10000", "0.3", "1400"],
                         capture_output=True, text=True, timeout=30)
    got = json.loads(res.stdout)
    assert got["seconds"] < 1.0 and got["sent"] < 10e9 * 0.3 / (1400 * 8)


def test_overlap_fraction_is_the_part_of_the_flow_the_cross_traffic_covered():
    assert traffic.overlap_fraction((10.0, 40.0), (11.0, 41.0)) == pytest.approx(29 / 30, abs=1e-3)
    assert traffic.overlap_fraction((10.0, 40.0), (40.0, 70.0)) == 0.0        # one after the other
    assert traffic.overlap_fraction((10.0, 40.0), (0.0, 25.0)) == 0.5
    assert traffic.overlap_fraction((10.0, 10.0), (0.0, 25.0)) == 0.0


def _iperf_out(sent_s: float, recv_s: float, seconds: float) -> dict:
    def ivs(step, key):
        n = round(seconds / step)
        return [{key: [{"start": k * step, "end": (k + 1) * step, "seconds": step, "snd_cwnd": 1000, "rtt": 5000}]
                 if key == "streams" else {"start": k * step, "end": (k + 1) * step, "seconds": step,
                                           "bits_per_second": (k + 1) * 1e6}} for k in range(n)]
    return {"intervals": ivs(sent_s, "streams"), "server_output_json": {"intervals": ivs(recv_s, "sum")}}


def test_the_receivers_goodput_is_paired_with_the_senders_interval_it_belongs_to():
    from experiments.testbed.traffic import series
    rows = series(_iperf_out(0.1, 0.1, 1.0))         # one interval for both: paired in order
    assert [r["goodput_mbps"] for r in rows] == [float(k) for k in range(1, 11)]
    rows = series(_iperf_out(0.5, 1.0, 2.0))         # a receiver at 1 s beside a 0.5 s sender
    assert [r["goodput_mbps"] for r in rows] == [None, 1.0, None, 2.0]
