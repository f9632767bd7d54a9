"""Per-packet telemetry at the sink -> flow and hop records to publish.

Pure logic (no network): INTSink's MQTT exporter feeds every stripped packet
to :meth:`SinkTelemetry.on_packet` and publishes what it returns. A flow record
goes out at once when a loss is confirmed (at most one per ``min_gap_ms`` per
flow) and otherwise every ``period_ms`` while the flow has packets; a hop
record at most every ``period_ms`` per node, with the busiest flows this sink saw
through that node since its last one and the losses of each confirmed meanwhile
(``top_flows``: a sender reads its competitors' rates at its bottleneck from their own
packets, however many they are, and how they answer their own losses).
"""
from __future__ import annotations

import heapq
from collections import OrderedDict
from operator import itemgetter
from typing import Callable, Dict, List, Optional, Tuple

from int_node import ioam_decode
from int_node.ioam import RECONFIG_NEXT_NONE, RECONFIG_ON_CIRCUIT
from int_node.packet import flow_tuple

from .attribution import GapLabel, HopCounters, SeqTracker, label_gap
from .flowid import flow_id_from_key
from .schema import TOP_FLOWS_MAX, FlowRecord, HopRecord, HopState, encode, flow_topic, hop_topic

Publication = Tuple[str, bytes]     # (topic, payload)
OWD_PLAUSIBLE_US = 60e6


def hop_state(n) -> HopState:
    """HopState from a decoded IOAM node (ioam_decode.NodeData)."""
    st = n.state
    cap = st.queue_capacity_bytes if st else 0
    depth = n.queue_depth_bytes or 0
    return HopState(
        node_id=n.node_id or 0, ts_ns=(n.ts_sec or 0) * 1_000_000_000 + (n.ts_frac or 0),
        queue_depth_bytes=depth, queue_depth_pkts=n.buffer_occupancy or 0, queue_capacity_bytes=cap,
        queue_drops=st.queue_drops if st else 0, link_losses=st.link_losses if st else 0,
        data_rate_kbps=st.data_rate_kbps if st else 0, arrival_rate_pps=st.arrival_rate_pps if st else 0,
        flow_count=st.flow_count if st else 0, queue_occupancy=(depth / cap) if cap else None,
        rssi_dbm=None if not st or st.rssi_dbm == -128 else st.rssi_dbm,
        mcs=None if not st or st.mcs == 0xFF else st.mcs,
        transit_delay_ns=n.transit_delay_ns, hop_limit=n.hop_limit, rx_drops=st.rx_drops if st else None,
        queue_index=st.queue_index if st else None, queue_count=st.queue_count if st else None,
        queue_weight=st.queue_weight if st else None,
        reconfig_period_ms=st.reconfig_period_ms if st else None,
        reconfig_downtime_ms=st.reconfig_downtime_ms if st else None,
        reconfig_next_ms=None if not st or st.reconfig_next_ms == RECONFIG_NEXT_NONE else st.reconfig_next_ms,
        reconfig_epoch=st.reconfig_epoch if st else None, reconfig_flags=st.reconfig_flags if st else None)


def _counters(nodes) -> List[HopCounters]:
    out = []
    for n in nodes:
        st = n.state
        if st is None:
            continue
        cap = st.queue_capacity_bytes
        out.append(HopCounters(n.node_id, st.queue_drops, st.link_losses,
                               (n.queue_depth_bytes or 0) / cap if cap else 0.0,
                               st.flow_queue_drops, st.flow_link_losses, st.queue_index or 0,
                               bool((st.reconfig_flags or 0) & RECONFIG_ON_CIRCUIT),
                               st.reconfig_epoch if st.reconfig_period_ms else None,
                               st.reconfig_downtime_ms if st.reconfig_period_ms else None))
    return out


def _queue_key(n) -> tuple:
    """The queue a decoded node's counters are of (attribution.HopCounters.key)."""
    st = n.state
    if st is None:
        return n.node_id, None, None
    return n.node_id, st.queue_index or 0, bool((st.reconfig_flags or 0) & RECONFIG_ON_CIRCUIT)


class _Flow:
    __slots__ = ("flow_id", "tuple", "tracker", "packets", "nodes", "queues", "last_pub_ns", "loss_due",
                 "iv_start_ns", "iv_packets", "iv_cong", "iv_link", "iv_reconfig", "last_cause", "last_loss_ns",
                 "owd_us", "last_seen_ns")

    def __init__(self, key: bytes, now_ns: int, reorder_pkts: int):
        self.flow_id = flow_id_from_key(key)
        self.tuple = flow_tuple(key)
        self.tracker = SeqTracker(reorder_pkts)
        self.packets = 0
        self.nodes = []
        self.queues: Dict[tuple, object] = {}    # each queue's node from the flow's last packet through it
        self.last_pub_ns = 0
        self.loss_due = False
        self.iv_start_ns = now_ns
        self.iv_packets = self.iv_cong = self.iv_link = self.iv_reconfig = 0
        self.last_cause: Optional[str] = None
        self.last_loss_ns: Optional[int] = None
        self.owd_us: Optional[float] = None
        self.last_seen_ns = now_ns


