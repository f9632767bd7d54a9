"""cubic: CUBIC in CCP, after RFC 9438, driven by a report per round (a window acked,
or else an RTT) and at once on a loss, a timeout or an undo by the kernel.

- beta_cubic = 0.7 (window retained after a congestion loss), C = 0.4;
- fast convergence: a loss below the last W_max lowers W_max to cwnd·(1+β)/2;
- TCP-friendly (Reno-friendly) region: W_est grows by α = 3(1-β)/(1+β) per RTT and
  wins when above the cubic curve;
- slow start to ssthresh (initially infinite), ssthresh = cwnd·β on loss;
- one window reduction per window of data (as reno.py), timeout: cwnd 1 MSS and
  a fresh curve (K = 0, RFC 9438 4.8), ssthresh kept on an RTO during a recovery or
  an RTO's retransmissions (as Linux); an undo by the kernel restores the window;
- before the first loss, congestion avoidance grows at least 5 % per RTT (Linux's
  minimum when last_max_cwnd is 0; not in the RFC): after a HyStart exit the
  cubic curve alone would stay flat for seconds;
- HyStart (on by default, ``hystart=False`` turns it off), delay detection as
  Linux tcp_cubic: from a window of 16 segments on, slow start ends (ssthresh =
  cwnd, no cut) when a round's smallest RTT exceeds the smallest RTT ever by
  clamp(min_rtt / 8, 4 ms, 16 ms). A round is a report (one RTT); its smallest RTT
  is folded per ACK in the datapath program (Linux looks at the round's first 8
  samples). Linux's ACK-train detection is not in: a report does not carry ACK
  spacing. Without HyStart, slow start ends at the first loss.

Subclasses (cubic_int.py) change two decisions: the backoff on a loss
(`loss_backoff`) and slow-start growth (`slow_start_growth`).
"""
from __future__ import annotations

import time

from .base import Algorithm, Report, WindowFlow

BETA = 0.7
C = 0.4
HYSTART_LOW_WINDOW_PKTS = 16            # Linux: hystart_low_window
HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US = 4_000, 16_000


