"""Benchmark: Table I feature extraction for one minute of trace, INT features
(one estimate, and all 100 rows of a collected run), a live estimate's trace and last
feature row at the end of a minute's flow against the whole computation, and Random
Forest inference per estimate (one ACK's features) and per batch.

    python -m tests.perf.bench_estimator        or        make bench
"""
from __future__ import annotations

import time

import numpy as np

from estimator.capture import _Flow
from estimator.features import FEATURES, SenderTrace, features, last_features
from estimator.int_features import int_features
from estimator.model import CCAS, CCAEstimator
from tests.perf import answer_help


def minute_trace(rate_mbps: float, rng, seconds=60.0, mss=1448):
    pkts = int(rate_mbps * 1e6 / 8 / mss * seconds)
    send_t = np.sort(rng.uniform(0, seconds, pkts))
    ack_t = send_t[1::2] + 0.02                     # delayed ACKs, 20 ms RTT
    n = len(ack_t)
    return SenderTrace(ack_t=ack_t, rtt_s=rng.uniform(0.02, 0.04, n), acked_bytes=np.full(n, 2.0 * mss),
                       send_t=send_t, retrans=rng.random(pkts) < 0.01)


def live_estimate_line(tr: SenderTrace) -> str:
    """A live estimate 0.5 s of packets after the last, at the end of the flow: the trace
    from the capture's lists (all of them, as the capture once did, and the new packets only)
    and the last feature row (full and last_features)."""
    flow = _Flow()
    n_ack, n_send = len(tr.ack_t) - 400, len(tr.send_t) - 800      # the last 0.5 s come later
    flow.ack_t += tr.ack_t[:n_ack].tolist()
    flow.rtt += tr.rtt_s[:n_ack].tolist()
    flow.acked += tr.acked_bytes[:n_ack].tolist()
    flow.send_t += tr.send_t[:n_send].tolist()
    flow.retrans += tr.retrans[:n_send].tolist()
    flow.trace("bench")                                   # the estimates before this one
    flow.ack_t += tr.ack_t[n_ack:].tolist()
    flow.rtt += tr.rtt_s[n_ack:].tolist()
    flow.acked += tr.acked_bytes[n_ack:].tolist()
    flow.send_t += tr.send_t[n_send:].tolist()
    flow.retrans += tr.retrans[n_send:].tolist()
    t0 = time.perf_counter()
    whole = SenderTrace(np.array(flow.ack_t), np.array(flow.rtt), np.array(flow.acked, dtype=float),
                        np.array(flow.send_t), np.array(flow.retrans, dtype=bool)).validate()
    t1 = time.perf_counter()
    live = flow.trace("bench")
    t2 = time.perf_counter()
    features(whole)[-1:]
    t3 = time.perf_counter()
    last_features(live)
    t4 = time.perf_counter()
    return (f"live estimate at {len(tr.ack_t)} ACKs: trace {(t1 - t0) * 1e3:.1f} ms whole, {(t2 - t1) * 1e3:.1f} ms "
            f"new packets only; last row {(t3 - t2) * 1e3:.1f} ms full, {(t4 - t3) * 1e3:.1f} ms last_features; "
            f"together {(t1 - t0 + t3 - t2) / (t2 - t1 + t4 - t3):.0f}x")


def run_benchmark() -> list[str]:
    rng = np.random.default_rng(0)
    lines = []
    for rate in (10, 100):
        tr = minute_trace(rate, rng)
        features(tr)                                  # warm up
        t0 = time.perf_counter()
        features(tr)
        dt = time.perf_counter() - t0
        lines.append(f"features, 60 s at {rate:>3} Mbit/s: {len(tr.ack_t):>7} ACKs in {dt * 1e3:7.1f} ms "
                     f"({len(tr.ack_t) / dt / 1e6:.2f} M ACKs/s)")
    lines.append(live_estimate_line(minute_trace(10, rng)))
    # flow 1's INT series: one row per packet at 10 Mbit/s for 60 s
    pkts = int(10e6 / 8 / 1500 * 60)
    t = np.sort(rng.uniform(0, 60, pkts))
    series = np.column_stack((t, rng.uniform(0, 1.5e5, pkts), np.full(pkts, 1.5e5), rng.uniform(300, 900, pkts),
                              np.full(pkts, 2), np.cumsum(rng.random(pkts) < 0.01)))
    for label, at in (("one estimate", np.array([59.9])), ("100 rows", np.linspace(6, 59.9, 100))):
        int_features(series, at, 0.03)
        t0 = time.perf_counter()
        int_features(series, at, 0.03)
        dt = time.perf_counter() - t0
        lines.append(f"INT features, 60 s series ({pkts} packets), {label}: {dt * 1e3:.1f} ms")
    X = rng.normal(size=(4000, len(FEATURES)))
    y = np.array([CCAS[i % 4] for i in range(4000)])
    est = CCAEstimator(grid={"n_estimators": [200], "max_depth": [15]}, folds=2).fit(
        X, y, np.array(["cubic"] * 4000), np.arange(4000) % 20)
    one = X[:1]
    est.predict(one, "cubic")
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        est.predict(one, "cubic")
    per = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    est.predict(X, "cubic")
    batch = (time.perf_counter() - t0) / len(X)
    lines.append(f"inference, 200 trees depth 15: {per * 1e3:.2f} ms per single estimate, "
                 f"{batch * 1e6:.1f} us per row in a batch of {len(X)}")
    return lines


def test_estimator_benchmark():
    print("\n" + "\n".join(run_benchmark()))


if __name__ == "__main__":
    answer_help(__doc__)
    print("\n".join(run_benchmark()))
