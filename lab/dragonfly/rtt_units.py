"""Dragonfly's dataframes on a time axis in round trips rather than milliseconds: a CCA's
signature is per round trip (Reno adds a packet a round trip, BBR cycles its gain over
eight), so across networks whose round trips differ tenfold the same CCA draws shapes of
tenfold different widths in 1 ms slots. The node can tell the round trip from its own
capture: by Little's law the bytes in flight beyond it over the rate it forwards them at.

``in_round_trips(frames)`` takes (N, slots, 3) dataframes of CBIQ, ingress bytes and bytes
in flight (1 ms slots) and gives (N, POINTS, 3): each frame's round trip estimated as its
mean flight over its mean ingress per slot, then POINTS_PER_RTT points a round trip from its
start (CBIQ and flight sampled, ingress summed over each point's slots), as many round
trips as the frame holds up to POINTS / POINTS_PER_RTT, zeros (an unknown slot's value)
after. The same observation time as the 1 ms frame: nothing from outside it."""
from __future__ import annotations

import numpy as np

POINTS_PER_RTT = 8
POINTS = 160                     # 20 round trips


def frame_rtt_slots(frame: np.ndarray) -> float:
    """A frame's round trip beyond the node, in slots: mean flight / mean ingress per slot."""
    flight, ingress = np.nanmean(frame[:, 2]), np.nanmean(frame[:, 1])
    if not (ingress > 0 and flight > 0):
        return float("nan")
    return float(flight / ingress)


def in_round_trips(frames: np.ndarray, points: int = POINTS, per_rtt: int = POINTS_PER_RTT) -> np.ndarray:
    out = np.full((len(frames), points, 3), np.nan)
    for i, f in enumerate(np.asarray(frames, dtype=float)):
        rtt = frame_rtt_slots(f)
        if not np.isfinite(rtt) or rtt < 1:
            rtt = 1.0                # a flow with nothing beyond the node: 1 ms points
        step = rtt / per_rtt
        edges = np.arange(0, len(f) + 1e-9, step)
        n = min(points, len(edges) - 1)
        if n < 1:
            continue
        idx = np.minimum(np.floor(edges[1:n + 1]).astype(int), len(f) - 1)
        out[i, :n, 0] = f[idx, 0]
        out[i, :n, 2] = f[idx, 2]
        cum = np.concatenate(([0.0], np.nancumsum(f[:, 1])))
        lo = np.floor(edges[:n]).astype(int)
        hi = np.maximum(np.floor(edges[1:n + 1]).astype(int), lo + 1)
        out[i, :n, 1] = (cum[np.minimum(hi, len(f))] - cum[lo]) / ((hi - lo) * 1.0)
    return out
