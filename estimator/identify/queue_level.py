"""Stage: how many of its own packets does the competitor keep in the queue?

Vegas keeps between alpha = 2 and beta = 4 of its segments queued (tcp_vegas holds
``diff = cwnd * (rtt - base_rtt) / rtt`` in [alpha, beta]); the others keep what the path
lets them: BBR up to its window (bbr_queue_max_pkts), Reno and CUBIC anything up to the buffer before their loss. A fixed-rate flow
too. Measured: the competitors' own packets in the queue, exactly at a FIFO port (those
that leave within the queue's delay: Series.comp_queued), the median over a stretch, per
competitor. (Read as the queue times their share of the port's packets, the probe's own
pulses, which queue this flow's packets, not theirs, hid Vegas's few: 2026-12-02.)

Likelihoods, uniform over each range and smeared by SIGMA_PKTS (the queue's 10 ms
sampling, the share's split), each with a share NONE_SHARE at none: a flow whose window is
below its pipe queues nothing (BBR beside a paced flow, its 0.75 phase draining what its
1.25 phase queued; Reno and CUBIC regrowing after a cut or a timeout; an application-limited
or fixed-rate flow below its share), except Vegas, which grows its window at once below
alpha (VEGAS_NONE_SHARE). The rest: Vegas [alpha - 1, beta + 1]; BBR [0, its window's
bound]; Reno, CUBIC and "unknown" [0, the buffer]. A queue read empty thus says only "not
Vegas"; a few packets, Vegas; more than BBR's window, not BBR."""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import Series
from .evidence import HYPOTHESES, UNKNOWN, Evidence

VEGAS_ALPHA, VEGAS_BETA = 2, 4
BBR_QUANTA_PKTS = 3 * 2
BBR_EXTRA_ACKED_S = 0.1
SIGMA_PKTS = 1.0
NONE_SHARE, VEGAS_NONE_SHARE = 0.5, 0.1


def level_pkts(s: Series, lo: int, hi: int) -> tuple[float, float] | None:
    """(the competitors' queued packets per competitor, its error) over bins [lo, hi): the
    median of Series.comp_queued (FIFO-exact: the packets of theirs that leave within the
    queue's delay); the error half a bin of their packets (a bin's are taken to leave evenly).
    None where fewer than half the bins are known yet."""
    k = s.comp.shape[0]
    if k == 0 or hi <= lo:
        return None
    queued = s.comp_queued()[:, lo:hi].sum(axis=0)
    known = ~np.isnan(queued)
    if known.sum() < (hi - lo) / 2:
        return None
    per_bin = s.comp[:, lo:hi].sum() / (hi - lo)
    return float(np.median(queued[known])) / k, 0.5 * per_bin / k


BBR_CWND_GAIN = 2                 # tcp_bbr bbr_cwnd_gain (ProbeBW); Startup's is bbr_high_gain


def bbr_queue_max_pkts(bdp_pkts: float, port_pps: float, gain: float = BBR_CWND_GAIN) -> float:
    """The most BBR can keep queued, its whole window: ``gain`` BDP (bbr_cwnd_gain) plus 3 send
    quanta of at least 2 segments (bbr_quantization_budget) plus what ACK aggregation adds,
    at most 100 ms of the rate (bbr_extra_acked_max_us). The port's BDP and rate: BBR's
    share of them is less, so a bound, not a guess. (1.5 BDP was too tight where the BDP
    is a few packets: BBR kept 19 queued beside a BDP of 4, 2026-12-02.)"""
    return gain * bdp_pkts + BBR_QUANTA_PKTS + BBR_EXTRA_ACKED_S * port_pps


def _uniform_smeared(x: float, lo: float, hi: float, sigma: float) -> float:
    """log density of a value uniform on [lo, hi] measured with normal error sigma."""
    hi = max(hi, lo + 1e-6)
    z = (math.erf((hi - x) / (sigma * math.sqrt(2))) - math.erf((lo - x) / (sigma * math.sqrt(2)))) / 2
    return math.log(max(z / (hi - lo), 1e-300))


def evidence(level: float, bdp_pkts: float, buffer_pkts: float, stderr: float = 0.0, port_pps: float = 0.0) -> Evidence:
    buffer_pkts = max(buffer_pkts, VEGAS_BETA + 2)
    sigma = math.sqrt(SIGMA_PKTS ** 2 + stderr ** 2)
    anything = _uniform_smeared(level, 0, buffer_pkts, sigma)
    none = -0.5 * (level / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))
    # BBR's bound or the buffer, whichever is less (a range wider than the buffer would
    # spread its density where no queue can be)
    window_bound = _uniform_smeared(level, 0, min(bbr_queue_max_pkts(bdp_pkts, port_pps), buffer_pkts), sigma)
    vegas = _uniform_smeared(level, VEGAS_ALPHA - 1, VEGAS_BETA + 1, sigma)

    def with_none(share, rest):
        return math.log(share * math.exp(none) + (1 - share) * math.exp(rest) + 1e-300)
    loglik = {"vegas": with_none(VEGAS_NONE_SHARE, vegas), "bbr": with_none(NONE_SHARE, window_bound),
              "reno": with_none(NONE_SHARE, anything), "cubic": with_none(NONE_SHARE, anything),
              UNKNOWN: with_none(NONE_SHARE, anything)}
    assert set(loglik) == set(HYPOTHESES)
    return Evidence("queue_level", loglik, measured=level, note=f"BDP {bdp_pkts:.0f}, buffer {buffer_pkts:.0f} pkts")
