"""Stage: how deep does the competitor's window fall after its slow start ends at a loss?
Read from its own packets at the bottleneck a few rounds after its first loss, so it
answers where the slow-start stage says nothing ("lost": all four can lose in slow start in
a small buffer) and the loss-cut stage must wait for a second loss (Reno's comes W/2 rounds
later).

Slow start overshoots: its window doubles in the round trip in which the sender learns of
its first drop, so the kernel's window at the cut is about twice what the pipe and buffer
held, and a whole round of packets is lost. Reno (tcp_reno_ssthresh, and Vegas, which falls
back to it) sets its window to half of that; CUBIC to 717/1024 of it; BBRv1 does not cut (it
leaves Startup when its delivery rate stops growing and drains its queue to its BDP
estimate). The recovery from a round of losses takes rounds (a lost retransmission costs an
RTO and a new slow start up to ssthresh); the window read is its mean over READ_ROUNDS after
RECOVERY_ROUNDS (as loss_repeat), over its peak in PEAK_ROUNDS before the loss.

Measured on the development runs of 2026-12-07 (lab/estimator/exit_cut_study.py, record
exit-cut-study-2026-12-07.json; the competitors' RTTs from the runs' parameters), the fall
reads deeper than the constants, in their order: medians Reno 0.28, Vegas 0.24, CUBIC 0.58,
BBR 0.47 (its window after Drain is its BDP estimate, whatever the buffer). So the model's
centres are the kernels' constants scaled by one factor, READ_FACTOR, a stated choice between
what Reno's and CUBIC's readings keep of their constants (0.56 and 0.81; a first reading of
the same runs gave 0.60 and 0.85), so that neither is favoured, and its
spread (SIGMA_MODEL) such that a reading between Reno's and CUBIC's centres says nothing and
one at either centre moves the odds between them about 3:1. BBR's centre is
CUBIC's (it does not cut, but the window it drains to is a BDP of a pipe and buffer it
overfilled), wider, or, as often, still in Startup when the loss came (a loss does not end
it: its delivery rate's growth does) and grown since, anywhere up to BBR_HIGH_GAIN times its
peak; "unknown" is flat over [0, RATIO_MAX]. A competitor that sent next to nothing in the
rounds read (under STALLED_PKTS a round trip) is waiting out an RTO: no cut is read there
(found on seed 4507, where a Reno's stall read as a fall to 0 and a BBR's growth after its
loss to 2.3 times its peak as none of the four)."""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import BIN_S, Series, round_starts
from .evidence import HYPOTHESES, UNKNOWN, Evidence

PEAK_ROUNDS = 2
RECOVERY_ROUNDS = 4
READ_ROUNDS = 2
#: the share of the kernel's kept window that the bottleneck's reading shows (see above)
READ_FACTOR = 0.72
KEPT_AFTER_EXIT = {"reno": 0.5, "vegas": 0.5, "cubic": 717 / 1024}
SIGMA_MODEL = 0.1
BBR_SIGMA = 0.15
BBR_STARTUP = 0.5        # stated: as often still in Startup after its first loss as drained, for want of a reason either way
BBR_HIGH_GAIN = 2 / math.log(2)     # tcp_bbr bbr_high_gain: Startup's window over its BDP estimate
RATIO_MAX = 3.0
STALLED_PKTS = 1.0
MIN_PEAK_PKTS = 8.0      # a peak of fewer packets: its fall is counting noise


def exit_ratio(s: Series, f: int, base_rtt_s: float, window=None) -> tuple[float, float] | None:
    """(competitor ``f``'s mean window over READ_ROUNDS rounds from RECOVERY_ROUNDS after its
    first loss over its peak in the PEAK_ROUNDS before it, its peak in packets), None until
    those rounds are read (or where its first loss is the series' first bin: what came before
    is not known). ``window``: its row of Series.comp_window where the caller has it."""
    lost = np.flatnonzero(s.comp_lost[f] > 0)
    if not lost.size or lost[0] == 0:
        return None
    if window is None:
        window = s.comp_window(np.full(s.comp.shape[0], base_rtt_s))[f]
    delay = s.queue_delay_s()
    loss = int(lost[0])
    rtt_bins = max(1, int(round((base_rtt_s + float(delay[loss])) / BIN_S)))
    before = window[max(0, loss - PEAK_ROUNDS * rtt_bins):loss + 1]
    before = before[np.isfinite(before)]
    starts = round_starts(s, loss, base_rtt_s, RECOVERY_ROUNDS + READ_ROUNDS)
    if len(starts) <= RECOVERY_ROUNDS + READ_ROUNDS:
        return None
    lo, t = starts[RECOVERY_ROUNDS], starts[-1]
    # the window is averaged over an RTT centred on each bin: half an RTT past the rounds too
    if t + rtt_bins // 2 + 1 > s.n or not before.size:
        return None
    after = window[lo:t]
    after = after[np.isfinite(after)]
    peak = float(before.max())
    if not after.size or peak <= 0:
        return None
    if after.mean() < STALLED_PKTS:      # an RTO's wait: nothing to read (NaN: read, and nothing said)
        return float("nan"), peak
    return float(after.mean()) / peak, peak


def loglik(ratio: float) -> dict:
    out = {}
    for h, kept in KEPT_AFTER_EXIT.items():
        out[h] = -0.5 * ((ratio - READ_FACTOR * kept) / SIGMA_MODEL) ** 2 - math.log(SIGMA_MODEL * math.sqrt(2 * math.pi))
    bbr_centre = READ_FACTOR * KEPT_AFTER_EXIT["cubic"]
    drained = math.exp(-0.5 * ((ratio - bbr_centre) / BBR_SIGMA) ** 2) / (BBR_SIGMA * math.sqrt(2 * math.pi))
    startup = 1 / BBR_HIGH_GAIN if 0 <= ratio <= BBR_HIGH_GAIN else 0.0
    out["bbr"] = math.log(max((1 - BBR_STARTUP) * drained + BBR_STARTUP * startup, 1e-300))
    out[UNKNOWN] = -math.log(RATIO_MAX) - max(0.0, ratio - RATIO_MAX) / SIGMA_MODEL
    assert set(out) == set(HYPOTHESES)
    return out


def evidence(read) -> Evidence | None:
    """The stage's evidence from the competitors' (ratio, peak) read: their median ratio
    (several competitors at one bottleneck lose in the same overflow: one reading, not
    their sum), those with a peak under MIN_PEAK_PKTS or stalled (NaN) left out; None where
    none is left."""
    ratios = sorted(r for r, peak in read if peak >= MIN_PEAK_PKTS and math.isfinite(r))
    if not ratios:
        return None
    ratio = float(np.median(ratios))
    return Evidence("exit_cut", loglik(ratio), measured=ratio,
                    note=f"window {ratio:.2f} of its peak after its slow start's loss")
