"""reno: NewReno-style AIMD in CCP (RFC 5681 in spirit, per-RTT reports):
slow start to ssthresh, +1 MSS per RTT after, halve once per window on loss
(losses among the data in flight at the cut belong to the same episode, as
NewReno's recovery point), back to one MSS on a timeout."""
from __future__ import annotations

from .base import Algorithm
from .window import WindowFlow


class RenoFlow(WindowFlow):
    def on_loss(self, r) -> str:
        window = self.cwnd
        base, ssthresh = self.cut_base(window, 0.5)
        self.cwnd = max(window / 2, 2 * self.mss)
        self.ssthresh = max(ssthresh, self.cwnd)
        if base > window:
            return f"{r.loss} lost: halve, slow start on to half the matched window"
        return f"{r.loss} lost: halve"

    def on_ack(self, r) -> str:
        if self.in_slow_start():
            return self.slow_start(r)
        self.cwnd += self.mss * r.growth_bytes(self.mss) / self.cwnd
        return "congestion avoidance"


class Reno(Algorithm):
    name = "reno"
    summary = "Reno AIMD: slow start, +1 MSS per RTT, halve on loss, 1 MSS on timeout."
    flow_class = RenoFlow
