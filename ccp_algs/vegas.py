"""vegas: TCP Vegas (Brakmo & Peterson 1995; Linux tcp_vegas) in CCP, as the
fourth CCA of the estimator's experiments (this kernel has no tcp_vegas).

Why CCP rather than a BPF struct_ops: Vegas decides once per RTT from the
smallest RTT seen in it, which is exactly a CCP report; the datapath program
folds the per-RTT minimum on every ACK, so no sample is lost between reports.

Per RTT: diff = cwnd * (rtt - base_rtt) / rtt (packets queued by this flow),
base_rtt = smallest RTT ever. Congestion avoidance: +1 MSS if diff < alpha (2),
-1 MSS if diff > beta (4). Slow start doubles every other RTT and ends when
diff > gamma (1). Losses: Reno halving; timeout: 1 MSS.
"""
from __future__ import annotations

from .base import AlgBase, FlowBase, Trace

ALPHA, BETA, GAMMA = 2, 4, 1

PROGRAM = """\
(def (Report
    (volatile acked 0)
    (volatile loss 0)
    (volatile timeout false)
    (volatile minrtt 4294967295)
    (volatile inflight 0)
))
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
    (:= Report.timeout Flow.was_timeout)
    (:= Report.inflight Flow.packets_in_flight)
    (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
    (fallthrough)
)
(when (|| Report.timeout (> Report.loss 0))
    (report)
    (:= Micros 0)
)
(when (&& (> Micros Flow.rtt_sample_us) (> Micros 1000))
    (report)
    (:= Micros 0)
)
"""


class VegasFlow(FlowBase):
    def __init__(self, alg, datapath, datapath_info):
        super().__init__(alg, datapath, datapath_info)
        self.cwnd = float(alg.init_cwnd_pkts * self.mss)
        self.ssthresh = float("inf")
        self.base_rtt_us = None
        self.double_now = True          # slow start doubles every other RTT
        self.recovery_bytes_left = 0.0
        self.install(self.cwnd)
        self.trace.row(sid=self.sid, event="start", cwnd_bytes=int(self.cwnd), reason="init")

    def on_report(self, r):
        acked, loss, timeout, rtt_us = r.acked, r.loss, bool(r.timeout), r.minrtt
        in_recovery = self.recovery_bytes_left > 0
        self.recovery_bytes_left = max(0.0, self.recovery_bytes_left - acked)
        mss = self.mss
        if 0 < rtt_us < 4294967295:
            self.base_rtt_us = rtt_us if self.base_rtt_us is None else min(self.base_rtt_us, rtt_us)
        if timeout:
            self.ssthresh = max(self.cwnd / 2, 2 * mss)
            self.cwnd = mss
            self.recovery_bytes_left = 0
            event, reason = "timeout", "timeout: cwnd 1 MSS"
        elif loss > 0 and not in_recovery:
            self.recovery_bytes_left = max(self.cwnd, (r.inflight + loss) * mss)
            self.cwnd = max(self.cwnd / 2, 2 * mss)
            self.ssthresh = self.cwnd
            event, reason = "loss", f"{loss} lost: halve"
        elif loss > 0 or in_recovery:
            event, reason = ("loss" if loss else "recovery"), "in recovery"
        elif self.base_rtt_us is None or not (0 < rtt_us < 4294967295):
            event, reason = "report", "no RTT sample"
        else:
            cwnd_pkts = self.cwnd / mss
            diff = cwnd_pkts * (rtt_us - self.base_rtt_us) / rtt_us
            event = "report"
            if self.cwnd < self.ssthresh:
                if diff > GAMMA:
                    self.ssthresh = min(self.ssthresh, self.cwnd)
                    self.cwnd = max(2 * mss, min(self.cwnd, (cwnd_pkts - diff + 1) * mss))
                    reason = f"slow start ends: diff {diff:.1f} > gamma"
                else:
                    if self.double_now:
                        self.cwnd += acked
                    self.double_now = not self.double_now
                    reason = f"slow start (diff {diff:.1f})"
            elif diff > BETA:
                self.cwnd -= mss
                reason = f"diff {diff:.1f} > beta: -1 MSS"
            elif diff < ALPHA:
                self.cwnd += mss
                reason = f"diff {diff:.1f} < alpha: +1 MSS"
            else:
                reason = f"diff {diff:.1f} in [alpha, beta]: hold"
        self.cwnd = max(self.cwnd, 2 * mss)
        self.datapath.update_field("Cwnd", int(self.cwnd))
        self.trace.row(sid=self.sid, event=event, cwnd_bytes=int(self.cwnd),
                       ssthresh_bytes=None if self.ssthresh == float("inf") else int(self.ssthresh),
                       rtt_us=rtt_us, acked_bytes=acked, loss_pkts=loss, timeout=int(timeout),
                       inflight_pkts=r.inflight, reason=reason)


class Vegas(AlgBase):
    name = "vegas"

    def __init__(self, init_cwnd_pkts: int = 10, trace: str | None = None):
        self.init_cwnd_pkts = init_cwnd_pkts
        self.trace = Trace(trace)

    def datapath_programs(self):
        return {"default": PROGRAM}

    def new_flow(self, datapath, datapath_info):
        return VegasFlow(self, datapath, datapath_info)