class CubicFlow(WindowFlow):
    def __init__(self, alg, datapath, datapath_info):
        self.w_max = 0.0                                      # bytes
        self.epoch_start_s: float | None = None
        self.k_s = 0.0
        self.w_est = 0.0
        self.cwnd_epoch = 0.0
        self.delay_min_us: int | None = None                  # smallest RTT ever (HyStart)
        self.w_max_from_loss = 0.0                            # 0 until the first loss (Linux last_max_cwnd)
        super().__init__(alg, datapath, datapath_info)

    # -- decisions subclasses may change ---------------------------------------------
    def loss_backoff(self, r: Report) -> tuple[float, str, bool]:
        """(retained fraction, reason, congestive?) for a loss episode."""
        return BETA, "loss: CUBIC beta 0.7", True

    def slow_start_growth(self, r: Report) -> tuple[float, str]:
        return float(r.acked), "slow start"

    # -- CUBIC ---------------------------------------------------------------------
    def _w_cubic(self, t_s: float) -> float:
        mss = self.mss
        return (C * (t_s - self.k_s) ** 3) * mss + self.w_max

    def _congestion_avoidance(self, r: Report, now_s: float) -> str:
        mss = self.mss
        rtt_s = max(r.rtt_us, 1) / 1e6
        if self.epoch_start_s is None:
            self.epoch_start_s = now_s
            self.cwnd_epoch = self.cwnd
            self.w_est = self.cwnd
            if self.w_max < self.cwnd:
                self.w_max = self.cwnd
            self.k_s = ((self.w_max - self.cwnd) / mss / C) ** (1 / 3)
        t = now_s - self.epoch_start_s
        target = self._w_cubic(t + rtt_s)
        target = min(max(target, self.cwnd), 1.5 * self.cwnd)
        alpha = 3 * (1 - BETA) / (1 + BETA)
        # Growth per acked byte is relative to the window in use: the datapath floors
        # ours to whole segments, as the kernel's window is (dividing by the fraction
        # grew ccp cubic up to 1/cwnd slower: -5 % at 10 segments, -12 % at 4).
        in_use = max(self._sent_window(), mss)
        self.w_est += alpha * mss * r.acked / in_use
        before = self.cwnd
        if self.w_est > self._w_cubic(t):
            self.cwnd = max(self.cwnd, self.w_est)
            reason = "congestion avoidance (Reno-friendly region)"
        else:
            self.cwnd += (target - self.cwnd) * r.acked / in_use
            reason = "congestion avoidance (cubic)"
        if self.w_max_from_loss == 0 and self.cwnd < before + r.acked / 20:
            # Linux (bictcp_update): before any loss, at least +1 segment per 20 acked
            # (5 % per RTT); after a HyStart exit the cubic curve alone is flat for seconds
            self.cwnd = before + r.acked / 20
            reason = "congestion avoidance (no loss yet: +5 % per RTT, as Linux)"
        return reason

    def _sent_window(self) -> float:
        """The window the kernel was using: whole segments (the datapath floors ours)."""
        return (self.cwnd // self.mss) * self.mss

    def on_timeout(self, r, new_episode: bool) -> str:
        reason = "timeout: cwnd 1 MSS"
        if new_episode:
            w = self._sent_window()
            self.ssthresh = max((w // self.mss * BETA) // 1 * self.mss, 2 * self.mss)
            reason += ", ssthresh 0.7 of the window"
        else:
            reason += ", ssthresh kept (the episode's data is not all acked yet)"
        # The curve after a timeout starts afresh at the window congestion avoidance begins
        # with (RFC 9438 4.8: K = 0; Linux resets last_max_cwnd and HyStart on TCP_CA_Loss):
        # aiming back at the old W_max grew ccp cubic slower than kernel cubic at high loss.
        self.w_max = self.w_max_from_loss = 0.0
        self.delay_min_us = None
        self.cwnd = self.mss
        self.epoch_start_s = None
        return reason

    def on_undo(self, r) -> str:
        reason = super().on_undo(r)
        self.epoch_start_s = None     # the next congestion avoidance starts a new curve from here
        return reason

    def on_loss(self, r) -> str:
        beta, reason, congestive = self.loss_backoff(r)
        if beta < 1.0:
            if congestive:
                # As the kernel, in whole segments: the window actually in use, cut and
                # rounded down (a fraction carried over would leave ccp cubic up to a
                # segment above kernel cubic after every cut: +20 % at 5 % link loss).
                w = self._sent_window()
                # fast convergence (RFC 9438 4.7): release bandwidth to newer flows
                self.w_max = w * (1 + beta) / 2 if w < self.w_max else w
                self.cwnd = max((w // self.mss * beta) // 1 * self.mss, 2 * self.mss)
            else:
                # L2's gentle 0.95 keeps the fraction: rounded down it would take a whole
                # segment off every small window
                self.w_max = self.cwnd
                self.cwnd = max(self.cwnd * beta, 2 * self.mss)
            self.w_max_from_loss = self.w_max
            self.ssthresh = self.cwnd
            self.epoch_start_s = None
        return reason

    def hystart_applies(self) -> bool:
        return self.alg.hystart

    def _hystart_exit(self, r: Report) -> str | None:
        """HyStart's delay detection on this round; the reason if slow start ends."""
        rtt = r.minrtt_us
        if rtt is None:
            return None
        base = self.delay_min_us
        self.delay_min_us = rtt if base is None else min(base, rtt)
        if base is None or self.cwnd < HYSTART_LOW_WINDOW_PKTS * self.mss or not self.hystart_applies():
            return None
        thresh = min(max(base // 8, HYSTART_DELAY_MIN_US), HYSTART_DELAY_MAX_US)
        if rtt < base + thresh:
            return None
        self.ssthresh = self.cwnd
        return f"HyStart: round RTT {rtt / 1e3:.1f} ms >= min {base / 1e3:.1f} + {thresh / 1e3:.1f} ms, slow start ends"

    def on_ack(self, r) -> str:
        if self.cwnd < self.ssthresh:
            hystart = self._hystart_exit(r)
            if hystart:
                return hystart
            growth, reason = self.slow_start_growth(r)
            self.cwnd += growth
            return reason
        if r.minrtt_us is not None and (self.delay_min_us is None or r.minrtt_us < self.delay_min_us):
            self.delay_min_us = r.minrtt_us
        return self._congestion_avoidance(r, time.monotonic())


class Cubic(Algorithm):
    name = "cubic"
    flow_class = CubicFlow

    def __init__(self, init_cwnd_pkts: int = 10, trace: str | None = None, hystart: bool = True):
        super().__init__(init_cwnd_pkts=init_cwnd_pkts, trace=trace)
        self.hystart = hystart
