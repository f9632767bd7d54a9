"""Stage: does the competitor fall silent for a moment every ten seconds (BBR's ProbeRTT)?

BBRv1 keeps its path's minimum RTT for 10 s (tcp_bbr: bbr_min_rtt_win_sec); when no sample
has gone below it by then (strictly: rarely), it enters ProbeRTT: its window drops to 4
packets (bbr_cwnd_min_target) for at least 200 ms and a round (bbr_probe_rtt_mode_ms), then
it resumes. At the bottleneck its packets all but stop for that long, and again ten seconds
and a little after. Reno, CUBIC and Vegas stop now and then too (a timeout, a deep queue's
burst, start-up turbulence), but not on a ten-second clock.

When BBR must dip is read from the bottleneck's queue: its minimum RTT is the lowest it
has sampled since its start or its last ProbeRTT, and a sample renews it only by being
lower (tcp_bbr: rtt_us < min_rtt_us), so only a new low of the queue its packets meet does.
Where the queue has reached no new low for PERIOD_S since the competitor's start (or its
last dip), a BBR competitor must enter ProbeRTT then: a window from PERIOD_S to PERIOD_S +
PERIOD_SLACK_S plus an RTT after it (must_dip_windows). A window counts where the dip would
show: the competitor's window before it at least VISIBLE_WINDOW_PKTS (ProbeRTT's 4 packets
then under a quarter of its rate).

Measured: the dips in the competitors' packets, each a stretch of at least MIN_DIP_S whose
rate is under DIP_LEVEL of the median of the seconds before it, with at least
MIN_MISSING_PKTS packets missing (a slow flow's gaps are no dip) and the rate back (above
half) within RECOVER_S (a flow that ends is no dip); of the windows where BBR must dip, how
many hold one. (Dips alone were no evidence: in shallow buffers BBR's come just after
losses of its own, and CUBIC in a queue of seconds dips without a loss, 2026-12-02.)
Likelihoods, binomial in the windows: BBR's hold a dip with probability BBR_PERIODIC (a
renewal between two queue samples, a dip the detector misses); the others' only by chance,
1 - exp(-rate * the window's length) with the dips' own rate. No window: no evidence either
way (a queue that keeps reaching new lows lets BBR renew its minimum without a dip)."""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import BIN_S, moving_mean
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
VISIBLE_WINDOW_PKTS = 16      # ProbeRTT's 4 packets under a quarter (DIP_LEVEL) of the window
NEW_LOW_PKTS = 0.5            # a queue sample this far under the lowest since the last reset: a new low
PROBE_RTT_SETTLE_S = 0.3      # after a dip: ProbeRTT's 200 ms and a round, its samples the new minimum


def dips(packets, since_bin: int = 0) -> list[tuple[int, int]]:
    """(first bin, length in bins) of each dip of one flow's ``packets`` per bin from
    ``since_bin`` on."""
    packets = np.asarray(packets, dtype=float)
    n = len(packets)
    rate = moving_mean(packets, SMOOTH_BINS)
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


def must_dip_windows(queue_pkts, packets, window_pkts, first_bin: int, rtt_bins: int,
                     dip_bins: list[int]) -> list[tuple[int, int, bool]]:
    """(first bin, last bin, whether a dip starts in it) of each window where a BBR
    competitor that sent its first packet at ``first_bin`` must enter ProbeRTT: PERIOD_S
    after its last reset (its start; a dip; a new low of the bottleneck's ``queue_pkts``)
    with no new low since, and its ``window_pkts`` before it at least
    VISIBLE_WINDOW_PKTS. Windows past the series' end are not read yet."""
    queue_pkts = np.asarray(queue_pkts, dtype=float)
    n = len(queue_pkts)
    period, slack = int(PERIOD_S / BIN_S), int(PERIOD_SLACK_S / BIN_S) + rtt_bins
    settle = int(PROBE_RTT_SETTLE_S / BIN_S)
    dips_sorted = sorted(dip_bins)
    out = []
    reset, low = first_bin, float("inf")
    t = first_bin
    while t < n:
        expiry = reset + period
        if expiry + slack >= n:
            break
        if t < expiry:
            if queue_pkts[t] < low - NEW_LOW_PKTS:
                low, reset = queue_pkts[t], t          # a new low: BBR's minimum renewed here
            else:
                low = min(low, queue_pkts[t])
            t += 1
            continue
        hit = next((d for d in dips_sorted if expiry - slack // 4 <= d <= expiry + slack), None)
        visible = float(np.median(window_pkts[max(first_bin, expiry - period // 10):expiry])) >= VISIBLE_WINDOW_PKTS
        sending = packets[expiry - settle:expiry].sum() > 0
        if visible and sending:
            out.append((expiry, expiry + slack, hit is not None))
        after = (hit if hit is not None else expiry) + settle
        reset, t = after, after
        low = float(queue_pkts[after:after + settle].min()) if after < n else low
    return out


def evidence(follow: int, eligible: int, dip_count: int, watched_s: float,
             window_s: float = PERIOD_SLACK_S) -> Evidence:
    """The log-likelihood of ``follow`` of ``eligible`` windows (or dips) of ``window_s``
    holding a dip on the ProbeRTT clock, with ``dip_count`` dips in ``watched_s`` seconds in
    all (their chance of falling in one)."""
    rate = max(dip_count / max(watched_s, 1e-9), MIN_OTHER_DIPS_PER_S)
    p_other = 1 - math.exp(-rate * window_s)

    def binomial(p):
        p = min(max(p, 1e-6), 1 - 1e-6)
        return follow * math.log(p) + (eligible - follow) * math.log(1 - p)
    loglik = {h: binomial(p_other) for h in HYPOTHESES}
    loglik["bbr"] = binomial(BBR_PERIODIC)
    return Evidence("probe_rtt", loglik, measured=float(follow),
                    note=f"of {eligible} windows ({dip_count} dips in {watched_s:.0f} s)")
