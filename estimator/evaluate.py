"""Held-out evaluation (the ML-fairness paper, Tables III and IV) on collected runs, split
by experiment: no run contributes rows to both training and test sets."""
from __future__ import annotations

import re

import numpy as np

from .dataset import CCAS, COMPETITOR_SETTLE_S, Run, load_raw, load_run, run_paths, tcp_competitors
from .features import TraceError
from .flow_features import CompetitorSeries
from .int_features import FEATURE_SETS, select_features, uses_flows
from .int_series import record_stream
from .model import CCAEstimator
from .model_selection import assign_folds
from .sink_view import stored_competitors, telemetry_features
from .vote import first_stable_correct, vote_series

VOTE_WINDOWS = (1, 10, 20, 30, 40, 50)
STABLE_WINDOWS = (10, 50)


def load_dataset(data_dirs, feature_set: str = "table1", settle_s: float | None = COMPETITOR_SETTLE_S):
    """Every collected run (:class:`Run`) of one dataset directory or several, X with the
    columns of ``feature_set``, with the rows taken once its competitor had been sending
    for ``settle_s`` (None: every row)."""
    if feature_set not in FEATURE_SETS:
        raise TraceError(f"unknown feature set {feature_set!r} (known: {', '.join(FEATURE_SETS)})")
    paths = []
    for data_dir in [data_dirs] if isinstance(data_dirs, str) else data_dirs:
        found = run_paths(data_dir)
        if not found:
            raise TraceError(f"{data_dir}: no collected runs (runs/*.npz); run 'intcc estimator collect' first")
        paths += found
    runs = [load_run(p) for p in paths]
    keys = [tuple(r.key) for r in runs]
    if len(set(keys)) < len(keys):
        # a run's identity is (collection seed, index): two collections of one seed would
        # put one network on both sides of a split
        dup = next(k for k in keys if keys.count(k) > 1)
        raise TraceError(f"run (seed {dup[0]}, index {dup[1]}) is in the data twice: datasets to combine "
                         "must come from collections of different seeds")
    if feature_set != "table1":
        names = FEATURE_SETS[feature_set]
        flows = uses_flows(names)
        runs = [r.with_features(select_features(np.hstack([r.X, run_int_features(p, flows=flows, meta=r.meta)]), names))
                for p, r in zip(paths, runs)]
    if settle_s is not None:
        runs = [r.with_competitor_present(settle_s) for r in runs]
    return runs


def run_int_features(path: str, per_packet: bool = False, flows: bool = False, meta: dict | None = None) -> np.ndarray:
    """INT features of a collected run at the ACKs its Table I rows were taken at, from
    the record stream a live sender receives (one record per ~10 ms: int_features.
    record_stream), or with ``per_packet`` from every packet's telemetry (how models were
    trained before the per-flow packets were kept; a compact run has only the records). With ``flows`` the
    competitors' flow features follow (flow_features.py; the run must have kept the
    competitors' packets; ``meta``: the run's, if already loaded)."""
    raw = load_raw(path)
    if "int_records" in raw:                              # a compact run (dataset.compact_raw)
        if per_packet:
            raise TraceError(f"{path}: a compact run keeps the record stream only, not every packet")
        series = np.column_stack([raw["int_record_t"], raw["int_records"].astype(float)])
        at_t, base_rtt = raw["sample_t"], raw["sample_base_rtt_s"].astype(float)
        t0 = float(raw["int_record_t"][0])
    elif "int_record_series" in raw and "sample_idx" in raw and not per_packet:
        idx = raw["sample_idx"]
        base_rtt = np.minimum.accumulate(raw["rtt_s"].astype(float))[idx]
        at_t = raw["ack_t"][idx]
        series = raw["int_record_series"]
        t0 = float(raw["int_series"][0, 0]) if "int_series" in raw else float(series[0, 0])
    elif "int_series" in raw and "sample_idx" in raw:
        idx = raw["sample_idx"]
        base_rtt = np.minimum.accumulate(raw["rtt_s"].astype(float))[idx]     # known to the sender by then
        at_t = raw["ack_t"][idx]
        t0 = float(raw["int_series"][0, 0])
        series = raw["int_series"] if per_packet else record_stream(raw["int_series"])
    else:
        raise TraceError(f"{path}: no INT series stored (collected before data format 2)")
    comp = None
    if flows:
        comp = None if per_packet else stored_competitors(raw)     # from the sink's hop records, as live
        if comp is None:
            if "comp_packets_10ms" not in raw or np.asarray(raw["comp_packets_10ms"]).ndim != 2:
                raise TraceError(f"{path}: the competitors' packets were not kept (collected before the "
                                 f"per-flow counts): no flow features")
            packets, lost = tcp_competitors(raw, load_run(path).meta if meta is None else meta)
            comp = CompetitorSeries.from_bins(packets, t0, lost=lost)
    return telemetry_features(series, comp, at_t, base_rtt, flows)


