"""What a flow's next algorithm starts from when the flow changes hands (handover.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass


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

    @property
    def ssthresh_or_window(self) -> float:
        """An algorithm that must have an ssthresh gets the window when there is none: it
        goes on in congestion avoidance, never slow-starts from a full window."""
        return self.cwnd_bytes if math.isinf(self.ssthresh_bytes) else self.ssthresh_bytes
