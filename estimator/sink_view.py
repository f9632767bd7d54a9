"""What a sender holds of the sink's records for one flow, live or replayed: its
FlowRecords as an IntSeries (its path's queues) and every node's hop records as HopFlows
(its competitors there). The live estimator fills one from MQTT; the collection fills one
from the sink's own replay of its per-packet log (telemetry/replay.py), so models train on
the records a live sender receives, computed by the same code."""
from __future__ import annotations

from collections import deque

import numpy as np

from telemetry.replay import replay

from .features import TraceError
from .competitor_features import competitor_features
from .flow_features import CompetitorSeries
from .hop_flows import HopFlows
from .int_features import busy_pps, int_features
from .int_series import IntSeries

#: hop records kept while the flow's first FlowRecord has not come (they wait for it)
EARLY_HOPS_MAX = 1000


class SinkView:
    """One flow's records (``series``) and the hop records from its first record on
    (``hops``: the training series start there). ``keep_s``: how much of the hop records
    HopFlows keeps (None: all, for a whole run replayed offline)."""

    def __init__(self, flow_id: str | None = None, keep_s: float | None = HopFlows.KEEP_S):
        self.series = IntSeries(flow_id)
        self.hops = HopFlows(keep_s=keep_s)
        self.first_record_ns: int | None = None
        self._early_hops: deque = deque(maxlen=EARLY_HOPS_MAX)

    @property
    def flow_id(self) -> str | None:
        return self.series.flow_id

    def add(self, rec) -> bool:
        """A FlowRecord or HopRecord; False if it is not kept (another flow's record)."""
        return self.add_hop(rec) if rec.type == "hop" else self.add_flow_record(rec)

    def add_flow_record(self, rec) -> bool:
        if not self.series.add(rec):
            return False
        if self.first_record_ns is None:
            self.first_record_ns = rec.ts_ns
            while self._early_hops:
                self.add_hop(self._early_hops.popleft())
        return True

    def add_hop(self, rec) -> bool:
        if self.first_record_ns is None:
            self._early_hops.append(rec)       # kept until the flow's first record tells which count
            return False
        return rec.ts_ns >= self.first_record_ns and self.hops.add(rec)

    def competitors(self) -> CompetitorSeries | None:
        """The flow's competitors at its bottleneck (the fullest hop so far)."""
        return self.hops.competitors(self.series.bottleneck_node(), self.flow_id)

    def features(self, at_t, base_rtt_s, flows: bool) -> np.ndarray | None:
        """The INT features (and with ``flows`` the competitors' features) at the times
        ``at_t``, from what this view holds; None before it holds two records."""
        series = self.series.array()
        if series is None or len(series) < 2:
            return None
        return telemetry_features(series, self.competitors() if flows else None, at_t, base_rtt_s, flows)


def telemetry_features(series: np.ndarray, comp: CompetitorSeries | None, at_t, base_rtt_s,
                       flows: bool) -> np.ndarray:
    """int_features (+ competitor_features with ``flows``) of a record series: one
    computation for a live view and for a collected run's stored arrays."""
    at_t = np.atleast_1d(np.asarray(at_t, dtype=float))
    F = int_features(series, at_t, base_rtt_s)
    if not flows:
        return F
    return np.hstack([F, competitor_features(comp, series, at_t, base_rtt_s, busy_pps(series, at_t))])


def replayed_view(log_path: str, src: str, dport: int | None = None) -> SinkView:
    """The SinkView a live sender of the flow from ``src`` (to ``dport``) would have held at
    the end of a run, from the sink's per-packet log replayed through the sink
    (telemetry.replay): the flow is that source's busiest (iperf3's control connection
    shares its data flow's port); every hop record is kept. A log without a record of
    that flow is a TraceError."""
    records, packets = [], {}
    for _, rec in replay(log_path):
        records.append(rec)
        if rec.type != "hop" and rec.src == src and (dport is None or rec.dport == dport):
            packets[rec.flow_id] = rec.packets
    if not packets:
        raise TraceError(f"{log_path}: no telemetry of flow from {src}")
    view = SinkView(max(packets, key=packets.get), keep_s=None)
    for rec in records:
        view.add(rec)
    return view


def view_arrays(view: SinkView) -> dict:
    """A replayed view as a collected run's raw arrays (dataset.save_run): the flow's
    record series (``int_record_series``, INT_SERIES_COLUMNS + packets) and its competitors
    at its bottleneck (``comp_t_end``, ``comp_span_s``, ``comp_packets``, ``comp_lost``)."""
    out = {"int_record_series": view.series.array()}
    comp = view.competitors()
    if comp is not None:
        out.update(comp_t_end=comp.t_end, comp_span_s=comp.span_s, comp_packets=comp.packets)
        if comp.lost is not None:
            out["comp_lost"] = comp.lost
    return out


def stored_competitors(raw: dict) -> CompetitorSeries | None:
    """view_arrays' competitors back from a run's raw arrays; None if it kept none."""
    if "comp_t_end" not in raw:
        return None
    return CompetitorSeries(raw["comp_t_end"], raw["comp_span_s"], raw["comp_packets"], raw.get("comp_lost"))
