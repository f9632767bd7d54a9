"""One-off studies the docs cite: each runnable with ``python -m lab.estimator.NAME``,
each printing the figures the development record docs/results/2026-11-30-estimator-development.md quotes. Not part of the estimator's API."""

import argparse

import numpy as np

from estimator.dataset import COMPETITOR_SETTLE_S, load_raw, load_run, run_paths, tcp_competitors
from estimator.evaluate import load_dataset
from estimator.flow_features import CompetitorSeries
from records import bootstrap


def paired(a: dict, b: dict, seed: int = 0) -> dict:
    """b - a per run (the keys of ``a``), its mean with a bootstrap 95 % CI, and how many
    runs went each way."""
    d = np.array([b[k] - a[k] for k in sorted(a)])
    ci = bootstrap.interval(bootstrap.draws(lambda x: x.mean(axis=-1), [d], 5000, np.random.default_rng(seed)))
    return {"mean": float(d.mean()), "ci95": list(ci),
            "better_runs": int((d > 0).sum()), "worse_runs": int((d < 0).sum())}


def run_inputs(path: str) -> dict:
    """A collected run's raw material as the competitor features read it: the run, its
    competitors' series (``comp``), flow 1's INT record stream (``series``), the sampled
    ACKs' times and base RTTs (``at_t``, ``base_rtt_s``), and ``keep``: which of those rows
    load_dataset keeps (from the competitor's start + COMPETITOR_SETTLE_S)."""
    raw, run = load_raw(path), load_run(path)
    packets, lost = tcp_competitors(raw, run.meta)
    return {"run": run,
            "comp": CompetitorSeries.from_bins(packets, float(raw["int_record_t"][0]), lost=lost),
            "series": np.column_stack([raw["int_record_t"], raw["int_records"].astype(float)]),
            "at_t": raw["sample_t"], "base_rtt_s": raw["sample_base_rtt_s"].astype(float),
            "keep": run.t >= float(run.meta["comp_start_s"]) + COMPETITOR_SETTLE_S}


def runs_with_columns(doc: str, argv, columns_of, feature_set: str, out_help: str):
    """A study's command line (dataset directories, ``--out``) and what it reads: (args, the
    runs with ``feature_set``, {run key: the study's extra columns at the kept rows}) with
    ``columns_of(path) -> (key, columns)``."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("data", nargs="+", help="dataset directories (hard distribution, with the competitors' losses)")
    ap.add_argument("--out", help=out_help)
    args = ap.parse_args(argv)
    extra = dict(columns_of(p) for d in args.data for p in run_paths(d))
    return args, load_dataset(args.data, feature_set), extra
