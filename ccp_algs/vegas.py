"""vegas: TCP Vegas (Brakmo & Peterson 1995; Linux tcp_vegas) in CCP, as the
fourth CCA of the estimator's experiments (this kernel has no tcp_vegas).

Why CCP rather than a BPF struct_ops: Vegas decides once per RTT from the
smallest RTT seen in it, which is exactly a CCP report; the shared datapath program
(programs.py) folds that minimum on every ACK, so no sample is lost between reports.
On the shared program a flow can move to vegas and back (the adaptive agent).

Per RTT: diff = cwnd * (rtt - base_rtt) / rtt (packets queued by this flow),
base_rtt = smallest RTT ever. Congestion avoidance: +1 MSS if diff < alpha (2),
-1 MSS if diff > beta (4). Slow start doubles every other RTT and ends when
diff > gamma (1). Losses: Reno halving; timeout: 1 MSS.
"""
from __future__ import annotations

from dataclasses import replace

from .base import Algorithm, Report
from .window import WindowFlow

ALPHA, BETA, GAMMA = 2, 4, 1

class VegasFlow(WindowFlow):
    datapath_slow_start = False         # its slow start doubles every other RTT, decided per report
    slow_starts_until_loss = False      # its slow start ends on its own delay rule (adopt below)
    def __init__(self, alg, datapath, datapath_info):
        self.base_rtt_us = None
        self.double_now = True          # slow start doubles every other RTT
        super().__init__(alg, datapath, datapath_info)

    def parse(self, raw):
        r = Report(raw)
        r.rtt_us = r.minrtt_us          # Vegas's RTT: the smallest of the round
        if r.rtt_us is not None:
            self.base_rtt_us = r.rtt_us if self.base_rtt_us is None else min(self.base_rtt_us, r.rtt_us)
        if r.grown_pkts is not None:    # nothing grows under vegas: a next algorithm's count starts here
            self.grown_seen = r.grown_pkts
        return r

    def adopt(self, state):
        """A flow taken over leaves its queue as Vegas's slow start ends (tcp_vegas: cwnd
        down to the target + 1, ssthresh below it): a window that filled a deep buffer
        under CUBIC would otherwise drain by one segment per RTT, for minutes."""
        self.base_rtt_us = state.min_rtt_us
        if state.min_rtt_us and state.rtt_us and state.rtt_us > state.min_rtt_us:
            pkts = state.cwnd_bytes / self.mss
            target_pkts = pkts * state.min_rtt_us / state.rtt_us          # its own queue emptied
            if pkts - target_pkts > BETA:
                cwnd = max(2.0, min(pkts, target_pkts + GAMMA)) * self.mss
                state = replace(state, cwnd_bytes=cwnd,
                                ssthresh_bytes=min(state.ssthresh_bytes, max(cwnd - self.mss, 2 * self.mss)))
        super().adopt(state)

    def on_loss(self, r) -> str:
        self.cwnd = max(self.cwnd / 2, 2 * self.mss)
        self.ssthresh = self.cwnd
        return f"{r.loss} lost: halve"

    def on_ack(self, r) -> str:
        mss = self.mss
        if self.base_rtt_us is None or r.rtt_us is None:
            return "no RTT sample"
        cwnd_pkts = self.cwnd / mss
        diff = cwnd_pkts * (r.rtt_us - self.base_rtt_us) / r.rtt_us      # packets this flow queues
        if self.cwnd < self.ssthresh:
            if diff > GAMMA:
                self.ssthresh = min(self.ssthresh, self.cwnd)
                self.cwnd = max(2 * mss, min(self.cwnd, (cwnd_pkts - diff + 1) * mss))
                return f"slow start ends: diff {diff:.1f} > gamma"
            if self.double_now:
                self.cwnd += r.acked
            self.double_now = not self.double_now
            return f"slow start (diff {diff:.1f})"
        if diff > BETA:
            self.cwnd = max(self.cwnd - mss, 2 * mss)     # Linux vegas keeps 2 segments
            # and ssthresh below the window (tcp_vegas_ssthresh): without it the next round
            # found cwnd < ssthresh, took slow start's exit and cut to the target
            self.ssthresh = min(self.ssthresh, self.cwnd - mss)
            return f"diff {diff:.1f} > beta: -1 MSS"
        if diff < ALPHA:
            self.cwnd += mss
            return f"diff {diff:.1f} < alpha: +1 MSS"
        return f"diff {diff:.1f} in [alpha, beta]: hold"


class Vegas(Algorithm):
    name = "vegas"
    summary = "TCP Vegas: delay-based, alpha 2 / beta 4 / gamma 1 packets (estimator runs)."
    flow_class = VegasFlow
