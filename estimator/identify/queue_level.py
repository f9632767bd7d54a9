"""Stage: how many of its own packets does the competitor keep in the queue?

Vegas keeps between alpha = 2 and beta = 4 of its segments queued (tcp_vegas holds
``diff = cwnd * (rtt - base_rtt) / rtt`` in [alpha, beta]); the others keep what the path
lets them: BBR up to the second BDP of its window (cwnd_gain 2: at most about one BDP
queued), Reno and CUBIC anything up to the buffer before their loss. A fixed-rate flow
too. Measured: the competitors' packets in the queue at the least queue of each probe
period (the probe's own pulse drained then), their share of the queue taken as their
share of the port's packets in that period; the median over a stretch, per competitor.

Likelihoods, uniform over each range and smeared by SIGMA_PKTS (the queue's 10 ms
sampling, the share's split), each with a share NONE_SHARE at none: a flow whose window is
below its pipe queues nothing (BBR beside a paced flow, its 0.75 phase draining what its
1.25 phase queued; Reno and CUBIC regrowing after a cut or a timeout; an application-limited
or fixed-rate flow below its share), except Vegas, which grows its window at once below
alpha (VEGAS_NONE_SHARE). The rest: Vegas [alpha - 1, beta + 1] (the least of a period's
samples reads it a little low); BBR [0, 1.5 BDP] (where its 2-BDP window binds; at least
beta + 2); Reno, CUBIC and "unknown" [0, the buffer]. A queue read empty thus says only
"not Vegas"; a few packets, Vegas; more than 1.5 BDP, not BBR."""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import Series
from .evidence import HYPOTHESES, UNKNOWN, Evidence

VEGAS_ALPHA, VEGAS_BETA = 2, 4
SIGMA_PKTS = 1.0
NONE_SHARE, VEGAS_NONE_SHARE = 0.5, 0.1


def level_pkts(s: Series, lo: int, hi: int, period_bins: int) -> float | None:
    """The competitors' queued packets per competitor at each period's least queue, the
    median over bins [lo, hi); None without two whole periods."""
    k = s.comp.shape[0]
    if k == 0 or period_bins < 2 or (hi - lo) // period_bins < 2:
        return None
    levels = []
    for a in range(lo, hi - period_bins + 1, period_bins):
        q = s.queue_pkts[a:a + period_bins]
        own, comp = s.own[a:a + period_bins].sum(), s.comp[:, a:a + period_bins].sum()
        if own + comp <= 0:
            continue
        levels.append(float(q.min()) * comp / (own + comp) / k)
    return float(np.median(levels)) if levels else None


def _uniform_smeared(x: float, lo: float, hi: float, sigma: float) -> float:
    """log density of a value uniform on [lo, hi] measured with normal error sigma."""
    hi = max(hi, lo + 1e-6)
    z = (math.erf((hi - x) / (sigma * math.sqrt(2))) - math.erf((lo - x) / (sigma * math.sqrt(2)))) / 2
    return math.log(max(z / (hi - lo), 1e-300))


def evidence(level: float, bdp_pkts: float, buffer_pkts: float, stderr: float = 0.0) -> Evidence:
    buffer_pkts = max(buffer_pkts, VEGAS_BETA + 2)
    sigma = math.sqrt(SIGMA_PKTS ** 2 + stderr ** 2)
    anything = _uniform_smeared(level, 0, buffer_pkts, sigma)
    none = -0.5 * (level / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))
    window_bound = _uniform_smeared(level, 0, max(1.5 * bdp_pkts, VEGAS_BETA + 2), sigma)
    vegas = _uniform_smeared(level, VEGAS_ALPHA - 1, VEGAS_BETA + 1, sigma)

    def with_none(share, rest):
        return math.log(share * math.exp(none) + (1 - share) * math.exp(rest) + 1e-300)
    loglik = {"vegas": with_none(VEGAS_NONE_SHARE, vegas), "bbr": with_none(NONE_SHARE, window_bound),
              "reno": with_none(NONE_SHARE, anything), "cubic": with_none(NONE_SHARE, anything),
              UNKNOWN: with_none(NONE_SHARE, anything)}
    assert set(loglik) == set(HYPOTHESES)
    return Evidence("queue_level", loglik, measured=level, note=f"BDP {bdp_pkts:.0f}, buffer {buffer_pkts:.0f} pkts")
