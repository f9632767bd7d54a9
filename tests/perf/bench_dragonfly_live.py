"""Benchmark: what naming every flow costs beside a node (estimator/dragonfly/live.py with
the shipped ONNX model), at 100 monitored flows.

Each round feeds the classifier what a FlowSlots table hands over in one drain period
(0.5 s: per flow and side 500 slot entries, a flow at ~10 Mbit/s over 100 flows still has a
packet most milliseconds) for 100 flows, then classifies: every flow has a new full
interval, so every round names all 100 in one batch. Prints per round the feed and the
classify time, the time per flow-interval, and the process's CPU per second of traffic
(feed + classify over the drain period: the share of a core the collector needs).
Asserts only that every flow was named every round.

    python -m tests.perf.bench_dragonfly_live          (part of make bench)
"""
from __future__ import annotations

import statistics
import time

from estimator.dragonfly import DEFAULT_MODEL
from estimator.dragonfly.cnn import OnnxClassifier
from estimator.dragonfly.live import PERIOD_S, LiveClassifier
from tests.perf import answer_help

FLOWS, ROUNDS, BYTES_PER_SLOT = 100, 10, 1448


def drain(round_i: int, flows: int, slots: int, lag_slots: int = 20) -> dict:
    """One drain period's entries for ``flows`` flows: a packet a slot in, the same ones out
    ``lag_slots`` later (a queue of 20 ms)."""
    out = {}
    first = 1_000_000 + round_i * slots
    for f in range(flows):
        seq0 = 1000 + f
        ins = [[s, (seq0 + (s - 1_000_000) * BYTES_PER_SLOT) % 2 ** 32, -1] for s in range(first, first + slots)]
        outs = [[s, (seq0 + (s - 1_000_000 - lag_slots) * BYTES_PER_SLOT) % 2 ** 32, -1]
                for s in range(max(first, 1_000_000 + lag_slots), first + slots)]
        out[f"{f:016x}"] = {"flow": ["2001:db8:1::1", "2001:db8:3::2", 6, 40000 + f, 5201], "in": ins, "out": outs}
    return out


def run_benchmark(flows: int = FLOWS, rounds: int = ROUNDS) -> dict:
    model = OnnxClassifier(DEFAULT_MODEL)
    live = LiveClassifier(model, node_id=1)
    slots = int(PERIOD_S * 1000)
    feed_s, classify_s, named, cpu_s = [], [], [], []
    for i in range(rounds + 1):
        taken = drain(i, flows, slots)                 # built outside the timing: the node's side
        c0, t0 = time.process_time(), time.perf_counter()
        live.feed(taken)
        t1 = time.perf_counter()
        recs = live.classify()
        t2, c2 = time.perf_counter(), time.process_time()
        if i == 0:
            continue                                   # the first drain: the session's warm-up
        feed_s.append(t1 - t0)
        classify_s.append(t2 - t1)
        cpu_s.append(c2 - c0)
        named.append(len(recs))
    med = statistics.median
    return {"flows": flows, "rounds": rounds, "named": named, "feed_s": med(feed_s), "classify_s": med(classify_s),
            "per_flow_interval_ms": 1e3 * med(classify_s) / flows, "cpu_cores": med(cpu_s) / PERIOD_S,
            "interval_ms": model.n_slots}


def report(r: dict) -> str:
    return (f"Dragonfly live at {r['flows']} flows, {r['interval_ms']} ms intervals, a drain every "
            f"{PERIOD_S} s ({r['rounds']} rounds, median):\n"
            f"  feed {r['feed_s'] * 1e3:.1f} ms, classify {r['classify_s'] * 1e3:.1f} ms "
            f"({r['per_flow_interval_ms']:.2f} ms per flow-interval), CPU {r['cpu_cores']:.2f} cores")


def test_dragonfly_live_benchmark():
    r = run_benchmark()
    print("\n" + report(r))
    assert r["named"] == [FLOWS] * ROUNDS


if __name__ == "__main__":
    answer_help(__doc__)
    print(report(run_benchmark()))
