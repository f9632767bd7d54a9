"""aimd: AIMD(a, b), the example of docs/algorithms.md ("Adding an algorithm"). Slow start,
then ``increase_pkts`` segments per window delivered, grown per ACK in the kernel by the
additive family (register ai_pkts, datapath/bpf/families/additive.h), and a cut to
``beta`` of the window on a loss. The agent finds it through INTCC_ALGORITHMS
(``aimd=tests.examples.aimd:Aimd``) or a line in ccp_algs/registry.py."""
from __future__ import annotations

from ccp_algs.base import Algorithm
from ccp_algs.registry import INIT_CWND, Param
from ccp_algs.window import WindowFlow


class AimdFlow(WindowFlow):
    def on_loss(self, r) -> str:
        beta = self.alg.beta
        _, ssthresh = self.cut_base(self.cwnd, beta)
        self.cwnd = max(self.cwnd * beta, 2 * self.mss)
        self.ssthresh = max(ssthresh, self.cwnd)
        return f"{r.loss} lost: cut to {beta:g}"

    def on_ack(self, r) -> str:
        if self.in_slow_start():
            return self.slow_start(r)              # WindowFlow's: a segment per packet delivered
        if self.grew_in_datapath(r, "ai_pkts"):
            return "congestion avoidance (datapath)"
        # a datapath without per-ACK growth (ccp-kernel): the same increase, per report
        self.cwnd += self.alg.increase_pkts * self.mss * r.growth_bytes(self.mss) / self.cwnd
        return "congestion avoidance"

    def growth_registers(self) -> list[tuple[str, int]]:
        # slow start's bound (the slow_start family), and in congestion avoidance a segments
        # per window (the additive family); neither in a recovery, where PRR runs
        in_ca = not self.in_slow_start() and self.recovery_bytes_left <= 0
        return super().growth_registers() + [("ai_pkts", self.alg.increase_pkts if in_ca else 0)]


class Aimd(Algorithm):
    name = "aimd"
    summary = "AIMD(a, b): a segments per RTT grown per ACK in the kernel, the window times b on a loss."
    flow_class = AimdFlow
    families = ("slow_start", "additive")
    params = (Param("increase_pkts", int, 2, "segments added per RTT in congestion avoidance", min=1, max=64),
              Param("beta", float, 0.5, "the window kept after a loss", min=0.1, max=0.99),
              INIT_CWND)

    def __init__(self, increase_pkts: int = 2, beta: float = 0.5, **kwargs):
        super().__init__(**kwargs)
        self.increase_pkts = increase_pkts
        self.beta = beta
        self.loss_beta_1024 = int(beta * 1024)     # the kernel's cut until the agent answers
