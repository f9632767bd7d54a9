"""The TCP-variant classifier of the reconfigurable-network paper (004, Sec. VI-B): which CCA a
flow runs, from half a second of its congestion window and RTT.

Input: the sender's kernel state per ACK (``intcc exp run ... --kernel-trace``:
``runs/*/kernel_trace.csv``, tcp_probe's cwnd and srtt). Each flow's trace is put on a grid
of ``STEP_MS`` (the last ACK's values hold until the next ACK) and cut into windows of
``WINDOW_S``; a window in which fewer than ``MIN_ACKS`` ACKs arrived (the flow waiting out a
timeout, a night) says nothing of its CCA and is left out, counted.

The paper classifies with an LSTM behind an embedding layer (93.3 %, Table III). This starts
from the project's estimator instead: a Random Forest on features of each window's shape
(``window_features``: how the window grows, how deep it is cut and how often, how the RTT
moves with it), in a Pipeline as the estimator's models are. No LSTM is added.

Evaluation (``evaluate``): windows of whole runs held out (GroupKFold over runs: the two
flows of a pair run one CCA, so a run is held out with both of its flows), whole
configurations held out, the same run folds with the labels shuffled (a control that must
fail), and ``held_out`` for a model fitted on one seed's runs and scored on another's.
Per window and per flow (the majority of its windows' verdicts)."""
from __future__ import annotations

import csv
import json
import os
import platform
import warnings
from dataclasses import dataclass, field

import numpy as np

from .fct import save  # noqa: F401  (a model and its card, as the FCT model's)

CCAS = ("bbr", "cubic", "reno")
STEP_MS = 10
WINDOW_S = 0.5
MIN_ACKS = 5
FOREST = dict(n_estimators=300, min_samples_leaf=2, max_features="sqrt")

FEATURES = (
    "cwnd_mean_pkts", "cwnd_cv", "cwnd_min_over_max", "cwnd_trend", "cwnd_up_share", "cwnd_down_share",
    "cwnd_cuts", "cwnd_drawdown", "cwnd_cut_ratio_min", "cwnd_cut_ratio_mean", "cwnd_rise_per_step", "cwnd_rise_cv",
    "cwnd_curvature", "cwnd_growth_per_rtt", "cwnd_at_4_share",
    "srtt_mean_ms", "srtt_max_over_min", "srtt_cv", "srtt_up_share", "srtt_trend", "cwnd_srtt_corr", "rate_cv", "cut_depth_min", "cut_depth_median", "ca_growth_per_rtt",
)


class VariantDataError(ValueError):
    pass


@dataclass
class FlowTrace:
    """One flow of one run on the ``STEP_MS`` grid."""
    cca: str
    role: str                   # "migrated" or "main"
    setting: str                # the run's reconfig setting, e.g. "100ms/10ms" or "none"
    run: str                    # "<seed>/<run dir>": unique across datasets
    cwnd_pkts: np.ndarray       # per step: the window the last ACK found
    srtt_us: np.ndarray         # per step: the smoothed RTT then
    acks: np.ndarray            # per step: ACKs that arrived in it


@dataclass
class Dataset:
    flows: list[FlowTrace]
    sources: list[str] = field(default_factory=list)


def resample(t_s, cwnd, srtt_us, step_ms: float = STEP_MS):
    """The grid of one flow's ACKs: values held from each ACK to the next, ACK counts per step."""
    t = np.asarray(t_s, float)
    if len(t) < 2:
        raise VariantDataError(f"a flow needs at least 2 ACKs, got {len(t)}")
    if np.any(np.diff(t) < 0):
        raise VariantDataError("ACK times must not decrease")
    step = step_ms / 1e3
    n = int((t[-1] - t[0]) / step + 1e-9)     # whole steps (1e-9: 3.99 s of 10 ms steps is 399 of them)
    edges = t[0] + step * np.arange(1, n + 1)
    last = np.searchsorted(t, edges, side="right") - 1    # the last ACK at or before each step's end
    acks = np.diff(np.concatenate([[0], last + 1]))
    return np.asarray(cwnd)[last], np.asarray(srtt_us)[last], acks


