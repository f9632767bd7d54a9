"""Traffic of a run: iperf3 flows between testbed hosts, their per-interval series, and
the sender's kernel TCP counters (how it recovered from losses)."""
from __future__ import annotations

import functools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

from experiments.testbed.bed import Testbed


#: How long iperf3 may take past its run time: at 20 % link loss the closing exchange on
#: its control connection can sit in RTO backoff (1, 2, 4, ... s) for a minute.
IPERF_GRACE_S = 180


class RunFailed(RuntimeError):
    """One run failed (its flow, not the testbed): recorded in failed.json, the rest go on."""


#: Sender-side kernel TCP counters kept per run (how the sender recovered from losses).
TCP_COUNTERS = ("Tcp.RetransSegs", "TcpExt.TCPTimeouts", "TcpExt.TCPLossProbes", "TcpExt.TCPLossProbeRecovery",
                "TcpExt.TCPSackRecovery", "TcpExt.TCPLostRetransmit", "TcpExt.TCPLossUndo",
                "TcpExt.TCPFullUndo", "TcpExt.TCPPartialUndo", "TcpExt.TCPDSACKUndo", "TcpExt.TCPSpuriousRTOs",
                "TcpExt.TCPDSACKRecv")


def tcp_counters(tb: Testbed, host: str) -> dict[str, int]:
    """The host namespace's TCP counters (/proc/net/snmp and netstat: header line, value line)."""
    out = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        lines = tb.run(host, ["cat", path]).stdout.splitlines()
        for head, vals in zip(lines[::2], lines[1::2]):
            group, names = head.split(":", 1)
            for name, val in zip(names.split(), vals.split(":", 1)[1].split()):
                key = f"{group}.{name}"
                if key in TCP_COUNTERS:
                    out[key] = int(val)
    return out


#: How long flows started together wait for each other's servers.
START_TOGETHER_TIMEOUT_S = 30
#: UDP datagrams' payload: with the IPv6 and UDP headers under the hosts' 1500-byte MTU
UDP_PAYLOAD_BYTES = 1400
#: cross traffic starts this long after the TCP flows it joins: their handshakes done first
UDP_CROSS_AFTER_START_S = 1.0


UDPGEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "udpgen.py")
#: How long the UDP receiver waits after the last datagram before it reports
UDP_IDLE_S = 1.0
#: ... and how much longer it is given once the sender is done, before it is told to stop
#: (it then waits for a first datagram that will not come: every one was lost)
UDP_LAST_WAIT_S = 5.0


def udp_flow(tb: Testbed, src: str, dst: str, rate_mbps: float, seconds: float, port: int = 5201,
             length: int = UDP_PAYLOAD_BYTES, start_together: threading.Barrier | None = None,
             after_start_s: float = 0.0) -> dict:
    """Paced UDP from src to dst for ``seconds`` (udpgen.py: no setup exchange to lose);
    returns sent, received, loss_fraction, out_of_order (datagrams that arrived behind a
    later one), received_mbps (the payload received over ``seconds``), started_at (wall
    clock, s) and send_s (how long the sender sent). ``start_together``: it starts with the
    flows sharing it (as ``iperf``), once its receiver listens, and ``after_start_s`` later:
    a flood at their start would drop their handshakes, and iperf3 counts its seconds from
    the first data, which then came only once the flood had ended."""
    rx = tb.popen(dst, [sys.executable, UDPGEN, "recv", str(port), str(UDP_IDLE_S)], stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE, text=True)
    try:
        if rx.stdout.readline().strip() != "ready":
            raise RunFailed(f"UDP {src} -> {dst}: the receiver did not start: {rx.stderr.read().strip()[:300]}")
        _start_with(start_together, f"UDP {src} -> {dst}")
        time.sleep(after_start_s)
        started_at = time.time()
        res = tb.run(src, [sys.executable, UDPGEN, "send", tb.addr(dst), str(port), str(rate_mbps), str(seconds),
                           str(length)], timeout=seconds + 30)
        if res.returncode != 0:
            raise RunFailed(f"UDP {src} -> {dst}: the sender failed: {res.stderr.strip()[:300]}")
        sender = json.loads(res.stdout)
        sent = sender["sent"]
        try:
            out, _ = rx.communicate(timeout=UDP_IDLE_S + UDP_LAST_WAIT_S)
        except subprocess.TimeoutExpired:       # every datagram lost: it still waits for the first
            rx.send_signal(signal.SIGINT)
            out, _ = rx.communicate(timeout=5)
        got = json.loads(out)
    except (ValueError, subprocess.TimeoutExpired) as e:
        raise RunFailed(f"UDP {src} -> {dst}: no count from the receiver ({e})") from None
    except BaseException:
        if start_together is not None:
            start_together.abort()
        raise
    finally:
        if rx.poll() is None:
            rx.kill()
        rx.wait()
    received = got["received"]
    return {"sent": sent, "received": received, "loss_fraction": 1 - received / sent if sent else 0.0,
            "out_of_order": got["out_of_order"], "received_mbps": got["bytes"] * 8 / seconds / 1e6,
            "started_at": started_at, "send_s": sender.get("seconds")}


