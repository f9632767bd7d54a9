"""The competitors at each node, live: the sink's hop records (their ``top_flows``: each
flow's packets, losses and protocol through the node since the last record) kept per node,
and one flow's competitors there as a CompetitorSeries (flow_features.py computes their
features from it, offline and live alike)."""
from __future__ import annotations

from collections import deque

import numpy as np

from telemetry.flowid import PROTO_TCP

from .flow_features import (COMPETITOR_MIN_PACKETS, MIN_FLOW_SHARE, RATE_WINDOW_RTTS, RATE_WINDOW_S, WINDOW_S,
                            CompetitorSeries)


class HopFlows:
    """The live side: hop records (``top_flows``) of every node, kept per node; the
    competitors of one flow at one node as a CompetitorSeries."""

    KEEP_S = WINDOW_S + 5.0          # what the features' window can still reach
    SEEN_MAX = 4096                  # flows tracked for arrival; beyond, the quiet ones are forgotten

    def __init__(self, keep_s: float | None = KEEP_S):
        self.keep_s = keep_s           # None: keep every record (a whole run replayed offline)
        self._nodes: dict = {}        # node id -> deque[(t_end_s, span_s, {flow id: packets}, {flow id: lost} or None)]
        # (node id, flow id) -> [first seen s, packets since, last seen s]: arrivals, over the whole run
        self._seen: dict = {}
        self.latest_s: float | None = None
        self.not_tcp_entries = 0      # top_flows entries left out: flows of another protocol than TCP

    def add(self, rec) -> bool:
        """A telemetry.schema.HopRecord; False without top flows (or a first record)."""
        if not rec.top_flows or not rec.interval_ms:
            return False
        # the IP protocol comes as a fourth element from sinks that name it (2026-11-30 on): a flow that is
        # not TCP (UDP cross traffic) has no CCA to estimate and is no competitor of one
        top = [e for e in rec.top_flows if len(e) < 4 or e[3] in (0, PROTO_TCP)]
        self.not_tcp_entries += len(rec.top_flows) - len(top)
        rows = self._nodes.setdefault(rec.node_id, deque())
        t = rec.ts_ns * 1e-9
        # losses come as a third element from sinks that count them (2026-11-28 on; None: not known)
        lost = {e[0]: e[2] for e in top} if all(len(e) > 2 for e in top) else None
        rows.append((t, rec.interval_ms / 1e3, {e[0]: e[1] for e in top}, lost))
        while self.keep_s is not None and rows and rows[0][0] < t - self.keep_s:
            rows.popleft()
        self.latest_s = t if self.latest_s is None else max(self.latest_s, t)
        for fid, k, *_ in top:
            seen = self._seen.setdefault((rec.node_id, fid), [t, 0, t])
            seen[1] += k
            seen[2] = t
        if len(self._seen) > self.SEEN_MAX:
            self._seen = {key: v for key, v in self._seen.items()
                          if v[1] >= COMPETITOR_MIN_PACKETS or v[2] >= t - (self.keep_s or self.KEEP_S)}
        return True

    def competitor_age_s(self, own_flow_id: str | None) -> float | None:
        """How long another data flow has shared a node with this one (s, the records'
        clock, from its first packet there): None while none has carried
        COMPETITOR_MIN_PACKETS at any node. Alone, a flow's estimates name what its own
        queue looks like (a lone flow reads as vegas), so none are made then."""
        if own_flow_id is None:
            return None
        arrivals = [first for (node, fid), (first, packets, _) in self._seen.items()
                    if fid != own_flow_id and packets >= COMPETITOR_MIN_PACKETS and (node, own_flow_id) in self._seen]
        return self.latest_s - min(arrivals) if arrivals else None

    def competitors(self, node_id: int, own_flow_id: str | None) -> CompetitorSeries | None:
        rows = list(self._nodes.get(node_id, ()))
        if not rows:
            return None
        ids = sorted({fid for _, _, flows, _ in rows for fid in flows if fid != own_flow_id})
        packets, lost = np.zeros((len(ids), len(rows))), np.zeros((len(ids), len(rows)))
        for j, (_, _, flows, losses) in enumerate(rows):
            for k, fid in enumerate(ids):
                packets[k, j] = flows.get(fid, 0)
                lost[k, j] = (losses or {}).get(fid, 0)
        known = all(r[3] is not None for r in rows)
        return CompetitorSeries([r[0] for r in rows], [r[1] for r in rows], packets, lost if known else None)

    def competitor_rate_ratio(self, node_id: int | None, own_flow_id: str | None,
                              window_s: float = RATE_WINDOW_S, rtt_s: float | None = None) -> float | None:
        """The mean competitor's packet rate over this flow's at ``node_id``, over the last
        ``window_s`` of hop records: the competitors are the flows that carried at least
        MIN_FLOW_SHARE of the others' packets (not iperf3's control connections). Where
        this flow has no packet in them, over RATE_WINDOW_RTTS of its ``rtt_s``: in loss
        recovery on an RTT of seconds a flow sends nothing for seconds (seed 2617, a
        32-BDP buffer, RTTs of 4-5 s: its switch went without a match). None without
        records covering half the window, without a competitor, or without a packet of
        this flow (it has no rate to scale)."""
        rows = list(self._nodes.get(node_id, ()))
        if not rows or own_flow_id is None:
            return None
        totals = self._packets_in_last(rows, window_s)
        if totals is not None and totals.get(own_flow_id, 0) <= 0 and rtt_s is not None \
                and RATE_WINDOW_RTTS * rtt_s > window_s:
            window_s = RATE_WINDOW_RTTS * rtt_s
            totals = self._packets_in_last(rows, window_s)
        if totals is None:
            return None
        own = totals.pop(own_flow_id, 0)
        others = sum(totals.values())
        competitors = [k for k in totals.values() if k >= MIN_FLOW_SHARE * others]
        if own <= 0 or not competitors:
            return None
        return sum(competitors) / len(competitors) / own

    @staticmethod
    def _packets_in_last(rows, window_s: float) -> dict | None:
        """Each flow's packets in the last ``window_s`` of records; None if they cover
        less than half of it."""
        recent = [r for r in rows if r[0] > rows[-1][0] - window_s]
        if sum(span for _, span, _, _ in recent) < window_s / 2:
            return None
        totals: dict = {}
        for _, _, flows, _ in recent:
            for fid, k in flows.items():
                totals[fid] = totals.get(fid, 0) + k
        return totals
