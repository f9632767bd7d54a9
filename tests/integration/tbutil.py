"""Helpers for testbed-based tests."""
from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import threading
import time

from experiments.testbed.nodeconf import INT_HEADROOM_BYTES
from experiments.testbed.bed import Testbed
from experiments.testbed.topo import load_topo

TOPO_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "testbed", "topologies")


def require_ccp_free():
    """Fail (not skip) when another process holds the 'ccp' congestion control: the test
    needs its own datapath."""
    import pytest
    from ccp_agent.datapath import ccp_holder, ccp_registered
    if ccp_registered():
        pytest.fail(f"a 'ccp' congestion control is already registered, so this test cannot run: {ccp_holder()}")


def start_testbed(topo: str, name: str, exporter: str = "jsonl", node_rt_priority: int | None = None,
                  **params) -> Testbed:
    return Testbed(load_topo(os.path.join(TOPO_DIR, f"{topo}.toml"), params), name).up(
        exporter=exporter, node_rt_priority=node_rt_priority)


def start_line_without_sink(name: str, fast_path: bool = False) -> Testbed:
    """h1 -- n1 -- h2 with no sink: INT reaches h2, whose interface gets the headroom.
    ``fast_path``: n1 forwards with tc BPF (int_node/fastpath)."""
    topo = load_topo(os.path.join(TOPO_DIR, "line.toml"))
    topo.nodes["n1"]["fast_path"] = fast_path
    t = Testbed(topo, name).up(exporter="none")
    t.run("h2", ["ip", "link", "set", "intcc-n1", "mtu", str(1500 + INT_HEADROOM_BYTES)])
    return t


def ping_rtts_ms(tb: Testbed, src: str, dst_addr: str, count: int = 20, interval: float = 0.05):
    res = tb.run(src, ["ping", "-6", "-n", "-c", str(count), "-i", str(interval), dst_addr])
    assert res.returncode == 0, res.stdout + res.stderr
    return [float(x) for x in re.findall(r"time=([0-9.]+) ms", res.stdout)]


def iperf3(tb: Testbed, client: str, server: str, seconds: float = 5, extra=(), port: int = 5201) -> dict:
    """A TCP iperf3 run (UDP flows go through traffic.udp_flow: iperf3's UDP setup is not loss-proof)."""
    srv = tb.popen(server, ["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        tb.wait_listening(server, port)
        res = tb.run(client, ["iperf3", "-6", "-c", tb.addr(server), "-p", str(port), "-t", str(seconds), "-J"]
                     + list(extra), timeout=seconds + 30)
        out = json.loads(res.stdout)
    finally:
        srv.kill()
        srv.wait()
    assert "error" not in out, out.get("error")
    return out


class SocketSampler:
    """The kernel's view of a host's TCP sockets to ``dport`` (inet_diag's tcp_info),
    sampled every ``interval_s`` while it runs, per local port: ``rtos``, how often its
    retransmission timer fired (tcpi_total_rto, cumulative), and ``longest_silence_s``, the
    longest it waited for an ACK with data in flight. A flow held by its retransmission
    timer shows both; a flow starved by the datapath's window still hears an ACK every
    round trip and has no timeout."""

    # iproute2 6.1's ss and pyroute2 0.9's tcp_info end before these (kernel 6.7+)
    TOTAL_RTO_OFFSET = 240          # __u16 tcpi_total_rto
    INET_DIAG_INFO_BIT = 1 << (2 - 1)     # idiag_ext asks for attribute INET_DIAG_INFO (2)

    def __init__(self, tb: Testbed, host: str, dport: int, interval_s: float = 0.25):
        self.netns = tb.state["hosts"][host]["netns"]
        self.dport, self.interval_s = dport, interval_s
        self.rtos: dict[int, int] = {}
        self.longest_silence_s: dict[int, float] = {}
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        from pyroute2 import netns
        from pyroute2.netlink.diag import DiagSocket
        try:
            netns.setns(self.netns, flags=0)      # this thread only: network namespaces are per thread
            with DiagSocket() as diag:
                diag.bind()
                while not self._stop.wait(self.interval_s):
                    self._sample(diag)
        except BaseException as e:               # noqa: BLE001 -- reported by __exit__
            self.error = e

    def _sample(self, diag):
        for msg in diag.get_sock_stats(family=socket.AF_INET6, states=1 << 1,     # established
                                       extensions=self.INET_DIAG_INFO_BIT):
            info = msg.get_attr("INET_DIAG_INFO")
            if msg["idiag_dport"] != self.dport or info is None:
                continue
            port = msg["idiag_sport"]
            raw = info.data[info.offset + 4:info.offset + info.length]
            if len(raw) < self.TOTAL_RTO_OFFSET + 2:
                raise RuntimeError(f"tcp_info of {len(raw)} bytes has no tcpi_total_rto: kernel older than 6.7")
            (rtos,) = struct.unpack_from("<H", raw, self.TOTAL_RTO_OFFSET)
            self.rtos[port] = max(self.rtos.get(port, 0), rtos)
            silence_s = info["tcpi_last_ack_recv"] / 1e3 if info["tcpi_unacked"] else 0.0
            self.longest_silence_s[port] = max(self.longest_silence_s.get(port, 0.0), silence_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        if self.error and not exc[0]:
            raise RuntimeError(f"sampling the sockets in {self.netns} failed: {self.error!r}") from self.error


def fresh_datapath_stats(dp) -> dict:
    """The daemon's stats.json as written after now (it rewrites it every second)."""
    uptime_s = dp.stats()["uptime_s"]
    deadline = time.monotonic() + 5
    while dp.stats()["uptime_s"] <= uptime_s and time.monotonic() < deadline:
        time.sleep(0.1)
    return dp.stats()


def ccp_flow_with_a_blackout(tb: Testbed, port: int, seconds: float, dark_at_s: float, dark_s: float,
                             loss_pct: float = 0):
    """A sta1 -> sta2 iperf3 flow with congestion control ccp, the wireless hop dark (100 %
    loss) from dark_at_s for dark_s and at loss_pct otherwise; the loss back at 0 after."""
    from experiments.testbed.linkctl import set_loss
    set_loss(tb, loss_pct)
    srv = tb.popen("sta2", ["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        tb.wait_listening("sta2", port)
        cli = tb.popen("sta1", ["iperf3", "-6", "-c", tb.addr("sta2"), "-p", str(port), "-t", str(seconds),
                                "-C", "ccp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(dark_at_s)
        set_loss(tb, 100)
        time.sleep(dark_s)
        set_loss(tb, loss_pct)
        cli.wait(timeout=30)
    finally:
        set_loss(tb, 0)
        srv.kill()
        srv.wait()
