"""Stage: is what competes with this flow TCP at all?

The node's per-flow records carry each flow's protocol. Where every other packet through the
bottleneck over a stretch is of a flow that is not TCP (UDP: a stream, a tunnel, a game),
there is no CCA to name: the competitor is "unknown", and the four are ruled out up to the
case of TCP carried inside another protocol (NOT_TCP_IF_TCP, a stated allowance). Measured
only where no TCP flow competes: beside a TCP competitor, UDP cross traffic is left out of
the stages (it uses the port, spare.py counts it) and the TCP one is named."""
from __future__ import annotations

import math

from .evidence import CCA_LABELS, HYPOTHESES, UNKNOWN, Evidence

NOT_TCP_IF_TCP = 0.01


def evidence(not_tcp_share: float, stderr: float = 0.0) -> Evidence:
    """``not_tcp_share``: of the other flows' packets over the stretch, those not TCP's."""
    loglik = {cca: math.log(NOT_TCP_IF_TCP) * not_tcp_share for cca in CCA_LABELS}
    loglik[UNKNOWN] = 0.0
    assert set(loglik) == set(HYPOTHESES)
    return Evidence("not_tcp", loglik, measured=not_tcp_share, note="of the others' packets")
