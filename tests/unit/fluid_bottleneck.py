"""A fluid FIFO port for the identification tests: this flow paced at its fair share with
the probe's pulses, one competitor of a known kind, hop records every 10 ms (what the
sink publishes), so each stage can be checked against a known answer.

``slow_start`` starts a ``window`` competitor from 10 segments, a segment more per ACK, until
its first loss ("loss": Reno) or until the queue's delay rose by 8 ms ("delay": CUBIC's
HyStart), not at half the BDP.

Competitors: ``window`` (Reno: a segment per RTT, half on a drop, ack-clocked), ``vegas``
(a window held at the pipe plus 3 segments, ack-clocked), ``paced`` (a fixed rate below its
share: an application-limited or fixed-rate flow; with ``competitor_proto`` 17, UDP), ``bbr`` (paced at the rate the port
leaves it, 1.25 / 0.75 / 1 x6 per RTT, no cut, ProbeRTT's 200 ms at 4 packets a round every 10 s)."""
from __future__ import annotations

from collections import deque

from ccp_algs.probe import pulse_factor
from estimator.identify.bottleneck import FRAME_BYTES
from telemetry.schema import HopRecord

DT = 0.001
PROBE_RTT_EVERY_S, PROBE_RTT_S = 10.0, 0.2     # tcp_bbr: bbr_min_rtt_win_sec, bbr_probe_rtt_mode_ms
SLOT = 1500                   # the queue's depth in bytes counts a slot per packet (int_node Queue)
FRAME = FRAME_BYTES           # a full frame with INT headers on the wire


def run(kind: str, seconds: float = 8.0, rate_pps: float = 1000.0, rtt_s: float = 0.04, buffer_pkts: int = 200,
        amplitude: float = 0.25, competitor_at_s: float = 0.0, paced_share: float = 0.3, competitor_proto: int = 6,
        slow_start: str | None = None, comp_rtt_s: float | None = None, rtt_told: bool = False):
    """``comp_rtt_s``: the competitor's base RTT where its path is longer than this flow's
    (``rtt_s``); ``rtt_told``: each record tells each flow's least RTT as the sink's node
    measures it (its base and the least queue it met so far), as FlowRTT's do."""
    comp_rtt_s = rtt_s if comp_rtt_s is None else comp_rtt_s
    least_queue_s = {}
    own_base = rate_pps / 2
    period = 8 * rtt_s
    q = deque()                       # packets in the queue: 0 = ours, 1 = the competitor's
    fluid = {0: 0.0, 1: 0.0}
    cwnd = rate_pps * comp_rtt_s / 2 if slow_start is None else 10.0      # the competitor's window (packets)
    in_slow_start = slow_start is not None
    queue_min = None
    inflight = deque()                # (due_s, packets) of the competitor's departures coming back as ACKs
    served = 0.0
    recs, acc = [], {0: 0, 1: 0}
    lost = 0
    comp_rate = rate_pps / 2
    for i in range(int(seconds / DT)):
        t = i * DT
        fluid[0] += own_base * pulse_factor(t, period, amplitude) * DT
        if t >= competitor_at_s:
            if kind in ("window", "vegas"):
                while inflight and inflight[0][0] <= t:          # ACKs: the window frees as packets return
                    inflight.popleft()
                out = sum(k for _, k in inflight) + sum(1 for p in q if p == 1)
                fluid[1] += max(0.0, cwnd - out - fluid[1])
            elif kind == "paced":
                fluid[1] += paced_share * rate_pps * DT
            elif kind == "bbr":
                since = t - competitor_at_s
                if since >= PROBE_RTT_EVERY_S and since % (PROBE_RTT_EVERY_S + PROBE_RTT_S) >= PROBE_RTT_EVERY_S:
                    fluid[1] += 4 / rtt_s * DT         # ProbeRTT: a window of 4 packets for 200 ms
                else:
                    gain = (1.25, 0.75, 1, 1, 1, 1, 1, 1)[int(t / rtt_s) % 8]
                    fluid[1] += gain * comp_rate * DT
        for who in (0, 1):
            while fluid[who] >= 1:
                fluid[who] -= 1
                if len(q) < buffer_pkts:
                    q.append(who)
                elif who == 1:
                    lost += 1
                    if kind == "window":
                        cwnd = max(2.0, cwnd / 2)
                        in_slow_start = False
        served += rate_pps * DT
        while served >= 1 and q:
            served -= 1
            who = q.popleft()
            acc[who] += 1
            if who == 1:
                inflight.append((t + comp_rtt_s, 1))
                if kind == "window" and in_slow_start:
                    cwnd += 1
                    queue_min = len(q) if queue_min is None else min(queue_min, len(q))
                    if slow_start == "delay" and cwnd >= 16 and (len(q) - queue_min) / rate_pps >= 0.008:
                        in_slow_start = False
                elif kind == "window":
                    cwnd += 1 / cwnd
                elif kind == "vegas":
                    queued = sum(1 for p in q if p == 1)
                    cwnd += (0.05 if queued < 2 else -0.05 if queued > 4 else 0.0)
        if not q:
            served = min(served, 1.0)
        for who in (0, 1):
            if acc[who]:
                least_queue_s[who] = min(least_queue_s.get(who, 1e9), len(q) / rate_pps)
        if i % 10 == 9:
            top = [["00000000000000aa", acc[0], 0, 6]]
            if acc[1] or lost:
                top.append(["00000000000000bb", acc[1], lost, competitor_proto])
            if rtt_told:
                for e, base in zip(top, (rtt_s, comp_rtt_s)):
                    who = 0 if e[0] == OWN else 1
                    e.append(int((base + least_queue_s[who]) * 1e6) if who in least_queue_s else None)
            recs.append(HopRecord(node_id=2, ts_ns=int((1_000 + t) * 1e9), queue_depth_bytes=len(q) * SLOT,
                                  queue_depth_pkts=len(q), queue_capacity_bytes=buffer_pkts * SLOT, queue_drops=0,
                                  link_losses=0, data_rate_kbps=int(rate_pps * FRAME * 8 / 1e3), arrival_rate_pps=0,
                                  flow_count=2, interval_ms=10.0, top_flows=top))
            acc, lost = {0: 0, 1: 0}, 0
    return recs


OWN = "00000000000000aa"
