"""The INT series of a flow at its bottleneck, where it comes from: the sink's JSON-lines
log (per packet, the collection), the record stream the sink publishes (one record per
~10 ms: what a live sender gets, and what models train on), and the live FlowRecords
(IntSeries). Columns INT_SERIES_COLUMNS (+ PACKETS_COLUMN); the features are
int_features.py's."""
from __future__ import annotations

import json

import numpy as np

from telemetry.attribution import SeqTracker
from telemetry.sink import PERIOD_MS, record_due

from .features import TraceError

INT_SERIES_COLUMNS = ("t_s", "qdepth_bytes", "capacity_bytes", "arrival_pps", "flow_count", "queue_drops")
#: An optional 7th column: packets of flow 1 each row stands for (1 per packet in the
#: sink's log; a published FlowRecord stands for its ``interval_packets``).
PACKETS_COLUMN = "packets"


def _sink_log(path: str, src: str):
    """The records of an INTSink JSON-lines log whose flow comes from ``src``; lines that
    are not records (a torn last line of a log still being written) are skipped."""
    try:
        f = open(path)
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror}") from None
    with f:
        for line in f:
            try:
                rec = json.loads(line)
                if rec["flow"]["src"] == src:
                    yield rec
            except (ValueError, KeyError, TypeError):
                continue


def int_series_from_jsonl(path: str, src: str, dport: int | None = None) -> np.ndarray:
    """The per-packet series (columns INT_SERIES_COLUMNS) of the flow(s) from ``src``
    (and to ``dport`` if given) in an INTSink JSON-lines log, at the bottleneck hop.
    Lines that are not telemetry records are skipped; a log without any record of
    that flow is a TraceError."""
    return bottleneck_series(hop_series_from_jsonl(path, src, dport))


def hop_series_from_jsonl(path: str, src: str, dport: int | None = None) -> dict[int, np.ndarray]:
    """int_series_from_jsonl's series at every hop (by path index), each with the index of
    its record in the flow's records as a last column."""
    per_hop: dict = {}
    records = 0
    for rec in _sink_log(path, src):
        try:
            if dport is not None and rec["flow"]["dport"] != dport:
                continue
            hops = list(enumerate(rec["trace"]["hops"]))
        except (KeyError, TypeError):
            continue
        for i, hop in hops:
            try:
                st = hop.get("state") or {}
                if hop.get("ts_sec") is None or hop.get("queue_depth_bytes") is None:
                    continue
                per_hop.setdefault(i, []).append(
                    (hop["ts_sec"] + (hop.get("ts_frac") or 0) * 1e-9, hop["queue_depth_bytes"],
                     st.get("queue_capacity_bytes", 0), st.get("arrival_rate_pps", 0),
                     st.get("flow_count", 0), st.get("queue_drops", 0), records))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
        records += 1
    if not per_hop:
        raise TraceError(f"{path}: no telemetry of flow from {src}")
    return {i: np.asarray(rows, dtype=float) for i, rows in per_hop.items()}


def bottleneck_series(per_hop: dict[int, np.ndarray]) -> np.ndarray:
    """The series of the hop fullest on average over the whole run (offline's choice)."""
    return max(per_hop.values(), key=_mean_occupancy)[:, :len(INT_SERIES_COLUMNS)]


def causal_pick_share(per_hop: dict[int, np.ndarray]) -> float:
    """The share of the flow's records at which the hop fullest on average so far (the live
    estimator's choice, IntSeries.bottleneck_node) is the one bottleneck_series takes over
    the whole run: 1.0 when training on the whole run's choice is what a live sender sees."""
    hops = list(per_hop)
    n = int(max(s[:, -1].max() for s in per_hop.values())) + 1
    total, count = np.zeros((n, len(hops))), np.zeros((n, len(hops)))
    for k, i in enumerate(hops):
        at = per_hop[i][:, -1].astype(int)
        total[at, k] = _occupancy(per_hop[i])
        count[at, k] = 1
    present = count.any(axis=1)
    total, count = np.cumsum(total, axis=0), np.cumsum(count, axis=0)
    mean_so_far = np.where(count > 0, total / np.maximum(count, 1), -np.inf)
    whole = hops.index(max(hops, key=lambda i: _mean_occupancy(per_hop[i])))
    return float(np.mean(np.argmax(mean_so_far, axis=1)[present] == whole))


#: The sink publishes a flow's record every 10 ms while it has packets (telemetry/sink.py).
SINK_PERIOD_S = PERIOD_MS / 1e3