def split(runs, test_fraction: float = 0.5, seed: int = 0):
    """Shuffle whole runs into train and test (stratified by CCA pair)."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    by_pair = {}
    for r in runs:
        by_pair.setdefault(r.pair, []).append(r)
    for pair in sorted(by_pair):
        group = by_pair[pair]
        order = rng.permutation(len(group))
        n_test = int(round(len(group) * test_fraction))
        test += [group[i] for i in order[:n_test]]
        train += [group[i] for i in order[n_test:]]
    return train, test


def held_out(runs, model: CCAEstimator, seed: int | None = None):
    """The held-out share of ``runs`` (split as in training: the model records its split
    seed and test fraction; ``seed`` overrides), less any run the model was trained on: a
    dataset that grew after training splits differently, and its held-out share would
    otherwise include training runs. Returns (runs, how many were left out)."""
    seed = model.split_.get("seed", 0) if seed is None else seed
    _, test = split(runs, model.split_.get("test_fraction", 0.5), seed=seed)
    trained = {tuple(k) for k in model.training_runs_}
    kept = [r for r in test if tuple(r.key) not in trained]
    return kept, len(test) - len(kept)


def shuffled_labels(runs, seed: int = 0) -> list:
    """The control that must fail: the same runs with their competitor labels permuted
    across runs (each run keeps one label for all its rows). A model that scores above
    chance (~0.25 over four CCAs) on these learns something other than the competitor."""
    rng = np.random.default_rng([seed, 2520])
    labels = [r.competitor_cca for r in runs]
    perm = rng.permutation(len(labels))
    return [Run(r.X, r.t, {**r.meta, "cca2": labels[j]}) for r, j in zip(runs, perm)]


def not_trained_on(runs, model: CCAEstimator):
    """Every run the model was not trained on (eval --all): (runs, how many were left out)."""
    trained = {tuple(k) for k in model.training_runs_}
    kept = [r for r in runs if tuple(r.key) not in trained]
    return kept, len(runs) - len(kept)


def stack(runs):
    X = np.vstack([r.X for r in runs])
    y = np.concatenate([[r.competitor_cca] * len(r.X) for r in runs])
    local = np.concatenate([[r.local_cca] * len(r.X) for r in runs])
    # a run's identity is (seed, index): by index alone, runs of combined collections that
    # share an index were one experiment to the grid search's folds and the model's counts
    groups = np.concatenate([[f"{r.key[0]}:{r.index}"] * len(r.X) for r in runs])
    return X, y, local, groups


def train(runs, grid=None, folds=3, seed=0, feature_set: str = "table1", shared: bool = False) -> CCAEstimator:
    X, y, local, groups = stack(runs)
    model = CCAEstimator(grid=grid, folds=folds, seed=seed, feature_names=FEATURE_SETS[feature_set],
                         shared=shared).fit(X, y, local, groups)
    model.training_runs_ = sorted(r.key for r in runs)
    return model


def predictions(model: CCAEstimator, test_runs) -> list:
    """[(meta, t, the model's estimates)] for each run whose local CCA the model knows."""
    return [(r.meta, r.t, model.predict(r.X, r.local_cca)) for r in test_runs if r.local_cca in model.models_]


def evaluate(model: CCAEstimator, test_runs) -> dict:
    """Table III (row accuracy per local x competitor) and Table IV (majority vote per w)."""
    res = tables(predictions(model, test_runs))
    res["test_runs"] = len(test_runs)
    return res


def tables(preds) -> dict:
    """Tables III and IV and the time to a stable correct verdict from ``predictions``."""
    cells = {}
    votes = {w: {} for w in VOTE_WINDOWS}
    stable = {w: [] for w in STABLE_WINDOWS}
    per_run = []
    for meta, t, pred in preds:
        local, comp = meta["cca1"], meta["cca2"]
        cells.setdefault((local, comp), []).append((pred == comp))
        for w in VOTE_WINDOWS:
            v = np.array(vote_series(list(pred), w))
            votes[w].setdefault((local, comp), []).append(v == comp)
            if w in STABLE_WINDOWS:
                stable[w].append(first_stable_correct(np.asarray(t), v == comp))
        per_run.append({"seed": int(meta.get("seed", 0)), "index": int(meta["index"]), "cca1": local, "cca2": comp,
                        "rows": len(pred), "rows_right": float(np.mean(pred == comp)) if len(pred) else None,
                        "verdict_w50": votes[50][(local, comp)][-1][-1].item() if len(pred) else None,
                        "stable_correct_s_w50": stable[50][-1],
                        **{name: label(meta) for name, label in CONDITIONS.items()}})
    table3 = {l: {c: _acc(cells.get((l, c))) for c in CCAS} for l in CCAS}
    table4 = {str(w): {"mean": _mean_cells({k: _acc(v) for k, v in votes[w].items()}),
                       "pairs": {f"{l}/{c}": _acc(v) for (l, c), v in sorted(votes[w].items())}}
              for w in VOTE_WINDOWS}
    time_to_stable = {str(w): {"runs_stable": float(np.mean([x is not None for x in v])) if v else None,
                               "median_s": float(np.median([x for x in v if x is not None]))
                               if any(x is not None for x in v) else None} for w, v in stable.items()}
    return {"table3": table3, "mean_accuracy": _mean_cells({k: _acc(v) for k, v in cells.items()}),
            "table4": table4, "time_to_stable_correct": time_to_stable, "test_runs": len(preds),
            "runs": per_run}


def _bands(value, edges, unit=""):
    """'lo-hi' label of the band ``value`` falls in (edges ascending), None if unknown."""
    if value is None:
        return None
    for lo, hi in zip(edges, edges[1:]):
        if value < hi:
            return f"{lo:g}-{hi:g}{unit}"
    return f">= {edges[-1]:g}{unit}"


#: Run conditions the held-out tables break down by (eval --by): each a label from a run's meta.
CONDITIONS = {
    "udp": lambda m: None if "udp_mbps" not in m else ("with UDP" if m["udp_mbps"] > 0 else "no UDP"),
    "flows": lambda m: None if "comp_flows" not in m else f"{m['comp_flows']} competing",
    "rtt": lambda m: _bands(m.get("rtt_factor"), (0, 1, 2), "x flow 1's RTT"),
    "buffer": lambda m: _bands(m.get("params", {}).get("buffer_bdp"), (0, 3, 10, 30), " BDP"),
    "loss": lambda m: None if "loss_pct" not in m.get("params", {}) else
    ("random loss" if m["params"]["loss_pct"] > 0 else "no random loss"),
    "start": lambda m: _bands(m.get("comp_start_s"), (0, 2, 5), " s late"),
    "share": lambda m: _bands(_competitor_share(m), (0, 0.05, 0.15, 0.3, 0.5, 0.7), " of goodput"),
}


def _competitor_share(meta):
    """The competitors' share of the run's goodput (its TCP flows; UDP is not in it)."""
    g = meta.get("goodput_mbps")
    if not g or len(g) < 2 or sum(g) <= 0:
        return None
    return float(sum(g[1:]) / sum(g))


def by_condition(res: dict, condition: str) -> list[dict]:
    """Per value of a CONDITIONS label, over the runs of ``tables``' result: runs, the mean of
    their share of rows right, and the share whose final verdict (w = 50) is right."""
    groups = {}
    for r in res["runs"]:
        if r["rows_right"] is not None:
            groups.setdefault(r[condition], []).append(r)
    return [{"value": v, "runs": len(rs), "rows_right": float(np.mean([r["rows_right"] for r in rs])),
             "verdict_w50": float(np.mean([r["verdict_w50"] for r in rs]))}
            for v, rs in sorted(groups.items(), key=lambda kv: _label_order(kv[0]))]


def _label_order(label):
    """Bands by their lower edge ("10-30 BDP" after "3-10 BDP"), other labels by name, unknown last."""
    if label is None:
        return (2, 0.0, "")
    m = re.match(r"(>= )?([0-9.]+)", label)
    return (0, float(m.group(2)), label) if m else (1, 0.0, label)


def format_by_condition(res: dict, condition: str) -> str:
    lines = [f"By {condition}: runs, mean share of rows right, final verdict (w = 50) right"]
    for g in by_condition(res, condition):
        lines.append(f"  {str(g['value'] or 'not recorded'):28s}{g['runs']:5d}{g['rows_right']:8.3f}"
                     f"{g['verdict_w50']:8.3f}")
    return "\n".join(lines)


def fold_of(runs, folds: int, seed: int = 0) -> np.ndarray:
    """Each run's fold (0..folds-1), whole runs, every CCA pair spread evenly over the folds
    (the assignment ``model_selection.RunFolds`` makes for scikit-learn)."""
    return assign_folds([r.pair for r in runs], folds, seed)


def cross_validate(runs, folds: int = 5, grid=None, seed: int = 0, feature_set: str = "table1",
                   shared: bool = False, progress=None) -> dict:
    """Tables III and IV with every run held out once: ``folds`` models, each trained on the
    other folds' runs (split by experiment) and evaluated on its own. More training runs
    per model than a half split, and every run counts in the tables."""
    if folds < 2:
        raise ValueError("cross-validation needs >= 2 folds")
    fold = fold_of(runs, folds, seed)
    preds = []
    for k in range(folds):
        test = [r for r, f in zip(runs, fold) if f == k]
        model = train([r for r, f in zip(runs, fold) if f != k], grid, seed=seed, feature_set=feature_set,
                      shared=shared)
        preds += predictions(model, test)
        if progress:
            progress(k, tables(preds))
    res = tables(preds)
    res.update(folds=folds, train_runs_per_fold=int(round(len(runs) * (folds - 1) / folds)))
    return res


def learning_curve(train_runs, test_runs, fractions=(0.25, 0.5, 0.75, 1.0), grid=None, seed=0,
                   feature_set: str = "table1", shared: bool = False) -> list[dict]:
    """Held-out accuracy against the number of training runs: the model trained on the
    first ``fraction`` of each CCA pair's training runs (at least 2), evaluated on the same
    held-out runs. Whether more runs would still pay (accuracy rose from 0.52 to
    0.71 between 32 and 98 training runs)."""
    by_pair = {}
    for r in train_runs:
        by_pair.setdefault(r.pair, []).append(r)
    rows = []
    for frac in fractions:
        subset = [r for group in by_pair.values() for r in group[:max(2, int(round(len(group) * frac)))]]
        res = evaluate(train(subset, grid, seed=seed, feature_set=feature_set, shared=shared), test_runs)
        rows.append({"fraction": frac, "train_runs": len(subset), "mean_accuracy": res["mean_accuracy"],
                     "vote50": res["table4"]["50"]["mean"]})
    return rows


def _acc(chunks):
    if not chunks:
        return None
    return float(np.concatenate(chunks).mean())


def _mean_cells(d):
    vals = [v for v in d.values() if v is not None]
    return float(np.mean(vals)) if vals else None


def _target_note(targets: dict, key: str) -> str:
    """'(target 0.85, release hard-v4's)': the scored model's own target, if it has one."""
    parts = []
    if targets.get("paper", {}).get(key) is not None:
        parts.append(f"paper: {targets['paper'][key]}")
    if targets.get(key) is not None:
        parts.append(f"target {targets[key]}" + (f", {targets['source']}" if targets.get("source") else ""))
    return f"  ({'; '.join(parts)})" if parts else "  (no target recorded for this model)"


def format_tables(res: dict, targets: dict | None = None) -> str:
    """Tables III and IV; beside each headline figure, the target of the model scored
    (its card's ``targets``: mean_accuracy, vote_w50, and the paper's where it applies)."""
    targets = targets or {}
    lines = ["Table III: accuracy per local CCA (rows) and competitor (columns), held-out runs",
             f"{'local / competitor':20s}" + "".join(f"{c:>9s}" for c in CCAS)]
    for l in CCAS:
        lines.append(f"{l:20s}" + "".join(f"{v:9.2f}" if v is not None else f"{'-':>9s}"
                                           for v in res["table3"][l].values()))
    lines.append(f"mean accuracy over pairs: {res['mean_accuracy']:.3f}" + _target_note(targets, "mean_accuracy"))
    lines += ["", "Table IV: majority vote over the last w estimates (mean over pairs)",
              "".join(f"{'w=' + w:>9s}" for w in res["table4"])]
    lines.append("".join(f"{v['mean']:9.3f}" if v["mean"] is not None else f"{'-':>9s}"
                         for v in res["table4"].values()))
    lines.append("at w=50:" + _target_note(targets, "vote_w50"))
    lines += ["", "Time from the first ACK to the first stable correct verdict (held-out runs; rows "
                  "start after a 10 % warm-up):"]
    for w, v in res.get("time_to_stable_correct", {}).items():
        med = "-" if v["median_s"] is None else f"{v['median_s']:.1f} s"
        lines.append(f"  w={w:>3}: {v['runs_stable']:.0%} of runs end on a stable correct verdict, "
                     f"median time {med}")
    return "\n".join(lines)
