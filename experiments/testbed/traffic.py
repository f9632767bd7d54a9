"""Traffic of a run: iperf3 flows between testbed hosts, their per-interval series, and
the sender's kernel TCP counters (how it recovered from losses)."""
from __future__ import annotations

import json
import subprocess
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


#: iperf3 sets a UDP stream up with one datagram each way and no retransmission (esnet/iperf
#: #862): one lost to the link's random loss or a full queue fails the flow with the first;
#: the second, taken to be the server giving up on the setup first, was seen once (a
#: clean-clone run, a hard collection run with UDP cross traffic, 2026-12-02)
UDP_SETUP_ERRORS = ("unable to read from stream socket", "control socket has closed unexpectedly")
#: ... so a UDP flow that failed so is started again (to end when it would have), this often
UDP_SETUP_TRIES = 3


def iperf(tb: Testbed, client: str, server: str, cca: str, seconds: float, interval_s: float,
          port: int = 5201, start_together: threading.Barrier | None = None, udp_mbps: float | None = None) -> dict:
    """One iperf3 flow, client -> server, its JSON output; with ``udp_mbps``, UDP at that
    constant rate instead of TCP (``cca`` then only names it; a setup lost on the way is
    tried again, UDP_SETUP_TRIES in all, the output's ``intcc_setup_retries`` says how often).
    ``start_together``: the clients of flows sharing it start at once, when every server
    listens. Each started as soon as its own server listened, the competitor (its thread
    started first) led flow 1 by up to an RTT: in slow start beside it, flow 1 met the queue
    the competitor's first rounds built and left slow start at 0.75 of its window."""
    if udp_mbps is None:
        return _iperf_once(tb, client, server, cca, seconds, interval_s, port, start_together, None)
    t0 = time.monotonic()
    for retries in range(UDP_SETUP_TRIES):
        left_s = seconds - (time.monotonic() - t0)
        try:
            out = _iperf_once(tb, client, server, cca, round(left_s, 3), interval_s, port, start_together, udp_mbps)
            return out | {"intcc_setup_retries": retries}
        except RunFailed as e:
            if not any(m in str(e) for m in UDP_SETUP_ERRORS) or retries == UDP_SETUP_TRIES - 1 \
                    or left_s < seconds / 2:
                raise


def _iperf_once(tb: Testbed, client: str, server: str, cca: str, seconds: float, interval_s: float,
                port: int, start_together: threading.Barrier | None, udp_mbps: float | None) -> dict:
    srv = tb.popen(server, ["iperf3", "-s", "-1", "-J", "-p", str(port)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        try:
            tb.wait_listening(server, port)
            if start_together is not None:
                start_together.wait(START_TOGETHER_TIMEOUT_S)
        except threading.BrokenBarrierError:
            raise RunFailed(f"iperf3 {client} -> {server}: the flows to start with it did not get ready "
                            f"within {START_TOGETHER_TIMEOUT_S} s") from None
        except BaseException:
            if start_together is not None:
                start_together.abort()     # the others go on to fail at once, not after the timeout
            raise
        try:
            kind = ["-C", cca] if udp_mbps is None else ["-u", "-b", f"{udp_mbps}M", "-l", str(UDP_PAYLOAD_BYTES)]
            # iperf3 reads -t as whole seconds (atoi): a competitor 2.151 s late in a 30 s run
            # sends for 27 s and stops 0.85 s before flow 1; every collection was made so
            res = tb.run(client, ["iperf3", "-6", "-c", tb.addr(server), "-p", str(port), "-t", str(int(seconds)),
                                  "-i", str(interval_s), *kind, "-J", "--get-server-output"],
                         timeout=seconds + IPERF_GRACE_S)
        except subprocess.TimeoutExpired:
            raise RunFailed(f"iperf3 {client} -> {server} ({cca}) did not end {IPERF_GRACE_S} s after its "
                            f"{seconds:g} s (its closing exchange stuck in RTO backoff?)") from None
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
    """An iperf3 flow (as ``iperf``) in a thread beside the caller's: a competitor, or one
    of several flows started together. ``join()`` returns its output or raises its error."""

    def __init__(self, tb: Testbed, client: str, server: str, cca: str, seconds: float, interval_s: float,
                 port: int, start_delay_s: float = 0.0, start_together: threading.Barrier | None = None,
                 udp_mbps: float | None = None):
        self.out: dict | None = None
        self.error: BaseException | None = None
        self.udp_mbps = udp_mbps
        args = (tb, client, server, cca, seconds, interval_s)
        self._thread = threading.Thread(target=self._run, args=(args, port, start_delay_s, start_together),
                                        name=f"iperf-{client}-{port}", daemon=True)
        self._thread.start()

    def _run(self, args, port, start_delay_s, start_together):
        try:
            time.sleep(start_delay_s)
            self.out = iperf(*args, port=port, start_together=start_together, udp_mbps=self.udp_mbps)
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
    rows = []
    for i, iv in enumerate(out["intervals"]):
        st = iv["streams"][0]
        rx = recv[i]["sum"]["bits_per_second"] / 1e6 if i < len(recv) else None
        rows.append({"t_s": round(st["end"], 3), "goodput_mbps": rx, "cwnd_bytes": st.get("snd_cwnd"),
                     "rtt_ms": st.get("rtt", 0) / 1e3, "retransmits": st.get("retransmits", 0)})
    return rows


#: Testbed k's main flow listens on port MAIN_PORT + PORT_STRIDE·k, its competitor one
#: above: the kernel trace (tracefs sees every namespace) and the agent's trace tell the
#: flows of parallel testbeds apart by port.
MAIN_PORT = 5201


PORT_STRIDE = 100
