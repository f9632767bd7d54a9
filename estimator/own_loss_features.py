"""How the competing flows answer their OWN losses, read at flow 1's bottleneck from their
own packets and drops (CompetitorSeries, flow_features.py) (``own_loss_response``: each flow's
packets and the packets it lost on the way, gaps in its IOAM E2E sequence; offline the
collection's ``comp_lost_10ms``, live the third element of a hop record's top flows), over
the last 30 s in 20 ms bins. flow_response's drop events are the queue's, any flow's; a random
link loss or another flow's drop looks the same there. Here each flow is read after its own:

  ol_loss_rate            the competitors' lost / (packets + lost)
  ol_cut                  per own-loss event (a loss with none in the 2 RTTs before), the
                          lowest rate over one RTT in the 4 RTTs after over the mean rate
                          in the 2 RTTs before; median over events and flows (-1: none)
  ol_cut_share            share of those events cut below 0.8x
  ol_events_per_s         own-loss events per second per competing flow

(RTTs: flow 1's base RTT, at least 20 ms; the competitor's own is not known.) All four
are -1 where the losses are not known: datasets collected before the sink counted them, hop records of an
older sink.

The same cut read over the round trip the flow had when it lost (``own_loss_queue_response``,
10 ms bins): the RTT then is flow 1's base RTT plus the queueing delay of flow 1's record
stream at that time. Behind a deep queue a flow hears of its loss and answers it seconds
later, after the 4 base RTTs ol_cut looks at; and a minimum over short windows of a few
packets each is biased low by their noise (training seed 28, runs with own-loss events:
ol_cut medians reno 0.38 / cubic 0.53, AUC 0.75; this one 0.46 / 0.69, AUC 0.88):

  ol_qcut                 per own-loss event (none in the 2 RTTs before), the lowest mean
                          rate over one RTT within 3 RTTs after over the mean rate in the 2
                          RTTs before; median over events and flows (-1: none)
  ol_qcut_share           share of those events cut below 0.8x
"""
from __future__ import annotations

import numpy as np

from .flow_features import COMPETITOR_MIN_PACKETS, MIN_FLOW_SHARE, WINDOW_S, CompetitorSeries, _rebin

OWN_LOSS_BIN_S = 0.02
OWN_LOSS_MIN_RTT_S = 0.02
OWN_LOSS_QUIET_RTTS = 2
OWN_LOSS_AFTER_RTTS = 4.0
OWN_LOSS_MIN_PACKETS_PER_BIN = 1.0
OWN_LOSS_CUT_BELOW = 0.8
OWN_LOSS_FEATURES = ("ol_loss_rate", "ol_cut", "ol_cut_share", "ol_events_per_s")
QUEUE_CUT_BIN_S = 0.01
QUEUE_CUT_AFTER_RTTS = 3
QUEUE_CUT_FEATURES = ("ol_qcut", "ol_qcut_share")


def own_loss_cuts(packets, lost, bin_s: float, rtt_s: float, after_rtts: float = OWN_LOSS_AFTER_RTTS) -> list:
    """One competing flow's response to each of its own loss events, from its packets and
    losses per bin: the lowest rate over one RTT within ``after_rtts`` RTTs after the event,
    over its mean rate in the OWN_LOSS_QUIET_RTTS before it (an event: a loss with none in
    that time). Reno halves, CUBIC keeps 0.7, BBR hardly reacts. ``rtt_s`` is flow 1's base
    RTT (the competitor's own is not known; its answer comes within its RTT)."""
    r = max(1, int(round(max(rtt_s, OWN_LOSS_MIN_RTT_S) / bin_s)))
    quiet, after = OWN_LOSS_QUIET_RTTS * r, int(after_rtts * r)
    if len(packets) < quiet + after + r:
        return []
    moving = np.convolve(packets, np.ones(r) / r, mode="valid")      # moving[i]: mean of packets[i:i + r]
    had_loss = np.concatenate(([0.0], np.cumsum(lost > 0)))
    cuts = []
    for k in np.flatnonzero(lost > 0):
        if k < quiet or k + 1 + after > len(moving) or had_loss[k] - had_loss[k - quiet] > 0:
            continue
        before = float(packets[k - quiet:k].mean())
        if before >= OWN_LOSS_MIN_PACKETS_PER_BIN:
            cuts.append(float(moving[k + 1:k + 1 + after].min()) / before)
    return cuts


def _loss_windows(comp: CompetitorSeries, at_t, bin_s: float):
    """The own-loss features' windows, one per time of ``at_t`` that has one (10 bins of
    ``bin_s`` at least, a competing flow that carried enough of it): (its index in
    ``at_t``, its start, its bins, those flows, ``rebin``: a flow's per-interval counts in
    the window's bins)."""
    t_mid = comp.t_end - comp.span_s / 2
    for i, a in enumerate(at_t):
        n = int(min(WINDOW_S, a - (comp.t_end[0] - comp.span_s[0])) / bin_s + 1e-6)
        if n < 10:
            continue
        lo = a - n * bin_s
        per_flow = comp.packets[:, (t_mid >= lo) & (t_mid < a)].sum(axis=1)
        flows = np.flatnonzero(per_flow >= max(COMPETITOR_MIN_PACKETS, MIN_FLOW_SHARE * per_flow.sum()))
        if len(flows):
            yield i, lo, n, flows, lambda x, lo=lo, n=n: _rebin(t_mid, x, lo, bin_s, n)


