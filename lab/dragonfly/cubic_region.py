"""Which region CUBIC runs in on each recorded network, and a model's accuracy per region.

RFC 9438 §4.3: after a cut CUBIC's window follows the larger of its cubic curve (back at the
last maximum W after K = cbrt(W (1 - beta) / C) seconds) and its Reno-friendly AIMD estimate
(back after W (1 - beta) / alpha round trips, alpha = 3 (1 - beta) / (1 + beta)). Where the
estimate is back first CUBIC is an AIMD flow like Reno but for its cut and its increase. W
here is the run's BDP plus its buffer over the flows at the bottleneck (the three of the
dragonfly scenarios). Prints, per CCA and region, the flows and the model's mean accuracy
over each flow's random sub-intervals (as `eval` draws them).

    python -m lab.dragonfly.cubic_region RESULTS... [--model M]
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

from estimator.dragonfly import DEFAULT_MODEL

BETA, C = 0.7, 0.4
ALPHA = 3 * (1 - BETA) / (1 + BETA)
FLOWS_AT_BOTTLENECK = 3
FRAME_BYTES = 1500


def region(rate_mbps: float, one_way_ms: float, buffer_bdp: float, flows: int = FLOWS_AT_BOTTLENECK) -> str:
    rtt_s = 2 * one_way_ms / 1e3
    window_pkts = rate_mbps * 1e6 * rtt_s / 8 / FRAME_BYTES * (1 + buffer_bdp) / flows
    k_s = (window_pkts * (1 - BETA) / C) ** (1 / 3)
    aimd_s = window_pkts * (1 - BETA) / ALPHA * rtt_s
    return "cubic curve" if k_s < aimd_s else "Reno-friendly"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    args = ap.parse_args(argv)
    from estimator.dragonfly.cnn import OnnxClassifier
    from estimator.dragonfly.dataset import frames
    from experiments.runs.slot_record import labelled_flows
    model = OnnxClassifier(args.model)
    rows = []
    for results in args.results:
        with open(os.path.join(results, "summary.json")) as f:
            params = {r["run"]: r["params"] for r in json.load(f)["records"]}
        for i, (run, series, cca) in enumerate(labelled_flows(results)):
            if cca not in model.classes_:
                continue
            p = params[run]
            x, y = frames([series], [cca], model.n_slots, per_flow=40, seed=i)
            if len(y):
                rows.append((cca, region(p["bottleneck_mbps"], p["bottleneck_delay_ms"], p["buffer_bdp"]),
                             float(np.mean(model.predict(x) == y))))
    for cca in model.classes_:
        for where in ("Reno-friendly", "cubic curve"):
            acc = [a for c, r, a in rows if c == cca and r == where]
            if acc:
                print(f"{cca:6s} {where:14s} {len(acc):3d} flows  mean accuracy {np.mean(acc):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
