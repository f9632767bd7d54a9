"""What a flow's next algorithm starts from when the flow changes hands (handover.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

#: how far a switch moves a flow's rate towards its competitor's (clamped: a ratio from a
#: flow with a handful of packets at the bottleneck says little)
RATE_RATIO_RANGE = (1 / 16, 16.0)


@dataclass
class FlowState:
    """What a flow's next algorithm starts from."""
    cwnd_bytes: float
    ssthresh_bytes: float                 # inf: none (the next algorithm then takes the window)
    recovery_bytes_left: float = 0.0      # data sent before the current cut, not yet acked
    rto_bytes_left: float = 0.0           # data sent before the current RTO, not yet acked
    grown_seen: int = 0                   # the datapath's growth counter already taken into the window
    reductions_seen: int = 0              # the kernel's window reductions already answered
    min_rtt_us: float | None = None
    rtt_us: float | None = None
    bw_bytes_per_s: float = 0.0           # max delivery rate of the last reports (0: none yet)
    loss_seen: bool = True                # the flow has lost a packet or timed out since it began
    #: the last algorithm ended the flow's slow start on a measure of its own, not on a loss:
    #: the probe at the INT fair share (the next one goes on in congestion avoidance from it)
    slow_start_over: bool = False
    matched_cwnd_bytes: float = 0.0       # the window a switch matched it to, still to be reached (0: none)
    #: the competitors' CUBIC epoch, read at the bottleneck, for a switch onto their CUBIC:
    #: (the curve's origin in bytes, its K in s, the epoch's age in s), or None
    cubic_epoch: tuple | None = None

    @property
    def ssthresh_or_window(self) -> float:
        """An algorithm that must have an ssthresh gets the window when there is none: it
        goes on in congestion avoidance, never slow-starts from a full window."""
        return self.cwnd_bytes if math.isinf(self.ssthresh_bytes) else self.ssthresh_bytes

    def at_rate_ratio(self, ratio: float, min_cwnd_bytes: float = 0.0) -> "FlowState":
        """The state of this flow at ``ratio`` times its rate (a competitor's, measured at
        the bottleneck), so that two flows of one CCA go on from equal windows, as they
        would had they started together: a switch leaves the gap the flow's earlier CCA
        built, and AIMD in a deep buffer closes it over minutes. Down: the window and
        ssthresh scaled at once. Up: reached by slow start (ssthresh), not sent as one
        burst into the queue; that window is kept as ``matched_cwnd_bytes`` until reached (a
        loss on the way cuts from it: WindowFlow.cut_base). The bandwidth estimate (BBR's)
        scales alike."""
        ratio = min(max(ratio, RATE_RATIO_RANGE[0]), RATE_RATIO_RANGE[1])
        if ratio < 1:
            cwnd = max(self.cwnd_bytes * ratio, min(min_cwnd_bytes, self.cwnd_bytes))
            ssthresh = self.ssthresh_bytes if math.isinf(self.ssthresh_bytes) else cwnd
            matched = 0.0                   # a new measurement: an older match ends
        else:
            cwnd, ssthresh = self.cwnd_bytes, self.cwnd_bytes * ratio
            matched = ssthresh if ratio > 1 else 0.0
        return replace(self, cwnd_bytes=cwnd, ssthresh_bytes=ssthresh, bw_bytes_per_s=self.bw_bytes_per_s * ratio,
                       matched_cwnd_bytes=matched)
