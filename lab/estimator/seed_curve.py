"""Accuracy on an unseen seed against the number of collections trained on (a study of
2026-11-29): the learning curve where it matters, on a test seed none of the models saw.

Trains release hard-v4's recipe (its features, the shared forest `train --grid cv` builds)
on the first 1, 2, ... N training collections, in the order given, scores each model once
on the test collection, and prints per point the mean row accuracy, the w = 50 vote, the
per-run row accuracy and its paired difference to the point before (bootstrap 95 % CI).
``--model FILE`` scores shipped models on the same test runs beside them. The recipe is
fixed before the test runs are seen: nothing here is chosen on them.

    python -m lab.estimator.seed_curve --test data/estimator/hard-seed2805 \\
        [--model estimator/models/cca_rf_int_qcut_hard.joblib] [--out F.json] TRAIN_DIR...
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from estimator.cli import CV_FOREST
from estimator.evaluate import load_dataset, not_trained_on, predictions, tables, train
from estimator.int_features import feature_set_of
from estimator.model import CCAEstimator
from lab.estimator import paired

FEATURE_SET = "table1+int+flows+response+dips+ownloss+qcut"


def scored(model, test_runs) -> tuple[dict, dict]:
    """(Tables III/IV, per-run row accuracy keyed "seed:index") of ``model`` on ``test_runs``."""
    preds = predictions(model, test_runs)
    per_run = {f"{int(m['seed'])}:{int(m['index'])}": float(np.mean(p == m["cca2"])) for m, _, p in preds}
    return tables(preds), per_run


def summary(res: dict, per_run: dict) -> dict:
    return {"mean_accuracy": res["mean_accuracy"], "vote50": res["table4"]["50"]["mean"],
            "per_run_mean": float(np.mean(list(per_run.values()))), "test_runs": len(per_run),
            "table3": res["table3"], "stable50": res["time_to_stable_correct"]["50"], "per_run": per_run}


def line(name: str, s: dict) -> str:
    return (f"{name:34} mean {s['mean_accuracy']:.3f}  w50 {s['vote50']:.3f}  per run {s['per_run_mean']:.3f}"
            + (f"  paired {s['paired']['mean']:+.3f} ({s['paired']['ci95'][0]:+.3f} to {s['paired']['ci95'][1]:+.3f};"
               f" better {s['paired']['better_runs']}, worse {s['paired']['worse_runs']})" if "paired" in s else ""))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("train", nargs="+", help="training collections, in the order they join the training")
    ap.add_argument("--test", required=True, help="the unseen collection every model is scored on")
    ap.add_argument("--model", action="append", default=[], help="a trained model to score beside (repeatable)")
    ap.add_argument("--out", help="write every point's figures and per-run accuracy here (JSON)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    test_runs = load_dataset([args.test], FEATURE_SET)
    collections = [load_dataset([d], FEATURE_SET) for d in args.train]
    print(f"loaded {len(test_runs)} test runs and {sum(map(len, collections))} training runs "
          f"in {time.monotonic() - t0:.0f} s", flush=True)
    results = {"test": args.test, "feature_set": FEATURE_SET, "forest": CV_FOREST, "points": [], "models": {}}
    before = None
    for k in range(1, len(collections) + 1):
        runs = [r for c in collections[:k] for r in c]
        model = train(runs, CV_FOREST, seed=0, feature_set=FEATURE_SET, shared=True)
        s = summary(*scored(model, test_runs))
        if before is not None:
            s["paired"] = paired(before, s["per_run"])
        before = s["per_run"]
        s.update(collections=args.train[:k], train_runs=len(runs))
        results["points"].append(s)
        print(line(f"{k} collection(s), {len(runs)} runs", s), flush=True)
    for path in args.model:
        model = CCAEstimator.load(path)
        if feature_set_of(model.feature_names) != FEATURE_SET:
            raise SystemExit(f"{path}: features {feature_set_of(model.feature_names)!r}, not {FEATURE_SET!r}")
        kept, left_out = not_trained_on(test_runs, model)
        s = summary(*scored(model, kept))
        last = results["points"][-1]["per_run"]
        s["paired"] = paired(s["per_run"], {k: last[k] for k in s["per_run"]})   # the last point minus this model
        results["models"][path] = s
        print(line(path, s) + f"  (paired: the last point minus it; {left_out} test runs it trained on left out)",
              flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
