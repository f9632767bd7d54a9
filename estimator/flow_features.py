"""Features of the competitors read from their own packets at flow 1's bottleneck (issue 28).

The INT model's comp_* features estimate the competitor as "arrivals at the queue minus my
own packets": that holds with exactly two flows. The sink's hop records name the busiest
flows through each node with their packets since the node's previous record
(``HopRecord.top_flows``, ~every 10 ms), so a sender can read each competing flow from its
own packets, however many there are. Offline, the collection keeps the same counts
(``comp_packets_10ms``: every competing flow's packets at the bottleneck per 10 ms).

Over the last 30 s before each time, with ``busy`` the link's packet rate (the 90th
percentile of the arrival rate at the queue, as for comp_*):

  tf_flows_x              competing flows that carried >= 10 % of the competitors' packets
  tf_rate_x               the competitors' packets per second / busy
  tf_top_share_x          the busiest competitor's share of the competitors' packets
  tf_top_p10_x, _cv_x     the busiest competitor's rate in 0.2 s bins / busy: 10th
                          percentile (BBR's ProbeRTT: 200 ms every 10 s), std / mean
  tf_top_ac{2..10}_x      its rate's autocorrelation in base-RTT bins at lags of 2..10 RTTs
                          (BBR's gain cycle: 8 RTTs)
"""
from __future__ import annotations

from collections import deque

import numpy as np

WINDOW_S = 30.0
TOP_BIN_S = 0.2
MIN_FLOW_SHARE = 0.1
AC_LAGS_RTTS = (2, 4, 6, 8, 10)
FLOW_FEATURES = ("tf_flows_x", "tf_rate_x", "tf_top_share_x", "tf_top_p10_x", "tf_top_cv_x") \
    + tuple(f"tf_top_ac{lag}_x" for lag in AC_LAGS_RTTS)


class CompetitorSeries:
    """Competing flows' packets per interval at one node: ``t_end`` (N,) the end of each
    interval (s, the INT series' clock), ``span_s`` (N,) its length, ``packets`` (F, N)
    per competing flow."""

    def __init__(self, t_end, span_s, packets):
        self.t_end = np.asarray(t_end, dtype=float)
        self.span_s = np.asarray(span_s, dtype=float)
        self.packets = np.asarray(packets, dtype=float).reshape(-1, len(self.t_end))

    @classmethod
    def from_bins(cls, counts, t0_s: float, bin_s: float = 0.01) -> "CompetitorSeries":
        """From the collection's per-flow counts per ``bin_s`` from ``t0_s``."""
        counts = np.asarray(counts)
        n = counts.shape[1] if counts.ndim == 2 else 0
        return cls(t0_s + (np.arange(n) + 1) * bin_s, np.full(n, bin_s), counts.reshape(-1, n))

    @property
    def empty(self) -> bool:
        return self.packets.size == 0


def _rebin(t_mid, packets, start, bin_s, n):
    """Packets per bin of ``bin_s`` from ``start``, each interval counted at its middle
    (not at an edge, where float noise would move it a bin)."""
    k = np.floor((t_mid - start) / bin_s).astype(int)
    inside = (k >= 0) & (k < n)
    return np.bincount(k[inside], weights=packets[inside], minlength=n)


def flow_features(comp: CompetitorSeries | None, at_t, base_rtt_s, busy_pps) -> np.ndarray:
    """(len(at_t), len(FLOW_FEATURES)) at times ``at_t``; zeros where no competitor was
    seen in the window. ``base_rtt_s`` and ``busy_pps``: one value or one per time."""
    at_t = np.asarray(at_t, dtype=float)
    out = np.zeros((len(at_t), len(FLOW_FEATURES)))
    if comp is None or comp.empty:
        return out
    base = np.broadcast_to(np.asarray(base_rtt_s, dtype=float), at_t.shape)
    busy = np.broadcast_to(np.asarray(busy_pps, dtype=float), at_t.shape)
    for i, a in enumerate(at_t):
        sel = (comp.t_end <= a) & (comp.t_end > a - WINDOW_S)
        if not sel.any():
            continue
        t_end, pk = comp.t_end[sel], comp.packets[:, sel]
        t_mid = t_end - comp.span_s[sel] / 2
        span = max(float(t_end[-1] - t_end[0] + comp.span_s[sel][0]), 1e-3)
        per_flow = pk.sum(axis=1)
        total = float(per_flow.sum())
        if total <= 0:
            continue
        b = max(float(busy[i]), 1.0)
        top = pk[int(np.argmax(per_flow))]
        row = [float(np.sum(per_flow >= MIN_FLOW_SHARE * total)), total / span / b, float(per_flow.max()) / total]
        start = t_end[0] - comp.span_s[sel][0]
        n = int(span / TOP_BIN_S)
        if n >= 4:
            r = _rebin(t_mid, top, start, TOP_BIN_S, n) / TOP_BIN_S / b
            row += [float(np.percentile(r, 10)), float(r.std() / max(r.mean(), 1e-6))]
        else:
            row += [0.0, 0.0]
        rtt = max(float(base[i]), 0.01)
        n = int(span / rtt)
        ac = [0.0] * len(AC_LAGS_RTTS)
        if n >= 4:
            x = _rebin(t_mid, top, start, rtt, n)
            x = x - x.mean()
            energy = max(float(x @ x), 1e-12)
            ac = [float(x[:-lag] @ x[lag:]) / energy if n > lag + 2 else 0.0 for lag in AC_LAGS_RTTS]
        out[i] = row + ac
    return out


class HopFlows:
    """The live side: hop records (``top_flows``) of every node, kept per node; the
    competitors of one flow at one node as a CompetitorSeries."""

    KEEP_S = WINDOW_S + 5.0          # what the features' window can still reach

    def __init__(self):
        self._nodes: dict = {}        # node id -> deque[(t_end_s, span_s, {flow id: packets})]

    def add(self, rec) -> bool:
        """A telemetry.schema.HopRecord; False without top flows (or a first record)."""
        if not rec.top_flows or not rec.interval_ms:
            return False
        rows = self._nodes.setdefault(rec.node_id, deque())
        t = rec.ts_ns * 1e-9
        rows.append((t, rec.interval_ms / 1e3, {fid: k for fid, k in rec.top_flows}))
        while rows and rows[0][0] < t - self.KEEP_S:
            rows.popleft()
        return True

    def competitors(self, node_id: int, own_flow_id: str | None) -> CompetitorSeries | None:
        rows = list(self._nodes.get(node_id, ()))
        if not rows:
            return None
        ids = sorted({fid for _, _, flows in rows for fid in flows if fid != own_flow_id})
        packets = np.zeros((len(ids), len(rows)))
        for j, (_, _, flows) in enumerate(rows):
            for k, fid in enumerate(ids):
                packets[k, j] = flows.get(fid, 0)
        return CompetitorSeries([r[0] for r in rows], [r[1] for r in rows], packets)
