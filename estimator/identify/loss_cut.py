"""Stage: how a competitor answers its own losses, from its own packets and drops at the
bottleneck (the sink's per-flow counts). A loss-based window CCA cuts its window by its
multiplicative decrease: Reno to 0.5 (RFC 5681; Linux tcp_reno_ssthresh), Vegas too (Linux
tcp_vegas falls back to tcp_reno_ssthresh on a loss), CUBIC to 717/1024 (tcp_cubic's beta);
BBRv1 does not cut (packet conservation for a round, its pacing rate unchanged). The sender
learns of a loss about an RTT after the drop, and its smaller window shows at the bottleneck
then: the cut is read as the competitor's mean window (its packets on the way and in the
queue, Series.comp_window) over the two RTTs from one RTT after its loss, over its window in
the RTT before it, at events with no other loss of its own in the two RTTs before. (Read
from its rate instead, a cut hid wherever the queue held a BDP: the halved window still
filled the pipe; 2026-12-02.)

Each cut is a measurement with a counting error (Poisson: the packets counted before and
after) and the model's own spread (SIGMA_MODEL: PRR's steps, delayed ACKs, a window still
growing when the loss came; a stated choice, not fitted), so its likelihood under a CCA is
normal around that CCA's constant; "unknown" is flat over [0, CUT_MAX] with a tail beyond."""
from __future__ import annotations

import math

import numpy as np

from .evidence import HYPOTHESES, UNKNOWN, Evidence

#: The window a CCA keeps after a loss, from the kernels' constants
KEPT_AFTER_LOSS = {"reno": 0.5, "vegas": 0.5, "cubic": 717 / 1024, "bbr": 1.0}
SIGMA_MODEL = 0.1
CUT_MAX = 2.0            # the measured ratio's plausible range ("unknown" is flat over it,
UNKNOWN_TAIL = 0.5       # ... and falls off beyond it, by e every this much)
QUIET_RTTS = 2
MIN_PACKETS_BEFORE = 8   # a cut read from fewer packets says little (its counting error is >1/3)


def loss_cuts(packets, lost, rtt_bins) -> list[tuple[float, float]]:
    """(cut, its standard error) of each loss event of one flow: ``packets`` and ``lost``
    per bin, ``rtt_bins`` the RTT in bins (one value, or one per bin)."""
    return [(cut, err) for _, cut, err in loss_cut_events(packets, lost, rtt_bins)]


def loss_cut_events(packets, lost, rtt_bins, window=None) -> list[tuple[int, float, float]]:
    """(the loss's bin, cut, its standard error) of each loss event, as loss_cuts; with
    ``window`` (the flow's window per bin, Series.comp_window) the cut is the window's, not
    the rate's: with a queue of a BDP or more a halved window still fills the pipe, and
    the cut shows in the flow's queued packets, its rate unchanged."""
    packets = np.asarray(packets, dtype=float)
    measure = packets if window is None else np.asarray(window, dtype=float)
    lost = np.asarray(lost, dtype=float)
    rtt = np.broadcast_to(np.maximum(np.asarray(rtt_bins, dtype=int), 1), packets.shape)
    had_loss = np.concatenate(([0], np.cumsum(lost > 0)))
    out = []
    for k in np.flatnonzero(lost > 0):
        r = int(rtt[k])
        if k < QUIET_RTTS * r or k + 3 * r > len(packets) or had_loss[k] - had_loss[k - QUIET_RTTS * r] > 0:
            continue
        before = packets[k - r:k].sum()
        after = packets[k + r:k + 3 * r].sum() / 2
        if before < MIN_PACKETS_BEFORE:
            continue
        was = measure[k - r:k].mean()
        if not np.isfinite(was) or was <= 0:
            continue
        cut = float(measure[k + r:k + 3 * r].mean() / was) if window is not None else after / before
        if not np.isfinite(cut):
            continue
        counting = cut * math.sqrt(1 / before + 1 / max(after, 1.0))
        out.append((int(k), float(cut), float(counting)))
    return out


def evidence(cut: float, stderr: float) -> Evidence:
    """The log-likelihood of one measured cut under each hypothesis."""
    sigma = math.sqrt(stderr ** 2 + SIGMA_MODEL ** 2)
    loglik = {h: -0.5 * ((cut - kept) / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))
              for h, kept in KEPT_AFTER_LOSS.items()}
    loglik[UNKNOWN] = -math.log(CUT_MAX) - max(0.0, cut - CUT_MAX) / UNKNOWN_TAIL
    assert set(loglik) == set(HYPOTHESES)
    return Evidence("loss_cut", loglik, measured=cut, note=f"+/- {sigma:.2f}")
