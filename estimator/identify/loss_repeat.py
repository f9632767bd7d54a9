"""Stage: does the competitor go on losing after a loss of its own? Read from its own drops
at the bottleneck in the round trips after its first loss, so it answers where the loss-cut
stage cannot: a flow that loses again before two quiet RTTs gives that stage no cut to read.

A loss-based window CCA cuts at a loss and then grows back to where it lost over many round
trips: Reno (and Vegas, which falls back to tcp_reno_ssthresh) half its window at a segment
a round, W/2 rounds; CUBIC 0.3 of it at no less than Reno-friendly 0.53 segments a round, or
along its curve. Once its recovery is over (RECOVERY_ROUNDS: the sender learns of the loss,
retransmits, and a retransmission lost again costs an RTO and a new slow start), it loses
again at most about once in W/2 rounds of its window W. BBRv1 does not cut: where its window
(its BDP estimate times 2 in ProbeBW, 2/ln 2 in Startup) is more than the pipe and its share
of the buffer hold, it loses in nearly every round; where that fits, only where its gain
cycle probes at 1.25, one round in 8. (In the development runs of 2026-12-07, 26 of the 40
BBR competitors that lost in slow start lost in 60 % or more of the 4th to 10th rounds
after it, and none of the 95 loss-based ones did.)

Each competitor's rounds from its first loss's RECOVERY_ROUNDS on, up to READ_ROUNDS of them
(a round: its base RTT and the queue's delay at the round's start), are read as they
complete: k of n with a drop of its own. The likelihoods are binomial, stated, not fitted:
- loss-based (Reno, CUBIC, Vegas): a loss a round at p = 2/W (W its mean window at the
  bottleneck over the rounds read), within [P_STRAY, P_BOUND];
- BBR: half the time (BBR_FITS) its window fits pipe and buffer and it loses as rarely as a
  loss-based flow would (at most where its gain cycle probes at 1.25), else anywhere up to
  every round (its window binds, or several BBR flows' windows overflow the buffer
  together): p uniform in [0, 1], any k alike (1/(n+1));
- unknown: any k alike.
So a competitor that goes on losing in most rounds is BBR (or none of the four), and one
quiet after its recovery says little (1.3:1 for the loss-based ones). A window of fewer than
MIN_WINDOW_PKTS over the rounds (an RTO's backoff) is not read: a flow that hardly sends
cannot lose. Several competitors at one bottleneck lose in the same overflows: the stage's
evidence is their mean, not their sum."""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import Series, round_starts
from .evidence import HYPOTHESES, UNKNOWN, Evidence

RECOVERY_ROUNDS = 4     # rounds after the loss not read: learnt, retransmitted, a retransmission's own loss, an RTO
READ_ROUNDS = 6         # rounds read after those
MIN_ROUNDS = 3          # fewer read say nothing yet
P_STRAY = 0.2           # a loss-based flow's drop in a round after its recovery: an RTO's slow start, a late retransmission
P_BOUND = 0.85          # a loss-based flow's window of a few packets: a drop nearly every round
BBR_FITS = 0.5          # stated: as often fitting as binding, for want of a reason either way
MIN_WINDOW_PKTS = 4.0
LOSS_BASED = ("reno", "cubic", "vegas")


def lossy_rounds(s: Series, f: int, base_rtt_s: float, window=None) -> tuple[int, int, float] | None:
    """(rounds with a drop of competitor ``f``'s own, rounds read, its mean window over them
    in packets) after its first loss, as far as the series tells (None: no loss yet, or its
    loss too close to the series' start: what came before it is not known). ``window``: its
    row of Series.comp_window where the caller has it."""
    lost = np.flatnonzero(s.comp_lost[f] > 0)
    if not lost.size or lost[0] == 0:
        return None
    starts = round_starts(s, int(lost[0]), base_rtt_s, RECOVERY_ROUNDS + READ_ROUNDS)
    rounds = [(a, b) for a, b in zip(starts[RECOVERY_ROUNDS:], starts[RECOVERY_ROUNDS + 1:])]
    if not rounds:
        return 0, 0, 0.0
    k = sum(int(s.comp_lost[f, a:b].sum() > 0) for a, b in rounds)
    if window is None:
        window = s.comp_window(np.full(s.comp.shape[0], base_rtt_s))[f]
    window = window[rounds[0][0]:rounds[-1][1]]
    window = window[np.isfinite(window)]
    return k, len(rounds), float(window.mean()) if window.size else 0.0


def _binomial_log(k: int, n: int, p: float) -> float:
    return math.log(math.comb(n, k)) + k * math.log(p) + (n - k) * math.log(1 - p)


def loglik(k: int, n: int, window_pkts: float) -> dict:
    """Log-likelihood per hypothesis of k lossy rounds of n, a window of ``window_pkts``."""
    p_loss_based = min(P_BOUND, max(P_STRAY, 2.0 / window_pkts if window_pkts > 0 else P_BOUND))
    based = _binomial_log(k, n, p_loss_based)
    anything = -math.log(n + 1)         # the binomial averaged over p uniform in [0, 1]
    out = {h: based for h in LOSS_BASED}
    out["bbr"] = math.log(BBR_FITS * math.exp(based) + (1 - BBR_FITS) * math.exp(anything))
    out[UNKNOWN] = anything
    return out


def evidence(read) -> Evidence | None:
    """The stage's evidence from each competitor's (k, n, window) read (those with n below
    MIN_ROUNDS or a window below MIN_WINDOW_PKTS left out), None where none has enough."""
    used = [(k, n, w) for k, n, w in read if n >= MIN_ROUNDS and w >= MIN_WINDOW_PKTS]
    if not used:
        return None
    total = {h: 0.0 for h in HYPOTHESES}
    for k, n, w in used:
        for h, v in loglik(k, n, w).items():
            total[h] += v
    total = {h: v / len(used) for h, v in total.items()}
    k_all, n_all = sum(k for k, _, _ in used), sum(n for _, n, _ in used)
    return Evidence("loss_repeat", total, measured=k_all / n_all,
                    note=f"{k_all} of {n_all} rounds after a loss lost again")
