"""Fairness of switching a flow's CCA to match its competitor's (the ML-fairness paper, Section IV).

The paper's offline method: from per-pair goodputs g1(i, j), g2(i, j) (flow 1 running i,
flow 2 running j, measured on the same network) and the time shares T_i / T flow 1 spent
on each CCA i while it followed the estimator's verdicts, flow 1's and flow 2's goodputs
with switching are

    G1_j = sum_i T_i / T * g1(i, j)        G2_j = sum_i T_i / T * g2(i, j)      (Eqs. 1-2)

and their goodput difference D = (G1_j - G2_j) / (G1_j + G2_j) (Eq. 3), |D| its absolute
value: 0 is perfect fairness, 1 one flow alone. "Not used" is flow 1 on one CCA drawn at
random for the whole run; "oracle" flow 1 on j from the start. Live runs measure D from
the two receivers' goodputs directly (the same Eq. 3).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from telemetry.schema import CCA_LABELS as CCAS     # the one list of the CCAs intcc names


def goodput_difference(g1: float, g2: float) -> float | None:
    """Eq. 3: (g1 - g2) / (g1 + g2), in [-1, 1]; None when neither flow got anything."""
    total = g1 + g2
    return (g1 - g2) / total if total > 0 else None


def time_shares(verdict_t_s: Sequence[float], verdicts: Sequence[str | None], start_cca: str,
                end_s: float, start_s: float = 0.0) -> dict[str, float]:
    """T_i / T: the share of [start_s, end_s] flow 1 ran each CCA, starting on
    ``start_cca`` and switching to each verdict at its time (a verdict of None, or one
    equal to the CCA in use, changes nothing)."""
    if end_s <= start_s:
        raise ValueError(f"the run must end after it starts ({start_s} .. {end_s})")
    if len(verdict_t_s) != len(verdicts):
        raise ValueError("one time per verdict")
    shares = dict.fromkeys(CCAS, 0.0)
    if start_cca not in shares:
        raise ValueError(f"unknown CCA {start_cca!r} (known: {', '.join(CCAS)})")
    cca, since = start_cca, start_s
    for t, v in zip(verdict_t_s, verdicts):
        t = min(max(t, start_s), end_s)
        if v is None or v == cca:
            continue
        if v not in shares:
            raise ValueError(f"unknown CCA {v!r} in the verdicts")
        shares[cca] += t - since
        cca, since = v, t
    shares[cca] += end_s - since
    span = end_s - start_s
    return {k: v / span for k, v in shares.items()}


def switched_goodputs(shares: Mapping[str, float], g1: Mapping[tuple, float], g2: Mapping[tuple, float],
                      competitor: str) -> tuple[float, float]:
    """Eqs. 1-2: (G1_j, G2_j) for competitor j from the time shares and the pair table
    ({(i, j): goodput}); a CCA flow 1 never ran needs no entry."""
    missing = [i for i, s in shares.items() if s > 0 and (i, competitor) not in g1]
    if missing:
        raise KeyError(f"no goodputs measured for flow 1 on {', '.join(missing)} against {competitor}")
    G1 = sum(s * g1[(i, competitor)] for i, s in shares.items() if s > 0)
    G2 = sum(s * g2[(i, competitor)] for i, s in shares.items() if s > 0)
    return G1, G2


def harm(competitor_beside_flow1: float, competitor_beside_own_cca: float) -> float | None:
    """How much flow 1 took from the competitor, relative to what the competitor got
    beside a flow of its own CCA: 1 - beside / own (0: none; negative: flow 1 gave)."""
    if competitor_beside_own_cca <= 0:
        return None
    return 1.0 - competitor_beside_flow1 / competitor_beside_own_cca
