"""bbr: BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00; Linux tcp_bbr.c) in CCP.

A model of the path, per report: the bottleneck bandwidth (the max delivery rate of the
last 10 rounds) and the propagation RTT (the min RTT of the last 10 s). It paces at
pacing_gain x bw and keeps cwnd at cwnd_gain x BDP, through four modes:
Startup (gain 2/ln 2 until bw grew < 25 % in 3 rounds), Drain (1/gain until in flight is
one BDP), ProbeBW (pacing gain cycling 5/4, 3/4, 1 x 6, a phase per min RTT) and ProbeRTT
(4 packets for 200 ms and a round when the min RTT is 10 s old).

Losses do not cut the model: as Linux, the window drops by what was lost, a recovery
starts a round of packet conservation (cwnd = in flight + delivered), and its end
restores the window from before it. The datapath grows the window per ACK up to the
target (contract register ss_until), as tcp_bbr's cwnd += acked, and paces at the rate
this sets (the contract's Rate). As Linux since 5.1, the target also allows for ACK
aggregation: the intcc datapath measures, per ACK, the packets delivered beyond bw in the
current ACK epoch (register bw, signal extra_acked), and the target adds the max of the
last 5-10 rounds, at most 100 ms at bw. Long-term bandwidth sampling (tcp_bbr's policer
detection): two intervals of 4-16 rounds, each ending on a loss, that both lost >= 20 % of
what they delivered and delivered at rates within 1/8 of each other, make the flow use
their mean rate as its bandwidth, at pacing gain 1, for 48 rounds. At 20 % random link
loss kernel bbr lives there; without it ccp bbr had 2.2x its goodput (docs/datapath.md).
"""
from __future__ import annotations

import random
from collections import deque

from .base import Algorithm, FlowBase, Report
from .bbr_policer import EXPIRED, POLICED, LongTermBw
from .flowstate import FlowState
from .programs import REPORT_PER_RTT_AND_ON_LOSS
from .registry import INIT_CWND

HIGH_GAIN = 2885 / 1000          # 2/ln(2): Startup doubles the delivery rate per round
DRAIN_GAIN = 1000 / 2885
CWND_GAIN = 2.0
PACING_GAINS = (5 / 4, 3 / 4, 1, 1, 1, 1, 1, 1)
BW_WINDOW_ROUNDS = len(PACING_GAINS) + 2
MIN_RTT_WINDOW_NS = 10 * 10**9
PROBE_RTT_NS = 200 * 10**6
CWND_MIN_PKTS = 4
FULL_BW_GROWTH = 5 / 4
FULL_BW_ROUNDS = 3
PACING_MARGIN = 0.99             # tcp_bbr paces 1 % below the estimate
TSO_BUDGET_PKTS = 3 * 2          # bbr_quantization_budget at low rates: 3 x 2 TSO segments
EXTRA_ACKED_WIN_ROUNDS = 5       # the aggregation max is kept in two windows of 5 rounds
EXTRA_ACKED_MAX_S = 0.1          # ... and allows at most 100 ms at bw
STARTUP, DRAIN, PROBE_BW, PROBE_RTT = "startup", "drain", "probe_bw", "probe_rtt"

