"""const: a fixed congestion window (and optionally a pacing rate). For tests and
calibration: goodput should be cwnd / RTT whatever the path does."""
from __future__ import annotations

from .base import Algorithm, FlowBase, Report
from .registry import Param


class ConstFlow(FlowBase):
    def __init__(self, alg, datapath, datapath_info):
        super().__init__(alg, datapath, datapath_info)
        self.cwnd_bytes = alg.init_cwnd_pkts * self.mss
        self.install(self.cwnd_bytes, [("rto_min", alg.rto_min_us)] if alg.rto_min_us else [])
        if alg.rate_bytes_per_s:
            self.datapath.update_field("Rate", alg.rate_bytes_per_s)
        self.trace.row(sid=self.sid, event="start", cwnd_bytes=self.cwnd_bytes, reason="const",
                       src_port=self.ports[0], dst_port=self.ports[1])

    def on_report(self, r):
        r = Report(r)
        # The same window every report: the datapath writes nothing new, the trace gets the
        # report. With --alternate-pkts every report commands a new window (latency benchmarks).
        if self.alg.alternate_pkts:
            other = self.alg.alternate_pkts * self.mss
            self.cwnd_bytes = other if self.cwnd_bytes != other else self.alg.init_cwnd_pkts * self.mss
        self.set_cwnd(self.cwnd_bytes, "report", r, reason="const")


class Const(Algorithm):
    name = "const"
    summary = "Fixed cwnd (tests, calibration): goodput = cwnd / RTT."
    flow_class = ConstFlow
    params = (Param("cwnd_pkts", int, 10, "the fixed congestion window, in MSS-sized packets", min=1),
              Param("rate_mbps", float, 0.0, "also pace at this rate (0: no pacing)", min=0),
              Param("loss_beta", float, 1.0, "the kernel's cut on a loss until the agent answers "
                    "(1: none, as const never cuts)", min=0, max=1, min_open=True),
              Param("alternate_pkts", int, 0, "alternate the window between cwnd-pkts and this at every "
                    "report: a new command per report, for latency benchmarks (0: never)", min=0),
              Param("rto_min_ms", float, 0.0, "the flow's minimum retransmission timeout (contract register "
                    "rto_min; the kernel takes 2 jiffies to 200 ms; 0: the kernel's)", min=0))

    def __init__(self, cwnd_pkts: int = 10, rate_mbps: float = 0.0, trace: str | None = None,
                 loss_beta: float = 1.0, alternate_pkts: int = 0, rto_min_ms: float = 0.0, **kwargs):
        super().__init__(init_cwnd_pkts=cwnd_pkts, trace=trace, **kwargs)
        if not 0 < loss_beta <= 1:
            raise ValueError(f"loss_beta must be in (0, 1], not {loss_beta}")
        # The kernel's cut on a loss until the agent answers: none by default, as const
        # never cuts; 0.7 gives a CUBIC-like hold for tests of the hold itself.
        self.loss_beta_1024 = round(loss_beta * 1024)
        self.rate_bytes_per_s = int(rate_mbps * 1e6 / 8)
        self.alternate_pkts = alternate_pkts
        self.rto_min_us = round(rto_min_ms * 1000)
