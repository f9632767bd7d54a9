"""Features beyond the ML-fairness paper's Table I: what INT tells flow 1 about the bottleneck.

The sink strips the telemetry of every packet of flow 1 and publishes it (MQTT,
or the testbed's JSON-lines log). From the hop whose queue is fullest on average
(the bottleneck; sw1's egress on the dumbbell) a ``int_series`` array is kept per
packet: time, queue depth, queue capacity, arrival rate at that queue, flow
count and cumulative queue drops. Only flow 1's own packets are used: nothing
the competitor's packets carry.

Why these help: the competitor's CCA shapes the shared queue and its share of the
arrivals. Vegas keeps the queue nearly empty, BBR drains it every 10 s (ProbeRTT)
and pulses its rate every 8 RTTs, Reno and CUBIC fill it to overflow with
sawtooths of different shapes, and the flow's share of the queue's arrivals
tells who is winning.

At time t, over a short window (8 base RTTs, at least 0.2 s) and a long one
(10 s, one BBR ProbeRTT period), with occupancy = queue depth / capacity:

  occ_now                       occupancy carried by the last packet before t
  occ_{mean,std,min,max}_{s,l}  occupancy statistics in the window
  share_{s,l}                   flow 1's packets / all arrivals at the queue in the window
  drops_{s,l}                   queue drops / all arrivals in the window (congestive loss rate)
  qdelay_now, qdelay_mean_l     queueing delay in base RTTs: depth / (arrival rate x 1500 B);
                                occupancy alone says little when buffers range over 1-100 BDP

and the shape of the whole recent run, over 10 s (l) and 30 s (x): a competitor's
CCA shows in how the queue and the arrivals move over many of its cycles, which
a few RTTs cannot show (measured on the first 145 runs: held-out accuracy 0.63 -> 0.69):

  qd_empty_{l,x}                fraction of packets that found < 0.1 base RTT of queue
  qd_{std,min,max,spread}_{l,x} queueing delay (base RTTs): spread = 90th - 10th percentile
  arrival_cv_{l,x}              std / mean of the arrival rate at the queue
  drop_events_{l,x}             packets that saw the drop counter rise, per second
  drop_gap_s, drop_gap_rtts     median time between drop events (events < 1 RTT apart
                                are one) over 30 s: Reno's sawtooth period grows with
                                the RTT, CUBIC's hardly
  own_rate_cv                   std / mean of flow 1's packets per 4 base RTTs over 30 s
  share_x                       share_ over 30 s

and the competitor itself, whose rate at the queue is the arrival rate there minus
flow 1's own packets, over 30 s, relative to the busy link's packet rate (the 90th
percentile of the arrival rate); on 160 held-out runs these raised the shared
forest's accuracy 0.81 -> 0.83 (BBR beside CUBIC: 0.55 -> 0.74):

  comp_{p10,mean,cv}_x          in 0.2 s bins (BBR's ProbeRTT drains for 200 ms every 10 s)
  comp_ac{2,4,6,8,10}_x         autocorrelation in bins of one base RTT at lags of 2..10 RTTs
                                (BBR's ProbeBW cycles its pacing gain every 8 RTTs)

and the competitor's window (its rate there x the RTT, base + queue depth / link rate), in
bins of one base RTT (at least 40 ms, the FlowMeter's smoothing), over 30 s:

  comp_backoff_x                its smallest window in the 3 bins after a drop event over
                                its median in the 3 before (median over events; -1 without
                                one): Reno halves, CUBIC keeps 0.7, BBR and Vegas hardly react
  comp_growth_x                 its growth in packets per RTT between drop events (or over
                                the last 10 s without one): Reno +1, CUBIC's Reno-friendly +0.53
  comp_convexity_x              the quadratic term of its window over the last 10 s relative
                                to the mean window: Reno linear, CUBIC convex or concave
"""
from __future__ import annotations

import numpy as np

from .features import FEATURES, TraceError, _SparseTable
from .flow_features import DIP_FEATURES, FLOW_FEATURES, FLOW_RESPONSE_FEATURES
from .own_loss_features import OWN_LOSS_FEATURES, QUEUE_CUT_FEATURES
from .int_series import INT_SERIES_COLUMNS, PACKETS_COLUMN