def read_trace(path: str) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The busiest socket per destination port of a ``kernel_trace.csv``: (t_s, cwnd, srtt_us)."""
    by: dict[tuple[str, str], list] = {}
    try:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["event"] == "tcp_probe" and r["srtt_us"]:
                    by.setdefault((r["dport"], r["sport"]), []).append(
                        (float(r["t_s"]), int(r["cwnd_pkts"]), int(r["srtt_us"])))
    except (OSError, KeyError, ValueError) as e:
        raise VariantDataError(f"{path}: not a kernel trace ({e})") from None
    busiest: dict[int, list] = {}
    for (dport, _), rows in by.items():
        if len(rows) > len(busiest.get(int(dport), ())):
            busiest[int(dport)] = rows
    return {p: tuple(np.array(c) for c in zip(*rows)) for p, rows in busiest.items()}


def from_results(results_dir: str) -> Dataset:
    """The flows of every two-flow run of kernel CCAs in a results directory recorded with
    ``--kernel-trace``: the lower port is the scenario's flow 1 (the migrated one), the next
    its competitor (the main flow)."""
    try:
        with open(os.path.join(results_dir, "summary.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise VariantDataError(f"{results_dir}: no summary.json ({e})") from None
    prov = doc.get("provenance") or {}
    flows = []
    for rec in doc.get("records", []):
        if rec.get("error") or rec.get("competitors", 1) != 1:
            continue
        ccas = (rec.get("flow1"), rec.get("competitor"))
        trace = os.path.join(results_dir, "runs", rec["run"], "kernel_trace.csv")
        if any(c not in CCAS for c in ccas) or not os.path.exists(trace):
            continue
        by_port = read_trace(trace)
        for cca, role, port in zip(ccas, ("migrated", "main"), sorted(by_port)[:2]):
            t, cwnd, srtt = by_port[port]
            c, s, a = resample(t, cwnd, srtt)
            flows.append(FlowTrace(cca, role, rec.get("reconfig", "none"), f"{rec.get('seed')}/{rec['run']}", c, s, a))
    if not flows:
        raise VariantDataError(f"{results_dir}: no two-flow runs of {', '.join(CCAS)} with a kernel trace "
                               "(run the scenario with --kernel-trace)")
    return Dataset(flows, [f"{results_dir}: {prov.get('date', '?')}, {prov.get('commit', '?')}, {prov.get('command', '?')}"])


def save_dataset(data: Dataset, path: str) -> None:
    """One compressed file: each flow's grid (padded with -1) and its labels."""
    n = max(len(f.cwnd_pkts) for f in data.flows)

    def pad(a, dtype):
        out = np.full((len(data.flows), n), -1, dtype=dtype)
        for i, f in enumerate(data.flows):
            out[i, :len(getattr(f, a))] = getattr(f, a)
        return out
    meta = {"format": 1, "step_ms": STEP_MS, "sources": data.sources,
            "flows": [{"cca": f.cca, "role": f.role, "setting": f.setting, "run": f.run, "steps": len(f.cwnd_pkts)}
                      for f in data.flows]}
    np.savez_compressed(path, cwnd_pkts=pad("cwnd_pkts", np.int32), srtt_us=pad("srtt_us", np.int32),
                        acks=pad("acks", np.int16), meta=np.array(json.dumps(meta)))


def load_dataset(path: str) -> Dataset:
    try:
        z = np.load(path)
        meta = json.loads(str(z["meta"]))
    except (OSError, ValueError, KeyError) as e:
        raise VariantDataError(f"{path}: not a variant dataset ({e})") from None
    if meta.get("step_ms") != STEP_MS:
        raise VariantDataError(f"{path}: grid of {meta.get('step_ms')} ms, this model reads {STEP_MS} ms")
    flows = [FlowTrace(m["cca"], m["role"], m["setting"], m["run"], z["cwnd_pkts"][i, :m["steps"]],
                       z["srtt_us"][i, :m["steps"]], z["acks"][i, :m["steps"]]) for i, m in enumerate(meta["flows"])]
    return Dataset(flows, meta["sources"])


def merge(datasets: list[Dataset]) -> Dataset:
    return Dataset([f for d in datasets for f in d.flows], [s for d in datasets for s in d.sources])


@dataclass
class Windows:
    X: np.ndarray               # (windows, steps, 2): cwnd pkts, srtt us
    y: np.ndarray               # CCA per window
    flow: np.ndarray            # index of its flow in the dataset
    run: np.ndarray
    setting: np.ndarray         # its flow's reconfiguration setting
    quiet: int                  # windows left out: fewer than MIN_ACKS ACKs


