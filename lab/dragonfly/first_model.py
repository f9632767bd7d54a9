"""A first Dragonfly model on the testbed's captures: trained on one seed's runs of the
`dragonfly` scenario, scored on another's (flows never seen, networks drawn apart), for
sub-intervals of the given lengths: Dragonfly (CBIQ and ingress bytes), CBIQ alone, and
ingress bytes alone (a DeePCCI-like throughput-only input). Prints macro F1 per interval
and input, with a control that must fail (the training labels shuffled), and writes a
record (date, commit, command).

    python -m lab.dragonfly.first_model TRAIN_RESULTS TEST_RESULTS [--intervals-ms 100 1000]
        [--windows-per-flow 40] [--epochs 20] --json-out RECORD
    python -m lab.dragonfly.first_model --table RECORD      # docs/dragonfly.md's table from it
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from sklearn.metrics import f1_score

from estimator.dragonfly.dataset import frames
from estimator.dragonfly.train import DragonflyTrainer
from experiments.runs.slot_record import labelled_flows
from lab.dragonfly import print_table
from records.provenance import stamp

CLASSES = ("reno", "cubic", "bbr")
INPUTS = {"dragonfly": [0, 1], "cbiq only": [0], "ingress bytes only": [1]}


def dataset(results: str, n_slots: int, per_flow: int, seed: int):
    flows = [(s, c) for _, s, c in labelled_flows(results) if c in CLASSES]
    return frames([s for s, _ in flows], [c for _, c in flows], n_slots, per_flow=per_flow, seed=seed)


def table(record: dict) -> list[str]:
    rows = ["| sub-interval | test frames | Dragonfly | CBIQ only | ingress bytes only | control: shuffled labels |",
            "|---|---|---|---|---|---|"]
    for ms, r in record["results"].items():
        rows.append(f"| {int(ms) / 1000:g} s | {r['test_frames']} | {r['dragonfly']['macro_f1']:.2f} | "
                    f"{r['cbiq only']['macro_f1']:.2f} | {r['ingress bytes only']['macro_f1']:.2f} | "
                    f"{r['control: shuffled labels']['macro_f1']:.2f} |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("train", nargs="?")
    ap.add_argument("test", nargs="?")
    ap.add_argument("--table", metavar="RECORD", help="print the docs' table from a record written by --json-out")
    ap.add_argument("--intervals-ms", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--windows-per-flow", type=int, default=40)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    if args.table:
        return print_table(args.table, table)
    if not (args.train and args.test):
        ap.error("TRAIN and TEST results directories are needed (or --table RECORD)")
    results = {}
    for ms in args.intervals_ms:
        x, y = dataset(args.train, ms, args.windows_per_flow, 0)
        xt, yt = dataset(args.test, ms, args.windows_per_flow, 1)
        row = {"train_frames": len(y), "test_frames": len(yt)}
        for name, cols in INPUTS.items():
            t0 = time.time()
            clf = DragonflyTrainer(CLASSES, epochs=args.epochs, patience=5).fit(x[:, :, cols], y)
            pred = clf.predict(xt[:, :, cols])
            row[name] = {"macro_f1": round(float(f1_score(yt, pred, average="macro")), 3),
                         "accuracy": round(float(np.mean(pred == yt)), 3), "epochs": len(clf.history_),
                         "train_s": round(time.time() - t0, 1)}
            print(f"{ms:5d} ms  {name:20s} F1 {row[name]['macro_f1']:.3f}  accuracy {row[name]['accuracy']:.3f}  "
                  f"({len(y)} training frames, {len(yt)} test, {row[name]['epochs']} epochs, {row[name]['train_s']} s)",
                  flush=True)
        shuffled = DragonflyTrainer(CLASSES, epochs=args.epochs, patience=5).fit(
            x, np.random.default_rng(7).permutation(y))
        row["control: shuffled labels"] = {"macro_f1": round(float(f1_score(yt, shuffled.predict(xt), average="macro")), 3)}
        print(f"{ms:5d} ms  control, shuffled labels F1 {row['control: shuffled labels']['macro_f1']:.3f}", flush=True)
        results[str(ms)] = row
    if args.json_out:
        made = stamp()
        with open(args.json_out, "w") as f:
            json.dump({"provenance": made, "train": args.train, "test": args.test, "classes": CLASSES,
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
