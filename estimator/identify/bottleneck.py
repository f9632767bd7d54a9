"""What identification reads: one node's hop records (the sink's ``top_flows``: each flow's
packets and losses through the node per ~10 ms, with the node's queue and port rate) as
series on a regular 10 ms grid, this flow's and each competitor's apart."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from int_node.ioam import inserted_bytes
from telemetry.flowid import PROTO_TCP
from telemetry.sink import PERIOD_MS as SINK_PERIOD_MS

BIN_S = 0.01
#: a full-sized frame with intcc's INT headers for two hops (a 1514-byte Ethernet frame from a
#: 1500-byte MTU host plus the IOAM trace and E2E options): the port's packet rate before its
#: busy stretches tell it; follows the wire schema's slot size
FRAME_BYTES = 14 + 1500 + inserted_bytes(2)
BUSY_WINDOW_BINS = 10         # the port's rate is measured over 100 ms windows with a queue throughout
MIN_BUSY_WINDOWS = 5
MIN_FLOW_SHARE = 0.05         # a competitor carries at least this share of the others' packets (not a control connection)
MIN_COMPETITOR_TOTAL_PKTS = 50    # ... and this many (alone beside this flow, a handshake is all the others' packets)


def moving_mean(x, k: int) -> np.ndarray:
    """The mean over ``k`` bins centred on each bin (np.convolve's "same" alignment), as long
    as ``x`` whatever k: a series can be shorter than an RTT (a test restarted a moment ago),
    where "same" would return k values."""
    x = np.asarray(x, dtype=float)
    k = max(1, int(k))
    start = (k - 1) // 2
    return np.convolve(x, np.ones(k) / k, mode="full")[start:start + len(x)]



def round_starts(s: "Series", first_bin: int, base_rtt_s: float, rounds: int) -> list[int]:
    """The bins where a flow's ``rounds`` round trips from ``first_bin`` start, and where the
    last ends (rounds + 1 values; fewer where the series ends first): each round its base
    RTT and the queue's delay at the round's start."""
    delay = s.queue_delay_s()
    t, starts = int(first_bin), []
    for _ in range(rounds + 1):
        starts.append(t)
        t += max(1, int(round((base_rtt_s + float(delay[min(t, s.n - 1)])) / BIN_S)))
        if t > s.n:
            break
    return starts

@dataclass
class Series:
    """Per 10 ms bin from ``t0_s``: this flow's packets (``own``), each competitor's
    (``comp``, (F, N)) and its losses (``comp_lost``), the packets of flows that are not TCP
    (``other``: no CCA to name, but they use the port), the queue at the bin's end (packets,
    carried over bins without a record); the port's rate (bit/s, 0: not stamped), its
    buffer and its packet rate measured while busy."""
    t0_s: float
    own: np.ndarray
    comp: np.ndarray
    comp_lost: np.ndarray
    comp_ids: list
    queue_pkts: np.ndarray
    port_bps: float
    capacity_pkts: float = 0.0         # the queue's buffer (0: not told)
    busy_pps: float | None = None      # the port's packet rate measured while it had a queue
    other: np.ndarray | None = None    # packets of flows that are not TCP (UDP) per bin
    tcp_rest: np.ndarray | None = None   # packets of TCP flows not (yet) named competitors per bin
    #: each competitor's least round trip the sink's node measured (FlowRTT), s; NaN: not told
    comp_rtt_s: np.ndarray | None = None
    _queued: np.ndarray | None = field(default=None, repr=False, compare=False)   # comp_queued's

    @property
    def buffer_pkts(self) -> float:
        return self.capacity_pkts

    @property
    def n(self) -> int:
        return len(self.own)

    @property
    def port_pps(self) -> float:
        """Packets per second the port sends: as measured while busy, else its stamped rate
        over a full frame (the queue's depth in bytes counts a slot per packet, not the
        frame: no help here), and never less than that: it is the rate's floor (frames are
        full-sized at most), and in a flow's first second a queue of a packet or two on a
        port not yet full reads as busy (20 packets/s measured on a port of 270,
        2026-12-03: every queue's delay read 13 times too long)."""
        return max(self.busy_pps or 0.0, self.port_bps / 8 / FRAME_BYTES)

    def queue_delay_s(self) -> np.ndarray:
        return self.queue_pkts / self.port_pps if self.port_pps else np.zeros(self.n)

    def comp_queued(self) -> np.ndarray:
        """Each competitor's packets in the queue at each bin's end, (F, N): at a FIFO port
        the packets queued at a moment are those that leave in the queue's delay after it,
        and the sink counts each flow's leaving. NaN where the series ends within that delay
        (not known yet)."""
        if self._queued is not None:           # asked by several stages at each step
            return self._queued
        if not self.port_pps:
            return np.full(self.comp.shape, np.nan)
        start = np.arange(self.n) + 1.0                   # the cumulative count's index at each bin's end
        end = start + self.queue_pkts / self.port_pps / BIN_S
        cum = np.concatenate((np.zeros((self.comp.shape[0], 1)), np.cumsum(self.comp, axis=1)), axis=1)
        grid = np.arange(self.n + 1)
        # a bin's packets taken to leave evenly through it: a queue shorter than a bin's
        # departures still counts its share of them
        queued = np.array([np.interp(end, grid, c) - c[start.astype(int)] for c in cum]).reshape(self.comp.shape)
        queued[:, end > self.n] = np.nan
        self._queued = queued
        return queued

    def comp_window(self, base_rtt_s) -> np.ndarray:
        """Each competitor's window as the bottleneck sees it, (F, N) packets: those on the
        way (its rate over an RTT around the bin, times its base RTT) and those queued
        (comp_queued). A window-limited sender's is its congestion window, whatever share
        of the port this flow's pulses leave it: where its rate falls, its queue grows.
        ``base_rtt_s``: one for all, or each competitor's (F,): read in a shorter RTT than
        its own, a competitor's window is its queued packets and only part of those on the
        way (0.8 of its kernel's packets in flight at 1.8-2.5 times flow 1's RTT, 0.97-1.0
        in its own; lab/estimator/window_truth.py)."""
        base = np.broadcast_to(np.asarray(base_rtt_s, dtype=float), (self.comp.shape[0],))
        rate = np.array([moving_mean(c, max(1, int(round(b / BIN_S)))) for c, b in zip(self.comp, base)])
        return rate.reshape(self.comp.shape) / BIN_S * base[:, None] + self.comp_queued()

    def others(self) -> np.ndarray:
        """Every other flow's packets per bin, TCP or not."""
        return self.comp.sum(axis=0) + sum(x for x in (self.other, self.tcp_rest) if x is not None)

    def comp_first_bin(self) -> int | None:
        """The first bin with a competitor's packet (None: none yet)."""
        hit = np.flatnonzero(self.comp.sum(axis=0) > 0)
        return int(hit[0]) if hit.size else None


def competing(tcp_packets: dict, not_tcp_packets: int, min_packets: int) -> set:
    """The TCP flows of ``tcp_packets`` (flow id -> packets) that compete: at least
    ``min_packets`` and MIN_FLOW_SHARE of every other packet, UDP's too (beside UDP alone, a
    connection's handshake, iperf3's control connection, is all the TCP there is)."""
    total = sum(tcp_packets.values()) + not_tcp_packets
    return {f for f, k in tcp_packets.items() if k >= min_packets and k >= MIN_FLOW_SHARE * total}


class NodeRecords:
    """One node's hop records, the last ``keep_s`` of them."""

    def __init__(self, keep_s: float = 60.0):
        self.keep_s = keep_s
        # (t_end_s, span_s, depth_pkts, port_bps, {fid: (packets, lost)} of TCP flows, packets of the rest)
        self.rows: deque = deque()
        self.not_tcp_entries = 0
        self.capacity_pkts = 0.0
        self.rtt_s: dict = {}        # flow id -> its least RTT the sink's node measured, as last told

    def add(self, rec) -> bool:
        if not rec.top_flows or not rec.interval_ms:
            return False
        flows, not_tcp = {}, 0
        for e in rec.top_flows:
            if len(e) >= 4 and e[3] not in (0, PROTO_TCP):
                self.not_tcp_entries += 1        # UDP: no CCA to name, but its packets use the port
                not_tcp += e[1]
                continue
            flows[e[0]] = (e[1], e[2] if len(e) > 2 else 0)
            if len(e) > 4 and e[4]:
                self.rtt_s[e[0]] = e[4] / 1e6
        t = rec.ts_ns * 1e-9
        if rec.queue_capacity_bytes:       # a slot per packet (int_node Queue.advertised_depth_bytes)
            self.capacity_pkts = rec.queue_capacity_bytes * (rec.queue_depth_pkts / rec.queue_depth_bytes) \
                if rec.queue_depth_bytes else self.capacity_pkts or rec.queue_capacity_bytes / 1500
        self.rows.append((t, rec.interval_ms / 1e3, rec.queue_depth_pkts,
                          rec.data_rate_kbps * 1e3, flows, not_tcp))
        while self.rows and self.rows[0][0] < t - self.keep_s:
            self.rows.popleft()
        return True

    def has_flow(self, flow_id: str) -> bool:
        return any(flow_id in r[4] for r in self.rows)

    def flows_since(self, t_s: float, own_flow_id: str, peers: frozenset = frozenset()) -> tuple[dict, int]:
        """Each other TCP flow's packets through the node in records ending after ``t_s``
        (``peers`` left out: other intcc senders identifying, never competitors), and the
        packets of flows that are not TCP."""
        out: dict = {}
        not_tcp = 0
        for t_end, _, _, _, flows, other in reversed(self.rows):
            if t_end <= t_s:
                break
            not_tcp += other
            for fid, (k, _) in flows.items():
                if fid != own_flow_id and fid not in peers:
                    out[fid] = out.get(fid, 0) + k
        return out, not_tcp

    def own_packets_since(self, t_s: float, own_flow_id: str) -> int:
        """This flow's packets through the node in records ending after ``t_s``."""
        total = 0
        for t_end, _, _, _, flows, _ in reversed(self.rows):
            if t_end <= t_s:
                break
            total += flows.get(own_flow_id, (0, 0))[0]
        return total

    def last_s(self) -> float | None:
        return self.rows[-1][0] if self.rows else None

    def first_seen_s(self, flow_id: str) -> float | None:
        """The end of the first record kept with a packet of ``flow_id`` (None: none)."""
        return next((r[0] - r[1] for r in self.rows if r[4].get(flow_id, (0, 0))[0] > 0), None)

    def drop_before(self, t_s: float) -> None:
        """Forget the records that ended before ``t_s``."""
        while self.rows and self.rows[0][0] < t_s:
            self.rows.popleft()

    def port_bps(self) -> float:
        return self.rows[-1][3] if self.rows else 0.0

    def series(self, own_flow_id: str, peers: frozenset = frozenset()) -> Series | None:
        """The node's records as series. ``peers``' packets (other intcc senders on the probe,
        identifying too) count with this flow's in ``own``: what the competitors answer is
        every probe's pulses together, and a peer is never a competitor."""
        rows = list(self.rows)
        if len(rows) < 2:
            return None
        t0 = rows[0][0] - rows[0][1]
        n = int(np.floor((rows[-1][0] - t0) / BIN_S)) + 1
        totals: dict = {}
        for r in rows:
            for fid, (k, _) in r[4].items():
                if fid != own_flow_id and fid not in peers:
                    totals[fid] = totals.get(fid, 0) + k
        ids = sorted(competing(totals, sum(r[5] for r in rows), MIN_COMPETITOR_TOTAL_PKTS))
        index = {f: i for i, f in enumerate(ids)}
        own = np.zeros(n)
        comp, lost = np.zeros((len(ids), n)), np.zeros((len(ids), n))
        qp = np.full(n, np.nan)
        other, tcp_rest = np.zeros(n), np.zeros(n)
        for t_end, span, depth_p, _, flows, not_tcp in rows:
            # A sink publishes a node's record at the first packet a period after its previous
            # one: all but that packet arrived within the period after the previous record. A
            # record spanning an idle gap (or a run before this one, from another sink) counts
            # its packets there, which may be before the series: those are left out.
            k = min(int(np.floor((t_end - span + min(span, SINK_PERIOD_MS / 1e3) / 2 - t0) / BIN_S)), n - 1)
            j = min(int(np.floor((t_end - t0) / BIN_S)), n - 1)
            if j >= 0:
                qp[j] = depth_p
            if k < 0:
                continue
            other[k] += not_tcp
            for fid, (packets, dropped) in flows.items():
                if fid == own_flow_id or fid in peers:
                    own[k] += packets
                elif fid in index:
                    comp[index[fid], k] += packets
                    lost[index[fid], k] += dropped
                else:
                    tcp_rest[k] += packets
        qp = _carried(qp)
        return Series(t0, own, comp, lost, ids, qp, self.port_bps(), float(self.capacity_pkts),
                      _busy_pps(own + comp.sum(axis=0) + other + tcp_rest, qp), other, tcp_rest,
                      comp_rtt_s=np.array([self.rtt_s.get(f, np.nan) for f in ids], dtype=float))


def _busy_pps(departed: np.ndarray, queue_pkts: np.ndarray) -> float | None:
    """The port's rate (packets/s): the median over 100 ms windows whose queue never
    emptied (the port sent all the while); None with fewer than MIN_BUSY_WINDOWS."""
    w = BUSY_WINDOW_BINS
    n = len(departed) // w
    if n < MIN_BUSY_WINDOWS:
        return None
    busy = (queue_pkts[:n * w].reshape(n, w) > 0).all(axis=1)
    if busy.sum() < MIN_BUSY_WINDOWS:
        return None
    return float(np.median(departed[:n * w].reshape(n, w).sum(axis=1)[busy])) / (w * BIN_S)


def _carried(x: np.ndarray) -> np.ndarray:
    """Each bin without a value takes the last one before it (0 before the first)."""
    ok = ~np.isnan(x)
    idx = np.where(ok, np.arange(len(x)), 0)
    np.maximum.accumulate(idx, out=idx)
    out = x[idx]
    out[~ok & (np.cumsum(ok) == 0)] = 0.0
    return out
