"""Dragonfly's macro F1 against the sub-interval's length (the paper's Figs. 6, 7 and 11):
per interval, a model trained on the captures of some scenario results and scored on
flows of others never trained on, beside the throughput-only input (ingress bytes alone,
DeePCCI-like) and a control trained on shuffled labels that must stay near chance. CIs
resample flows (a flow's sub-intervals are not independent); "dragonfly - throughput" is
paired: both models scored on the same resampled flows' sub-intervals. With ``--flight``
(captures with the ACK side) also the paper's two inputs and the flow's bytes in flight
beyond the node, paired against the paper's two. Writes a record (date, commit, command).

    python -m lab.dragonfly.intervals --train DIR... --test DIR... [--intervals-ms 100 1000 6000]
        [--windows-per-flow 40 40 5] [--epochs 20] [--flight] --json-out RECORD
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
from estimator.dragonfly.dataset import FEATURES, FLIGHT_FEATURES, frames
from experiments.runs.slot_record import labelled_flows
from lab.dragonfly import print_tables
from records.provenance import stamp

INPUTS = {"dragonfly": [0, 1], "throughput only": [1]}
FLIGHT_INPUTS = {**INPUTS, "dragonfly + flight": [0, 1, 2]}
#: models trained with another scaling than the paper's per-frame maximum (cnn.normalised)
SCALED = {"dragonfly + flight, packets": ([0, 1, 2], "packets")}
#: models trained on frames in round trips (rtt_units.py)
IN_ROUND_TRIPS = {"dragonfly + flight, round trips": [0, 1, 2], "dragonfly, round trips": [0, 1]}
#: how the tables name the models
NAMES = {"dragonfly": "CBIQ + ingress (the paper's), max", "throughput only": "ingress only, max",
         "dragonfly + flight": "CBIQ + ingress + flight, max",
         "dragonfly + flight, packets": "CBIQ + ingress + flight, packets",
         "dragonfly + flight, round trips": "CBIQ + ingress + flight, max, in round trips",
         "dragonfly, round trips": "CBIQ + ingress, max, in round trips"}
#: the paired differences reported: (better, baseline)
PAIRS = (("dragonfly", "throughput only"), ("dragonfly + flight", "dragonfly"),
         ("dragonfly + flight, packets", "dragonfly + flight"),
         ("dragonfly + flight, round trips", "dragonfly + flight"), ("dragonfly, round trips", "dragonfly"))
BOOTSTRAP = 1000


def flows_of(results: list[str]) -> list:
    return [(s, c) for r in results for _, s, c in labelled_flows(r) if c in TRAIN_CLASSES]


def per_flow_frames(flows: list, n_slots: int, per_flow: int, seed: int, features=FEATURES) -> list:
    """[(frames, labels)] per flow with at least one sub-interval of ``n_slots``."""
    out = [frames([s], [c], n_slots, per_flow=per_flow, seed=seed + i, features=features)
           for i, (s, c) in enumerate(flows)]
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
    for better, base in PAIRS:
        if better in boots and base in boots:
            d = boots[better] - boots[base]
            out[f"{better} - {base}"] = {
                "macro_f1": round(out[better]["macro_f1"] - out[base]["macro_f1"], 3),
                "ci95": [round(float(v), 3) for v in np.percentile(d, [2.5, 97.5])]}
    return out


def _data_names(rec: dict) -> tuple[str, str]:
    """The record's training and test results directories, by name, for a table."""
    return tuple(", ".join(f"`{os.path.basename(r.rstrip('/'))}`" for r in rec[k]) for k in ("train", "test"))


def _with_ci(m: dict) -> str:
    return f"{m['macro_f1']:.2f} ({m['ci95'][0]:.2f}–{m['ci95'][1]:.2f})"


def _signed_with_ci(d: dict) -> str:
    return f"{d['macro_f1']:+.2f} ({d['ci95'][0]:+.2f} to {d['ci95'][1]:+.2f})"


def _per_class(m: dict) -> str:
    return ", ".join(f"{c} {v:.2f}" for c, v in m["f1"].items())


def _results(records: list[dict]):
    """(trained on, scored on, sub-interval in ms, its results) of every record's intervals."""
    for rec in records:
        train, test = _data_names(rec)
        for ms, r in rec["results"].items():
            yield train, test, ms, r


def flight_table(records: list[dict]) -> list[str]:
    """The records written with --flight: each model's macro F1 with its CI and F1 per class,
    and the paired differences, one row per model."""
    rows = ["| trained on | scored on (flows) | sub-interval | inputs, scaling | macro F1 (95 % CI) | paired against | "
            "difference (95 % CI) | F1 per class | control: shuffled labels |",
            "|---|---|---|---|---|---|---|---|---|"]
    for train, test, ms, r in _results(records):
        for name in [*FLIGHT_INPUTS, *SCALED, *IN_ROUND_TRIPS]:
            if name not in r:
                continue
            m = r[name]
            base = next((b for better, b in PAIRS if better == name and f"{better} - {b}" in r), None)
            diff = r[f"{name} - {base}"] if base else None
            label = NAMES.get(name, name)
            rows.append(f"| {train} | {test} ({r['test_flows']}) | {int(ms) / 1000:g} s | {label} | {_with_ci(m)} | "
                        f"{NAMES.get(base, base) if base else '–'} | {_signed_with_ci(diff) if diff else '–'} | "
                        f"{_per_class(m)} | {r['control: shuffled labels']['macro_f1']:.2f} |")
    return rows


