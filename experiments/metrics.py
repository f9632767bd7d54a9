"""Metrics of a run from its series and traces: Jain's index, time to plateau, slow-start exit."""
from __future__ import annotations

import csv
import os
import statistics


def jain(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    if not xs or not any(xs):
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def time_to_plateau_s(rows: list[dict], fraction: float = 0.9) -> float | None:
    """Seconds until cwnd first reaches ``fraction`` of its median over the run's
    second half: when the window has grown to where the flow settles (paper 003
    Fig. 7's "reaches ssthresh"; works for kernel flows, which leave no trace)."""
    cw = [(r["t_s"], r["cwnd_bytes"]) for r in rows if r.get("cwnd_bytes")]
    if len(cw) < 4:
        return None
    settled = statistics.median(c for _, c in cw[len(cw) // 2:])
    return next((t for t, c in cw if c >= fraction * settled), None)


def slow_start_exit_s(trace_csv: str) -> float | None:
    """Seconds from the flow's start to its first window cut (where ssthresh is set)."""
    if not os.path.exists(trace_csv):
        return None
    starts, sender = {}, None
    with open(trace_csv) as f:
        rows = list(csv.DictReader(f))
    counts = {}
    for r in rows:
        counts[r["sid"]] = counts.get(r["sid"], 0) + 1
    if not counts:
        return None
    sender = max(counts, key=counts.get)      # the data flow (iperf3's control flow is tiny)
    for r in rows:
        if r["sid"] != sender:
            continue
        if r["event"] == "start":
            starts[sender] = float(r["t_s"])
        elif r["ssthresh_bytes"] and sender in starts:
            return float(r["t_s"]) - starts[sender]
    return None
