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

from types import SimpleNamespace

from .base import Algorithm, WindowFlow
from .contract import register_declarations
from .programs import FOLD_RTO_ACKED, NO_RTT_SAMPLE, REPORT_TRIGGERS

ALPHA, BETA, GAMMA = 2, 4, 1

PROGRAM = """\
(def (Report
    (volatile acked 0)
    (volatile loss 0)
    (volatile sacked 0)
    (volatile timeout false)
    (volatile minrtt 2147483647)
    (volatile inflight 0)
    (volatile undo 0)
    (volatile rto_acked 0)
) """ + register_declarations() + """)
""" + FOLD_RTO_ACKED + """\
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
    (:= Report.sacked Ack.packets_misordered)
    (:= Report.timeout Flow.was_timeout)
    (:= Report.inflight Flow.packets_in_flight)
    (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
    (:= Report.undo (max Report.undo Ack.ecn_bytes))
    (fallthrough)
)
""" + REPORT_TRIGGERS


class VegasFlow(WindowFlow):
    datapath_slow_start = False         # its slow start doubles every other RTT, decided per report
    def __init__(self, alg, datapath, datapath_info):
        self.base_rtt_us = None
        self.double_now = True          # slow start doubles every other RTT
        super().__init__(alg, datapath, datapath_info)

    def parse(self, r):
        rtt_us = r.minrtt if 0 < r.minrtt < NO_RTT_SAMPLE else None
        if rtt_us is not None:
            self.base_rtt_us = rtt_us if self.base_rtt_us is None else min(self.base_rtt_us, rtt_us)
        # a Report's fields; its program leaves out the kernel's growth and delivery counts
        return SimpleNamespace(acked=r.acked, loss=r.loss, sacked=r.sacked, timeout=bool(r.timeout), rtt_us=rtt_us,
                               minrtt_us=rtt_us, inflight=r.inflight, undo_bytes=r.undo, rto_acked=r.rto_acked,
                               extra_acked=None, delivered=None, rto_delivered=None, grown_pkts=None,
                               reductions=None, datapath_grew=False)

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
            return f"diff {diff:.1f} > beta: -1 MSS"
        if diff < ALPHA:
            self.cwnd += mss
            return f"diff {diff:.1f} < alpha: +1 MSS"
        return f"diff {diff:.1f} in [alpha, beta]: hold"


class Vegas(Algorithm):
    name = "vegas"
    summary = "TCP Vegas: delay-based, alpha 2 / beta 4 / gamma 1 packets (estimator runs)."
    flow_class = VegasFlow
    program = PROGRAM
