"""Stage: does the competitor take the capacity this flow leaves?

This flow paces at its fair share, so a capacity-seeking competitor (all four CCAs: each
grows until a loss, a delay rise, or its bandwidth probe finds no more) keeps the port
busy; a flow below its share that does not seek more (an application-limited sender, a
fixed-rate one) leaves it partly idle. Measured: the port's use, the packets of every flow
through it over the port's packet rate (its stamped rate over the mean frame), over a stretch.
The four: normal around 1 with SIGMA_USE (the pulses' dips that drain a small queue, a
competitor's backoff after a loss); "unknown": uniform over [0, USE_MAX]."""
from __future__ import annotations

import math

from .evidence import CCA_LABELS, HYPOTHESES, UNKNOWN, Evidence

SIGMA_USE = 0.08
USE_MAX = 1.1


def port_use(packets: float, seconds: float, port_pps: float) -> float | None:
    if seconds <= 0 or port_pps <= 0:
        return None
    return packets / (seconds * port_pps)


def evidence(use: float, stderr: float = 0.0) -> Evidence:
    sigma = math.sqrt(SIGMA_USE ** 2 + stderr ** 2)
    seek = -0.5 * ((min(use, 1.0) - 1.0) / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))
    loglik = {cca: seek for cca in CCA_LABELS}
    loglik[UNKNOWN] = -math.log(USE_MAX) if use <= USE_MAX else -math.log(USE_MAX) - (use - USE_MAX) / 0.05
    assert set(loglik) == set(HYPOTHESES)
    return Evidence("spare", loglik, measured=use, note="port use")