def windows(data: Dataset, window_s: float = WINDOW_S, min_acks: int = MIN_ACKS) -> Windows:
    steps = int(round(window_s * 1e3 / STEP_MS))
    X, y, flow, run, setting, quiet = [], [], [], [], [], 0
    for i, f in enumerate(data.flows):
        for k in range(len(f.cwnd_pkts) // steps):
            sl = slice(k * steps, (k + 1) * steps)
            if f.acks[sl].sum() < min_acks:
                quiet += 1
                continue
            X.append(np.stack([f.cwnd_pkts[sl], f.srtt_us[sl]], axis=1))
            y.append(f.cca)
            flow.append(i)
            run.append(f.run)
            setting.append(f.setting)
    if not X:
        raise VariantDataError("no window with traffic in the dataset")
    return Windows(np.array(X, float), np.array(y), np.array(flow), np.array(run), np.array(setting), quiet)


def _cuts_and_growth(c: np.ndarray, r_ms: np.ndarray) -> tuple[float, float, float]:
    """One window's deepest and median cut (the window after a reduction over the next two
    RTTs against the window before it: CUBIC's 0.7, Reno's 0.5, spread over an RTT by
    proportional rate reduction) and its growth per RTT outside slow start (Reno one
    segment, CUBIC's TCP-friendly region about half of one)."""
    dc = np.diff(c)
    rtt_steps = np.maximum(r_ms[:-1] / STEP_MS, 1e-3)
    depths = []
    for t in np.flatnonzero((dc < 0) & np.concatenate([[True], dc[:-1] >= 0])):
        span = int(np.ceil(2 * rtt_steps[t]))
        depths.append(c[t + 1:t + 2 + span].min() / c[t])
    per_rtt = dc * rtt_steps                 # segments per RTT at each step
    ca = (dc >= 0) & (per_rtt < 0.25 * c[:-1])
    growth = per_rtt[ca].mean() if ca.any() else 0.0
    return (min(depths), float(np.median(depths)), growth) if depths else (1.0, 1.0, growth)


def window_features(X: np.ndarray) -> np.ndarray:
    """``FEATURES`` of windows ``X`` (windows, steps, 2: cwnd pkts, srtt us)."""
    c, r = X[:, :, 0].astype(float), X[:, :, 1].astype(float) / 1e3
    c = np.maximum(c, 1.0)
    r = np.maximum(r, 1e-3)
    steps = c.shape[1]
    mean_c = c.mean(axis=1)
    dc = np.diff(c, axis=1)
    up, down = dc > 0, dc < 0
    ratio = c[:, 1:] / c[:, :-1]
    cut_ratio = np.where(down, ratio, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # windows with no rise or no cut: 0 / 1 below
        rise = np.where(up, dc, np.nan)
        rise_mean = np.nan_to_num(np.nanmean(rise, axis=1))
        rise_cv = np.nan_to_num(np.nanstd(rise, axis=1) / rise_mean)
        # how the rise itself changes while the window grows: CUBIC's plateau bends it,
        # Reno's line does not
        d2 = np.diff(c, n=2, axis=1)
        growing = up[:, 1:] & up[:, :-1]
        curvature = np.nan_to_num(np.nanmean(np.where(growing, d2, np.nan), axis=1) / mean_c)
        cut_min = np.nan_to_num(np.nanmin(cut_ratio, axis=1), nan=1.0)
        cut_mean = np.nan_to_num(np.nanmean(cut_ratio, axis=1), nan=1.0)
    x = np.arange(steps) - (steps - 1) / 2
    trend = lambda v: (v * x).sum(axis=1) / (x * x).sum() * steps / np.maximum(v.mean(axis=1), 1e-9)
    dr = np.diff(r, axis=1)
    cc, rc = c - mean_c[:, None], r - r.mean(axis=1)[:, None]
    denom = np.sqrt((cc * cc).sum(axis=1) * (rc * rc).sum(axis=1))
    corr = np.where(denom > 0, (cc * rc).sum(axis=1) / np.where(denom > 0, denom, 1), 0.0)
    rate = c / r
    drawdown = (c / np.maximum.accumulate(c, axis=1)).min(axis=1)
    growth_per_rtt = np.maximum(dc, 0).sum(axis=1) / (steps * STEP_MS / r.mean(axis=1))
    return np.column_stack([
        mean_c, c.std(axis=1) / mean_c, c.min(axis=1) / c.max(axis=1), trend(c), up.mean(axis=1), down.mean(axis=1),
        down.sum(axis=1), drawdown, cut_min, cut_mean, rise_mean / mean_c, rise_cv,
        curvature, growth_per_rtt, (c <= 4).mean(axis=1),
        r.mean(axis=1), r.max(axis=1) / r.min(axis=1), r.std(axis=1) / r.mean(axis=1),
        (dr > 0).mean(axis=1), trend(r), corr, rate.std(axis=1) / rate.mean(axis=1),
        np.array([_cuts_and_growth(ci, ri) for ci, ri in zip(c, r)]).reshape(len(c), 3),
    ])


def pipeline(seed: int = 0, **forest_args):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer
    return Pipeline([("features", FunctionTransformer(window_features)),
                     ("forest", RandomForestClassifier(random_state=seed, n_jobs=1, **{**FOREST, **forest_args}))])


def confusion(y, pred) -> list[list[int]]:
    """Rows the actual CCA, columns the predicted (``CCAS`` order), as the paper's Table III."""
    return [[int(np.sum((y == a) & (pred == p))) for p in CCAS] for a in CCAS]


def flow_votes(pred: np.ndarray, flow: np.ndarray) -> dict[int, str]:
    """Each flow's verdict: the CCA most of its windows were given (ties: ``CCAS`` order)."""
    out = {}
    for i in np.unique(flow):
        counts = [int(np.sum(pred[flow == i] == c)) for c in CCAS]
        out[int(i)] = CCAS[int(np.argmax(counts))]
    return out


def _scores(w: Windows, pred: np.ndarray, y: np.ndarray | None = None) -> dict:
    y = w.y if y is None else y
    votes = flow_votes(pred, w.flow)
    truth = {int(i): y[w.flow == i][0] for i in np.unique(w.flow)}
    return {"windows": int(len(y)), "accuracy": float(np.mean(pred == y)), "confusion": confusion(y, pred),
            "flows": len(votes), "flow_accuracy": float(np.mean([votes[i] == truth[i] for i in votes])),
            "quiet_windows": w.quiet}


def _oof(w: Windows, y: np.ndarray, groups, folds: int, seed: int, forest_args: dict) -> np.ndarray:
    from sklearn.model_selection import GroupKFold, cross_val_predict
    n = len(set(groups))
    if n < 2:
        raise VariantDataError(f"{n} group: held-out folds need at least 2")
    return cross_val_predict(pipeline(seed, **forest_args), w.X, y, groups=groups, cv=GroupKFold(n_splits=min(folds, n)))


def evaluate(data: Dataset, seed: int = 0, folds: int = 5, window_s: float = WINDOW_S, **forest_args) -> dict:
    """Out-of-fold scores: runs held out whole, reconfiguration settings held out whole (every
    CCA's runs of it), windows at random (the paper's protocol), and the run folds with each
    run's label shuffled among the runs (a control that must fail)."""
    from sklearn.model_selection import KFold, cross_val_predict
    w = windows(data, window_s)
    out = {"runs": len(set(w.run)), "settings": len(set(w.setting))}
    out["by_run"] = _scores(w, _oof(w, w.y, w.run, folds, seed, forest_args))
    out["by_setting"] = _scores(w, _oof(w, w.y, w.setting, folds, seed, forest_args))
    out["random"] = _scores(w, cross_val_predict(pipeline(seed, **forest_args), w.X, w.y,
                                                  cv=KFold(n_splits=folds, shuffle=True, random_state=seed)))
    runs = sorted(set(w.run))
    run_label = {r: w.y[w.run == r][0] for r in runs}
    shuffled_label = dict(zip(runs, np.random.default_rng(seed).permutation([run_label[r] for r in runs])))
    y_shuffled = np.array([shuffled_label[r] for r in w.run])
    out["by_run_shuffled"] = _scores(w, _oof(w, y_shuffled, w.run, folds, seed, forest_args), y_shuffled)
    return out


def held_out(train: Dataset, test: Dataset, seed: int = 0, window_s: float = WINDOW_S, **forest_args) -> dict:
    """Fitted on ``train``'s windows, scored on ``test``'s (another seed, other settings)."""
    w_test = windows(test, window_s)
    pred = fit(train, seed, window_s, **forest_args).predict(w_test.X)
    per_setting = {str(s): float(np.mean(pred[w_test.setting == s] == w_test.y[w_test.setting == s]))
                   for s in sorted(set(w_test.setting))}
    return {**_scores(w_test, pred), "runs": len(set(w_test.run)), "settings": sorted(per_setting),
            "accuracy_per_setting": per_setting}


def fit(data: Dataset, seed: int = 0, window_s: float = WINDOW_S, **forest_args):
    w = windows(data, window_s)
    return pipeline(seed, **forest_args).fit(w.X, w.y)


SCORE_NAMES = {"by_run": "runs held out whole", "by_setting": "reconfiguration settings held out whole",
               "random": "windows at random (the paper's protocol)", "held_out": "another seed's runs (fitted on all of the above)",
               "by_run_shuffled": "runs held out, labels shuffled among runs (control)"}


def format_scores(ev: dict) -> str:
    lines = ["| folds | windows | accuracy per window | flows | accuracy per flow (majority of its windows) |",
             "|---|---|---|---|---|"]
    for key, name in SCORE_NAMES.items():
        if key in ev:
            s = ev[key]
            lines.append(f"| {name} | {s['windows']} | {s['accuracy']:.3f} | {s['flows']} | {s['flow_accuracy']:.3f} |")
    return "\n".join(lines)


PAPER_TABLE_III = {"labels": ["cubic", "bbr", "reno", "westwood"],
                   "rows": [[100, 0, 17, 4], [0, 107, 0, 0], [3, 0, 101, 0], [1, 0, 4, 95]], "accuracy": 0.933}


def format_confusion(scores: dict) -> str:
    """A scores' confusion matrix beside the paper's Table III, in the paper's order (its
    Westwood has no kernel here)."""
    paper = PAPER_TABLE_III
    ours_order = [c for c in paper["labels"] if c in CCAS]
    head = "| actual | " + " | ".join(f"→ {c}" for c in ours_order) + " | accuracy | paper: " + \
        " | ".join(f"→ {c}" for c in paper["labels"]) + " | paper accuracy |"
    lines = [head, "|" + "---|" * (len(ours_order) + len(paper["labels"]) + 3)]
    for a in paper["labels"]:
        if a in CCAS:
            full = scores["confusion"][CCAS.index(a)]
            row = [full[CCAS.index(p)] for p in ours_order]
            ours = " | ".join(str(v) for v in row) + f" | {full[CCAS.index(a)] / max(sum(full), 1):.3f}"
        else:
            ours = " | ".join("–" for _ in CCAS) + " | –"
        prow = paper["rows"][paper["labels"].index(a)]
        lines.append(f"| {a} | {ours} | " + " | ".join(str(v) for v in prow)
                     + f" | {prow[paper['labels'].index(a)] / sum(prow):.3f} |")
    return "\n".join(lines)


def card(data: Dataset, evaluation: dict, seed: int, window_s: float, **forest_args) -> dict:
    import sklearn
    from records.provenance import stamp
    return {"format": 1, "provenance": stamp(), "model": "the CCA of a flow from its congestion window and RTT",
            "ccas": list(CCAS), "window_s": window_s, "step_ms": STEP_MS, "min_acks": MIN_ACKS,
            "features": list(FEATURES), "forest": {**FOREST, **forest_args, "seed": seed}, "training_flows": len(data.flows),
            "records": data.sources, "evaluation": evaluation,
            "sklearn": sklearn.__version__, "numpy": np.__version__, "python": platform.python_version()}


def predict_trace(model_path: str, trace_csv: str) -> list[dict]:
    """Each flow of a kernel trace (by destination port): its windows' verdicts and the majority."""
    import joblib
    with open(model_path + ".json") as f:
        window_s = json.load(f)["window_s"]
    model = joblib.load(model_path)
    out = []
    for port, (t, cwnd, srtt) in sorted(read_trace(trace_csv).items()):
        try:
            w = windows(Dataset([FlowTrace("?", "?", "?", str(port), *resample(t, cwnd, srtt))]), window_s)
        except VariantDataError:       # too few ACKs, or none in any window: no verdict for this flow
            out.append({"dport": port, "windows": 0, "verdict": None})
            continue
        pred = model.predict(w.X)
        counts = {cca: int(np.sum(pred == cca)) for cca in CCAS}
        out.append({"dport": port, "windows": int(len(pred)), "quiet_windows": w.quiet, "counts": counts,
                    "verdict": max(CCAS, key=lambda cca: counts[cca])})
    return out
