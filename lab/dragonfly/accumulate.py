"""What a node's classifier knows about a flow as it goes on: one model's verdicts on a
flow's consecutive sub-intervals from its first slot at the node (what `intcc estimator
dragonfly watch` sees live), each alone and accumulated (the log of the softmax scores
summed over every interval so far: the intervals' evidence taken as independent, which
overstates the confidence, not the verdict). Macro F1 at each time since the flow's first
slot, with a 95 % CI over flows. Writes a record (date, commit, command).

    python -m lab.dragonfly.accumulate RESULTS... [--model M] [--at-s 0.5 1 2 3 5 10 15] --json-out RECORD
    python -m lab.dragonfly.accumulate --table RECORD [RECORD...]
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
from sklearn.metrics import f1_score

from estimator.dragonfly import DEFAULT_MODEL
from estimator.dragonfly.cnn import OnnxClassifier
from estimator.dragonfly.live import softmax
from experiments.runs.slot_record import labelled_flows
from lab.dragonfly import print_tables
from records.provenance import stamp

BOOTSTRAP = 1000
MIN_KNOWN = 0.9          # as live.LiveClassifier: an interval with fewer slots known is not classified


def flow_verdicts(model: OnnxClassifier, series) -> tuple[np.ndarray, np.ndarray]:
    """(ends_s, log-probabilities (k, classes)) of a flow's consecutive intervals from its
    first slot; intervals with too few known slots are left out."""
    x = series.inputs
    n = model.n_slots
    starts = np.arange(0, len(x) - n + 1, n)
    keep = [s for s in starts if np.mean(~np.isnan(x[s:s + n]).any(axis=1)) >= MIN_KNOWN]
    if not keep:
        return np.zeros(0), np.zeros((0, len(model.classes_)))
    p = softmax(np.asarray(model.decision_function(np.stack([x[s:s + n] for s in keep])), dtype=float))
    return (np.array(keep) + n) / 1000.0, np.log(np.clip(p, 1e-9, 1.0))


def at_times(model, flows: list, times_s: list[float]) -> dict:
    """Per time: the labels and the two verdicts (last interval alone, accumulated) of the
    flows that have an interval ending by then and whose capture lasts that long."""
    out = {t: {"y": [], "alone": [], "accumulated": [], "flow": []} for t in times_s}
    classes = np.array(model.classes_)
    for i, (series, cca) in enumerate(flows):
        ends, logp = flow_verdicts(model, series)
        span_s = len(series.inputs) / 1000.0
        for t in times_s:
            upto = ends <= t + 1e-9
            if not upto.any() or span_s < t:
                continue
            out[t]["y"].append(cca)
            out[t]["alone"].append(classes[logp[upto][-1].argmax()])
            out[t]["accumulated"].append(classes[logp[upto].sum(axis=0).argmax()])
            out[t]["flow"].append(i)
    return out


def _f1_ci(y, pred, classes, seed) -> tuple[float, list]:
    y, pred = np.array(y), np.array(pred)
    rng = np.random.default_rng(seed)
    boot = [f1_score(y[p], pred[p], labels=classes, average="macro", zero_division=0)
            for p in (rng.integers(0, len(y), len(y)) for _ in range(BOOTSTRAP))]
    return (round(float(f1_score(y, pred, labels=classes, average="macro", zero_division=0)), 3),
            [round(float(v), 3) for v in np.percentile(boot, [2.5, 97.5])])


def table(records: list[dict]) -> list[str]:
    times = sorted({float(t) for r in records for t in r["at_s"]})
    rows = ["| model | scored on | verdict | " + " | ".join(f"{t:g} s" for t in times) + " |",
            "|---|---|---|" + "---|" * len(times)]
    for rec in records:
        test = ", ".join(f"`{os.path.basename(r.rstrip('/'))}`" for r in rec["results"])
        for kind in ("alone", "accumulated"):
            cells = []
            for t in times:
                v = rec["at_s"].get(f"{t:g}")
                cells.append(f"{v[kind]['macro_f1']:.2f} ({v['flows']})" if v else "–")
            label = "last interval alone" if kind == "alone" else "every interval so far"
            rows.append(f"| `{os.path.basename(rec['model'])}` | {test} | {label} | " + " | ".join(cells) + " |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="*")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--at-s", type=float, nargs="+", default=[0.5, 1, 2, 3, 5, 10, 15])
    ap.add_argument("--table", nargs="+", metavar="RECORD")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    if args.table:
        return print_tables(args.table, table)
    if not args.results:
        ap.error("RESULTS directories are needed (or --table RECORD)")
    model = OnnxClassifier(args.model)
    flows = [(s, c) for r in args.results for _, s, c in labelled_flows(r) if c in model.classes_]
    got = at_times(model, flows, args.at_s)
    res = {}
    for t, v in got.items():
        if not v["y"]:
            continue
        row = {"flows": len(v["y"])}
        for kind in ("alone", "accumulated"):
            f1, ci = _f1_ci(v["y"], v[kind], list(model.classes_), seed=int(t * 1000))
            row[kind] = {"macro_f1": f1, "ci95": ci}
        res[f"{t:g}"] = row
        print(f"{t:5g} s  {row['flows']:3d} flows  alone {row['alone']['macro_f1']:.3f} {row['alone']['ci95']}  "
              f"accumulated {row['accumulated']['macro_f1']:.3f} {row['accumulated']['ci95']}", flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"provenance": stamp(), "model": os.path.relpath(args.model), "results": args.results,
                       "at_s": res}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