SHORT_WINDOW_RTTS = 8.0
SHORT_WINDOW_MIN_S = 0.2
LONG_WINDOW_S = 10.0
_RUN_WINDOWS = {"l": LONG_WINDOW_S, "x": 30.0}
COMP_BIN_S = 0.2
COMP_AC_LAGS_RTTS = (2, 4, 6, 8, 10)
#: FlowMeter's arrival rate is an EWMA over ~35 ms (10 ms windows, alpha 0.25):
#: competitor windows are binned no finer.
FLOWMETER_SMOOTHING_S = 0.04
EMPTY_QUEUE_RTTS = 0.1
MTU_BYTES = 1500
COMP_DYNAMICS_FEATURES = ("comp_backoff_x", "comp_growth_x", "comp_convexity_x")
WINDOW_FEATURES = ("occ_now",) + tuple(f"{name}_{w}" for w in ("s", "l") for name in
                                       ("occ_mean", "occ_std", "occ_min", "occ_max", "share", "drops")) \
    + ("qdelay_now", "qdelay_mean_l")
RUN_FEATURES = tuple(f"{name}_{w}" for w in _RUN_WINDOWS for name in
                     ("qd_empty", "qd_std", "qd_min", "qd_max", "qd_spread", "arrival_cv", "drop_events")) \
    + ("drop_gap_s", "drop_gap_rtts", "own_rate_cv", "share_x") \
    + ("comp_p10_x", "comp_mean_x", "comp_cv_x") + tuple(f"comp_ac{lag}_x" for lag in COMP_AC_LAGS_RTTS) \
    + COMP_DYNAMICS_FEATURES
#: Every column int_features() computes.
INT_FEATURES = WINDOW_FEATURES + RUN_FEATURES
#: Model 1: the ML-fairness paper's Table I only. Model 2: plus what INT says about the bottleneck.
#: "table1+int+dynamics": model 2 plus the competitor's backoff and growth (not yet
#: evaluated on collected runs; the shipped model is "table1+int").
#: "table1+int+flows": model 2 plus the competitors read from their own packets at the
#: bottleneck (flow_features.py); "+response": and how they respond to the queue
#: and its drops (flow_features.flow_response).
FEATURE_SETS = {"table1": FEATURES,
                "table1+int": FEATURES + tuple(n for n in INT_FEATURES if n not in COMP_DYNAMICS_FEATURES),
                "table1+int+dynamics": FEATURES + INT_FEATURES,
                "table1+int+flows": FEATURES + tuple(n for n in INT_FEATURES if n not in COMP_DYNAMICS_FEATURES)
                + FLOW_FEATURES}
FEATURE_SETS["table1+int+flows+response"] = FEATURE_SETS["table1+int+flows"] + FLOW_RESPONSE_FEATURES
#: ... and the busiest competitor's dips (flow_features.flow_dips: BBR's ProbeRTT).
FEATURE_SETS["table1+int+flows+response+dips"] = FEATURE_SETS["table1+int+flows+response"] + DIP_FEATURES
#: ... and the competitors' own losses and their response to them (flow_features.own_loss_response).
FEATURE_SETS["table1+int+flows+response+dips+ownloss"] = FEATURE_SETS["table1+int+flows+response+dips"] \
    + OWN_LOSS_FEATURES
#: ... and their cuts read over the RTT of the time, queue included (flow_features.own_loss_queue_response).
FEATURE_SETS["table1+int+flows+response+dips+ownloss+qcut"] = \
    FEATURE_SETS["table1+int+flows+response+dips+ownloss"] + QUEUE_CUT_FEATURES
#: The columns of a full feature row, in order: Table I, INT, then the flows'.
ALL_FEATURES = FEATURES + INT_FEATURES + FLOW_FEATURES + FLOW_RESPONSE_FEATURES + DIP_FEATURES + OWN_LOSS_FEATURES \
    + QUEUE_CUT_FEATURES


