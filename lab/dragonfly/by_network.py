"""Where on the drawn networks Dragonfly goes wrong: a model per input set trained on some
results' flows (as lab/dragonfly/intervals.py), its accuracy on another's sub-intervals
split by the test run's network (buffer in BDP, one-way delay) and by the flow's CCA.
Writes a record (date, commit, command).

    python -m lab.dragonfly.by_network --train DIR... --test DIR... [--interval-ms 1000]
        [--windows-per-flow 20] [--epochs 20] --json-out RECORD
    python -m lab.dragonfly.by_network --table RECORD
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

from estimator.dragonfly import TRAIN_CLASSES
from estimator.dragonfly.dataset import FLIGHT_FEATURES, frames
from experiments.runs.slot_record import labelled_flows
from lab.dragonfly import print_tables
from lab.dragonfly.intervals import flows_of
from records.provenance import stamp

MODELS = {"CBIQ + ingress": [0, 1], "CBIQ + ingress + flight": [0, 1, 2]}
BINS = {"buffer_bdp": [0, 2, 5, 100], "bottleneck_delay_ms": [0, 15, 30, 1000]}


def _params(results_dir: str) -> dict:
    with open(os.path.join(results_dir, "summary.json")) as f:
        return {r["run"]: r.get("params", {}) for r in json.load(f)["records"]}


def _bin(value: float, edges: list) -> str:
    i = int(np.searchsorted(edges, value, side="right")) - 1
    return f"{edges[i]:g}–{edges[i + 1]:g}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", nargs="+", metavar="DIR")
    ap.add_argument("--test", nargs="+", metavar="DIR")
    ap.add_argument("--table", nargs="+", metavar="RECORD")
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--windows-per-flow", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    if args.table:
        return print_tables(args.table, table)
    if not (args.train and args.test):
        ap.error("--train and --test results directories are needed (or --table RECORD)")
    from estimator.dragonfly.train import DragonflyTrainer
    train = flows_of(args.train)
    x, y = frames([s for s, _ in train], [c for _, c in train], args.interval_ms, per_flow=args.windows_per_flow,
                  features=FLIGHT_FEATURES)
    test = []                      # (frames, labels, run's params) per flow
    for r in args.test:
        params = _params(r)
        for i, (run, s, c) in enumerate(labelled_flows(r)):
            if c in TRAIN_CLASSES:
                fx, fy = frames([s], [c], args.interval_ms, per_flow=args.windows_per_flow, seed=100_000 + i,
                                features=FLIGHT_FEATURES)
                if len(fy):
                    test.append((fx, fy, params.get(run, {})))
    rows = []
    for name, cols in MODELS.items():
        clf = DragonflyTrainer(TRAIN_CLASSES, epochs=args.epochs, patience=5).fit(x[:, :, cols], y)
        for fx, fy, p in test:
            right = clf.predict(fx[:, :, cols]) == fy
            rows.append({"model": name, "cca": str(fy[0]), "right": int(right.sum()), "frames": int(len(fy)),
                         **{k: _bin(float(p[k]), edges) for k, edges in BINS.items() if k in p}})
        print(f"{name}: trained, {len(test)} test flows", flush=True)
    rec = {"provenance": stamp(), "train": args.train, "test": args.test, "interval_ms": args.interval_ms,
           "rows": rows}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rec, f, indent=1)
    print("\n".join(table([rec])))
    return 0


def table(records: list[dict]) -> list[str]:
    """Accuracy per model, split by each network parameter's bins and by CCA (flows in brackets)."""
    out = []
    for rec in records:
        models = list(dict.fromkeys(r["model"] for r in rec["rows"]))
        out += [f"| network | CCA | flows | " + " | ".join(f"accuracy, {m}" for m in models) + " |",
                "|---|---|---|" + "---|" * len(models)]
        for key in BINS:
            for b in sorted({r[key] for r in rec["rows"] if key in r}, key=lambda v: float(v.split("–")[0])):
                for cca in TRAIN_CLASSES:
                    got = {m: [r for r in rec["rows"] if r["model"] == m and r.get(key) == b and r["cca"] == cca]
                           for m in models}
                    n = len(got[models[0]])
                    if not n:
                        continue
                    acc = [sum(r["right"] for r in got[m]) / sum(r["frames"] for r in got[m]) for m in models]
                    out.append(f"| {key} {b} | {cca} | {n} | " + " | ".join(f"{a:.2f}" for a in acc) + " |")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