def overlap_fraction(flow: tuple, cross: tuple) -> float:
    """How much of ``flow``'s (start, end) span ``cross``'s (start, end) covered, 0-1: the
    part of a measured flow that met the cross traffic meant to meet it."""
    length = flow[1] - flow[0]
    if length <= 0:
        return 0.0
    return round(max(0.0, min(flow[1], cross[1]) - max(flow[0], cross[0])) / length, 3)


def _start_with(start_together: threading.Barrier | None, what: str) -> None:
    """Wait for the flows that start together with this one (none: go)."""
    if start_together is None:
        return
    try:
        start_together.wait(START_TOGETHER_TIMEOUT_S)
    except threading.BrokenBarrierError:
        raise RunFailed(f"{what}: the flows to start with it did not get ready within "
                        f"{START_TOGETHER_TIMEOUT_S} s") from None


def iperf(tb: Testbed, client: str, server: str, cca: str, seconds: float, interval_s: float,
          port: int = 5201, start_together: threading.Barrier | None = None, rate_mbps: float | None = None,
          size_bytes: int | None = None) -> dict:
    """One iperf3 TCP flow, client -> server, its JSON output; ``rate_mbps``: application-
    limited at that rate (iperf3 -b: the CCA never sets its pace). ``size_bytes``: a transfer
    of that many bytes (iperf3 -n) instead of one of ``seconds``, which then bound it. ``start_together``: the
    clients of flows sharing it start at once, when every server listens. Each started as
    soon as its own server listened, the competitor (its thread started first) led flow 1 by
    up to an RTT: in slow start beside it, flow 1 met the queue the competitor's first
    rounds built and left slow start at 0.75 of its window."""
    # the server reports at the client's interval too: series() pairs their intervals (at its
    # default 1 s, a 0.1 s run's goodput stopped after its tenth interval, each value late)
    srv = tb.popen(server, ["iperf3", "-s", "-1", "-J", "-p", str(port), "-i", str(interval_s)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        try:
            tb.wait_listening(server, port)
            _start_with(start_together, f"iperf3 {client} -> {server}")
        except BaseException:
            if start_together is not None:
                start_together.abort()     # the others go on to fail at once, not after the timeout
            raise
        try:
            # iperf3 reads -t as whole seconds (atoi): a competitor 2.151 s late in a 30 s run
            # sends for 27 s and stops 0.85 s before flow 1; every collection was made so. At
            # least 1: '-t 0' is a flow without end (a competitor starting in a run's last second)
            length = ["-n", str(int(size_bytes))] if size_bytes else ["-t", str(max(1, int(seconds)))]
            res = tb.run(client, ["iperf3", "-6", "-c", tb.addr(server), "-p", str(port), *length,
                                  "-i", str(interval_s), "-C", cca, "-J", "--get-server-output",
                                  *(["-b", f"{rate_mbps}M"] if rate_mbps else [])],
                         timeout=seconds + IPERF_GRACE_S)
        except subprocess.TimeoutExpired:
            what = f"{size_bytes:,d}-byte transfer's {seconds:g} s bound" if size_bytes else f"{seconds:g} s"
            raise RunFailed(f"iperf3 {client} -> {server} ({cca}) did not end {IPERF_GRACE_S} s after its "
                            f"{what} (its closing exchange stuck in RTO backoff?)") from None
        try:
            out = json.loads(res.stdout)
        except json.JSONDecodeError:
            raise RunFailed(f"iperf3 {client} -> {server} ({cca}) wrote no JSON: "
                            f"{(res.stderr or res.stdout).strip()[:300]}") from None
        if "error" in out:
            raise RunFailed(f"iperf3 {client} -> {server} ({cca}): {out['error']}")
        return out
    finally:
        srv.kill()
        srv.wait()


class BackgroundFlow:
    """An iperf3 flow (as ``iperf``), or with ``udp_mbps`` a UDP one (as ``udp_flow``; ``cca``
    then only names it), in a thread beside the caller's: a competitor, cross traffic, or one
    of several flows started together. ``join()`` returns its output or raises its error."""

    def __init__(self, tb: Testbed, client: str, server: str, cca: str, seconds: float, interval_s: float,
                 port: int, start_delay_s: float = 0.0, start_together: threading.Barrier | None = None,
                 udp_mbps: float | None = None, rate_mbps: float | None = None, udp_after_start_s: float = 0.0):
        self.out: dict | None = None
        self.error: BaseException | None = None
        self.udp_mbps = udp_mbps
        if udp_mbps is None:
            run = functools.partial(iperf, tb, client, server, cca, seconds, interval_s, port, start_together,
                                    rate_mbps)
        else:
            run = functools.partial(udp_flow, tb, client, server, udp_mbps, seconds, port,
                                    start_together=start_together, after_start_s=udp_after_start_s)
        self._thread = threading.Thread(target=self._run, args=(run, start_delay_s),
                                        name=f"iperf-{client}-{port}", daemon=True)
        self._thread.start()

    def _run(self, run, start_delay_s):
        try:
            time.sleep(start_delay_s)
            self.out = run()
        except BaseException as e:     # raised in join(), in the caller's thread
            self.error = e

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> dict:
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.out


def series(out: dict) -> list[dict]:
    """Per-interval rows: receiver goodput, sender cwnd, RTT and retransmits."""
    recv = out.get("server_output_json", {}).get("intervals", [])
    sent = out["intervals"]
    # the receiver's intervals are the sender's (their clocks start within an RTT of each other)
    # where both report at one interval; a receiver at another interval (1 s, iperf3's default,
    # beside a 0.1 s sender) is paired by time: gaps, not values at the wrong times
    same = not recv or not sent or math.isclose(recv[0]["sum"]["seconds"], sent[0]["streams"][0]["seconds"],
                                                rel_tol=0.1)
    recv_by_end = [(iv["sum"]["end"], iv["sum"]["bits_per_second"] / 1e6) for iv in recv]
    rows = []
    for i, iv in enumerate(sent):
        st = iv["streams"][0]
        if same:
            rx = recv_by_end[i][1] if i < len(recv_by_end) else None
        else:
            near = min(recv_by_end, key=lambda e: abs(e[0] - st["end"]))
            rx = near[1] if abs(near[0] - st["end"]) <= st["seconds"] / 2 else None
        rows.append({"t_s": round(st["end"], 3), "goodput_mbps": rx, "cwnd_bytes": st.get("snd_cwnd"),
                     "rtt_ms": st.get("rtt", 0) / 1e3, "retransmits": st.get("retransmits", 0)})
    return rows


#: Testbed k's main flow listens on port MAIN_PORT + PORT_STRIDE·k, its competitor one
#: above: the kernel trace (tracefs sees every namespace) and the agent's trace tell the
#: flows of parallel testbeds apart by port.
MAIN_PORT = 5201


PORT_STRIDE = 100
