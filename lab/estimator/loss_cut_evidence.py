"""How far the loss-cut stage alone names a competitor, passively, on collected runs (a
study of 2026-12-02 for the identification by evidence, estimator/identify/)

For every run of a collection: the competitors' own packets and drops at the bottleneck
(per 10 ms), each loss event's cut (estimator.identify.loss_cut) read over an RTT of

  oracle   the competitor's own base RTT (from the run's parameters) plus the queueing delay
  proxy    flow 1's base RTT plus the queueing delay (what a live sender knows)

added as evidence to a sequential test (threshold 0.95). At the run's end: committed or
not, and right or not (Reno and Vegas both halve: a commit to either, or a posterior of
the two together >= 0.95, counts as the pair "reno|vegas"). Per competitor CCA, with
Wilson 95 % intervals.

    python -m lab.estimator.loss_cut_evidence --data data/estimator/hard-seed2804 [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import math

import numpy as np

from estimator.dataset import load_raw, load_run, run_paths, tcp_competitors
from estimator.identify.evidence import SequentialTest
from estimator.identify.loss_cut import evidence, loss_cuts
from experiments.runs.collection_plans import ACCESS_DELAY_MS
from records.provenance import stamp

BIN_S = 0.01
GROUPS = {"reno": "reno|vegas", "vegas": "reno|vegas", "cubic": "cubic", "bbr": "bbr", "unknown": "unknown"}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def queue_delay_s(raw: dict, meta: dict, n_bins: int) -> np.ndarray:
    """The bottleneck's queueing delay per 10 ms bin (its depth over its rate), from flow 1's records."""
    t = raw["int_record_t"]
    depth = raw["int_records"][:, 0]
    rate_bytes_per_s = meta["params"]["bottleneck_mbps"] * 1e6 / 8
    bins = t[0] + (np.arange(n_bins) + 0.5) * BIN_S
    return np.interp(bins, t, depth) / rate_bytes_per_s


def verdict_of(path: str, rtt: str) -> dict:
    raw, (_, _, meta) = load_raw(path), load_run(path)
    packets, lost = tcp_competitors(raw, meta)
    packets, lost = np.asarray(packets, float), np.asarray(lost, float)
    p = meta["params"]
    if rtt == "oracle":
        one_way_ms = p["bottleneck_delay_ms"] + 2 * (ACCESS_DELAY_MS + p.get("comp_extra_delay_ms", 0.0))
        base_s = 2 * one_way_ms / 1e3
    else:
        base_s = float(raw["sample_base_rtt_s"][-1])
    rtt_bins = np.round((base_s + queue_delay_s(raw, meta, packets.shape[1])) / BIN_S).astype(int)
    test = SequentialTest()
    events = 0
    for f in range(packets.shape[0]):
        for cut, err in loss_cuts(packets[f], lost[f], rtt_bins):
            test.add(evidence(cut, err))
            events += 1
    post = test.posterior()
    verdict = test.verdict()
    if verdict is None and post["reno"] + post["vegas"] >= test.threshold:
        verdict = "reno|vegas"
    truth = meta["cca2"]
    return {"run": meta["run"], "truth": truth, "events": events, "verdict": verdict,
            "right": verdict is not None and GROUPS.get(verdict, verdict) == GROUPS[truth],
            "posterior": {h: round(v, 4) for h, v in post.items()}}


def summarise(rows: list[dict]) -> dict:
    out = {}
    for truth in sorted({r["truth"] for r in rows}) + ["all"]:
        sel = [r for r in rows if truth in ("all", r["truth"])]
        committed = [r for r in sel if r["verdict"] is not None]
        right = sum(r["right"] for r in committed)
        out[truth] = {"runs": len(sel), "with_events": sum(r["events"] > 0 for r in sel),
                      "committed": len(committed), "committed_ci": wilson(len(committed), len(sel)),
                      "right_of_committed": right, "precision_ci": wilson(right, len(committed)),
                      "right_of_all_ci": wilson(right, len(sel))}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, action="append", help="a collection (repeatable)")
    ap.add_argument("--out", help="write the per-run results and the summary here (JSON)")
    args = ap.parse_args(argv)
    result = {"provenance": stamp(), "data": args.data}
    for rtt in ("oracle", "proxy"):
        rows = [verdict_of(p, rtt) for d in args.data for p in run_paths(d)]
        result[rtt] = {"summary": summarise(rows), "runs": rows}
        print(f"RTT {rtt}:")
        print(f"  {'competitor':10s} {'runs':>5s} {'events':>7s} {'committed':>17s} {'right of committed':>24s}")
        for truth, s in result[rtt]["summary"].items():
            c_lo, c_hi = s["committed_ci"]
            p_lo, p_hi = s["precision_ci"]
            print(f"  {truth:10s} {s['runs']:5d} {s['with_events']:7d} {s['committed']:5d} ({c_lo:.2f}-{c_hi:.2f})"
                  f" {s['right_of_committed']:8d}/{s['committed']:<3d} ({p_lo:.2f}-{p_hi:.2f})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