def record_due(since_ns: int, loss_due: bool, period_ns: int, min_gap_ns: int) -> Optional[str]:
    """Whether a flow's packet brings a record, and why: every ``period_ns`` while the flow
    has packets ("periodic"), sooner after a new loss, but ``min_gap_ns`` apart ("loss").
    The one rule: the sink publishes by it, and the estimator's offline record stream
    (estimator/int_series.py) is cut by it."""
    if loss_due and since_ns >= min_gap_ns:
        return "loss"
    return "periodic" if since_ns >= period_ns else None


#: The sink's defaults, for what replays its rule offline.
PERIOD_MS, MIN_GAP_MS = 10.0, 1.0


class SinkTelemetry:
    def __init__(self, period_ms: float = PERIOD_MS, min_gap_ms: float = MIN_GAP_MS, reorder_pkts: int = 3,
                 max_flows: int = 4096, idle_s: float = 60.0):
        if period_ms <= 0 or min_gap_ms < 0:
            raise ValueError("period_ms must be > 0 and min_gap_ms >= 0")
        self.period_ns = int(period_ms * 1e6)
        self.min_gap_ns = int(min_gap_ms * 1e6)
        self.reorder_pkts = reorder_pkts
        self.max_flows = max_flows
        self.idle_ns = int(idle_s * 1e9)
        self.flows: "OrderedDict[bytes, _Flow]" = OrderedDict()
        self._hop_pub_ns: Dict[int, int] = {}
        # per node: packets of each flow through it since its last hop record (its top flows)
        self._hop_flow_pkts: Dict[int, Dict[str, int]] = {}
        # ... and the losses of each flow confirmed meanwhile (wherever on its path)
        self._hop_flow_lost: Dict[int, Dict[str, int]] = {}
        # each known flow's IP protocol, for its top_flows entries (UDP has no CCA to estimate)
        self._proto_of: Dict[str, int] = {}
        #: the node's per-flow round trips (int_node FlowRTT.rtt_us: flow key -> us or None),
        #: where the sink's node measures them: each top_flows entry then ends with its flow's
        self.flow_rtt_us: Optional[Callable[[bytes], Optional[float]]] = None
        self._key_of: Dict[str, bytes] = {}
        self._swept_ns = 0
        self.counters = {"packets": 0, "decode_errors": 0, "flow_records": 0, "hop_records": 0,
                         "flows_evicted": 0, "no_e2e": 0}

    def on_packet(self, key: bytes, trace_raw, e2e_raw, now_ns: int) -> List[Publication]:
        """One stripped packet's raw IOAM trace and E2E option, arrived at ``now_ns``."""
        try:
            nodes = ioam_decode.decode_trace(trace_raw).nodes
            e2e = ioam_decode.decode_e2e(e2e_raw, 0, len(e2e_raw)) if e2e_raw else None
        except ioam_decode.IOAMError:
            self.counters["decode_errors"] += 1
            return []
        return self.on_decoded(key, nodes, e2e, now_ns)

    def on_decoded(self, key: bytes, nodes, e2e, now_ns: int) -> List[Publication]:
        """on_packet after decoding (ioam_decode NodeData list, E2E or None): where a sink's
        per-packet log is replayed (telemetry/replay.py), so offline records are this
        sink's records."""
        c = self.counters
        c["packets"] += 1
        f = self._flow(key, now_ns)
        f.packets += 1
        f.iv_packets += 1
        f.last_seen_ns = now_ns
        new_lost = 0
        if e2e is not None and e2e.seq is not None:
            prev = f.nodes

            def label(n: int) -> GapLabel:
                return label_gap(n, _counters(f.queues.values()), _counters(nodes), previous=_counters(prev))
            r = f.tracker.observe(e2e.seq, label)
            cong, link, reconfig = r.confirmed
            new_lost = cong + link + reconfig
            if new_lost:
                f.iv_cong += cong
                f.iv_link += link
                f.iv_reconfig += reconfig
                f.last_cause = max((cong, "congestion"), (link, "link"), (reconfig, "reconfig"),
                                   key=itemgetter(0))[1]      # a tie: congestion, then link
                f.last_loss_ns = now_ns
                f.loss_due = True
            if e2e.ts_sec is not None:
                owd_us = (now_ns - e2e.ts_sec * 1_000_000_000 - (e2e.ts_frac or 0)) / 1000
                # Source and sink clocks are one clock on a testbed; across hosts
                # they may not be synchronised at all: publish null, not nonsense.
                f.owd_us = owd_us if abs(owd_us) < OWD_PLAUSIBLE_US else None
        else:
            c["no_e2e"] += 1
        f.nodes = nodes
        for n in nodes:
            f.queues[_queue_key(n)] = n
        out: List[Publication] = []
        reason = record_due(now_ns - f.last_pub_ns, f.loss_due, self.period_ns, self.min_gap_ns)
        if reason:
            out.append(self._flow_record(f, now_ns, reason))
        for n in nodes:
            seen = self._hop_flow_pkts.setdefault(n.node_id, {})
            seen[f.flow_id] = seen.get(f.flow_id, 0) + 1
            if new_lost:           # rare: no dict work per packet otherwise
                lost = self._hop_flow_lost.setdefault(n.node_id, {})
                lost[f.flow_id] = lost.get(f.flow_id, 0) + new_lost
            last_ns = self._hop_pub_ns.get(n.node_id, 0)
            if now_ns - last_ns >= self.period_ns:
                self._hop_pub_ns[n.node_id] = now_ns
                top = heapq.nlargest(TOP_FLOWS_MAX, seen.items(), key=itemgetter(1))
                self._hop_flow_pkts[n.node_id] = {}
                lost = self._hop_flow_lost.pop(n.node_id, {})
                entries = [[fid, k, lost.get(fid, 0), self._proto_of.get(fid, 0)] for fid, k in top]
                if self.flow_rtt_us is not None:
                    for e in entries:
                        key = self._key_of.get(e[0])
                        rtt_us = self.flow_rtt_us(key) if key is not None else None
                        e.append(None if rtt_us is None else int(round(rtt_us)))
                rec = HopRecord(**vars(hop_state(n)), interval_ms=(now_ns - last_ns) / 1e6 if last_ns else None,
                                top_flows=entries)
                out.append((hop_topic(rec.node_id), encode(rec)))
                c["hop_records"] += 1
        if now_ns - self._swept_ns > 1_000_000_000:
            self._sweep(now_ns)
        return out

    def _flow(self, key: bytes, now_ns: int) -> _Flow:
        f = self.flows.get(key)
        if f is None:
            if len(self.flows) >= self.max_flows:
                gone = self.flows.popitem(last=False)[1].flow_id
                self._proto_of.pop(gone, None)
                self._key_of.pop(gone, None)
                self.counters["flows_evicted"] += 1
            f = self.flows[key] = _Flow(key, now_ns, self.reorder_pkts)
            self._proto_of[f.flow_id] = f.tuple[2]
            self._key_of[f.flow_id] = key
        else:
            self.flows.move_to_end(key)
        return f

    def _sweep(self, now_ns: int) -> None:
        self._swept_ns = now_ns
        while self.flows:
            key, f = next(iter(self.flows.items()))
            if now_ns - f.last_seen_ns < self.idle_ns:
                break
            del self.flows[key]
            self._proto_of.pop(f.flow_id, None)
            self._key_of.pop(f.flow_id, None)

    def _flow_record(self, f: _Flow, now_ns: int, reason: str) -> Publication:
        t = f.tracker
        lost = t.total_lost
        src, dst, proto, sport, dport = f.tuple
        rec = FlowRecord(
            flow_id=f.flow_id, ts_ns=now_ns, reason=reason, src=src, dst=dst, proto=proto, sport=sport,
            dport=dport, seq=t.highest or 0, packets=f.packets, lost=lost,
            lost_congestion=t.lost["congestion"], lost_link=t.lost["link"], lost_reconfig=t.lost["reconfig"],
            reordered=t.reordered,
            loss_rate=lost / (f.packets + lost) if f.packets + lost else 0.0,
            interval_ms=(now_ns - f.iv_start_ns) / 1e6, interval_packets=f.iv_packets,
            interval_lost=f.iv_cong + f.iv_link + f.iv_reconfig, interval_lost_congestion=f.iv_cong,
            interval_lost_link=f.iv_link, interval_lost_reconfig=f.iv_reconfig, path=[hop_state(n) for n in f.nodes],
            last_loss_cause=f.last_cause, last_loss_ns=f.last_loss_ns, one_way_delay_us=f.owd_us,
            sink_node_id=f.nodes[-1].node_id if f.nodes else None)
        f.last_pub_ns = now_ns
        f.loss_due = False
        f.iv_start_ns = now_ns
        f.iv_packets = f.iv_cong = f.iv_link = f.iv_reconfig = 0
        self.counters["flow_records"] += 1
        return flow_topic(f.flow_id), encode(rec)
