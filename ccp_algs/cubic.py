"""cubic: CUBIC in CCP, after RFC 9438, driven by a report per round (a window acked,
or else an RTT) and at once on a loss, a timeout or an undo by the kernel.

- beta_cubic = 0.7 (window retained after a congestion loss), C = 0.4;
- fast convergence: a loss below the last W_max lowers W_max to cwnd·(1+β)/2;
- TCP-friendly (Reno-friendly) region: W_est grows by α = 3(1-β)/(1+β) per RTT and
  wins when above the cubic curve;
- growth in Linux's integers (bictcp_update, tcp_cong_avoid_ai), segment by segment
  acked: the curve truncated to whole segments, W_est +1 per (cwnd·15)>>3 acked, the
  window +1 per cnt = cwnd/(target − cwnd) acked (at least 2). Where loss keeps windows
  at a few segments this is what kernel cubic does, and it grows faster than the exact
  formulas (the fidelity target is kernel cubic);
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
  clamp(min_rtt / 8, 4 ms, 16 ms). The intcc datapath checks the threshold per ACK,
  as Linux (register ss_exit_rtt: slow start pauses for the round once more than 8
  samples are above it; rounds are flights, from the first ACK), and the agent ends slow start at the next report, whose smallest RTT is
  folded per ACK in the datapath program. Decided only at reports, the exit came a
  round late, at twice kernel cubic's window. Linux's ACK-train detection is not in: a
  report does not carry ACK spacing. Without HyStart, slow start ends at the first loss.

Subclasses (cubic_int.py) change two decisions: the backoff on a loss
(`loss_backoff`) and slow-start growth (`slow_start_growth`).
"""
from __future__ import annotations

import time

from .base import Algorithm, Report
from .window import WindowFlow
from .registry import INIT_CWND, Param

HYSTART = Param("hystart", bool, True, "HyStart delay detection ends slow start before the first loss (as Linux)")

BETA = 0.7
C = 0.4
# Linux's beta_scale: 8 (1024 + 717) / 3 / (1024 - 717) in integers = 15, so W_est gains
# a segment per (cwnd * 15) >> 3 segments acked (alpha = 8/15 per window, floored)
_BETA_1024 = round(BETA * 1024)
RENO_FRIENDLY_SCALE = 8 * (1024 + _BETA_1024) // 3 // (1024 - _BETA_1024)
HYSTART_LOW_WINDOW_PKTS = 16            # Linux: hystart_low_window
HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US = 4_000, 16_000


