"""Stage: does the competitor answer this flow's pulses (ack-clocked) or not (paced)?

Nimbus's question (Goyal et al., SIGCOMM 2022), asked with the queue measured instead of
inferred. At a busy FIFO port the packets arriving are the port's rate plus the queue's
growth, ``C + dQ/dt``; this flow's own arrivals there are its departures (INT counts them)
moved back by the queueing delay they saw. The rest, ``z``, is the competitors'. A
window-limited (ack-clocked) sender sends as its ACKs return, so when this flow's pulse
takes a larger share of the port, the competitor's arrivals fall by as much an RTT later:
``z`` moves against the pulse with gain 1 (elastic). A paced sender's arrivals do not move:
gain 0, the queue takes the whole pulse.

Measured: the elasticity ``eta = -(z_up - z_down) / (o_up - o_down)`` over a stretch, with
``o`` this flow's arrivals and up / down its pulses' phases (above / below its mean).
Likelihoods (normal, SIGMA_ETA for the competitor's RTT shifting part of its answer out of
the up phase, and the queue's 10 ms steps): Reno, CUBIC and Vegas are window-limited
(ETA_WINDOW); a fixed-rate or application-limited flow does not answer ("unknown",
ETA_PACED); BBR paces, but its window (2 BDP) binds whenever the queue it meets holds a
BDP or more, and then it answers as a window CCA: uniform between the two, smeared alike.
(Measured on the development runs of lab/scenarios/identify_active.toml, 2026-12-02: BBR
in a 1-BDP buffer read 0.9-0.97, as Reno; so the stage tells the four from a paced flow,
not BBR from the others.)"""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import Series, moving_mean
from .evidence import HYPOTHESES, UNKNOWN, Evidence

ETA_WINDOW, ETA_PACED = 0.75, 0.0
SIGMA_ETA = 0.3
MIN_SWING = 0.05              # this flow's up and down arrivals must differ by this share of the port


def elasticity(s: Series, lo: int, hi: int, smooth_bins: int = 5) -> tuple[float, float] | None:
    """(eta, its standard error) over bins [lo, hi) of the series, or None where the
    port was idle, the pulses too shallow, or the stretch too short."""
    if not s.port_bps or hi - lo < 4 * smooth_bins:
        return None
    per_bin = s.port_pps * 0.01
    q = s.queue_pkts
    delay_bins = np.round(s.queue_delay_s() / 0.01).astype(int)
    # this flow's arrivals: each bin's departures moved back by the delay they queued
    arrived = np.zeros(s.n)
    np.add.at(arrived, np.clip(np.arange(s.n) - delay_bins, 0, s.n - 1), s.own)
    busy = (q > 0) | ((s.own + s.comp.sum(axis=0)) >= 0.9 * per_bin)
    total = np.where(busy, per_bin, s.own + s.comp.sum(axis=0)) + np.diff(q, prepend=q[0])
    z = total - arrived
    o = moving_mean(arrived, smooth_bins)[lo:hi]
    z = moving_mean(z, smooth_bins)[lo:hi]
    if np.mean(busy[lo:hi]) < 0.8:
        return None
    up = o > np.mean(o)
    if up.sum() < smooth_bins or (~up).sum() < smooth_bins:
        return None
    swing = o[up].mean() - o[~up].mean()
    if swing < MIN_SWING * per_bin:
        return None
    eta = -(z[up].mean() - z[~up].mean()) / swing
    # the error: z's spread, one independent sample per smoothing window
    err = np.std(z) * math.sqrt(smooth_bins / up.sum() + smooth_bins / (~up).sum()) / swing
    return float(eta), float(err)


def evidence(eta: float, stderr: float) -> Evidence:
    sigma = math.sqrt(stderr ** 2 + SIGMA_ETA ** 2)

    def normal(mean):
        return -0.5 * ((eta - mean) / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))
    grid = np.linspace(ETA_PACED, ETA_WINDOW, 50)
    between = math.log(float(np.mean([math.exp(normal(m)) for m in grid])) + 1e-300)
    loglik = {"reno": normal(ETA_WINDOW), "cubic": normal(ETA_WINDOW), "vegas": normal(ETA_WINDOW),
              "bbr": between, UNKNOWN: normal(ETA_PACED)}
    assert set(loglik) == set(HYPOTHESES)
    return Evidence("elasticity", loglik, measured=eta, note=f"+/- {sigma:.2f}")
