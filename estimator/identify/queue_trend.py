"""Stage: between its losses, does the competitor grow its window or hold it?

With this flow paced at its fair share (ccp_algs/probe.py), what changes on a scale longer
than the pulses is the competitors'. A loss-based window CCA grows its window until a drop: Reno a segment per RTT (RFC 5681 congestion avoidance; Linux tcp_reno_cong_avoid),
CUBIC at least its Reno-friendly 3(1-beta)/(1+beta) = 0.53 segment per RTT and along its
curve more (tcp_cubic); below its pipe the growth shows in its rate, above in the queue. Vegas holds
its queue between alpha = 2 and beta = 4 segments (tcp_vegas), adjusting a segment per RTT
either way; BBR in ProbeBW paces at its bandwidth estimate with gains 1.25 / 0.75 / 1
(tcp_bbr): neither grows on average.

Measured: the slope of the competitors' window as the bottleneck sees it (their rate
times the base RTT, plus their packets in the queue) over a stretch without a competitor loss, in segments per RTT per
competitor (the RTT this flow sees: the competitor's may differ by up to 4x either way, so
growth reads between 1/4 and 4 segments per RTT for Reno). CUBIC's growth follows from its
constants and the window it regrows (cubic_growth_per_rtt): Reno-like in a small pipe, many
segments per RTT in a deep queue. Likelihoods:
"holds" (vegas, bbr, and an inelastic flow: "unknown") normal around 0 with the fit's error
and SIGMA_HOLD (Vegas's segment a RTT now and then); "fills" log-uniform over the growth a
loss-based CCA can show (GROWTH_RANGE[cca]), spread by the same error."""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import BIN_S, moving_mean
from .evidence import HYPOTHESES, UNKNOWN, Evidence

SIGMA_HOLD = 0.15
RTT_RATIO_MAX = 4.0           # the competitor's base RTT may be this many times this flow's, or its inverse
RTT_RATIO_KNOWN = 1.5         # ... and within this of its own where the sink's node measured it
#: segments per RTT (this flow's RTT) Reno's window grows by: one per its own RTT
RENO_RANGE = (1 / RTT_RATIO_MAX, RTT_RATIO_MAX)


def reno_range(rtt_s: float | None = None, base_rtt_s: float | None = None,
               comp_rtt_s: float | None = None) -> tuple[float, float]:
    """Reno's growth in segments per this flow's RTT: one per its own RTT, which shares this
    flow's queue delay and differs only in its base RTT (up to RTT_RATIO_MAX either way). In
    a queue of many base RTTs both RTTs are mostly the queue's: the range narrows to about
    one segment per RTT (against CUBIC's growth of tens there, its clock being time). With
    its RTT known (``comp_rtt_s``, queue included), one per that, within RTT_RATIO_KNOWN."""
    if rtt_s and comp_rtt_s:
        per = rtt_s / comp_rtt_s
        return per / RTT_RATIO_KNOWN, per * RTT_RATIO_KNOWN
    if not rtt_s or not base_rtt_s or rtt_s <= base_rtt_s:
        return RENO_RANGE
    queue_s = rtt_s - base_rtt_s
    return rtt_s / (RTT_RATIO_MAX * base_rtt_s + queue_s), rtt_s / (base_rtt_s / RTT_RATIO_MAX + queue_s)
CUBIC_C, CUBIC_BETA = 0.4, 717 / 1024            # tcp_cubic: segments per s^3, the window kept on a loss
RENO_FRIENDLY = 3 * (1 - CUBIC_BETA) / (1 + CUBIC_BETA)   # CUBIC's Reno-friendly growth, segments per RTT
CUBIC_RANGE_UNKNOWN = (0.12, 16.0)               # without the window and RTT: anything from slow to fast


def cubic_growth_per_rtt(window_pkts: float, rtt_s: float) -> float:
    """CUBIC's mean growth per RTT over an epoch that regrows a window to itself: (1 - beta) W
    in K = cbrt(W (1 - beta) / C) seconds (tcp_cubic's bictcp_update), at least its
    Reno-friendly growth. A deep queue (a long RTT, a large window) makes it many segments
    per RTT; a small pipe leaves CUBIC Reno-like."""
    w = max(window_pkts, 1.0)
    k_s = (w * (1 - CUBIC_BETA) / CUBIC_C) ** (1 / 3)
    return max(RENO_FRIENDLY, (1 - CUBIC_BETA) * w * rtt_s / k_s)