def table(records: list[dict]) -> list[str]:
    rows = ["| trained on | scored on (flows) | sub-interval | Dragonfly (95 % CI) | throughput only | "
            "Dragonfly - throughput, paired | F1 per class (Dragonfly) | control: shuffled labels |",
            "|---|---|---|---|---|---|---|---|"]
    for train, test, ms, r in _results(records):
        d, t, diff = r["dragonfly"], r["throughput only"], r["dragonfly - throughput only"]
        rows.append(f"| {train} | {test} ({r['test_flows']}) | {int(ms) / 1000:g} s | {_with_ci(d)} | "
                    f"{t['macro_f1']:.2f} | {_signed_with_ci(diff)} | {_per_class(d)} | "
                    f"{r['control: shuffled labels']['macro_f1']:.2f} |")
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
    ap.add_argument("--flight", action="store_true",
                    help="also train on the bytes in flight beyond the node (captures with the ACK side)")
    ap.add_argument("--only", nargs="+", metavar="MODEL", help="train only these of the models (their names as in "
                    "the record), e.g. 'dragonfly + flight' 'dragonfly + flight, packets'")
    ap.add_argument("--rtt-units", action="store_true",
                    help="with --flight, also the three inputs on a time axis in round trips (lab/dragonfly/rtt_units.py)")
    ap.add_argument("--packets", action="store_true",
                    help="with --flight, also the three inputs scaled in packets rather than by each frame's maximum")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    if args.table:
        return print_tables(args.table, flight_table if args.flight else table)
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
        features = FLIGHT_FEATURES if args.flight else FEATURES
        train = per_flow_frames(train_flows, ms, windows[ms], 0, features)
        test = per_flow_frames(test_flows, ms, windows[ms], 100_000, features)
        if not train or not test:
            print(f"{ms} ms: no flow with that much capture, skipped", flush=True)
            continue
        x, y = np.concatenate([f for f, _ in train]), np.concatenate([yy for _, yy in train])
        row = {"windows_per_flow": windows[ms], "train_flows": len(train), "train_frames": int(len(y)), "test_flows": len(test),
               "test_frames": int(sum(len(yy) for _, yy in test))}
        preds = {}
        models = {name: (cols, "max") for name, cols in (FLIGHT_INPUTS if args.flight else INPUTS).items()}
        if args.flight and args.rtt_units:
            models.update({name: (cols, "rtt") for name, cols in IN_ROUND_TRIPS.items()})
        if args.flight and args.packets:
            models.update(SCALED)
        if args.only:
            models = {k: v for k, v in models.items() if k in args.only}
        for name, (cols, scaling) in models.items():
            t0 = time.time()
            if scaling == "rtt":          # the same frames, their time axis in round trips
                from lab.dragonfly.rtt_units import in_round_trips
                clf = DragonflyTrainer(TRAIN_CLASSES, epochs=args.epochs, patience=5).fit(in_round_trips(x)[:, :, cols], y)
                preds[name] = [clf.predict(in_round_trips(f)[:, :, cols]) for f, _ in test]
            else:
                clf = DragonflyTrainer(TRAIN_CLASSES, epochs=args.epochs, patience=5, scaling=scaling).fit(
                    x[:, :, cols], y)
                preds[name] = [clf.predict(f[:, :, cols]) for f, _ in test]
            row[f"{name} training"] = {"epochs": len(clf.history_), "train_s": round(time.time() - t0, 1)}
            print(f"{ms:5d} ms  {name:16s} trained in {row[f'{name} training']['train_s']} s", flush=True)
        control = DragonflyTrainer(TRAIN_CLASSES, epochs=args.epochs, patience=5).fit(
            x, np.random.default_rng(7).permutation(y))     # every input, labels shuffled
        row.update(scores(test, preds))
        yt = np.concatenate([yy for _, yy in test])
        row["control: shuffled labels"] = {"macro_f1": round(_f1(yt, np.concatenate([control.predict(f) for f, _ in test])), 3)}
        print(f"{ms:5d} ms  F1 " + ", ".join(f"{k} {v['macro_f1']:.3f} {v.get('ci95', '')}" for k, v in row.items()
                                              if isinstance(v, dict) and "macro_f1" in v), flush=True)
        results[str(ms)] = row
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"provenance": stamp(), "train": args.train, "test": args.test, "classes": TRAIN_CLASSES,
                       "epochs": args.epochs, "inputs": list(features), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