def own_loss_response(comp: CompetitorSeries | None, at_t, base_rtt_s) -> np.ndarray:
    """(len(at_t), len(OWN_LOSS_FEATURES)): the competing flows' losses and their response
    to them (module docstring), over the last 30 s: -1 where their losses are not known
    (all four) or no event was seen (the cut's two)."""
    at_t = np.asarray(at_t, dtype=float)
    out = np.full((len(at_t), len(OWN_LOSS_FEATURES)), -1.0)
    if comp is None or comp.empty or comp.lost is None:
        return out
    out[:, 0] = out[:, 3] = 0.0
    base = np.broadcast_to(np.asarray(base_rtt_s, dtype=float), at_t.shape)
    for i, _, n, flows, rebin in _loss_windows(comp, at_t, OWN_LOSS_BIN_S):
        cuts, events, packets, lost = [], 0, 0.0, 0.0
        for f in flows:
            p, lf = rebin(comp.packets[f]), rebin(comp.lost[f])
            c = own_loss_cuts(p, lf, OWN_LOSS_BIN_S, float(base[i]))
            cuts += c
            events += len(c)
            packets += float(p.sum())
            lost += float(lf.sum())
        out[i] = [lost / max(packets + lost, 1.0),
                  float(np.median(cuts)) if cuts else -1.0,
                  float(np.mean(np.asarray(cuts) < OWN_LOSS_CUT_BELOW)) if cuts else -1.0,
                  events / len(flows) / (n * OWN_LOSS_BIN_S)]
    return out


def queue_loss_cuts(packets, lost, rtt_bins) -> list:
    """One competing flow's response to each of its own loss events (as own_loss_cuts),
    each read over the RTT it had then: ``rtt_bins`` per bin, that RTT in bins."""
    had_loss = np.concatenate(([0], np.cumsum(lost > 0)))
    cuts = []
    for k in np.flatnonzero(lost > 0):
        r = int(rtt_bins[k])
        quiet, after = OWN_LOSS_QUIET_RTTS * r, QUEUE_CUT_AFTER_RTTS * r
        if k < quiet or k + 1 + after > len(packets) or had_loss[k] - had_loss[k - quiet] > 0:
            continue
        before = float(packets[k - quiet:k].mean())
        if before >= OWN_LOSS_MIN_PACKETS_PER_BIN * QUEUE_CUT_BIN_S / OWN_LOSS_BIN_S:
            moving = np.convolve(packets[k + 1:k + 1 + after], np.ones(r) / r, mode="valid")
            cuts.append(float(moving.min()) / before)
    return cuts


def own_loss_queue_response(comp: CompetitorSeries | None, series, at_t, base_rtt_s, busy_pps) -> np.ndarray:
    """(len(at_t), len(QUEUE_CUT_FEATURES)): the competing flows' cuts after their own
    losses, each over the RTT of its time (module docstring), over the last 30 s; ``series``
    is flow 1's INT record stream at the same node. -1 where their losses are not known or
    no event was seen."""
    at_t = np.asarray(at_t, dtype=float)
    out = np.full((len(at_t), len(QUEUE_CUT_FEATURES)), -1.0)
    s = np.asarray(series, dtype=float)
    if comp is None or comp.empty or comp.lost is None or s.ndim != 2 or len(s) < 2:
        return out
    base = np.broadcast_to(np.asarray(base_rtt_s, dtype=float), at_t.shape)
    busy = np.broadcast_to(np.asarray(busy_pps, dtype=float), at_t.shape)
    for i, lo, n, flows, rebin in _loss_windows(comp, at_t, QUEUE_CUT_BIN_S):
        bin_mid = lo + (np.arange(n) + 0.5) * QUEUE_CUT_BIN_S
        qdelay_s = np.interp(bin_mid, s[:, 0], s[:, 1]) / (max(float(busy[i]), 1.0) * 1500.0)
        rtt_bins = np.maximum(1, np.round(np.maximum(float(base[i]) + qdelay_s, OWN_LOSS_MIN_RTT_S)
                                          / QUEUE_CUT_BIN_S)).astype(int)
        cuts = [c for f in flows for c in queue_loss_cuts(rebin(comp.packets[f]), rebin(comp.lost[f]), rtt_bins)]
        if cuts:
            out[i] = [float(np.median(cuts)), float(np.mean(np.asarray(cuts) < OWN_LOSS_CUT_BELOW))]
    return out