def cubic_range(window_pkts: float | None, rtt_s: float | None, age_s: float | None = None,
                comp_rtt_s: float | None = None) -> tuple[float, float]:
    """The growth CUBIC may show: its epoch's mean, within the RTT ratio and its epoch's
    phases (slow near the old maximum, fast away from it) either way; and up to its curve's
    slope 3 C t^2 after ``age_s`` (the competitor's time so far): an epoch without a loss
    before it (HyStart's exit: no old maximum) grows along C t^3 from its start, without
    bound but time (hundreds of segments per RTT after 15 s in a queue of seconds). With its
    RTT known (``comp_rtt_s``), its epoch's mean per its own RTT, within RTT_RATIO_KNOWN."""
    if not window_pkts or not rtt_s:
        return CUBIC_RANGE_UNKNOWN
    convex = 3 * CUBIC_C * age_s ** 2 * rtt_s if age_s else 0.0
    if comp_rtt_s:
        g = cubic_growth_per_rtt(window_pkts, comp_rtt_s) * rtt_s / comp_rtt_s
        return g / RTT_RATIO_KNOWN, max(g * RTT_RATIO_KNOWN, convex)
    g = cubic_growth_per_rtt(window_pkts, rtt_s)
    return g / RTT_RATIO_MAX, max(g * RTT_RATIO_MAX, convex)
MIN_BINS = 50                 # half a second of 10 ms bins


def window_pkts(s, lo: int, hi: int, base_rtt_s, period_bins: int = 0) -> np.ndarray:
    """The competitors' window per bin of [lo, hi), in packets, as the bottleneck sees it:
    their packets on the way (their rate times the base RTT) plus those in the queue
    (Series.comp_queued), averaged over the RTT or ``period_bins`` (the probe's pulse
    period) where longer: with the port busy the competitors' rate answers this flow's
    pulses, which a shorter average leaves in the series as a swing many segments high."""
    k = max(1, period_bins)
    window = np.nan_to_num(s.comp_window(base_rtt_s).sum(axis=0), nan=0.0)
    return moving_mean(window, k)[lo:hi]


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


def evidence(growth: float, stderr: float, window_pkts: float | None = None, rtt_s: float | None = None,
             base_rtt_s: float | None = None, age_s: float | None = None, comp_rtt_s: float | None = None) -> Evidence:
    """``window_pkts`` and ``rtt_s``: the competitor's window and the RTT over the stretches
    measured (CUBIC's expected growth); without them CUBIC's range is CUBIC_RANGE_UNKNOWN.
    ``base_rtt_s``: this flow's, which with ``rtt_s`` gives the queue's delay (Reno's range);
    ``age_s``: the competitor's time since its first packet at the stretch's end, where it
    has lost nothing yet (CUBIC's curve from its start; None: from its last loss);
    ``comp_rtt_s``: the competitors' RTT (queue included) where measured: Reno's and CUBIC's
    growth per their own round trip, not within RTT_RATIO_MAX of this flow's."""
    sigma = math.sqrt(stderr ** 2 + SIGMA_HOLD ** 2)
    hold = -0.5 * (growth / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))
    loglik = {"vegas": hold, "bbr": hold, UNKNOWN: hold,
              "reno": _log_uniform_smeared(growth, *reno_range(rtt_s, base_rtt_s, comp_rtt_s), sigma),
              "cubic": _log_uniform_smeared(growth, *cubic_range(window_pkts, rtt_s, age_s, comp_rtt_s), sigma)}
    assert set(loglik) == set(HYPOTHESES)
    return Evidence("queue_trend", loglik, measured=growth, note=f"+/- {sigma:.2f} segments/RTT")


#: the share of stretches no model holds for (a start-up, ProbeRTT, a receive window
#: reached, a cut's drain): each hypothesis's density is mixed with a flat one there, so one
#: such stretch costs a hypothesis a bounded amount, not its case
OUTLIER_SHARE = 0.2


def _outlier_loglik(window_pkts: float) -> float:
    """log density of a growth no model holds for: flat over +- the window per RTT (slow
    start's doubling, a timeout's collapse)."""
    return -math.log(2 * max(window_pkts, 10.0))


def combined(measurements, contexts, base_rtt_s: float | None = None) -> Evidence:
    """The stage's evidence from all its measurements [(growth, stderr)] with their
    [(window_pkts, rtt_s, age_s[, comp_rtt_s])]: the mean of each one's log-likelihood, so the stage counts once
    and each hypothesis must explain the typical stretch. (Not the evidence of their median:
    CUBIC's growth is no constant but its curve, slow after a cut and fast minutes later in
    a deep queue; the median of a run's trends, with their spread as its error, read tens of
    segments per RTT as consistent with Reno's one.) A stretch may be an outlier
    (OUTLIER_SHARE)."""
    each = [(evidence(g, e, c[0], c[1], base_rtt_s, *c[2:]), _outlier_loglik(c[0])) for (g, e), c in zip(measurements, contexts)]
    loglik = {h: sum(np.logaddexp(math.log(1 - OUTLIER_SHARE) + ev.loglik[h], math.log(OUTLIER_SHARE) + out)
                     for ev, out in each) / len(each) for h in HYPOTHESES}
    median = sorted(g for g, _ in measurements)[len(measurements) // 2]
    return Evidence("queue_trend", loglik, measured=median, note=f"mean over {len(each)} stretches")
