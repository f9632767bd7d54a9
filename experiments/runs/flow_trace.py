"""Long-flow traces to replay on the testbed (the RTT-separation paper's FCT test): one row
per transfer, when it starts, how many bytes and over what round trip.

    # intcc flow trace: ...generator and its parameters...
    flow,start_s,size_bytes,rtt_ms
    0,0.000,3514211,41.2

The paper replays 6,000 transfers of 150 MB - 2 GB over RTTs of 1-224 ms from a MAWI trace
(WIDE backbone, 2024-02-15) at 1 Gbit/s. MAWI is not redistributable here, so ``generate``
draws a trace of the same kind: RTTs log-normal (median ``rtt_median_ms``, clipped to the
paper's 1-224 ms), sizes log-uniform over a range that takes the link as long as the paper's
took its link (150 MB - 2 GB is 1.2-16 s at 1 Gbit/s; the default 1-10 MB is 0.8-8 s at
10 Mbit/s), Poisson arrivals at an offered ``load`` of the link. The shapes are assumptions,
said in the file's header; a trace from elsewhere in the same four columns replays as well.
"""
from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass

COLUMNS = ("flow", "start_s", "size_bytes", "rtt_ms")
PAPER_RTT_RANGE_MS = (1.0, 224.0)


class TraceError(ValueError):
    """A trace file that cannot be replayed: says which line and why."""


@dataclass(frozen=True)
class TraceFlow:
    flow: int
    start_s: float
    size_bytes: int
    rtt_ms: float


def generate(flows: int, seed: int, link_mbps: float = 10.0, load: float = 0.8,
             size_range_bytes: tuple = (1_000_000, 10_000_000), rtt_median_ms: float = 40.0,
             rtt_sigma: float = 1.0, rtt_range_ms: tuple = PAPER_RTT_RANGE_MS) -> list[TraceFlow]:
    """``flows`` transfers, the first at 0 s, Poisson arrivals whose bytes offer ``load`` of a
    ``link_mbps`` link on average."""
    if flows < 1:
        raise ValueError("a trace needs at least one flow")
    if not 0 < load < 1:
        raise ValueError(f"load is a share of the link in (0, 1), not {load} (at 1 or more flows pile up without end)")
    lo, hi = size_range_bytes
    if not 0 < lo <= hi:
        raise ValueError(f"size range {size_range_bytes} is not 0 < low <= high")
    rng = random.Random(seed)
    mean_bytes = (hi - lo) / math.log(hi / lo) if hi > lo else lo       # log-uniform's mean
    mean_gap_s = mean_bytes * 8 / (load * link_mbps * 1e6)
    out, t = [], 0.0
    for k in range(flows):
        size = int(round(lo * (hi / lo) ** rng.random()))
        rtt = min(max(rtt_median_ms * math.exp(rng.gauss(0.0, rtt_sigma)), rtt_range_ms[0]), rtt_range_ms[1])
        out.append(TraceFlow(k, round(t, 3), size, round(rtt, 2)))
        t += rng.expovariate(1.0 / mean_gap_s)
    return out


def header(**params) -> str:
    return "intcc flow trace: " + ", ".join(f"{k} {v}" for k, v in params.items())


def write_csv(flows: list[TraceFlow], path: str, comment: str = "") -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        if comment:
            f.write(f"# {comment}\n")
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in flows:
            w.writerow((r.flow, f"{r.start_s:.3f}", r.size_bytes, f"{r.rtt_ms:g}"))


def read_csv(path: str) -> list[TraceFlow]:
    """The trace's flows by start time; TraceError naming the line of a bad row."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror}") from None
    with f:
        lines = [(n, line) for n, line in enumerate(f, 1) if line.strip() and not line.startswith("#")]
    if not lines or tuple(c.strip() for c in lines[0][1].strip().split(",")) != COLUMNS:
        raise TraceError(f"{path}: the first row must be the header {','.join(COLUMNS)}")
    flows, seen = [], set()
    for n, row in zip((n for n, _ in lines[1:]), csv.reader(line for _, line in lines[1:])):
        where = f"{path}:{n}"
        if len(row) != len(COLUMNS):
            raise TraceError(f"{where}: {len(row)} fields, expected {len(COLUMNS)} ({','.join(COLUMNS)})")
        try:
            r = TraceFlow(int(row[0]), float(row[1]), int(row[2]), float(row[3]))
        except ValueError:
            raise TraceError(f"{where}: not numbers: {','.join(row)}") from None
        if r.flow in seen:
            raise TraceError(f"{where}: flow {r.flow} appears twice")
        if r.start_s < 0 or r.size_bytes <= 0 or not r.rtt_ms > 0 or not math.isfinite(r.start_s):
            raise TraceError(f"{where}: start_s must be >= 0, size_bytes and rtt_ms > 0: {','.join(row)}")
        seen.add(r.flow)
        flows.append(r)
    if not flows:
        raise TraceError(f"{path}: no flows")
    return sorted(flows, key=lambda r: (r.start_s, r.flow))


def path_rtts(flows: list[TraceFlow], paths: int) -> tuple[list[float], list[int]]:
    """The testbed has ``paths`` sender-receiver pairs, each of one RTT: the trace's RTTs cut
    into that many quantile groups, each pair at its group's geometric mean. Returns the
    pairs' RTTs (ms, ascending) and each flow's pair (in ``flows``' order)."""
    order = sorted(range(len(flows)), key=lambda i: flows[i].rtt_ms)
    pair = [0] * len(flows)
    groups = [[] for _ in range(paths)]
    for rank, i in enumerate(order):
        g = min(paths - 1, rank * paths // len(flows))
        pair[i] = g
        groups[g].append(flows[i].rtt_ms)
    rtts = [round(math.exp(sum(map(math.log, g)) / len(g)), 2) if g else None for g in groups]
    for g in range(paths):                    # fewer flows than paths: an unused pair copies a neighbour
        if rtts[g] is None:
            rtts[g] = next(r for r in rtts[g::-1] + rtts[g:] if r is not None)
    return rtts, pair