def select_features(X_all: np.ndarray, feature_names) -> np.ndarray:
    """The columns ``feature_names`` of rows with Table I, every INT column and (when a
    feature set needs them) the flow features, in ALL_FEATURES order."""
    idx = [ALL_FEATURES.index(n) for n in feature_names]
    if idx and max(idx) >= X_all.shape[1]:
        raise TraceError(f"the rows hold {X_all.shape[1]} features, not the competitors' flow features "
                         f"this model needs")
    return X_all[:, idx]


def uses_int(feature_names) -> bool:
    """Whether a model with these features needs the sink's telemetry (anything beyond
    Table I); unknown features are a TraceError."""
    return feature_set_of(feature_names) != "table1"


def uses_flows(feature_names) -> bool:
    return any(n in FLOW_FEATURES + FLOW_RESPONSE_FEATURES + DIP_FEATURES + OWN_LOSS_FEATURES + QUEUE_CUT_FEATURES
               for n in feature_names)


def busy_pps(series: np.ndarray, at_t, window_s: float = 30.0) -> np.ndarray:
    """The link's packet rate as the comp_* features take it: the 90th percentile of the
    arrival rate at the queue over the window before each time (at least 1)."""
    s = np.asarray(series, dtype=float)
    out = []
    for a in np.asarray(at_t, dtype=float):
        sel = (s[:, 0] <= a) & (s[:, 0] > a - window_s)
        out.append(max(float(np.percentile(s[sel, 3], 90)), 1.0) if sel.any() else 1.0)
    return np.asarray(out)


def feature_set_of(feature_names) -> str:
    """The name of the feature set a model was trained on."""
    for name, cols in FEATURE_SETS.items():
        if tuple(feature_names) == tuple(cols):
            return name
    raise TraceError(f"the model's features ({', '.join(feature_names)}) are not ones this intcc computes")


class _Bins:
    """Rows binned by time in bins of ``bin_s`` from the first row (``n`` whole bins)."""

    def __init__(self, t, bin_s):
        self.n = int((t[-1] - t[0]) / bin_s)
        k = ((t - t[0]) / bin_s).astype(int)
        self.inside = k < self.n
        self.k = k[self.inside]
        rows = np.bincount(self.k, minlength=self.n)
        self.seen = np.flatnonzero(rows > 0)
        self.rows_seen = rows[self.seen]

    def sum(self, x):
        return np.bincount(self.k, weights=x[self.inside], minlength=self.n)

    def mean(self, x):
        """Per-bin mean; a bin without rows takes its neighbours'."""
        return np.interp(np.arange(self.n), self.seen, self.sum(x)[self.seen] / self.rows_seen)


def _competitor_rate(t, packets, arrival, bin_s, bins: _Bins | None = None):
    """The competitor's packets per second in bins of ``bin_s`` from the first row,
    relative to the busy link's rate (returned too, packets/s), or None for fewer than
    4 bins. A bin without flow-1 rows has no arrival reading: it takes its neighbours'."""
    bins = bins or _Bins(t, bin_s)
    if bins.n < 4:
        return None
    own = bins.sum(packets) / bin_s
    arrival_b = bins.mean(arrival)
    busy = max(float(np.percentile(arrival_b, 90)), 1.0)
    return np.maximum(arrival_b - own, 0.0) / busy, busy


def _competitor_window(t, packets, arrival, qdepth_bytes, base_rtt_s, bin_s):
    """The competitor's packets in flight per bin (its rate at the queue x the RTT,
    base + queueing delay) and the RTT per bin, or None for fewer than 4 bins."""
    bins = _Bins(t, bin_s)
    got = _competitor_rate(t, packets, arrival, bin_s, bins)
    if got is None:
        return None
    c, busy = got
    rtt_s = base_rtt_s + bins.mean(qdepth_bytes) / (busy * MTU_BYTES)   # the queue drains at the link's rate
    return c * busy * rtt_s, rtt_s


