"""Would the competitor's own RTT help? (a study of 2026-11-29)

Every wrong live verdict of release hard-v4 had a competitor whose base RTT was 2-3.7x flow
1's, and the own-loss cut features read a competitor's answer in flow 1's RTT. Before
estimating the competitor's RTT, this measures what knowing it exactly would give: pooled
5-fold cross-validation (whole runs, folds as ``evaluate.fold_of``) of the shared forest on
the given datasets, with the hard-v4 features and, beside them, the same with

  oracle_cut       the own-loss cut features (ol_*, ol_qcut*) read in the competitor's
                   true base RTT (flow 1's times the run's rtt_factor) instead of flow 1's
  oracle_cut_add   those columns added beside the usual ones
  rtt_factor       the true RTT factor itself as a feature

and prints each variant's accuracy and its paired per-run difference to the baseline with
a bootstrap 95 % CI. The true RTT is not known to a sender: this is a bound, not a model.

    python -m lab.estimator.competitor_rtt_oracle [--out FILE.json] DATA_DIR...
"""
from __future__ import annotations

import json

import numpy as np

from estimator.evaluate import fold_of, predictions, stack, tables
from estimator.own_loss_features import (OWN_LOSS_FEATURES, QUEUE_CUT_FEATURES, own_loss_queue_response,
                                         own_loss_response)
from estimator.int_features import FEATURE_SETS, busy_pps
from estimator.model import CCAEstimator
from lab.estimator import paired, run_inputs, runs_with_columns

FEATURE_SET = "table1+int+flows+response+dips+ownloss+qcut"
VARIANTS = ("baseline", "oracle_cut", "oracle_cut_add", "rtt_factor")
FOLDS = 5
FOREST = {"n_estimators": [100], "max_depth": [20]}


def oracle_columns(path: str) -> tuple:
    """(run key, the own-loss and queue-cut columns in the competitor's true RTT and the
    RTT factor, at the rows load_dataset keeps)."""
    r = run_inputs(path)
    factor = float(r["run"].meta["rtt_factor"])
    comp_rtt_s = r["base_rtt_s"] * factor
    cols = np.hstack([own_loss_response(r["comp"], r["at_t"], comp_rtt_s),
                      own_loss_queue_response(r["comp"], r["series"], r["at_t"], comp_rtt_s,
                                              busy_pps(r["series"], r["at_t"])),
                      np.full((len(r["at_t"]), 1), factor)])
    return tuple(r["run"].key), cols[r["keep"]]


def variant_runs(runs, oracle: dict, name: str) -> list:
    names = list(FEATURE_SETS[FEATURE_SET])
    cut_idx = [names.index(n) for n in OWN_LOSS_FEATURES + QUEUE_CUT_FEATURES]
    n_cut = len(cut_idx)
    out = []
    for r in runs:
        X, extra = r.X.copy(), oracle[tuple(r.key)]
        if name == "oracle_cut":
            X[:, cut_idx] = extra[:, :n_cut]
        elif name == "oracle_cut_add":
            X = np.hstack([X, extra[:, :n_cut]])
        elif name == "rtt_factor":
            X = np.hstack([X, extra[:, n_cut:]])
        out.append(r.with_features(X))
    return out


def cross_validated(runs, fold) -> tuple[dict, dict]:
    preds = []
    for k in range(FOLDS):
        X, y, local, groups = stack([r for r, f in zip(runs, fold) if f != k])
        model = CCAEstimator(grid=FOREST, seed=0, n_jobs=-1, shared=True,
                             feature_names=[f"f{i}" for i in range(X.shape[1])]).fit(X, y, local, groups)
        preds += predictions(model, [r for r, f in zip(runs, fold) if f == k])
    per_run = {(int(m["seed"]), int(m["index"])): float(np.mean(p == m["cca2"])) for m, _, p in preds}
    return tables(preds), per_run


RTT_BANDS = ((0.0, 1.0), (1.0, 2.0), (2.0, 4.01))
SHARE_BANDS = ((0.0, 0.3), (0.3, 0.6), (0.6, 1.01))


def by_rtt_band(runs, per_run: dict) -> dict:
    """The baseline's per-run row accuracy by the competitor's RTT factor band, per
    competitor CCA and per band of the competitors' goodput share: is a long-RTT
    competitor hard because it gets less of the link, or by itself?"""
    rows = []
    for r in runs:
        goodput = r.meta["goodput_mbps"]
        share = sum(goodput[1:]) / max(sum(goodput), 1e-9)
        rows.append((float(r.meta["rtt_factor"]), share, r.competitor_cca, per_run[tuple(r.key)]))

    def mean_in(keep):
        v = [acc for f, sh, c, acc in rows if keep(f, sh, c)]
        return {"runs": len(v), "accuracy": float(np.mean(v)) if v else None}
    out = {}
    for lo, hi in RTT_BANDS:
        band = f"rtt {lo:g}-{min(hi, 4):g}x"
        out[band] = {c: mean_in(lambda f, sh, cc, c=c: lo <= f < hi and cc == c) for c in ("bbr", "cubic", "reno", "vegas")}
        out[band].update({f"share {a:g}-{min(b, 1):g}": mean_in(lambda f, sh, cc, a=a, b=b: lo <= f < hi and a <= sh < b)
                          for a, b in SHARE_BANDS})
    return out


def main(argv=None) -> None:
    args, runs, oracle = runs_with_columns(__doc__, argv, oracle_columns, FEATURE_SET,
                                           "write every variant's figures and per-run accuracy here (JSON)")
    fold = fold_of(runs, FOLDS, 0)
    print(f"{len(runs)} runs, {FOLDS}-fold CV, shared forest {FOREST}", flush=True)
    results, base = {}, None
    for name in VARIANTS:
        res, per_run = cross_validated(variant_runs(runs, oracle, name), fold)
        base = per_run if base is None else base
        results[name] = {"mean_accuracy": res["mean_accuracy"], "vote50": res["table4"]["50"]["mean"],
                         "per_run_mean": float(np.mean(list(per_run.values()))),
                         "paired_vs_baseline": paired(base, per_run),
                         "per_run": {f"{s}:{i}": v for (s, i), v in sorted(per_run.items())}}
        p = results[name]["paired_vs_baseline"]
        print(f"{name:15} mean {res['mean_accuracy']:.3f}  w50 {res['table4']['50']['mean']:.3f}  "
              f"per run {results[name]['per_run_mean']:.3f}  paired {p['mean']:+.3f} "
              f"({p['ci95'][0]:+.3f} to {p['ci95'][1]:+.3f}; better {p['better_runs']}, worse {p['worse_runs']})",
              flush=True)
    bands = by_rtt_band(runs, {(s, i): results["baseline"]["per_run"][f"{s}:{i}"] for s, i in (r.key for r in runs)})
    for band, cells in bands.items():
        print(band, "  ".join(f"{k} {v['accuracy']:.2f} ({v['runs']})" for k, v in cells.items() if v["runs"]))
    results["baseline_by_rtt_band"] = bands
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