class CubicFlow(WindowFlow):
    def __init__(self, alg, datapath, datapath_info):
        self.w_max = 0.0                                      # bytes
        self.epoch_start_s: float | None = None
        self.k_s = 0.0
        self.est_pkts = self.est_acked = 0                      # Linux tcp_cwnd, ack_cnt
        self.cwnd_credit = 0                                  # Linux snd_cwnd_cnt: segments acked toward +1
        self.acked_carry = 0.0                                # acked bytes short of a segment
        self.delay_min_us: int | None = None                  # smallest RTT ever (HyStart)
        self.w_max_from_loss = 0.0                            # 0 until the first loss (Linux last_max_cwnd)
        self.ca_epoch = 1                                     # numbers the epochs for the datapath's W_est
        self.epoch_end_pkts = 0                               # the window an epoch ended at (cut, undo)
        self.ca_target = 0.0                                  # the curve one RTT ahead (bytes; 0: none yet)
        self.congestion_ssthresh = float("inf")               # ssthresh of the last congestion cut
        #: the epoch is a competitor's, begun before this flow took it (adopt): the agent sets
        #: the target, the datapath's own curve would begin the epoch at its first ACK
        self.competitor_epoch = False
        super().__init__(alg, datapath, datapath_info)

    def adopt(self, state):
        """A curve from the window taken over (W_max there: the plateau, then probing), or
        from the ssthresh it is to slow-start to (a switch to a competitor's larger rate), a
        new epoch on the next congestion-avoidance ACK; HyStart's minimum RTT carried."""
        self.w_max = float(max(state.cwnd_bytes, state.ssthresh_or_window))
        self.delay_min_us = int(state.min_rtt_us) if state.min_rtt_us else None
        self.epoch_start_s = None
        self.epoch_end_pkts = int(state.cwnd_bytes // self.mss)
        self.ca_epoch += 1
        self.competitor_epoch = False
        if state.cubic_epoch is not None:
            self._adopt_competitor_epoch(state)
        super().adopt(state)

    def _adopt_competitor_epoch(self, state):
        """Go on along the competitors' curve (a mirror switch, FlowState.cubic_epoch): from
        an equal window, a CUBIC beside them grows as they do only on their epoch's clock.
        Begun afresh at the switch, its curve grew C t^3 from there while theirs, seconds
        into its epoch, grew 3 C t^2 a second: in deep buffers, where no loss comes for
        tens of seconds, the flow's share fell from a half to a fifth (2026-12-06, seed
        2618). Their plateau and K as measured; the 5 %-per-RTT floor only where they have
        not lost yet (K 0: the curve from their slow start's exit)."""
        origin_bytes, k_s, age_s = state.cubic_epoch
        self.w_max, self.k_s = float(origin_bytes), float(k_s)
        self.w_max_from_loss = self.w_max if k_s > 0 else 0.0
        self.epoch_start_s = time.monotonic() - float(age_s)
        self.est_pkts, self.est_acked = max(int(state.cwnd_bytes // self.mss), 1), 0
        self.competitor_epoch = True
        ahead_s = (state.rtt_us or state.min_rtt_us or 0) / 1e6
        self.ca_target = float(max(self._w_cubic(float(age_s) + ahead_s), self.mss))

    # -- decisions subclasses may change ---------------------------------------------
    def loss_backoff(self, r: Report) -> tuple[float, str, bool]:
        """(retained fraction, reason, congestive?) for a loss episode."""
        return BETA, "loss: CUBIC beta 0.7", True

    def slow_start_growth(self, r: Report) -> tuple[float, str]:
        return r.growth_bytes(self.mss), "slow start"

    # -- the datapath's per-ACK growth ----------------------------------------------
    def growth_registers(self) -> list[tuple[str, int]]:
        """Slow start to ssthresh, then congestion avoidance with W_est (Linux's per-ACK
        arithmetic, kept in the datapath) towards the cubic curve, which the intcc datapath
        computes per ACK from W_max (ca_w_max, Linux's last_max_cwnd) delay_min ahead
        (ca_ahead), its epoch from the first congestion-avoidance ACK after a new ca_epoch,
        as tcp_cubic. ca_target, the curve one delay_min past this report, is the target
        where the datapath has no curve of its own. Fixed once per report, it stood still
        for an RTT: in deep buffers (RTTs of seconds) ccp cubic's epochs began a whole RTT
        after kernel cubic's and its window fell to 0.6 of a kernel competitor's. In slow
        start the target is ssthresh: the ACK that ends it grows by the rest as the first of
        a new epoch, as bictcp_cong_avoid."""
        ss_until = self.slow_start_in_datapath()
        if self.in_slow_start():
            target = ss_until if self.ssthresh != float("inf") else 0
        else:
            target = int(self.ca_target)
        # a competitor's epoch: the agent's target, an RTT ahead (the datapath's curve is off)
        ahead_us = 0 if self.competitor_epoch else (self.delay_min_us or 1)
        return [("ss_until", ss_until), ("ca_target", target),
                ("ca_cnt_max", 20 if self.w_max_from_loss == 0 else 0),
                ("reno_scale", RENO_FRIENDLY_SCALE), ("ca_epoch", self.ca_epoch),
                ("ss_exit_rtt", self.hystart_exit_rtt_us() if ss_until else 0),
                ("ca_w_max", int(self.w_max_from_loss)), ("ca_ahead", ahead_us)]

    def hystart_exit_rtt_us(self) -> int:
        """The RTT at which HyStart ends slow start (0: not now): the datapath checks it per
        ACK, as tcp_cubic (the agent's check at the next report then ends slow start here)."""
        if self.delay_min_us is None or not self.in_slow_start() or not self.hystart_applies():
            return 0
        return self.delay_min_us + self._hystart_threshold_us(self.delay_min_us)

    @staticmethod
    def _hystart_threshold_us(delay_min_us: int) -> int:
        return min(max(delay_min_us // 8, HYSTART_DELAY_MIN_US), HYSTART_DELAY_MAX_US)

    def _end_epoch(self):
        """The curve restarts at the next congestion avoidance (Linux epoch_start = 0)."""
        self.epoch_start_s = None
        self.epoch_end_pkts = int(self.cwnd // self.mss)
        self.cwnd_credit = 0
        self.ca_epoch += 1
        self.competitor_epoch = False

    # -- CUBIC ---------------------------------------------------------------------
    @property
    def w_est(self) -> float:
        """The Reno-friendly estimate W_est (bytes): Linux's tcp_cwnd."""
        return self.est_pkts * self.mss

    def _w_cubic(self, t_s: float) -> float:
        """The cubic curve at t_s into the epoch (bytes)."""
        return self._curve(t_s, self.k_s, self.w_max)

    def _curve(self, t_s: float, k_s: float, w_max: float) -> float:
        """A cubic curve at t_s into its epoch (bytes), in whole segments as Linux's
        bictcp_update: C (t - K)^3 truncated to segments, off an integer W_max."""
        offset_pkts = int(C * abs(t_s - k_s) ** 3)
        origin_pkts = w_max // self.mss
        return (origin_pkts - offset_pkts if t_s < k_s else origin_pkts + offset_pkts) * self.mss

    def _new_epoch_target(self, r: Report) -> float:
        """The target one RTT into the epoch that starts at this window (bytes), as Linux
        computes it on the epoch's first ACK: the datapath grows towards it until the
        agent's first congestion-avoidance report. Handed the window instead, the datapath
        ran cnt = 100 x cwnd until then, and the credit tcp_cong_avoid_ai counts meanwhile
        was paid out at once when the target came."""
        mss = self.mss
        cwnd = max(self.cwnd // mss, 1) * mss
        w_max = max(self.w_max, cwnd)
        ahead_s = (self.delay_min_us or r.rtt_us or 1) / 1e6
        return self._curve(ahead_s, ((w_max - cwnd) / mss / C) ** (1 / 3), w_max)

    def _start_epoch(self, now_s: float):
        """A new curve, as Linux on the epoch's first ACK in congestion avoidance: K and
        W_est from the window at that ACK. That is the window the last epoch ended at (the
        cut, once the recovery is over; an undo's), or ssthresh where slow start led up to
        it, not the window at the agent's first report: the datapath has grown since, and
        a curve begun there sat nearer W_max, its target a segment higher (docs/datapath.md, A5)."""
        mss = self.mss
        now_pkts = max(int(self.cwnd // mss), 1)
        ss_pkts = int(self.ssthresh // mss) if self.ssthresh != float("inf") else now_pkts
        base_pkts = min(now_pkts, max(self.epoch_end_pkts, min(now_pkts, ss_pkts), 1))
        self.epoch_start_s = now_s
        self.est_pkts, self.est_acked = base_pkts, 0     # Linux tcp_cwnd, ack_cnt
        if self.w_max <= base_pkts * mss:
            self.w_max = base_pkts * mss
        self.k_s = ((self.w_max - base_pkts * mss) / mss / C) ** (1 / 3)

    def on_recovery_over(self, r: Report):
        """Linux's epoch begins on the ACK that ends the recovery (cong_avoid runs on it,
        in Open): the curve's clock starts with this report, not the next one."""
        if self.epoch_start_s is None and not self.in_slow_start():
            self._start_epoch(time.monotonic())

    def _congestion_avoidance(self, r: Report, now_s: float) -> str:
        """One report's growth as tcp_cubic's per-ACK arithmetic (bictcp_update and
        tcp_cong_avoid_ai), segment by segment, in whole segments: the window grows a
        segment per ``cnt`` acked, cnt = cwnd / (target - cwnd) towards the cubic curve
        one RTT ahead or the Reno-friendly W_est where that is higher, at least 2, with
        credit acked while cnt was higher paid out as a segment. Linux's integers matter
        where loss keeps windows small: the curve 1.9 segments below W_max counts as 1, and
        W_est gains a segment per (cwnd * 15) >> 3 acked, faster than alpha at 2 segments
        (docs/datapath.md, A6)."""
        mss = self.mss
        cwnd_pkts = max(int(self.cwnd // mss), 1)
        if self.epoch_start_s is None:
            self._start_epoch(now_s)
        ahead_s = (self.delay_min_us or r.rtt_us or 1) / 1e6
        if self.competitor_epoch:       # the target stands until the next report, an RTT on
            ahead_s = (r.rtt_us or self.delay_min_us or 1) / 1e6
        target_pkts = int(self._w_cubic(now_s - self.epoch_start_s + ahead_s) // mss)
        self.ca_target = float(target_pkts * mss)
        if self.grew_in_datapath(r, "ca_target") or self.grew_in_datapath(r, "ca_ahead"):
            return f"congestion avoidance (datapath, towards {target_pkts} segments)"
        self.acked_carry += r.growth_bytes(mss) / mss
        segments = int(self.acked_carry)
        self.acked_carry -= segments
        reason = "congestion avoidance (cubic)"
        for _ in range(segments):
            cnt = cwnd_pkts // (target_pkts - cwnd_pkts) if target_pkts > cwnd_pkts else 100 * cwnd_pkts
            if self.w_max_from_loss == 0 and cnt > 20:
                # before any loss at least +1 segment per 20 acked (5 % per RTT): after a
                # HyStart exit the cubic curve alone is flat for seconds
                cnt = 20
                reason = "congestion avoidance (no loss yet: +5 % per RTT, as Linux)"
            self.est_acked += 1
            acked_per_segment = max((cwnd_pkts * RENO_FRIENDLY_SCALE) >> 3, 1)
            while self.est_acked > acked_per_segment:
                self.est_acked -= acked_per_segment
                self.est_pkts += 1
            if self.est_pkts > cwnd_pkts and cwnd_pkts // (self.est_pkts - cwnd_pkts) < cnt:
                cnt = cwnd_pkts // (self.est_pkts - cwnd_pkts)
                reason = "congestion avoidance (Reno-friendly region)"
            cnt = max(cnt, 2)
            if self.cwnd_credit >= cnt:          # credit from a higher cnt: one segment now
                self.cwnd_credit = 0
                cwnd_pkts += 1
            self.cwnd_credit += 1
            if self.cwnd_credit >= cnt:
                cwnd_pkts += self.cwnd_credit // cnt
                self.cwnd_credit %= cnt
        self.cwnd = max(self.cwnd, float(cwnd_pkts * mss))
        return reason

    def _sent_window(self) -> float:
        """The window the kernel was using: whole segments (the datapath floors ours)."""
        return (self.cwnd // self.mss) * self.mss

    def on_timeout(self, r, new_episode: bool) -> str:
        reason = "timeout: cwnd 1 MSS"
        if new_episode:
            w = self._sent_window()
            self.ssthresh = self.congestion_ssthresh = max((w // self.mss * BETA) // 1 * self.mss, 2 * self.mss)
            reason += ", ssthresh 0.7 of the window"
        else:
            reason += ", ssthresh kept (the episode's data is not all acked yet)"
        # The curve after a timeout starts afresh at the window congestion avoidance begins
        # with (RFC 9438 4.8: K = 0; Linux resets last_max_cwnd and HyStart on TCP_CA_Loss):
        # aiming back at the old W_max grew ccp cubic slower than kernel cubic at high loss.
        self.w_max = self.w_max_from_loss = 0.0
        self.delay_min_us = None
        self.cwnd = self.mss
        self._end_epoch()
        # The next epoch's curve starts flat at the window congestion avoidance begins
        # with, ssthresh once slow start is back there: the datapath's target until the
        # agent's first congestion-avoidance report. The old curve's target, left in place,
        # grew the window a segment on the ACKs right after slow start ended.
        # (none while ssthresh is unset: an INT policy that kept the window on a link loss
        # leaves it infinite, and inf // mss is NaN, which the next registers cannot send)
        self.ca_target = float(max(self.ssthresh // self.mss, 1) * self.mss) if self.ssthresh != float("inf") else 0.0
        return reason

    def on_undo(self, r) -> str:
        reason = super().on_undo(r)
        self._end_epoch()             # the next congestion avoidance starts a new curve from here
        self.ca_target = self._new_epoch_target(r)
        return reason

    def on_loss(self, r) -> str:
        beta, reason, congestive = self.loss_backoff(r)
        if beta < 1.0:
            if congestive:
                # As the kernel, in whole segments: the window actually in use, cut and
                # rounded down (a fraction carried over would leave ccp cubic up to a
                # segment above kernel cubic after every cut; A7).
                w = self._sent_window()
                base, matched_ssthresh = self.cut_base(w, beta)
                if base > w:              # a switch's matched window not reached yet (cut_base)
                    self.w_max = base
                elif w < self.w_max:
                    # fast convergence (RFC 9438 4.7): release bandwidth to newer flows
                    # (whole segments, as Linux's last_max_cwnd)
                    self.w_max = (w // self.mss * (1 + beta) / 2) // 1 * self.mss
                else:
                    self.w_max = w
                self.cwnd = max((w // self.mss * beta) // 1 * self.mss, 2 * self.mss)
            else:
                # A loss that was not congestion (cubic_int's L2): the window gives up its
                # fraction (kept: rounded down it would take a whole segment off every small
                # window) and nothing else. What CUBIC learned about congestion stays: ssthresh,
                # W_max and the curve, so slow start and the curve go on from the smaller window
                # (ending slow start at every link loss, as a congestion cut does, held L2 far
                # below L1; A8).
                self.cwnd = max(self.cwnd * beta, 2 * self.mss)
                return reason
            self.w_max_from_loss = self.w_max
            self.ssthresh = self.congestion_ssthresh = self.cwnd
            if base > w:
                self.ssthresh = self.congestion_ssthresh = max(matched_ssthresh, self.cwnd)
                reason += f", slow start on to {beta:g} of the matched window"
            self._end_epoch()             # snd_cwnd_cnt 0, as tcp_init_cwnd_reduction
            self.ca_target = self._new_epoch_target(r)
        return reason

    def hystart_applies(self) -> bool:
        # Not on the way to a switch's matched window: the delay it would see is the
        # competitor's queue, and the matched window is where this slow start ends.
        return self.alg.hystart and self.matched_cwnd <= self.cwnd

    def _hystart_exit(self, r: Report) -> str | None:
        """HyStart's delay detection on this round; the reason if slow start ends."""
        rtt = r.minrtt_us
        if rtt is None:
            return None
        base = self.delay_min_us
        self.delay_min_us = rtt if base is None else min(base, rtt)
        if base is None or self.cwnd < HYSTART_LOW_WINDOW_PKTS * self.mss or not self.hystart_applies():
            return None
        thresh = self._hystart_threshold_us(base)
        if rtt < base + thresh:
            return None
        self.ssthresh = self.cwnd
        return f"HyStart: round RTT {rtt / 1e3:.1f} ms >= min {base / 1e3:.1f} + {thresh / 1e3:.1f} ms, slow start ends"

    def on_ack(self, r) -> str:
        if self.in_slow_start():
            hystart = self._hystart_exit(r)
            if hystart:
                return hystart
            if self.grew_in_datapath(r, "ss_until"):
                return "slow start (datapath)"
            growth, reason = self.slow_start_growth(r)
            # up to ssthresh, as tcp_slow_start (past it, a 2-segment ACK after an RTO
            # took ccp cubic to 3 segments where kernel cubic stops at ssthresh 2)
            self.cwnd = min(self.cwnd + growth, max(self.ssthresh, self.cwnd))
            return reason
        if r.minrtt_us is not None and (self.delay_min_us is None or r.minrtt_us < self.delay_min_us):
            self.delay_min_us = r.minrtt_us
        return self._congestion_avoidance(r, time.monotonic())


class Cubic(Algorithm):
    families = ("slow_start", "cubic")
    name = "cubic"
    summary = "CUBIC (RFC 9438: beta 0.7, C 0.4, fast convergence, Reno-friendly region, HyStart)."
    flow_class = CubicFlow
    params = (HYSTART, INIT_CWND)
    loss_beta_1024 = _BETA_1024

    def __init__(self, init_cwnd_pkts: int = 10, trace: str | None = None, hystart: bool = True, **kwargs):
        super().__init__(init_cwnd_pkts=init_cwnd_pkts, trace=trace, **kwargs)
        self.hystart = hystart