def _competitor_dynamics(t, packets, arrival, qdepth_bytes, rose, base_rtt_s) -> list:
    """comp_backoff_x, comp_growth_x, comp_convexity_x (see the module docstring)."""
    bin_s = max(base_rtt_s, FLOWMETER_SMOOTHING_S)
    got = _competitor_window(t, packets, arrival, qdepth_bytes, base_rtt_s, bin_s)
    if got is None:
        return [-1.0, 0.0, 0.0]
    w, rtt_s = got
    n = len(w)
    events = np.unique(((t[rose] - t[0]) / bin_s).astype(int))
    events = events[(events >= 3) & (events < n - 3)]
    if len(events):
        events = events[np.concatenate(([True], np.diff(events) > 1))]   # one event per burst
    ratios = [w[e + 1:e + 4].min() / max(float(np.median(w[e - 3:e])), 0.5) for e in events]
    backoff = min(float(np.median(ratios)), 3.0) if ratios else -1.0
    # growth between drop events (from the bin after a backoff to the next drop), or
    # over the last 10 s when nothing was dropped: packets per RTT
    segments = [(a + 2, b) for a, b in zip(events[:-1], events[1:]) if b - a - 2 >= 6]
    if not segments and not len(events):
        segments = [(max(n - int(LONG_WINDOW_S / bin_s), 0), n)]
    slopes = []
    for a, b in segments:
        x = np.arange(b - a) * bin_s
        slopes.append(float(np.polyfit(x, w[a:b], 1)[0]) * float(rtt_s[a:b].mean()))
    growth = float(np.median(slopes)) if slopes else 0.0
    # curvature over the last 10 s relative to the mean window: Reno's slow start and
    # congestion avoidance are linear in time, CUBIC's curve convex or concave
    tail = w[max(n - int(LONG_WINDOW_S / bin_s), 0):]
    convexity = 0.0
    if len(tail) >= 6:
        convexity = float(np.polyfit(np.linspace(0.0, 1.0, len(tail)), tail, 2)[0]) / max(float(tail.mean()), 1.0)
    return [backoff, growth, convexity]


def _competitor(t, packets, arrival, base_rtt_s) -> list:
    """comp_* features (see the module docstring) of one window; zeros when too short."""
    row = [0.0] * (3 + len(COMP_AC_LAGS_RTTS))
    got = _competitor_rate(t, packets, arrival, COMP_BIN_S)
    if got is not None:
        c = got[0]
        row[:3] = [float(np.percentile(c, 10)), float(c.mean()), float(c.std() / max(c.mean(), 1e-6))]
    got = _competitor_rate(t, packets, arrival, max(base_rtt_s, 0.01))
    if got is not None:
        c = got[0]
        x = c - c.mean()
        energy = max(float(x @ x), 1e-12)
        row[3:] = [float(x[:-lag] @ x[lag:]) / energy if len(x) > lag + 2 else 0.0 for lag in COMP_AC_LAGS_RTTS]
    return row


