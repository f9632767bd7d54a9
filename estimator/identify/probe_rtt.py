"""Stage: does the competitor fall silent for a moment every ten seconds (BBR's ProbeRTT)?

BBRv1 keeps its path's minimum RTT for 10 s (tcp_bbr: bbr_min_rtt_win_sec); when no sample
has gone below it by then (strictly: rarely), it enters ProbeRTT: its window drops to 4
packets (bbr_cwnd_min_target) for at least 200 ms and a round (bbr_probe_rtt_mode_ms), then
it resumes. At the bottleneck its packets all but stop for that long, and again ten seconds
and a little after. Reno, CUBIC and Vegas stop now and then too (a timeout, a deep queue's
burst, start-up turbulence), but not on a ten-second clock.

Measured: the dips in the competitors' packets, each a stretch of at least MIN_DIP_S whose
rate is under DIP_LEVEL of the median of the seconds before it, with at least
MIN_MISSING_PKTS packets missing (a slow flow's gaps are no dip) and the rate back (above
half) within RECOVER_S (a flow that ends is no dip); of those at least PERIOD_S after the
first dip could have been seen, how many follow an earlier one by PERIOD_S..PERIOD_S +
PERIOD_SLACK_S (the ProbeRTT clock). (Dips alone were no evidence: in shallow buffers BBR's
come just after losses of its own, and CUBIC in a queue of seconds dips without a loss,
2026-12-02.) Likelihoods, binomial in the eligible dips: BBR's follow with probability
BBR_PERIODIC; the others' only by chance, 1 - exp(-rate * PERIOD_SLACK_S) with the dips'
own rate. No eligible dip: no evidence either way (BBR whose minimum RTT is renewed never
dips)."""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import BIN_S
from .evidence import HYPOTHESES, Evidence

PERIOD_S = 10.0
PERIOD_SLACK_S = 1.2          # ProbeRTT's 200 ms, a round, the drain of its queued packets
BBR_PERIODIC = 0.85
MIN_OTHER_DIPS_PER_S = 1 / 100
DIP_LEVEL = 0.25
MIN_DIP_S = 0.1
MIN_MISSING_PKTS = 5
RECOVER_S = 1.0
HISTORY_S = 2.0
SMOOTH_BINS = 5               # the rate over 50 ms


def dips(packets, since_bin: int = 0) -> list[tuple[int, int]]:
    """(first bin, length in bins) of each dip of one flow's ``packets`` per bin from
    ``since_bin`` on."""
    packets = np.asarray(packets, dtype=float)
    n = len(packets)
    rate = np.convolve(packets, np.ones(SMOOTH_BINS) / SMOOTH_BINS, mode="same")
    hist = int(HISTORY_S / BIN_S)
    recover, min_len = int(RECOVER_S / BIN_S), int(MIN_DIP_S / BIN_S)
    out = []
    i = max(since_bin, hist)
    while i < n:
        level = np.median(rate[i - hist:i])
        if level <= 0 or rate[i] >= DIP_LEVEL * level:
            i += 1
            continue
        j = i
        while j < n and rate[j] < DIP_LEVEL * level:
            j += 1
        back = np.flatnonzero(rate[j:j + recover] > 0.5 * level)
        long_enough = j - i >= min_len and level * (j - i) >= MIN_MISSING_PKTS
        if j < n and back.size and long_enough:
            out.append((i, j - i))
        elif j >= n or not back.size:
            break                # not over yet (or the flow ended): read again later
        i = j + 1
    return out


def periodic(dip_bins: list[int], since_bin: int) -> tuple[int, int]:
    """(dips that follow an earlier one on the ProbeRTT clock, dips eligible: at least
    PERIOD_S after ``since_bin``, where the first dip could have been seen)."""
    lo, hi = PERIOD_S / BIN_S, (PERIOD_S + PERIOD_SLACK_S) / BIN_S
    eligible = [d for d in dip_bins if d - since_bin >= lo]
    follow = sum(any(lo <= d - e <= hi for e in dip_bins) for d in eligible)
    return follow, len(eligible)


def evidence(follow: int, eligible: int, dip_count: int, watched_s: float) -> Evidence:
    """The log-likelihood of ``follow`` of ``eligible`` dips on the ProbeRTT clock, with
    ``dip_count`` dips in ``watched_s`` seconds in all (their chance of a partner)."""
    rate = max(dip_count / max(watched_s, 1e-9), MIN_OTHER_DIPS_PER_S)
    p_other = 1 - math.exp(-rate * PERIOD_SLACK_S)

    def binomial(p):
        p = min(max(p, 1e-6), 1 - 1e-6)
        return follow * math.log(p) + (eligible - follow) * math.log(1 - p)
    loglik = {h: binomial(p_other) for h in HYPOTHESES}
    loglik["bbr"] = binomial(BBR_PERIODIC)
    return Evidence("probe_rtt", loglik, measured=float(follow),
                    note=f"of {eligible} dips ({dip_count} in {watched_s:.0f} s)")
