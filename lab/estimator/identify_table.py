"""The table of docs/estimator.md "Active identification" from committed records: an
identify_replay record (the commits and the most likely hypothesis at the end, per run)
and the experiment's summary (flow 1 on the probe and the oracle on the same networks).

    python -m lab.estimator.identify_table REPLAY_RECORD EXPERIMENT_RECORD

The experiment record is the run's summary.json in its results directory, whose
runs/*/series.csv give flow 1's seconds of zero goodput. The fairness rows pair each "mirror active" run with the oracle's run of the same
competitor and repeat (the same network): the difference of their |D|, its mean with a
95 % bootstrap CI (10,000 resamples, seed 0) and its mean absolute value."""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os

import numpy as np

CCAS = ("bbr", "cubic", "reno", "vegas")


def identification_rows(replay: dict) -> list[str]:
    runs = [r for r in replay["runs"] if "error" not in r]
    committed = [r for r in runs if r["first_commit"] is not None]
    right = [r for r in committed if r["first_commit"][1] == r["truth"]]
    when = ", ".join(f"{r['truth']} at {r['first_commit'][0]:.1f} s" for r in right)
    final = {c: (sum(r["final_best"] == c for r in runs if r["truth"] == c), sum(r["truth"] == c for r in runs))
             for c in CCAS}
    return [f"| committed within the run | {len(committed)} of {len(runs)} (right: {len(right)}"
            + (f"; {when}" if when else "") + f"); wrong: {len(committed) - len(right)} |",
            f"| the most likely hypothesis at the end | right in {sum(k for k, _ in final.values())} of {len(runs)} ("
            + ", ".join(f"{c} {k}/{n}" for c, (k, n) in final.items()) + ") |"]


def fairness_rows(summary: dict) -> list[str]:
    by = {(r["algorithm"], r["competitor"], r["repeat"]): r for r in summary["records"]}
    pairs = [(r, by[("oracle", c, k)]) for (a, c, k), r in sorted(by.items())
             if a == "mirror active" and ("oracle", c, k) in by]
    diff = np.array([p["abs_goodput_difference"] - o["abs_goodput_difference"] for p, o in pairs])
    rng = np.random.default_rng(0)
    boot = rng.choice(diff, (10_000, len(diff))).mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])

    def per_cca(alg, key="abs_goodput_difference"):
        return {c: [r[key] for (a, cc, _), r in by.items() if a == alg and cc == c] for c in CCAS}
    probe, oracle, jain = per_cca("mirror active"), per_cca("oracle"), per_cca("mirror active", "jain_mean")
    fmt = ", ".join
    return ["| the phase's own fairness: flow 1 on the probe (or where it switched, after), mean \\|D\\| | "
            + fmt(f"{c} {np.mean(v):.2f}" for c, v in probe.items() if v)
            + f" (Jain {min(min(v) for v in jain.values() if v):.2f}–{max(max(v) for v in jain.values() if v):.2f}) |",
            "| the oracle on the same networks (flow 1 runs the competitor's CCA), mean \\|D\\| | "
            + fmt(f"{c} {np.mean(v):.2f}" for c, v in oracle.items() if v)
            + f"; paired over the {len(diff)} networks, the probe's \\|D\\| minus the oracle's: mean {diff.mean():.2f} "
              f"(95 % bootstrap CI {lo:.2f} to {hi:.2f}), mean absolute difference {np.abs(diff).mean():.2f} |"]


def stall_row(results_dir: str) -> str:
    """Flow 1's seconds of zero goodput (runs/*/series.csv, its first 2 s and last one left
    out: start-up and the end of the run), per mode."""
    out = {}
    for mode, label in (("mirror-active", "on the probe"), ("oracle", "the oracle")):
        seconds = runs = 0
        for path in sorted(glob.glob(os.path.join(results_dir, "runs", f"{mode}_*", "series.csv"))):
            with open(path) as f:
                goodputs = [float(r["goodput_mbps"]) for r in csv.DictReader(f)][2:-1]
            zero = sum(g == 0 for g in goodputs)
            seconds, runs = seconds + zero, runs + (zero > 0)
        out[label] = f"{label} {seconds} s in {runs} runs"
    return "| seconds of zero goodput of flow 1 (after its first 2 s) | " + ", ".join(out.values()) + " |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("replay_record", help="lab/records/estimator/identify_active-*.json (identify_replay --json-out)")
    ap.add_argument("experiment_record", help="the run's summary.json, both modes (lab/records/experiments/)")
    args = ap.parse_args(argv)
    with open(args.replay_record) as f:
        replay = json.load(f)
    with open(args.experiment_record) as f:
        summary = json.load(f)
    print("| measured | result |\n|---|---|")
    for row in identification_rows(replay) + fairness_rows(summary) + [stall_row(os.path.dirname(
            args.experiment_record))]:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
