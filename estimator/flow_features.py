"""Features of the competitors read from their own packets at flow 1's bottleneck.

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

and how the competitors respond to the queue and its drops (``flow_response``: all competing
flows' packets with flow 1's record stream, in bins of one base RTT, at least 50 ms, over
the last 30 s from 0.5 s after the first competitor packet; rates relative to ``busy``):

  fr_rate_qdelay_corr     correlation of their rate with the queueing delay (Vegas backs off
                          as the queue grows; loss-based flows grow into it)
  fr_change_qdelay_corr   ... of the rate's next change with the queueing delay
  fr_qdelay_slope         the rate's least-squares slope over the queueing delay (base RTTs)
  fr_backoff3, _8         the smallest rate in the 3 (8) bins after a drop event over the
                          median of the 4 bins up to it, median over events (-1: no event):
                          Reno halves, CUBIC keeps 0.7, BBR hardly reacts
  fr_cut_share            share of drop events followed by a rate below 0.8x within 8 bins
  fr_growth               the rate's slope between drop events (or over the last 10 s) per
                          second, relative to its median
  fr_steadiness           the median bin-to-bin change of the rate over its median (BBR paces)
  fr_own_corr             correlation of their rate with flow 1's own packets
  fr_drop_events          drop events per second (drops in bins less than 4 apart: one event)

and how often the busiest competitor all but stops (``flow_dips``: its packets in 0.2 s bins
over the last 30 s from 1 s after its first packet, relative to their median):

  tf_top_p2_x             the 2nd percentile
  tf_top_dips_x           the share of bins below a quarter of the median

BBR's ProbeRTT (a window of 4 packets for 200 ms once the queue has kept its min RTT from
being refreshed for 10 s) is such a dip, 2-4 % of the bins; a loss-based flow beside a
shallow queue never drops below half its rate. tf_top_p10_x misses it (seed 30, buffers
under 10 BDP, 15 s in: p2 0.10-0.12 for bbr against 0.33-0.64, dips 0.04 against 0-0.02).

How the competing flows answer their own losses: own_loss_features.py; all the groups
together: competitor_features.py.
"""
from __future__ import annotations

import numpy as np


WINDOW_S = 30.0
TOP_BIN_S = 0.2
MIN_FLOW_SHARE = 0.1
#: A competitor's data flow has carried this many packets through a node: iperf3's control
#: connection carries 13 from client to server in a whole run; a Vegas flow that arrives
#: 10 s late into a deep queue a cubic flow holds gets ~2 a second (seed 2615: 100 took
#: longer than the run)
COMPETITOR_MIN_PACKETS = 30
RATE_WINDOW_S = 2.0              # competitor_rate_ratio: some RTTs, a sawtooth or BBR's gain cycle
RATE_WINDOW_RTTS = 2.0           # ... or this many of the flow's RTTs where it sent nothing in 2 s (deep buffers)
AC_LAGS_RTTS = (2, 4, 6, 8, 10)
FLOW_FEATURES = ("tf_flows_x", "tf_rate_x", "tf_top_share_x", "tf_top_p10_x", "tf_top_cv_x") \
    + tuple(f"tf_top_ac{lag}_x" for lag in AC_LAGS_RTTS)
RESPONSE_MIN_BIN_S = 0.05
RESPONSE_SETTLE_S = 0.5
FLOW_RESPONSE_FEATURES = ("fr_rate_qdelay_corr", "fr_change_qdelay_corr", "fr_qdelay_slope", "fr_backoff3",
                          "fr_backoff8", "fr_cut_share", "fr_growth", "fr_steadiness", "fr_own_corr",
                          "fr_drop_events")
DIP_SETTLE_S = 1.0
DIP_BELOW = 0.25
DIP_FEATURES = ("tf_top_p2_x", "tf_top_dips_x")


class CompetitorSeries:
    """Competing flows' packets per interval at one node: ``t_end`` (N,) the end of each
    interval (s, the INT series' clock), ``span_s`` (N,) its length, ``packets`` (F, N)
    per competing flow."""

    def __init__(self, t_end, span_s, packets, lost=None):
        self.t_end = np.asarray(t_end, dtype=float)
        self.span_s = np.asarray(span_s, dtype=float)
        self.packets = np.asarray(packets, dtype=float).reshape(-1, len(self.t_end))
        #: (F, N) packets each flow lost on the way (gaps in its E2E sequence), or None: not known
        self.lost = None if lost is None else np.asarray(lost, dtype=float).reshape(self.packets.shape)

    @classmethod
    def from_bins(cls, counts, t0_s: float, bin_s: float = 0.01, lost=None) -> "CompetitorSeries":
        """From the collection's per-flow counts per ``bin_s`` from ``t0_s`` (and losses)."""
        counts = np.asarray(counts)
        n = counts.shape[1] if counts.ndim == 2 else 0
        if lost is not None and np.asarray(lost).shape != counts.shape:
            lost = None
        return cls(t0_s + (np.arange(n) + 1) * bin_s, np.full(n, bin_s), counts.reshape(-1, n), lost)

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


def _corr(a, b) -> float:
    if len(a) < 4 or a.std() < 1e-9 or b.std() < 1e-9:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def _binned_records(series, lo, bin_s, n):
    """Flow 1's record stream in ``n`` bins from ``lo``: per-bin mean of a column (a bin
    without a record takes its neighbours'), per-bin sums; None with fewer than 4 records."""
    k = np.floor((series[:, 0] - lo) / bin_s).astype(int)
    inside = (k >= 0) & (k < n)
    if inside.sum() < 4:
        return None
    k = k[inside]
    rows = np.bincount(k, minlength=n)
    seen = np.flatnonzero(rows)

    def mean(col):
        return np.interp(np.arange(n), seen, np.bincount(k, weights=series[inside, col], minlength=n)[seen] / rows[seen])

    def total(x):
        return np.bincount(k, weights=x[inside], minlength=n)
    return mean, total


