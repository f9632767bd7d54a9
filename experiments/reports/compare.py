"""Ratios of mean goodput against a baseline algorithm, with bootstrap confidence
intervals, pooled over one or more results directories (each OUT/summary.json of
`intcc exp run`).

Why a CI: at high link loss single runs differ by tens of percent (kernel cubic's own
8-run means at 20 % spread 0.08-0.16 Mbit/s), so a ratio of two small batches says
little without one. The interval is a percentile bootstrap, seeded: both sides' runs are
resampled independently, or, where both ran the same loss seeds (runs of one
`intcc exp run`: every algorithm of a repeat meets the same loss draws), as pairs.
"""
from __future__ import annotations

import json
import os

import numpy as np

from records import bootstrap

DEFAULT_RESAMPLES = bootstrap.DEFAULT_RESAMPLES
FEW_RUNS = 5        # a bootstrap of fewer runs sees too few of the possible outcomes


class CompareError(ValueError):
    pass


def load_records(dirs) -> list[dict]:
    """Every record of DIR/summary.json for each DIR (a directory or the file itself)."""
    records = []
    for d in dirs:
        path = d if d.endswith(".json") else os.path.join(d, "summary.json")
        try:
            with open(path) as f:
                recs = json.load(f)
        except FileNotFoundError:
            raise CompareError(f"{path}: no such file (a results directory of 'intcc exp run' has one)")
        except json.JSONDecodeError as e:
            raise CompareError(f"{path}: not JSON ({e})")
        if isinstance(recs, dict):        # format 2: {"format": 2, "scenario": ..., "records": [...]}
            if recs.get("format") != 2:
                raise CompareError(f"{path}: summary format {recs.get('format')!r} is not one this intcc reads (2)")
            recs = recs.get("records")
        if not isinstance(recs, list) or not all(isinstance(r, dict) and "algorithm" in r for r in recs):
            raise CompareError(f"{path}: not a list of run records with an 'algorithm'")
        records += [{**r, "source": path} for r in recs]
    return records


def with_reruns(records: list[dict], reruns: list[dict]) -> tuple[list[dict], int]:
    """``records`` with the runs ``reruns`` ran again (the same seed, run name and network:
    the cells a fixed bug changed, say) replaced by them. Returns the records and how many
    were replaced; a rerun of no run in ``records`` is added."""
    def key(r):
        return r.get("seed"), r.get("run"), json.dumps(r.get("params"), sort_keys=True)
    again = {key(r) for r in reruns if "run" in r}              # a record without its run's name matches none
    kept = [r for r in records if "run" not in r or key(r) not in again]
    return kept + reruns, len(records) - len(kept)


def ratio_ci(values, baseline, resamples: int = DEFAULT_RESAMPLES, level: float = 0.95,
             seed: int = 0, paired: bool = False) -> tuple[float, float, float]:
    """(mean(values) / mean(baseline), low, high): percentile bootstrap interval. Paired
    (values[i] and baseline[i] met the same loss draws): pairs are resampled together, so
    what a pair shared (a lost SYN-ACK, an early run of losses) does not widen the interval."""
    a, b = np.asarray(values, float), np.asarray(baseline, float)
    if a.size == 0 or b.size == 0:
        raise CompareError("a ratio needs runs on both sides")
    if paired and a.size != b.size:
        raise CompareError("paired runs need as many runs on each side")
    if b.mean() <= 0:
        raise CompareError("the baseline's mean goodput is 0: no ratio")
    def ratio(x, y):
        my = y.mean(axis=-1)
        return np.where(my > 0, x.mean(axis=-1) / np.where(my > 0, my, 1), np.nan)   # a 0 baseline: no ratio
    low, high = bootstrap.interval(bootstrap.draws(ratio, [a, b], resamples, np.random.default_rng(seed), paired),
                                   level)
    return float(a.mean() / b.mean()), low, high


def _pairs(runs, base_runs, metric):
    """(values, baseline) aligned by loss_seed over the seeds both sides ran (a run that
    failed leaves its partner out), else None: seeds missing or repeated, or fewer than
    two in common."""
    seeds = [r.get("loss_seed") for r in runs]
    base_seeds = [r.get("loss_seed") for r in base_runs]
    for side in (seeds, base_seeds):
        if None in side or len(set(side)) != len(side):
            return None
    by_seed = {r["loss_seed"]: r[metric] for r in base_runs}
    common = [r for r in runs if r["loss_seed"] in by_seed]
    if len(common) < 2:
        return None
    return [r[metric] for r in common], [by_seed[r["loss_seed"]] for r in common]


def compare(records: list[dict], baseline: str, key: str | None = "loss_pct", metric: str = "goodput_mbps",
            resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict]:
    """One row per (algorithm, key value): runs, mean, median, ratio to the baseline and its
    CI, paired (``paired`` True) where both sides met the same loss seeds."""
    algs = list(dict.fromkeys(r["algorithm"] for r in records))
    if baseline not in algs:
        raise CompareError(f"baseline {baseline!r} is not among the algorithms: {', '.join(algs)}")
    values = sorted({r.get(key) for r in records}, key=lambda v: (v is None, v)) if key else [None]
    rows = []
    def runs_of(alg, v):
        return [r for r in records if r["algorithm"] == alg and (key is None or r.get(key) == v)
                and r.get(metric) is not None]
    for v in values:
        base_runs = runs_of(baseline, v)
        base = [r[metric] for r in base_runs]
        for a in algs:
            a_runs = runs_of(a, v)
            xs = [r[metric] for r in a_runs]
            if not xs:
                continue
            row = {"algorithm": a, "runs": len(xs), "mean": float(np.mean(xs)), "median": float(np.median(xs))}
            if key:
                row[key] = v
            if base and np.mean(base) > 0:
                pairs = _pairs(a_runs, base_runs, metric)
                row["paired"] = pairs is not None
                row["pairs"] = len(pairs[0]) if pairs else 0
                row["all_paired"] = row["pairs"] == len(xs) == len(base)
                row["ratio"], row["ci_low"], row["ci_high"] = ratio_ci(
                    *(pairs or (xs, base)), resamples, seed=seed, paired=pairs is not None)
            rows.append(row)
    return rows


def format_rows(rows: list[dict], baseline: str, key: str | None, metric: str) -> str:
    head = (f"{key or '':>9s}  " if key else "") + f"{'algorithm':20s}{'runs':>5s}{'mean':>10s}{'median':>10s}" \
        + f"   ratio to {baseline} (95 % CI)"
    lines = [f"{metric}", head]
    for r in rows:
        cells = (f"{r[key]!s:>9s}  " if key else "") + f"{r['algorithm']:20s}{r['runs']:5d}{r['mean']:10.3f}" \
            f"{r['median']:10.3f}"
        if "ratio" in r:
            paired = ""
            if r["paired"]:
                paired = " paired" if r.get("all_paired", True) else f" paired ({r['pairs']} pairs)"
            cells += f"   {r['ratio']:6.2f} ({r['ci_low']:.2f}-{r['ci_high']:.2f})" + paired
            if r["runs"] < FEW_RUNS:
                cells += f" (< {FEW_RUNS} runs: the interval is too narrow)"
        lines.append(cells)
    return "\n".join(lines)