class BbrFlow(FlowBase):
    def __init__(self, alg, datapath, datapath_info, now_ns=None):
        super().__init__(alg, datapath, datapath_info)
        self.clock = alg.clock
        now = self.clock() if now_ns is None else now_ns
        self.cwnd_pkts = float(alg.init_cwnd_pkts)
        self.mode = STARTUP
        self.pacing_gain, self.cwnd_gain = HIGH_GAIN, HIGH_GAIN
        self.bw_samples: deque[tuple[int, float]] = deque()      # (round, max delivery rate B/s)
        self.min_rtt_us: float | None = None
        self.min_rtt_stamp_ns = now
        self.round = 0
        self.delivered_bytes = 0.0
        self.next_round_delivered = 0.0
        self.full_bw, self.full_bw_count, self.full_bw_reached = 0.0, 0, False
        self.cycle_idx, self.cycle_stamp_ns = 0, now
        self.probe_rtt_done_ns: int | None = None
        self.probe_rtt_round_done = False
        self.prior_cwnd_pkts = 0.0
        self.conservation_until_round: int | None = None
        self.recovery_bytes_left = 0.0
        self.grown_seen = 0
        self.reductions_seen = 0
        self.rate_bytes_per_s = 0
        self.extra_acked = [0.0, 0.0]      # tcp_bbr's two aggregation windows (packets)
        self.extra_acked_idx = 0
        self.extra_acked_rounds = 0
        self.lost_pkts_total = 0
        self.lt = LongTermBw(now, self.mss)      # tcp_bbr's policer detection
        self.install(int(self.cwnd_pkts * self.mss), [("seg_bytes", self.mss)] + self._growth(self.cwnd_pkts))
        self.trace.row(sid=self.sid, event="start", cwnd_bytes=int(self.cwnd_pkts * self.mss), reason="bbr startup",
                       src_port=self.ports[0], dst_port=self.ports[1])

    # -- the model ---------------------------------------------------------------------
    @property
    def max_bw(self) -> float:
        """The max delivery-rate sample of the last 10 rounds (bytes/s)."""
        return max((b for _, b in self.bw_samples), default=0.0)

    @property
    def bw(self) -> float:
        """Bottleneck bandwidth estimate (bytes/s): the policed rate while one is in use,
        else the max sample of the last 10 rounds (tcp_bbr's bbr_bw)."""
        return self.lt_bw if self.lt_use_bw else self.max_bw

    @property
    def lt_use_bw(self) -> bool:
        """Pacing at a policer's rate (bbr_policer.py)."""
        return self.lt.use_bw

    @property
    def lt_bw(self) -> float:
        return self.lt.bw

    def _lt_bw_sampling(self, losses: int, round_start: bool, now: int):
        done = self.lt.on_report(losses, round_start, now, self.delivered_bytes / self.mss, self.lost_pkts_total,
                                 in_probe_bw=self.mode == PROBE_BW)
        if done == POLICED:
            self.pacing_gain = 1.0
        elif done == EXPIRED:
            self._enter_probe_bw(now)          # gain cycling again

    def bdp_pkts(self, gain: float) -> float:
        if self.min_rtt_us is None or self.bw <= 0:
            return float(self.alg.init_cwnd_pkts)      # no model yet: the initial window
        return gain * self.bw * self.min_rtt_us / 1e6 / self.mss

    def aggregation_pkts(self) -> float:
        """bbr_ack_aggregation_cwnd: the window for ACKs that arrive in bursts, once the pipe
        is full: the largest aggregation of the last 5-10 rounds, at most 100 ms at bw."""
        if not self.full_bw_reached:
            return 0.0
        return min(max(self.extra_acked), self.bw * EXTRA_ACKED_MAX_S / self.mss)

    def _update_aggregation(self, sample_pkts, round_start: bool):
        if round_start:
            self.extra_acked_rounds = min(0x1F, self.extra_acked_rounds + 1)
            if self.extra_acked_rounds >= EXTRA_ACKED_WIN_ROUNDS:
                self.extra_acked_rounds = 0
                self.extra_acked_idx ^= 1
                self.extra_acked[self.extra_acked_idx] = 0.0
        if sample_pkts:
            self.extra_acked[self.extra_acked_idx] = max(self.extra_acked[self.extra_acked_idx], float(sample_pkts))

    def _quantization_budget(self, pkts: float) -> float:
        """bbr_quantization_budget: room for the end hosts' segments, rounded up to even,
        and 2 more to probe while pacing 5/4."""
        budget = int(-(-pkts // 1)) + TSO_BUDGET_PKTS
        budget += budget % 2
        if self.mode == PROBE_BW and self.cycle_idx == 0:
            budget += 2
        return float(budget)

    def inflight_pkts(self, gain: float) -> float:
        """bbr_inflight: gain x BDP with the quantization budget, the in-flight level Drain
        and gain cycling aim at (not the bare BDP: at a few packets of BDP a flow would
        drain a shared queue it cannot empty, for seconds)."""
        return self._quantization_budget(self.bdp_pkts(gain))

    def target_pkts(self) -> float:
        """bbr_bdp with cwnd_gain, plus the aggregation allowance and the quantization
        budget."""
        return self._quantization_budget(self.bdp_pkts(self.cwnd_gain) + self.aggregation_pkts())

    def _update_round(self, r: Report, delivered_bytes: float) -> bool:
        """A round ends once what was in flight when it began is delivered (tcp_bbr's
        next_rtt_delivered)."""
        self.delivered_bytes += delivered_bytes
        if self.delivered_bytes >= self.next_round_delivered:
            self.next_round_delivered = self.delivered_bytes + r.inflight * self.mss
            self.round += 1
            if self.conservation_until_round is not None and self.round >= self.conservation_until_round:
                self.conservation_until_round = None
            return True
        return False

    def _update_bw(self, bw_sample: float):
        if bw_sample > 0:
            if self.bw_samples and self.bw_samples[-1][0] == self.round:
                if bw_sample > self.bw_samples[-1][1]:
                    self.bw_samples[-1] = (self.round, bw_sample)
            else:
                self.bw_samples.append((self.round, bw_sample))
        while self.bw_samples and self.bw_samples[0][0] <= self.round - BW_WINDOW_ROUNDS:
            self.bw_samples.popleft()

    def _check_full_bw(self, round_start: bool):
        if self.full_bw_reached or not round_start:
            return
        if self.max_bw >= self.full_bw * FULL_BW_GROWTH:
            self.full_bw, self.full_bw_count = self.max_bw, 0
            return
        self.full_bw_count += 1
        self.full_bw_reached = self.full_bw_count >= FULL_BW_ROUNDS

    def _enter_probe_bw(self, now: int):
        self.mode, self.pacing_gain, self.cwnd_gain = PROBE_BW, 1.0, CWND_GAIN
        # a random phase, never the draining one (tcp_bbr: CYCLE_LEN - 1 - rand(7), then advance)
        self.cycle_idx = (len(PACING_GAINS) - 1 - self.alg.rng.randrange(7) + 1) % len(PACING_GAINS)
        self.pacing_gain, self.cycle_stamp_ns = PACING_GAINS[self.cycle_idx], now

    def _update_cycle(self, r: Report, now: int):
        if self.mode != PROBE_BW:
            return
        full_length = (now - self.cycle_stamp_ns) > (self.min_rtt_us or 0) * 1e3
        inflight = r.inflight
        if self.pacing_gain == 1:
            advance = full_length
        elif self.pacing_gain > 1:
            advance = full_length and (r.loss > 0 or inflight >= self.inflight_pkts(self.pacing_gain))
        else:
            advance = full_length or inflight <= self.inflight_pkts(1.0)
        if advance:
            self.cycle_idx = (self.cycle_idx + 1) % len(PACING_GAINS)
            self.pacing_gain, self.cycle_stamp_ns = PACING_GAINS[self.cycle_idx], now

    def _update_modes(self, r: Report, now: int, round_start: bool):
        if self.mode == STARTUP and self.full_bw_reached:
            self.mode, self.pacing_gain, self.cwnd_gain = DRAIN, DRAIN_GAIN, HIGH_GAIN
        if self.mode == DRAIN and r.inflight <= self.inflight_pkts(1.0):
            self._enter_probe_bw(now)
        # the min RTT: a lower sample, or a fresh one once it is 10 s old
        expired = now - self.min_rtt_stamp_ns > MIN_RTT_WINDOW_NS
        if r.minrtt_us is not None and (self.min_rtt_us is None or r.minrtt_us <= self.min_rtt_us or expired):
            self.min_rtt_us, self.min_rtt_stamp_ns = float(r.minrtt_us), now
        if expired and self.mode != PROBE_RTT:
            self.mode, self.pacing_gain, self.cwnd_gain = PROBE_RTT, 1.0, 1.0
            self._save_cwnd()
            self.probe_rtt_done_ns = None
        if self.mode == PROBE_RTT:
            if self.probe_rtt_done_ns is None and r.inflight <= CWND_MIN_PKTS:
                self.probe_rtt_done_ns = now + PROBE_RTT_NS
                self.probe_rtt_round_done = False
                self.next_round_delivered = self.delivered_bytes       # a round from now
            elif self.probe_rtt_done_ns is not None:
                self.probe_rtt_round_done |= round_start
                if self.probe_rtt_round_done and now >= self.probe_rtt_done_ns:
                    self.min_rtt_stamp_ns = now
                    self.cwnd_pkts = max(self.cwnd_pkts, self.prior_cwnd_pkts)
                    if self.full_bw_reached:
                        self._enter_probe_bw(now)
                    else:
                        self.mode, self.pacing_gain, self.cwnd_gain = STARTUP, HIGH_GAIN, HIGH_GAIN

    def _save_cwnd(self):
        in_loss = self.recovery_bytes_left > 0 or self.mode == PROBE_RTT
        self.prior_cwnd_pkts = max(self.prior_cwnd_pkts, self.cwnd_pkts) if in_loss else self.cwnd_pkts

    # -- hand-over ---------------------------------------------------------------------
    def cwnd_bytes_now(self) -> int:
        return int(self.cwnd_pkts * self.mss)

    def export_state(self) -> FlowState:
        return FlowState(cwnd_bytes=self.cwnd_pkts * self.mss, ssthresh_bytes=float("inf"),
                         recovery_bytes_left=self.recovery_bytes_left, grown_seen=self.grown_seen,
                         reductions_seen=self.reductions_seen, min_rtt_us=self.min_rtt_us,
                         bw_bytes_per_s=self.bw)

    def adopt(self, state: FlowState):
        """A flow already running: with a bandwidth estimate BBR goes straight to ProbeBW
        from the window it finds (Startup would double the rate into a full pipe); the
        window then moves to 2 BDP by per-ACK growth or the cap, not at once."""
        now = self.clock()
        self.cwnd_pkts = max(state.cwnd_bytes / self.mss, CWND_MIN_PKTS)
        self.recovery_bytes_left = state.recovery_bytes_left
        self.grown_seen, self.reductions_seen = state.grown_seen, state.reductions_seen
        if state.min_rtt_us:
            self.min_rtt_us, self.min_rtt_stamp_ns = float(state.min_rtt_us), now
        if state.bw_bytes_per_s > 0 and self.min_rtt_us:
            self.bw_samples.append((self.round, float(state.bw_bytes_per_s)))
            self.full_bw, self.full_bw_reached = float(state.bw_bytes_per_s), True
            self._enter_probe_bw(now)
        self.rate_bytes_per_s = self.pacing_rate()
        self.resume([("Rate", self.rate_bytes_per_s)] + self._growth(self.target_pkts()) + self._bw_register(),
                    reason=f"took the flow over in {self.mode}")

    # -- per report --------------------------------------------------------------------
    def _growth(self, target_pkts: float) -> list[tuple[str, int]]:
        """The datapath grows the window a segment per packet delivered up to the target
        (tcp_bbr: cwnd += acked below it), except in packet conservation."""
        grows = self.conservation_until_round is None and self.mode != PROBE_RTT
        return [("ss_until", int(target_pkts * self.mss) if grows else 0)]

    def _bw_register(self) -> list[tuple[str, int]]:
        """The bandwidth the datapath measures ACK aggregation against, and tcp_bbr's
        recoveries in the kernel (conservation per ACK, no PRR, growth on)."""
        return [("bw", int(self.bw)), ("own_recovery", 1)] if self.alg.capabilities.aggregation else []

    def on_report(self, raw):
        r = Report(raw)
        bw_sample = float(getattr(raw, "bw_max", 0) or 0)
        now = self.clock()
        mss = self.mss
        caps = self.alg.capabilities
        grown = 0
        if caps.growth and r.grown_pkts is not None:
            grown = (r.grown_pkts - self.grown_seen) % 2 ** 32
            self.cwnd_pkts += grown
            self.grown_seen = r.grown_pkts
        # tcp_bbr counts packets delivered on every ACK, SACKed ones included (acked_sacked)
        all_pkts = getattr(raw, "delivered_all", None)
        delivered_pkts = float(all_pkts) if all_pkts is not None else r.growth_bytes(mss) / mss
        # ... and grows the window by them, recoveries included; the datapath grows only
        # outside them (and up to the target): the agent adds the rest
        ungrown = max(0.0, delivered_pkts - grown)
        new_recovery = False
        if caps.reductions and r.reductions is not None:
            new_recovery = (r.reductions - self.reductions_seen) % 2 ** 32 > 0
            self.reductions_seen = r.reductions
        elif r.loss > 0 and self.recovery_bytes_left <= 0:
            new_recovery = True
        was_recovering = self.recovery_bytes_left > 0
        self.recovery_bytes_left = max(0.0, self.recovery_bytes_left - r.acked)

        round_start = self._update_round(r, delivered_pkts * mss)
        self.lost_pkts_total += r.loss + (1 if r.timeout and not r.loss else 0)
        # an RTO ends a round and counts as a loss for the sampling (tcp_bbr's bbr_set_state)
        self._lt_bw_sampling(r.loss or r.timeout, round_start or r.timeout, now)
        self._update_bw(bw_sample)
        self._update_aggregation(r.extra_acked if caps.aggregation else 0, round_start)
        self._check_full_bw(round_start)
        self._update_cycle(r, now)
        if self.lt_use_bw and self.mode == PROBE_BW:
            self.pacing_gain = 1.0          # bbr_update_gains: no probing on a policed rate
        self._update_modes(r, now, round_start)

        reason = self.mode
        # losses: the window drops by what was lost; a recovery (or an RTO) saves the window,
        # starts a round of packet conservation; its end restores the saved window
        if r.loss > 0:
            self.cwnd_pkts = max(self.cwnd_pkts - r.loss, 1.0)
        if r.timeout or new_recovery:
            self._save_cwnd()
            self.recovery_bytes_left = max(self.cwnd_pkts, r.inflight + r.loss + r.sacked) * mss
            if r.timeout:
                self.cwnd_pkts = 1.0 + (r.rto_delivered or 0)    # tcp_enter_loss, then this ACK's growth
                reason += "; timeout: 1 MSS, growth back to the target"
            else:
                self.cwnd_pkts = r.inflight + delivered_pkts
                self.conservation_until_round = self.round + 1
                self.next_round_delivered = self.delivered_bytes    # the conservation round starts now
                reason += "; recovery: packet conservation for a round"
        elif was_recovering and self.recovery_bytes_left <= 0:
            self.cwnd_pkts = max(self.cwnd_pkts, self.prior_cwnd_pkts)
            self.conservation_until_round = None
            reason += "; recovery over: window restored"

        target = self.target_pkts()
        if self.conservation_until_round is not None:
            self.cwnd_pkts = max(self.cwnd_pkts, r.inflight + delivered_pkts)
        elif r.timeout:
            pass
        elif self.full_bw_reached:
            self.cwnd_pkts = min(self.cwnd_pkts + ungrown, target)
        elif self.cwnd_pkts < target:
            self.cwnd_pkts = min(self.cwnd_pkts + ungrown, target)
        self.cwnd_pkts = max(self.cwnd_pkts, CWND_MIN_PKTS)
        if self.mode == PROBE_RTT:
            self.cwnd_pkts = min(self.cwnd_pkts, CWND_MIN_PKTS)

        self._set_pacing_rate(r)
        registers = [("Rate", self.rate_bytes_per_s)] + self._growth(target) + self._bw_register()
        self.set_cwnd(int(self.cwnd_pkts * mss), "loss" if r.loss or r.timeout else "report", r,
                      reason=f"{reason}; bw {self.bw * 8 / 1e6:.2f} Mbit/s{' (policed)' if self.lt_use_bw else ''}, min RTT "
                             f"{(self.min_rtt_us or 0) / 1e3:.1f} ms, target {target:.0f} pkts "
                             f"(aggregation {self.aggregation_pkts():.0f})",
                      registers=registers)

    def pacing_rate(self) -> int:
        """pacing_gain x bw, 1 % below; before a bandwidth sample, the initial window per
        RTT at the Startup gain (tcp_bbr's bbr_init_pacing_rate_from_rtt)."""
        if self.bw > 0:
            return int(self.pacing_gain * self.bw * PACING_MARGIN)
        return self._initial_rate(self.min_rtt_us or 1000)

    def _initial_rate(self, rtt_us: float) -> int:
        return int(HIGH_GAIN * self.cwnd_pkts * self.mss / (rtt_us / 1e6) * PACING_MARGIN)

    def _set_pacing_rate(self, r: Report):
        """tcp_bbr's bbr_set_pacing_rate: the window per RTT at the Startup gain from the
        first RTT, and until the pipe is full the rate only rises. Without it the first
        report's sample (the first packets' delivery rate, 0.06 Mbit/s on an 8 Mbit/s
        path) paced Startup at a fraction of the initial window per RTT, and a kernel BBR
        starting beside it took and kept the larger share (fairness_switching, oracle ccp)."""
        if not self.rate_bytes_per_s and r.rtt_us:
            self.rate_bytes_per_s = self._initial_rate(r.rtt_us)
        rate = self.pacing_rate()
        if self.full_bw_reached or rate > self.rate_bytes_per_s:
            self.rate_bytes_per_s = rate


class Bbr(Algorithm):
    families = ("slow_start", "bbr")
    name = "bbr"
    summary = "BBR v1 (Linux tcp_bbr): bandwidth and min-RTT model, pacing, gain cycling, ProbeRTT."
    flow_class = BbrFlow
    program = REPORT_PER_RTT_AND_ON_LOSS      # the shared report: its bw_max is the bandwidth sample
    params = (INIT_CWND,)
    loss_beta_1024 = 1024          # BBR does not cut on a loss (bbr_ssthresh keeps the window)

    def __init__(self, init_cwnd_pkts: int = 10, trace: str | None = None, seed: int | None = None, clock=None,
                 **kwargs):
        import time
        super().__init__(init_cwnd_pkts=init_cwnd_pkts, trace=trace, **kwargs)
        self.rng = random.Random(seed)
        self.clock = clock or time.monotonic_ns
