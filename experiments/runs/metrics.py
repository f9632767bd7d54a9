"""Metrics of a run from its series and traces: Jain's index, time to plateau, slow-start exit."""
from __future__ import annotations

import bisect
import csv
import json
import os
import statistics


def jain(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    if not xs or not any(xs):
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def time_to_plateau_s(rows: list[dict], fraction: float = 0.9) -> float | None:
    """Seconds until cwnd first reaches ``fraction`` of its median over the run's
    second half: when the window has grown to where the flow settles (the INT-eBPF paper
    Fig. 7's "reaches ssthresh"; works for kernel flows, which leave no trace)."""
    cw = [(r["t_s"], r["cwnd_bytes"]) for r in rows if r.get("cwnd_bytes")]
    if len(cw) < 4:
        return None
    settled = statistics.median(c for _, c in cw[len(cw) // 2:])
    return next((t for t, c in cw if c >= fraction * settled), None)


def sender_rows(trace_csv: str) -> list[dict]:
    """The data flow's rows of an agent trace (iperf3's control flow is tiny); [] if none."""
    if not os.path.exists(trace_csv):
        return []
    with open(trace_csv) as f:
        rows = list(csv.DictReader(f))
    counts = {}
    for r in rows:
        counts[r["sid"]] = counts.get(r["sid"], 0) + 1
    if not counts:
        return []
    sender = max(counts, key=counts.get)
    return [r for r in rows if r["sid"] == sender]


def is_switch(row: dict) -> bool:
    """A switch's own row ("cubic -> bbr: why"); the new algorithm's first command after
    it is a "switch" row too ("took the flow over")."""
    return row["event"] == "switch" and " -> " in row["reason"]


def algorithm_spans(trace_csv: str, initial: str, end_s: float | None = None) -> list[tuple[float, float, str]]:
    """(from_s, to_s, algorithm) of the data flow, from the flow's start (to ``end_s``,
    else its last trace row), from its trace."""
    rows = sender_rows(trace_csv)
    if not rows:
        return []
    start = next((float(x["t_s"]) for x in rows if x["event"] == "start"), float(rows[0]["t_s"]))
    if end_s is None:
        end_s = float(rows[-1]["t_s"]) - start
    first_move = next((x for x in rows if is_switch(x)), None)
    if first_move is not None:       # the trace knows what the flow started on (best-response picks it)
        initial = first_move["reason"].split(" -> ")[0]
    spans, since, alg = [], 0.0, initial
    for x in rows:
        if is_switch(x):
            t = min(float(x["t_s"]) - start, end_s)      # one as the run ends falls at its end
            spans.append((since, t, alg))
            since, alg = t, x["reason"].split(" -> ")[1].split(":")[0]
    spans.append((since, end_s, alg))
    return [sp for sp in spans if sp[1] > sp[0]]


def switches(trace_csv: str, initial: str = "cubic", end_s: float | None = None) -> dict | None:
    """The adaptive agent's switches of the data flow: how many, the first one's time
    from the flow's start (s), the algorithm it ended on, and the share of the run on each
    algorithm (``initial``: the one it started on); None without a trace."""
    rows = sender_rows(trace_csv)
    if not rows:
        return None
    start = next((float(r["t_s"]) for r in rows if r["event"] == "start"), float(rows[0]["t_s"]))
    moves = [r for r in rows if is_switch(r)]
    spans = algorithm_spans(trace_csv, initial, end_s)
    total = sum(hi - lo for lo, hi, _ in spans)
    shares: dict = {}
    for lo, hi, alg in spans:
        shares[alg] = shares.get(alg, 0.0) + (hi - lo) / total
    return {"switches": len(moves),
            "first_switch_s": round(float(moves[0]["t_s"]) - start, 3) if moves else None,
            "final_algorithm": moves[-1]["reason"].split(" -> ")[1].split(":")[0] if moves else None,
            "time_on": {a: round(v, 4) for a, v in shares.items()}}


#: The parts of a run's D by what flow 1 ran (goodput_difference_parts).
DIFFERENCE_PARTS = ("start", "right", "wrong")


def goodput_difference_parts(rows: list[dict], spans: list[tuple[float, float, str]], competitor: str,
                             interval_s: float, competitor_from_s: float = 0.0) -> dict | None:
    """The ML-fairness paper's D split over what flow 1 ran: ``start`` (before its first switch,
    whatever it ran), ``right`` (after it, on the competitor's CCA) and ``wrong`` (after
    it, on another). D = (G1 - G2) / (G1 + G2) = sum over parts p of (G1_p - G2_p) /
    (G1 + G2) exactly, so the parts add up to the D of the intervals (``d``; the record's
    D is from iperf3's totals and differs by rounding). Where the gap to the oracle comes
    from: the time to the first verdict, a wrong verdict, or the pair after a right one.
    ``rows``: the run's series (each interval's end ``t_s``, both goodputs); ``spans``:
    ``algorithm_spans``; intervals before ``competitor_from_s`` (a late competitor) are
    left out, as the record's D leaves them. None without both flows' goodputs."""
    first_switch_s = spans[0][1] if len(spans) > 1 else float("inf")
    sums = {p: [0.0, 0.0, 0.0] for p in DIFFERENCE_PARTS}     # flow 1's goodput, the competitor's, seconds
    for r in rows:
        mid_s = float(r["t_s"]) - interval_s / 2     # an interval goes with what ran at its middle
        g1, g2 = r.get("goodput_mbps"), r.get("competitor_goodput_mbps")
        if g1 is None or g2 is None or mid_s < competitor_from_s:
            continue
        on = next((alg for lo, hi, alg in spans if lo <= mid_s < hi), spans[-1][2] if spans else None)
        part = "start" if mid_s < first_switch_s else "right" if on == competitor else "wrong"
        sums[part][0] += g1
        sums[part][1] += g2
        sums[part][2] += interval_s
    total = sum(g1 + g2 for g1, g2, _ in sums.values())
    if total <= 0:
        return None
    parts = {p: (g1 - g2) / total for p, (g1, g2, _) in sums.items()}
    return {"d": sum(parts.values()), "parts": parts, "seconds": {p: s for p, (_, _, s) in sums.items()}}


#: Seconds since flow 1's last switch (or its start) that verdicts are scored in.
VERDICT_SINCE_BINS_S = (0, 2, 5, 10, 20, 30)


def _since_bin(since_s: float) -> str:
    i = max(bisect.bisect_right(VERDICT_SINCE_BINS_S, since_s) - 1, 0)
    return (f"{VERDICT_SINCE_BINS_S[i]}-{VERDICT_SINCE_BINS_S[i + 1]}" if i + 1 < len(VERDICT_SINCE_BINS_S)
            else f"{VERDICT_SINCE_BINS_S[i]}+")


def verdict_scores(trace_csv: str, competitor: str, initial: str = "cubic") -> dict | None:
    """The estimator's verdicts on the data flow scored against the true ``competitor``,
    by what flow 1 ran then and the time since it last switched (or started): does a
    switch, which puts the flow on another algorithm under the model's eyes, cost the
    estimates that follow it? Per cell: rows (verdicts), ``row_right`` (the step's own
    estimate; older traces lack it: null) and ``vote_right`` (the majority
    vote). None without verdicts in the trace."""
    rows = sender_rows(trace_csv)
    start = next((float(r["t_s"]) for r in rows if r["event"] == "start"), None)
    if start is None:
        return None
    moves = [r for r in rows if is_switch(r)]
    alg = moves[0]["reason"].split(" -> ")[0] if moves else initial
    after, since_t = "start", start
    cells: dict = {}
    for r in rows:
        if is_switch(r):
            alg, after, since_t = r["reason"].split(" -> ")[1].split(":")[0], "switch", float(r["t_s"])
            continue
        if r["event"] != "verdict":
            continue
        vote, _, rest = r["reason"].partition(" (")
        row = rest.rpartition("; row ")[2] if "; row " in rest else None
        key = (alg, after, _since_bin(float(r["t_s"]) - since_t))
        c = cells.setdefault(key, {"rows": 0, "row_right": 0 if row is not None else None, "vote_right": 0})
        c["rows"] += 1
        c["vote_right"] += vote == competitor
        if row is not None and c["row_right"] is not None:
            c["row_right"] += row == competitor
    if not cells:
        return None
    return {"cells": [{"on": a, "after": w, "since_s": b, **c} for (a, w, b), c in sorted(cells.items())]}


def slow_start_exit_s(trace_csv: str) -> float | None:
    """Seconds from the flow's start to its first window cut (where ssthresh is set)."""
    starts = {}
    rows = sender_rows(trace_csv)
    sender = rows[0]["sid"] if rows else None
    for r in rows:
        if r["sid"] != sender:
            continue
        if r["event"] == "start":
            starts[sender] = float(r["t_s"])
        elif r["ssthresh_bytes"] and sender in starts:
            return float(r["t_s"]) - starts[sender]
    return None


def mean_queue_delay_ms(int_log: str, offset: int, src: str, dport: int, rate_mbps: float) -> float | None:
    """Mean queueing delay flow (``src``, ``dport``)'s packets met at the bottleneck, from
    the INT in a sink's JSON-lines log written after ``offset``: each packet's queue depth
    at the hop where it was deepest on average, over the bottleneck's rate. None without
    records or rate."""
    depths: dict[int, list[int]] = {}
    try:
        f = open(int_log, encoding="utf-8", errors="replace")
    except OSError:
        return None
    with f:
        f.seek(offset)
        for line in f:
            try:
                rec = json.loads(line)
                if rec["flow"]["src"] != src or rec["flow"]["dport"] != dport:
                    continue
                for i, hop in enumerate(rec["trace"]["hops"]):
                    if hop.get("queue_depth_bytes") is not None:
                        depths.setdefault(i, []).append(hop["queue_depth_bytes"])
            except (ValueError, KeyError, TypeError):
                continue            # not a record (a torn last line)
    if not depths or not rate_mbps:
        return None
    deepest = max(statistics.mean(d) for d in depths.values())
    return deepest * 8 / (rate_mbps * 1e3)


def queueing_delays_ms(int_log: str, offset: int, flows: list[tuple[str, int]]) -> dict:
    """Each flow's (src, dport) queueing delay at the bottleneck, from the INT in a sink's
    JSON-lines log written after ``offset``: per packet, the transit delay of the hop where
    the flow's packets waited longest on average, above the least any of them took there
    (what the node adds without a queue: its own processing, an ingress link's emulated
    delay). Unlike a queue depth over the port's rate, it holds for a queue that DRR serves
    at a share of the port. {dport: {"mean_ms", "p95_ms", "packets"}} for flows with records."""
    wanted = {(src, int(dport)) for src, dport in flows}
    delays: dict = {}                 # (src, dport) -> {hop index: [ns, ...]}
    try:
        f = open(int_log, encoding="utf-8", errors="replace")
    except OSError:
        return {}
    with f:
        f.seek(offset)
        for line in f:
            try:
                rec = json.loads(line)
                key = (rec["flow"]["src"], rec["flow"]["dport"])
                if key not in wanted:
                    continue
                hops = delays.setdefault(key, {})
                for i, hop in enumerate(rec["trace"]["hops"]):
                    if hop.get("transit_delay_ns") is not None:
                        hops.setdefault(i, []).append(hop["transit_delay_ns"])
            except (ValueError, KeyError, TypeError):
                continue            # not a record (a torn last line)
    out = {}
    for (_, dport), hops in delays.items():
        worst = max(hops.values(), key=statistics.mean)
        base = min(worst)
        above = sorted((d - base) / 1e6 for d in worst)
        out[dport] = {"mean_ms": round(statistics.mean(above), 3),
                      "p95_ms": round(above[min(len(above) - 1, int(0.95 * len(above)))], 3), "packets": len(above)}
    return out
