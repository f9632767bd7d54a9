"""Stage: between its losses, does the competitor grow its window or hold it?

With this flow paced at its fair share (ccp_algs/probe.py), what changes on a scale longer
than the pulses is the competitors'. A loss-based window CCA grows its window until a drop: Reno a segment per RTT (RFC 5681 congestion avoidance; Linux tcp_reno_cong_avoid),
CUBIC at least its Reno-friendly 3(1-beta)/(1+beta) = 0.53 segment per RTT and along its
curve more (tcp_cubic); below its pipe the growth shows in its rate, above in the queue. Vegas holds
its queue between alpha = 2 and beta = 4 segments (tcp_vegas), adjusting a segment per RTT
either way; BBR in ProbeBW paces at its bandwidth estimate with gains 1.25 / 0.75 / 1
(tcp_bbr): neither grows on average.

Measured: the slope of the competitors' window as the bottleneck sees it (their rate over
the last RTT times the RTT, plus their packets in the queue: the queue times their share of
the port's packets) over a stretch without a competitor loss, in segments per RTT per
competitor (the RTT this flow sees: the competitor's may differ by up to 4x either way, so
growth reads between 1/4 and 4 segments per RTT for Reno in the queue). Likelihoods:
"holds" (vegas, bbr, and an inelastic flow: "unknown") normal around 0 with the fit's error
and SIGMA_HOLD (Vegas's segment a RTT now and then); "fills" log-uniform over the growth a
loss-based CCA can show (GROWTH_RANGE[cca]), spread by the same error."""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import BIN_S
from .evidence import HYPOTHESES, UNKNOWN, Evidence

SIGMA_HOLD = 0.15
#: segments per RTT (this flow's RTT) a loss-based CCA's queue grows by, per competitor
GROWTH_RANGE = {"reno": (0.25, 4.0), "cubic": (0.12, 16.0)}
MIN_BINS = 50                 # half a second of 10 ms bins


def window_pkts(s, lo: int, hi: int, rtt_s: float) -> np.ndarray:
    """The competitors' window per bin of [lo, hi), in packets, as the bottleneck sees it."""
    k = max(1, int(round(rtt_s / BIN_S)))
    kernel = np.ones(k) / k
    comp = s.comp.sum(axis=0)
    rate = np.convolve(comp, kernel, mode="same") / BIN_S
    share = np.convolve(comp, kernel, mode="same") / np.maximum(np.convolve(s.own + comp, kernel, mode="same"), 1e-9)
    return (rate * rtt_s + s.queue_pkts * share)[lo:hi]


def slope_per_rtt(q, rtt_s: float, competitors: int, bin_s: float = BIN_S):
    """(growth in segments per RTT per competitor, its standard error) of the window
    series ``q`` (packets per bin), or None where the stretch is too short."""
    q = np.asarray(q, dtype=float)
    if len(q) < MIN_BINS or competitors < 1:
        return None
    t = np.arange(len(q)) * bin_s
    (slope, _), cov = np.polyfit(t, q, 1, cov=True)
    scale = rtt_s / competitors
    # the residuals are correlated (pulses, a gain cycle): the error counts one sample per RTT
    per_rtt = max(1.0, len(q) * bin_s / rtt_s)
    err = math.sqrt(max(cov[0, 0], 0.0) * len(q) / per_rtt)
    return float(slope * scale), float(err * scale)


def _log_uniform_smeared(g: float, lo: float, hi: float, sigma: float) -> float:
    """log density of a growth log-uniform on [lo, hi], measured with normal error sigma
    (numerically: over 200 points of the range)."""
    grid = np.exp(np.linspace(math.log(lo), math.log(hi), 200))
    w = 1 / grid / math.log(hi / lo)
    dens = np.exp(-0.5 * ((g - grid) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
    return float(math.log(max(np.trapezoid(w * dens, grid), 1e-300)))


def evidence(growth: float, stderr: float) -> Evidence:
    sigma = math.sqrt(stderr ** 2 + SIGMA_HOLD ** 2)
    hold = -0.5 * (growth / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))
    loglik = {"vegas": hold, "bbr": hold, UNKNOWN: hold}
    for cca, (lo, hi) in GROWTH_RANGE.items():
        loglik[cca] = _log_uniform_smeared(growth, lo, hi, sigma)
    assert set(loglik) == set(HYPOTHESES)
    return Evidence("queue_trend", loglik, measured=growth, note=f"+/- {sigma:.2f} segments/RTT")