def int_features(series: np.ndarray, at_t: np.ndarray, base_rtt_s) -> np.ndarray:
    """(len(at_t), len(INT_FEATURES)) features at times ``at_t`` (same clock as the
    series' t_s) from the packets before each time; ``base_rtt_s`` is the flow's
    smallest RTT so far, one value or one per time. Times before the first packet
    get zeros."""
    s = np.asarray(series, dtype=float)
    at_t = np.asarray(at_t, dtype=float)
    if s.ndim != 2 or s.shape[1] not in (len(INT_SERIES_COLUMNS), len(INT_SERIES_COLUMNS) + 1) or len(s) < 2:
        raise TraceError(f"an INT series needs >= 2 rows of {len(INT_SERIES_COLUMNS)} columns "
                         f"(+ {PACKETS_COLUMN}), got {s.shape}")
    order = np.argsort(s[:, 0], kind="stable")
    s = s[order]
    t = s[:, 0]
    occ = np.clip(s[:, 1] / np.maximum(s[:, 2], 1.0), 0.0, 1.0)
    new_drops = np.concatenate(([0.0], np.mod(np.diff(s[:, 5]), 2 ** 32)))   # the counter wraps at 2^32
    drops = np.cumsum(new_drops)
    arrival = s[:, 3]
    packets = s[:, 6] if s.shape[1] > 6 else np.ones(len(s))
    cp = np.concatenate(([0.0], np.cumsum(packets)))
    base_rtt_s = np.maximum(np.broadcast_to(np.asarray(base_rtt_s, dtype=float), at_t.shape), 1e-4)
    qdelay_s = s[:, 1] / (np.maximum(arrival, 1.0) * MTU_BYTES)
    cq = np.concatenate(([0.0], np.cumsum(qdelay_s)))
    hi = np.searchsorted(t, at_t, side="right") - 1              # last packet at or before each time
    valid = hi >= 0
    hi = np.maximum(hi, 0)
    out = np.zeros((len(at_t), len(INT_FEATURES)))
    out[:, 0] = occ[hi]
    c1 = np.concatenate(([0.0], np.cumsum(occ)))
    c2 = np.concatenate(([0.0], np.cumsum(occ * occ)))
    ca = np.concatenate(([0.0], np.cumsum(arrival)))
    mx, mn = _SparseTable(occ, np.maximum), _SparseTable(occ, np.minimum)
    windows = (np.maximum(SHORT_WINDOW_RTTS * base_rtt_s, SHORT_WINDOW_MIN_S), LONG_WINDOW_S)
    col = 1
    for w_s in windows:
        lo = np.minimum(np.searchsorted(t, at_t - w_s, side="right"), hi)
        cnt = hi - lo + 1
        mean = (c1[hi + 1] - c1[lo]) / cnt
        var = np.maximum((c2[hi + 1] - c2[lo]) / cnt - mean ** 2, 0.0)
        span_s = np.maximum(t[hi] - t[lo], 1e-3)
        # all arrivals at the queue in the window: mean arrival rate x span
        arrivals = (ca[hi + 1] - ca[lo]) / cnt * span_s
        out[:, col:col + 6] = np.column_stack((
            mean, np.sqrt(var), mn.query(lo, hi), mx.query(lo, hi),
            np.clip((cp[hi + 1] - cp[lo]) / np.maximum(arrivals, 1.0), 0.0, 2.0),
            (drops[hi] - drops[lo]) / np.maximum(arrivals, 1.0)))
        col += 6
    out[:, col] = qdelay_s[hi] / base_rtt_s
    out[:, col + 1] = (cq[hi + 1] - cq[lo]) / cnt / base_rtt_s    # lo, cnt: the long window's
    col += 2
    rose = new_drops > 0
    # one estimate every ~0.5 s: a loop over the times, numpy inside
    for i, (a, base) in enumerate(zip(at_t, base_rtt_s)):
        if not valid[i]:
            continue
        h = hi[i] + 1
        row = []
        for w_s in _RUN_WINDOWS.values():
            lo_i = min(np.searchsorted(t, a - w_s, side="right"), h - 1)
            q = qdelay_s[lo_i:h] / base
            ar = arrival[lo_i:h]
            p10, p90 = np.percentile(q, (10, 90))
            row += [np.mean(q < EMPTY_QUEUE_RTTS), q.std(), q.min(), q.max(), p90 - p10,
                    ar.std() / max(ar.mean(), 1.0), rose[lo_i:h].sum() / w_s]
        w_s = _RUN_WINDOWS["x"]
        lo_i = min(np.searchsorted(t, a - w_s, side="right"), h - 1)
        events = t[lo_i:h][rose[lo_i:h]]
        gaps = np.diff(events)
        gaps = gaps[gaps > base]
        gap_s = float(np.median(gaps)) if len(gaps) else w_s
        tt, pk = t[lo_i:h], packets[lo_i:h]
        bins = np.bincount(((tt - tt[0]) / max(4 * base, 0.1)).astype(int), weights=pk)
        span_s = max(tt[-1] - tt[0], 1e-3)
        row += [gap_s, gap_s / base, bins.std() / max(bins.mean(), 1e-9),
                min(pk.sum() / max(arrival[lo_i:h].mean() * span_s, 1.0), 2.0)]
        row += _competitor(tt, pk, arrival[lo_i:h], base)
        row += _competitor_dynamics(tt, pk, arrival[lo_i:h], s[lo_i:h, 1], rose[lo_i:h], base)
        out[i, col:] = row
    out[~valid] = 0.0
    return out
