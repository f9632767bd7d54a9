"""reno: NewReno-style AIMD in CCP (RFC 5681 in spirit, per-RTT reports):
slow start to ssthresh, +1 MSS per RTT after, halve once per window on loss
(losses among the data in flight at the cut belong to the same episode, as
NewReno's recovery point), back to one MSS on a timeout."""
from __future__ import annotations

from .base import AlgBase, FlowBase, REPORT_PER_RTT_AND_ON_LOSS, Report, Trace


class RenoFlow(FlowBase):
    def __init__(self, alg, datapath, datapath_info):
        super().__init__(alg, datapath, datapath_info)
        self.cwnd = float(alg.init_cwnd_pkts * self.mss)
        self.ssthresh = float("inf")
        self.recovery_bytes_left = 0    # data in flight at the last cut, not yet acked
        self.install(self.cwnd)
        self.trace.row(sid=self.sid, event="start", cwnd_bytes=int(self.cwnd), reason="init")

    def on_report(self, r):
        r = Report(r)
        in_recovery = self.recovery_bytes_left > 0
        self.recovery_bytes_left = max(0, self.recovery_bytes_left - r.acked)
        if r.timeout:
            self.ssthresh = max(self.cwnd / 2, 2 * self.mss)
            self.cwnd = self.mss
            self.recovery_bytes_left = 0
            reason = "timeout: cwnd 1 MSS, ssthresh cwnd/2"
            event = "timeout"
        elif r.loss > 0 and not in_recovery:
            # everything sent under the old window may still be reported lost: one cut for all of it
            self.recovery_bytes_left = max(self.cwnd, (r.inflight + r.loss) * self.mss)
            self.cwnd = max(self.cwnd / 2, 2 * self.mss)
            self.ssthresh = self.cwnd
            reason = f"{r.loss} lost: halve"
            event = "loss"
        elif r.loss > 0 or in_recovery:
            reason = "in recovery: the window was already cut"
            event = "loss" if r.loss else "recovery"
        elif self.cwnd < self.ssthresh:
            self.cwnd += r.acked
            reason = "slow start"
            event = "report"
        else:
            self.cwnd += self.mss * r.acked / self.cwnd
            reason = "congestion avoidance"
            event = "report"
        self.cwnd = max(self.cwnd, 2 * self.mss)
        self.set_cwnd(self.cwnd, event, r, reason=reason,
                      ssthresh_bytes=None if self.ssthresh == float("inf") else int(self.ssthresh))


class Reno(AlgBase):
    name = "reno"

    def __init__(self, init_cwnd_pkts: int = 10, trace: str | None = None):
        self.init_cwnd_pkts = init_cwnd_pkts
        self.trace = Trace(trace)

    def datapath_programs(self):
        return {"default": REPORT_PER_RTT_AND_ON_LOSS}

    def new_flow(self, datapath, datapath_info):
        return RenoFlow(self, datapath, datapath_info)
