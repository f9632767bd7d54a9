"""The passive features' forest as a stage of active identification (estimator/identify/
forest.py): its rows from recorded probe runs, its training, and the ablation replay.

Rows: every recorded run of ``mirror active`` (``--record-telemetry``), at the bottleneck the
Identifier picks, every 0.5 s from 1 s after the competitor's first packet there to the
run's end; the passive features but Table I (forest.FEATURES), labelled with the
competitor's CCA, grouped by run. Training: a Random Forest (TREES below, seed 0);
``--shuffle-labels`` trains the control that must come out at chance (runs' labels permuted,
rows of a run kept together).

    python -m lab.estimator.forest_stage rows RESULTS... --out ROWS.npz
    python -m lab.estimator.forest_stage train ROWS.npz... --out MODEL.joblib [--shuffle-labels]
    python -m lab.estimator.forest_stage score MODEL.joblib HELD_OUT_ROWS.npz
    python -m lab.estimator.early_evidence RESULTS... [--set FOREST_MODEL=MODEL.joblib] --json-out F
    python -m lab.estimator.forest_stage ablation F_WITHOUT F_WITH... --label probe --label "probe + forest"
"""
from __future__ import annotations

import argparse
import sys
from multiprocessing import Pool

import numpy as np

ROW_EVERY_S = 0.5
FIRST_ROW_S = 1.0
#: the forest: as the passive model's but 100 trees with leaves of 5 or more rows (on the
#: development seeds' held-out rows as right as 200 trees of unbounded leaves, 0.854 and 0.850,
#: at a tenth of the size: 1.6 MB compressed)
TREES, MAX_DEPTH, MIN_LEAF = 100, 20, 5


def run_rows(job):
    """(X, y, run name) of one recorded run; None where it has no competitor or flow 1."""
    run_dir, record = job
    from estimator.identify.forest import NodeView
    from experiments.runs.telemetry_record import read_records
    from lab.estimator.identify_replay import flow1_base_rtt_s, flow1_id, recorded_series
    from estimator.identify.bottleneck import BIN_S
    own = flow1_id(run_dir)
    if own is None:
        return None
    base_rtt_s = flow1_base_rtt_s(record["params"])
    s, idf = recorded_series(run_dir, own, base_rtt_s)
    if s is None or s.comp_first_bin() is None:
        return None
    view = NodeView(keep_s=None)
    for _, rec in read_records(run_dir, types=("hop",)):
        if rec.node_id == idf.node_id:
            view.add(rec)
    start = s.t0_s + s.comp_first_bin() * BIN_S + FIRST_ROW_S
    at = np.arange(start, s.t0_s + s.n * BIN_S, ROW_EVERY_S)
    if not at.size:
        return None
    X = view.features(own, at, base_rtt_s)
    return X, [record["competitor"]] * len(at), record["run"] + "@" + run_dir


def rows_main(args) -> int:
    from lab.estimator.identify_replay import recorded_runs
    jobs = recorded_runs(args.results, algorithm="mirror active")
    X, y, groups = [], [], []
    with Pool(args.jobs) as pool:
        for i, out in enumerate(pool.imap_unordered(run_rows, jobs), 1):
            if out is not None:
                X.append(out[0])
                y += out[1]
                groups += [out[2]] * len(out[1])
            if i % 20 == 0 or i == len(jobs):
                print(f"{i}/{len(jobs)} runs read", file=sys.stderr, flush=True)
    from estimator.identify.forest import FEATURES
    np.savez_compressed(args.out, X=np.vstack(X), y=np.asarray(y), groups=np.asarray(groups),
                        features=np.asarray(FEATURES), results=np.asarray(args.results))
    print(f"{len(y)} rows of {len(set(groups))} runs -> {args.out}")
    return 0


def train_main(args) -> int:
    import joblib
    from sklearn.ensemble import RandomForestClassifier
    from records.provenance import stamp
    from telemetry.ccas import CCA_LABELS
    parts = [np.load(p) for p in args.rows]
    X = np.nan_to_num(np.vstack([p["X"] for p in parts]))
    y = np.concatenate([p["y"] for p in parts])
    groups = np.concatenate([p["groups"] for p in parts])
    if args.shuffle_labels:           # whole runs relabelled: a run's rows keep one label
        runs = np.unique(groups)
        label = dict(zip(runs, np.random.default_rng(args.seed).permutation([y[groups == g][0] for g in runs])))
        y = np.asarray([label[g] for g in groups])
    forest = RandomForestClassifier(n_estimators=TREES, max_depth=MAX_DEPTH, min_samples_leaf=MIN_LEAF,
                                    random_state=args.seed, n_jobs=args.jobs)
    forest.fit(X, y)
    missing = set(CCA_LABELS) - set(forest.classes_)
    if missing:
        raise SystemExit(f"no rows of {', '.join(sorted(missing))}: the stage needs every CCA")
    made = stamp()
    from estimator.identify.forest import FEATURES
    joblib.dump({"forest": forest, "features": list(FEATURES), "classes": list(CCA_LABELS),
                 "provenance": made, "results": [str(r) for p in parts for r in p["results"]],
                 "rows": len(y), "runs": int(len(np.unique(groups))), "shuffled_labels": args.shuffle_labels}, args.out,
                compress=3)
    print(f"forest on {len(y)} rows of {len(np.unique(groups))} runs -> {args.out}")
    return 0


