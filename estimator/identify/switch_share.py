"""Stage: did the switch make this flow's share clearly worse?

After a commit the flow leaves the probe (paced at its fair share 1/(n+1) of the
bottleneck, n competitors) for the algorithm the policy gives the committed hypothesis: the
competitor's own CCA under mirror. Beside the competitor's own CCA a flow gets about its
fair share; it falls below half of it only where RTTs differ by 2x or more (Reno's and
CUBIC's shares go as 1/RTT, BBR's grows with it) and otherwise when the hypothesis was
wrong (Vegas beside a loss-based CCA or BBR gets a tenth or less). Measured: this flow's
share of the TCP packets through the bottleneck over a window after the switch settled;
a share under TAKE_BACK of the fair share, or no packet for STARVED_S, is clearly worse:
the switch is taken back (the flow returns to the probe) and the hypothesis loses
WRONG_RATIO (a judgement, not a fit: the RTT-unfairness cases above are the right
hypothesis's share of such outcomes). One switch is one measurement: evidence added, not
replaced (evidence.SequentialTest.add)."""
from __future__ import annotations

import math

from .evidence import HYPOTHESES, Evidence

TAKE_BACK = 0.5           # of the fair share
STARVED_S = 1.0           # no packet of this flow at the bottleneck for this long: starving
SETTLE_S, SETTLE_RTTS = 2.0, 8        # after the commit, before the share counts (the switch, then its start)
WINDOW_S, WINDOW_RTTS = 2.0, 8        # the share is measured over this much
WRONG_RATIO = 10.0


def settle_s(base_rtt_s: float) -> float:
    return max(SETTLE_S, SETTLE_RTTS * base_rtt_s)


def window_s(base_rtt_s: float) -> float:
    return max(WINDOW_S, WINDOW_RTTS * base_rtt_s)


def clearly_worse(share: float | None, n_competitors: int, starved: bool) -> str | None:
    """Why the share after a switch is clearly worse than the probe's, or None."""
    if starved:
        return f"no packet of this flow at its bottleneck for {STARVED_S:.0f} s"
    if share is None or n_competitors < 1:
        return None
    fair = 1.0 / (n_competitors + 1)
    if share < TAKE_BACK * fair:
        return f"its share fell to {share:.2f} of the bottleneck (fair {fair:.2f})"
    return None


def evidence(hypothesis: str, share: float | None) -> Evidence:
    """Against the hypothesis whose switch was taken back."""
    loglik = {h: (-math.log(WRONG_RATIO) if h == hypothesis else 0.0) for h in HYPOTHESES}
    return Evidence("switch_share", loglik, measured=share, note=f"switch to {hypothesis}'s answer taken back")
