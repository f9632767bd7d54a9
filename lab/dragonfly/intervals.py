"""Dragonfly's macro F1 against the sub-interval's length (the paper's Figs. 6, 7 and 11):
per interval, a model trained on the captures of some scenario results and scored on
flows of others never trained on, beside the throughput-only input (ingress bytes alone,
DeePCCI-like) and a control trained on shuffled labels that must stay near chance. CIs
resample flows (a flow's sub-intervals are not independent); "dragonfly - throughput" is
paired: both models scored on the same resampled flows' sub-intervals. Writes a record
(date, commit, command).

    python -m lab.dragonfly.intervals --train DIR... --test DIR... [--intervals-ms 100 1000 6000]
        [--windows-per-flow 40 40 5] [--epochs 20] --json-out RECORD
    python -m lab.dragonfly.intervals --table RECORD [RECORD...]   # docs/dragonfly.md's table
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from sklearn.metrics import f1_score

from estimator.dragonfly import TRAIN_CLASSES
from estimator.dragonfly.dataset import frames
from experiments.runs.slot_record import labelled_flows
from lab.dragonfly import print_tables
from records.provenance import stamp

INPUTS = {"dragonfly": [0, 1], "throughput only": [1]}
BOOTSTRAP = 1000


def flows_of(results: list[str]) -> list:
    return [(s, c) for r in results for _, s, c in labelled_flows(r) if c in TRAIN_CLASSES]


def per_flow_frames(flows: list, n_slots: int, per_flow: int, seed: int) -> list:
    """[(frames, labels)] per flow with at least one sub-interval of ``n_slots``."""
    out = [frames([s], [c], n_slots, per_flow=per_flow, seed=seed + i) for i, (s, c) in enumerate(flows)]
    return [(x, y) for x, y in out if len(y)]


def _f1(y, pred) -> float:
    return float(f1_score(y, pred, labels=list(TRAIN_CLASSES), average="macro", zero_division=0))


def scores(test: list, preds: dict, seed: int = 0) -> dict:
    """Macro F1 per input with a 95 % CI over flows, and the paired difference dragonfly -
    throughput only on the same resampled flows."""
    y = np.concatenate([yy for _, yy in test])
    rng = np.random.default_rng(seed)
    picks = [rng.integers(0, len(test), len(test)) for _ in range(BOOTSTRAP)]
    out = {}
    boots = {}
    for name, per_flow in preds.items():
        boots[name] = np.array([_f1(np.concatenate([test[i][1] for i in p]), np.concatenate([per_flow[i] for i in p]))
                                for p in picks])
        out[name] = {"macro_f1": round(_f1(y, np.concatenate(per_flow)), 3),
                     "ci95": [round(float(v), 3) for v in np.percentile(boots[name], [2.5, 97.5])],
                     "f1": dict(zip(TRAIN_CLASSES, (round(float(v), 3) for v in f1_score(
                         y, np.concatenate(per_flow), labels=list(TRAIN_CLASSES), average=None, zero_division=0))))}
    if "dragonfly" in boots and "throughput only" in boots:
        d = boots["dragonfly"] - boots["throughput only"]
        out["dragonfly - throughput only"] = {
            "macro_f1": round(out["dragonfly"]["macro_f1"] - out["throughput only"]["macro_f1"], 3),
            "ci95": [round(float(v), 3) for v in np.percentile(d, [2.5, 97.5])]}
    return out


def table(records: list[dict]) -> list[str]:
    rows = ["| trained on | scored on (flows) | sub-interval | Dragonfly (95 % CI) | throughput only | "
            "Dragonfly - throughput, paired | F1 per class (Dragonfly) | control: shuffled labels |",
            "|---|---|---|---|---|---|---|---|"]
    for rec in records:
        train = ", ".join(f"`{os.path.basename(r.rstrip('/'))}`" for r in rec["train"])
        test = ", ".join(f"`{os.path.basename(r.rstrip('/'))}`" for r in rec["test"])
        for ms, r in rec["results"].items():
            d, t, diff = r["dragonfly"], r["throughput only"], r["dragonfly - throughput only"]
            rows.append(f"| {train} | {test} ({r['test_flows']}) | {int(ms) / 1000:g} s | {d['macro_f1']:.2f} "
                        f"({d['ci95'][0]:.2f}–{d['ci95'][1]:.2f}) | {t['macro_f1']:.2f} | {diff['macro_f1']:+.2f} "
                        f"({diff['ci95'][0]:+.2f} to {diff['ci95'][1]:+.2f}) | "
                        + ", ".join(f"{c} {v:.2f}" for c, v in d["f1"].items())
                        + f" | {r['control: shuffled labels']['macro_f1']:.2f} |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", nargs="+", metavar="DIR")
    ap.add_argument("--test", nargs="+", metavar="DIR")
    ap.add_argument("--table", nargs="+", metavar="RECORD", help="print the docs' table from records written by --json-out")
    ap.add_argument("--intervals-ms", type=int, nargs="+", default=[100, 1000, 6000])
    ap.add_argument("--windows-per-flow", type=int, nargs="+", default=[40],
                    help="random sub-intervals drawn per flow: one value, or one per interval (long ones overlap)")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    if args.table:
        return print_tables(args.table, table)
    if not (args.train and args.test):
        ap.error("--train and --test results directories are needed (or --table RECORD)")
    if len(args.windows_per_flow) not in (1, len(args.intervals_ms)):
        ap.error("--windows-per-flow takes one value or one per interval")
    windows = dict(zip(args.intervals_ms, args.windows_per_flow * len(args.intervals_ms)
                       if len(args.windows_per_flow) == 1 else args.windows_per_flow))
    from estimator.dragonfly.train import DragonflyTrainer   # the training extra
    train_flows, test_flows = flows_of(args.train), flows_of(args.test)
    results = {}
    for ms in args.intervals_ms:
        train = per_flow_frames(train_flows, ms, windows[ms], 0)
        test = per_flow_frames(test_flows, ms, windows[ms], 100_000)
        if not train or not test:
            print(f"{ms} ms: no flow with that much capture, skipped", flush=True)
            continue
        x, y = np.concatenate([f for f, _ in train]), np.concatenate([yy for _, yy in train])
        row = {"windows_per_flow": windows[ms], "train_flows": len(train), "train_frames": int(len(y)), "test_flows": len(test),
               "test_frames": int(sum(len(yy) for _, yy in test))}
        preds = {}
        for name, cols in INPUTS.items():
            t0 = time.time()
            clf = DragonflyTrainer(TRAIN_CLASSES, epochs=args.epochs, patience=5).fit(x[:, :, cols], y)
            preds[name] = [clf.predict(f[:, :, cols]) for f, _ in test]
            row[f"{name} training"] = {"epochs": len(clf.history_), "train_s": round(time.time() - t0, 1)}
            print(f"{ms:5d} ms  {name:16s} trained in {row[f'{name} training']['train_s']} s", flush=True)
        control = DragonflyTrainer(TRAIN_CLASSES, epochs=args.epochs, patience=5).fit(
            x, np.random.default_rng(7).permutation(y))
        row.update(scores(test, preds))
        yt = np.concatenate([yy for _, yy in test])
        row["control: shuffled labels"] = {"macro_f1": round(_f1(yt, np.concatenate([control.predict(f) for f, _ in test])), 3)}
        print(f"{ms:5d} ms  F1 dragonfly {row['dragonfly']['macro_f1']:.3f} {row['dragonfly']['ci95']}, throughput only "
              f"{row['throughput only']['macro_f1']:.3f}, paired difference {row['dragonfly - throughput only']}, "
              f"control {row['control: shuffled labels']['macro_f1']:.3f}", flush=True)
        results[str(ms)] = row
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"provenance": stamp(), "train": args.train, "test": args.test, "classes": TRAIN_CLASSES,
                       "epochs": args.epochs, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