def record_stream(series: np.ndarray, period_s: float = SINK_PERIOD_S) -> np.ndarray:
    """The FlowRecords the sink publishes for a per-packet series, as a live sender
    receives them: cut by the sink's own rule (telemetry.sink.record_due) on the series'
    times, that packet's hop values with the packets since the last record
    (PACKETS_COLUMN). Loss-triggered records (at most one per ms) are left out: the
    series carries no losses. The times are the bottleneck hop's stamps, the sink's
    arrival shifted by the path after it; exact to the ns where the times keep them (seconds
    from a run's start do; epoch seconds as floats keep ~0.2 µs)."""
    s = np.asarray(series, dtype=float)
    if len(s) == 0:
        return np.zeros((0, len(INT_SERIES_COLUMNS) + 1))
    period_ns = int(round(period_s * 1e9))
    keep, last_ns = [], None
    for i, t in enumerate(s[:, 0]):
        now_ns = int(round(t * 1e9))
        if last_ns is None or record_due(now_ns - last_ns, False, period_ns, 0):
            keep.append(i)
            last_ns = now_ns
    keep = np.asarray(keep)
    counts = np.diff(np.concatenate(([-1], keep)))       # packets since the last record, this one included
    return np.hstack([s[keep, :len(INT_SERIES_COLUMNS)], counts[:, None].astype(float)])


#: A jump of the IOAM E2E sequence this large is a source restart, not a loss (the sink's rule)
E2E_RESYNC_JUMP = 65536


def flow_counts_from_jsonl(path: str, src: str, t0_s: float, bin_s: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """Packets from ``src`` the sink logged per flow (by destination port, in port order;
    iperf3's control connection shares its data flow's) per ``bin_s`` from ``t0_s``, and
    the packets each flow lost on the way: gaps in its IOAM E2E sequence, counted in the
    bin of the packet after the gap (a packet that comes back late is not subtracted).
    Two (flows, bins) uint16 arrays, by the first hop's timestamp (the bottleneck's on
    the dumbbell)."""
    times, ports, gaps, trackers = [], [], [], {}
    for rec in _sink_log(path, src):
        try:
            hop = rec["trace"]["hops"][0]
            t = hop["ts_sec"] + (hop.get("ts_frac") or 0) * 1e-9
            port = int(rec["flow"]["dport"])
        except (ValueError, KeyError, TypeError, IndexError):
            continue
        seq = (rec.get("e2e") or {}).get("seq")
        gap = 0
        if isinstance(seq, int):
            # the sink's own sequence rule (a gap opened ahead; a jump of 2^16 a restart)
            tracker = trackers.get(port) or trackers.setdefault(port, SeqTracker(resync_gap=E2E_RESYNC_JUMP))
            gap = tracker.observe(seq).gap
        ports.append(port)
        times.append(t)
        gaps.append(gap)
    if not times:
        return np.zeros((0, 0), dtype=np.uint16), np.zeros((0, 0), dtype=np.uint16)
    idx = np.floor((np.asarray(times) - t0_s) / bin_s).astype(np.int64)
    ports, gaps = np.asarray(ports), np.asarray(gaps)
    keep = idx >= 0
    idx, ports, gaps = idx[keep], ports[keep], gaps[keep]
    bins = int(idx.max()) + 1 if len(idx) else 0
    flows = np.unique(ports)
    packets, lost = np.zeros((len(flows), bins), dtype=np.int64), np.zeros((len(flows), bins), dtype=np.int64)
    for row, port in enumerate(flows):
        packets[row] = np.bincount(idx[ports == port], minlength=bins)
        lost[row] = np.bincount(idx[ports == port], weights=gaps[ports == port], minlength=bins)
    cap = np.iinfo(np.uint16).max
    return np.minimum(packets, cap).astype(np.uint16), np.minimum(lost, cap).astype(np.uint16)


class IntSeries:
    """The series built online from the sink's published FlowRecords of one flow
    (one row per record and hop; the bottleneck hop chosen when asked)."""

    def __init__(self, flow_id: str | None = None):
        self.flow_id = flow_id
        self._hops: dict = {}
        self._node_ids: dict = {}         # path index -> node id
        self.records = 0

    def add(self, rec) -> bool:
        """A telemetry.schema.FlowRecord; False if it is another flow's."""
        if self.flow_id is not None and rec.flow_id != self.flow_id:
            return False
        self.records += 1
        for i, h in enumerate(rec.path):
            self._node_ids[i] = h.node_id
            self._hops.setdefault(i, []).append(
                (h.ts_ns * 1e-9, h.queue_depth_bytes, h.queue_capacity_bytes, h.arrival_rate_pps,
                 h.flow_count, h.queue_drops, rec.interval_packets))
        return True

    def array(self) -> np.ndarray | None:
        if not self._hops:
            return None
        return max((np.asarray(r, dtype=float) for r in list(self._hops.values())), key=_mean_occupancy)

    def bottleneck_node(self) -> int | None:
        """The node id of the hop array() picks (the fullest queue so far)."""
        if not self._hops:
            return None
        i = max(list(self._hops), key=lambda k: _mean_occupancy(np.asarray(self._hops[k], dtype=float)))
        return self._node_ids.get(i)


def _occupancy(s: np.ndarray) -> np.ndarray:
    return s[:, 1] / np.maximum(s[:, 2], 1.0)


def _mean_occupancy(s: np.ndarray) -> float:
    return float(np.mean(_occupancy(s)))