def score_main(args) -> int:
    """Per-row accuracy of a stage's forest on rows it did not train on, overall and by the
    time since the competitor's first packet (rows of a run come every ROW_EVERY_S from
    FIRST_ROW_S)."""
    import joblib
    model = joblib.load(args.model)
    d = np.load(args.rows)
    X, y, groups = np.nan_to_num(d["X"]), d["y"], d["groups"]
    since = np.zeros(len(y))
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        since[idx] = FIRST_ROW_S + ROW_EVERY_S * np.arange(len(idx))
    right = model["forest"].predict(X) == y
    print(f"rows {len(y)} of {len(np.unique(groups))} runs: right {right.mean():.3f}")
    for lo, hi in ((1, 3), (3, 5), (5, 10), (10, 20), (20, 60)):
        sel = (since >= lo) & (since < hi)
        if sel.any():
            print(f"  {lo:>2}-{hi:<2} s after the competitor's first packet: {right[sel].mean():.3f} ({sel.sum()} rows)")
    for c in sorted(set(y)):
        print(f"  {c}: {right[y == c].mean():.3f}")
    return 0


#: per run, each a 0/1: what early_evidence's table counts, as the issue's targets ask
ABLATION_METRICS = (("best right at 3 s", "best3"), ("best right at 5 s", "best5"), ("best right at 10 s", "best10"),
                    ("commit right within 3 s", "commit3"), ("commit right within 8 s", "commit8"),
                    ("wrong first commit", "wrong_first"), ("first commit right", "first_right"),
                    ("committed at the end right", "final_right"), ("best at the end right", "best_end"))


def run_metrics(r: dict) -> dict:
    """One replayed run (identify_replay's row) as ABLATION_METRICS' 0/1 values."""
    def best_right(c):
        if r.get("passive"):             # the passive estimator's verdict rows: its estimate then
            said = r["best_at"].get(c)
            return int(said is not None and said[0] == r["truth"])
        post = r["posterior_at"].get(c)
        if not post:
            return 0
        top = max(post.values())
        return int(post[r["truth"]] == top and sum(v == top for v in post.values()) == 1)
    commit = r["first_commit"]
    after = commit[0] - r["competitor_at_s"] if commit and r.get("competitor_at_s") is not None else None
    right = commit is not None and commit[1] == r["truth"]
    return {"best3": best_right("3.0"), "best5": best_right("5.0"), "best10": best_right("10.0"),
            "commit3": int(right and after is not None and after <= 3.0),
            "commit8": int(right and after is not None and after <= 8.0),
            "wrong_first": int(commit is not None and not right), "first_right": int(right),
            "final_right": int(r.get("final_verdict") == r["truth"]), "best_end": int(r["final_best"] == r["truth"])}


def ablation_table(paths, labels) -> str:
    """Counts per variant (early_evidence or identify_replay records; a passive run's from its
    verdict rows and switches) on the networks all of them ran, and each variant after the
    first against it, paired over networks (a bootstrap 95 % CI of the mean difference)."""
    import json
    from records import bootstrap
    variants = []
    for p in paths:
        with open(p) as f:
            rows = [r for r in json.load(f)["runs"] if "error" not in r]
        # a network is its parameters and its competitor: the same in every mode's run of it
        variants.append({(r["truth"], json.dumps(r["params"], sort_keys=True)): run_metrics(r) for r in rows})
    common = sorted(set.intersection(*(set(v) for v in variants)))
    head = "| variant | runs | " + " | ".join(name for name, _ in ABLATION_METRICS) + " |"
    lines = [head, "|---" * (len(ABLATION_METRICS) + 2) + "|"]
    for label, v in zip(labels, variants):
        lines.append(f"| {label} | {len(common)} | " + " | ".join(str(sum(v[k][m] for k in common))
                                                                   for _, m in ABLATION_METRICS) + " |")
    for label, v in zip(labels[1:], variants[1:]):
        cells = []
        for _, m in ABLATION_METRICS:
            d = np.asarray([v[k][m] - variants[0][k][m] for k in common], dtype=float)
            lo, hi = bootstrap.mean_interval(d)
            cells.append(f"{d.mean():+.3f} ({lo:+.3f} to {hi:+.3f})")
        lines.append(f"| {label} − {labels[0]}, paired (95 % CI) | {len(common)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ablation_main(args) -> int:
    labels = args.label or [f"variant {i}" for i in range(len(args.records))]
    if len(labels) != len(args.records):
        raise SystemExit(f"{len(args.records)} records and {len(labels)} --label: one label each")
    print(ablation_table(args.records, labels))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rows", help="feature rows of recorded probe runs")
    r.add_argument("results", nargs="+")
    r.add_argument("--out", required=True)
    r.add_argument("--jobs", type=int, default=2)
    t = sub.add_parser("train", help="the stage's forest from rows")
    t.add_argument("rows", nargs="+")
    t.add_argument("--out", required=True)
    t.add_argument("--shuffle-labels", action="store_true", help="the control: runs' labels permuted")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--jobs", type=int, default=1)
    c = sub.add_parser("score", help="per-row accuracy on held-out rows")
    c.add_argument("model")
    c.add_argument("rows")
    a = sub.add_parser("ablation", help="early_evidence records of the same runs side by side, paired")
    a.add_argument("records", nargs="+", help="early_evidence --json-out records; the first is the baseline")
    a.add_argument("--label", action="append", help="a name per record, in order")
    args = ap.parse_args(argv)
    return {"rows": rows_main, "train": train_main, "score": score_main, "ablation": ablation_main}[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