def _response_row(rate, qdelay, own, drops, bin_s, span_s) -> list:
    n = len(rate)
    events = np.flatnonzero(drops > 0)
    if len(events):
        events = events[np.concatenate(([True], np.diff(events) > 3))]      # one event per burst
    median = max(float(np.median(rate)), 1e-3)

    def after_over_before(h):
        return [rate[e + 1:e + 1 + h].min() / max(float(np.median(rate[e - 3:e + 1])), 1e-3)
                for e in events if e >= 3 and e + 1 + h <= n]
    back3, back8 = after_over_before(3), after_over_before(8)
    segments = [(a + 2, b) for a, b in zip(events[:-1], events[1:]) if b - a - 2 >= 6] \
        or [(max(n - int(10.0 / bin_s), 0), n)]
    slopes = [np.polyfit(np.arange(b - a) * bin_s, rate[a:b], 1)[0] / median for a, b in segments]
    change = np.diff(rate)
    return [_corr(rate, qdelay), _corr(change, qdelay[:-1]),
            float(np.polyfit(qdelay, rate, 1)[0]) if qdelay.std() > 1e-6 else 0.0,
            float(np.median(back3)) if back3 else -1.0, float(np.median(back8)) if back8 else -1.0,
            float(np.mean(np.asarray(back8) < 0.8)) if back8 else -1.0, float(np.median(slopes)),
            float(np.median(np.abs(change))) / median, _corr(rate, own), len(events) / span_s]


def flow_response(comp: CompetitorSeries | None, series, at_t, base_rtt_s, busy_pps) -> np.ndarray:
    """(len(at_t), len(FLOW_RESPONSE_FEATURES)): how the competitors respond to the queue
    (module docstring); ``series`` is flow 1's INT record stream at the same node
    (int_series.INT_SERIES_COLUMNS + packets). Zeros until 2 s of competitor are seen."""
    at_t = np.asarray(at_t, dtype=float)
    out = np.zeros((len(at_t), len(FLOW_RESPONSE_FEATURES)))
    s = np.asarray(series, dtype=float)
    if comp is None or comp.empty or s.ndim != 2 or len(s) < 4:
        return out
    total = comp.packets.sum(axis=0)
    seen = np.flatnonzero(total > 0)
    if not len(seen):
        return out
    first_s = comp.t_end[seen[0]] - comp.span_s[seen[0]]
    t_mid = comp.t_end - comp.span_s / 2
    own = s[:, 6] if s.shape[1] > 6 else np.ones(len(s))
    new_drops = np.concatenate(([0.0], np.mod(np.diff(s[:, 5]), 2 ** 32)))   # the counter wraps at 2^32
    base = np.broadcast_to(np.asarray(base_rtt_s, dtype=float), at_t.shape)
    busy = np.broadcast_to(np.asarray(busy_pps, dtype=float), at_t.shape)
    for i, a in enumerate(at_t):
        span_s = a - max(a - WINDOW_S, first_s + RESPONSE_SETTLE_S)
        bin_s = max(float(base[i]), RESPONSE_MIN_BIN_S)
        n = int(span_s / bin_s + 1e-6)      # a span of whole bins stays whole under float noise
        if span_s < 2.0 or n < 8:
            continue
        lo = a - n * bin_s          # bins end at ``a``: their edges do not hang on float noise in first_s
        got = _binned_records(s, lo, bin_s, n)
        if got is None:
            continue
        mean, per_bin = got
        b = max(float(busy[i]), 1.0)
        rate = _rebin(t_mid, total, lo, bin_s, n) / bin_s / b
        qdelay = mean(1) / (b * 1500.0) / max(float(base[i]), 1e-3)   # base RTTs of queue
        out[i] = _response_row(rate, qdelay, per_bin(own) / bin_s / b, per_bin(new_drops), bin_s, n * bin_s)
    return out


def flow_dips(comp: CompetitorSeries | None, at_t) -> np.ndarray:
    """(len(at_t), len(DIP_FEATURES)): the busiest competitor's dips (module docstring);
    zeros until 10 bins of it are seen."""
    at_t = np.asarray(at_t, dtype=float)
    out = np.zeros((len(at_t), len(DIP_FEATURES)))
    if comp is None or comp.empty:
        return out
    t_mid = comp.t_end - comp.span_s / 2
    for i, a in enumerate(at_t):
        upto = comp.t_end <= a
        pk = comp.packets[:, upto & (comp.t_end > a - WINDOW_S)]
        if not pk.size:
            continue
        top = int(np.argmax(pk.sum(axis=1)))
        seen = np.flatnonzero(comp.packets[top] * upto > 0)
        if not len(seen):
            continue
        lo = max(a - WINDOW_S, comp.t_end[seen[0]] - comp.span_s[seen[0]] + DIP_SETTLE_S)
        n = int((a - lo) / TOP_BIN_S + 1e-6)
        if n < 10:
            continue
        x = _rebin(t_mid, comp.packets[top], a - n * TOP_BIN_S, TOP_BIN_S, n)
        median = float(np.median(x))
        if median <= 0:
            continue
        out[i] = [float(np.percentile(x, 2)) / median, float(np.mean(x < DIP_BELOW * median))]
    return out
