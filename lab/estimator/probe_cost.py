"""The identification phase's own cost on fairness_switching networks (issue 66: "the
probing's own cost, flow 1's and the competitor's goodput in the phase against the
oracle's").

For each run of the active mode, the phase is flow 1's seconds before its first switch (on
the probe, the first commit); over the same seconds of the oracle's run on the same network
(same competitor and repeat), flow 1's and the competitor's mean goodputs are compared,
paired per network. Intervals go with what ran at their middle, as the record's D parts
(experiments/runs/metrics.goodput_difference_parts); a run that never commits counts whole.

    python -m lab.estimator.probe_cost RUNS_DIR [RUNS_DIR ...] [--mode 'mirror active'] \\
        [--oracle oracle] [--json-out FILE]
    python -m lab.estimator.probe_cost --table FILE       # the docs' table of a record

RUNS_DIR: an experiment's output (its ``runs/<mode>_competitor-<cca>_r<repeat>/`` with
series.csv and trace.csv); the oracle's runs may be in another of the directories given.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
import sys

import numpy as np

from experiments.runs.metrics import algorithm_spans
from records import bootstrap
from records.provenance import stamp

RUN_NAME = re.compile(r"^(?P<mode>.+)_competitor-(?P<cca>[a-z]+)_r(?P<repeat>\d+)$")


def _slug(mode: str) -> str:
    return mode.replace(" ", "-")


def runs(dirs: list[str], mode: str) -> dict:
    """(competitor, repeat) -> run directory of ``mode`` in ``dirs``."""
    out = {}
    for d in dirs:
        for path in glob.glob(os.path.join(d, "runs", "*")):
            m = RUN_NAME.match(os.path.basename(path))
            if m and m["mode"] == _slug(mode) and os.path.exists(os.path.join(path, "series.csv")):
                out[(m["cca"], int(m["repeat"]))] = path
    return out


def series(run_dir: str) -> list[tuple[float, float, float]]:
    """(interval's middle s, flow 1's goodput, the competitor's) per interval."""
    rows = list(csv.DictReader(open(os.path.join(run_dir, "series.csv"))))
    out, last = [], 0.0
    for r in rows:
        t = float(r["t_s"])
        if r.get("goodput_mbps") not in (None, "") and r.get("competitor_goodput_mbps") not in (None, ""):
            out.append(((last + t) / 2, float(r["goodput_mbps"]), float(r["competitor_goodput_mbps"])))
        last = t
    return out


def phase_end_s(run_dir: str, end_s: float) -> float:
    """Flow 1's first switch from its start (the probe's first commit), or ``end_s``."""
    spans = algorithm_spans(os.path.join(run_dir, "trace.csv"), "probe", end_s)
    return spans[0][1] if len(spans) > 1 else end_s


def measure(dirs: list[str], mode: str, oracle: str) -> dict:
    active, base = runs(dirs, mode), runs(dirs, oracle)
    networks = []
    for key in sorted(active):
        if key not in base:
            continue
        mine, theirs = series(active[key]), series(base[key])
        if not mine or not theirs:
            continue
        end_s = phase_end_s(active[key], mine[-1][0] + 0.5)
        a = [(g1, g2) for mid, g1, g2 in mine if mid < end_s]
        o = [(g1, g2) for mid, g1, g2 in theirs if mid < end_s]
        if not a or not o:
            continue
        networks.append({"competitor": key[0], "repeat": key[1], "phase_s": round(end_s, 2),
                         "flow1_mbps": float(np.mean([x for x, _ in a])),
                         "competitor_mbps": float(np.mean([y for _, y in a])),
                         "oracle_flow1_mbps": float(np.mean([x for x, _ in o])),
                         "oracle_competitor_mbps": float(np.mean([y for _, y in o]))})
    return {"mode": mode, "oracle": oracle, "networks": networks}


def _ratio_row(nets: list[dict], mine: str, theirs: str) -> str:
    """The mean of per-network ratios (active over the oracle), with its bootstrap CI."""
    ratios = np.array([n[mine] / n[theirs] for n in nets if n[theirs] > 0])
    if not len(ratios):
        return "–"
    lo, hi = bootstrap.mean_interval(ratios)
    return f"{ratios.mean():.2f} ({lo:.2f}–{hi:.2f})"


def table(record: dict) -> str:
    by: dict[str, list] = {}
    for n in record["networks"]:
        by.setdefault(n["competitor"], []).append(n)
    order = [c for c in ("bbr", "vegas", "cubic", "reno") if c in by] + sorted(set(by) - {"bbr", "vegas", "cubic", "reno"})
    everyone = [n for c in order for n in by[c]]
    head = ("| before the first commit, over the same seconds of the oracle's run on the network | "
            + " | ".join(f"{c} ({len(by[c])})" for c in order) + " | all |")
    out = [head, "|---" * (len(order) + 2) + "|",
           "| the phase's seconds, median (range) | " + " | ".join(
               f"{np.median([n['phase_s'] for n in by[c]]):.1f} ({min(n['phase_s'] for n in by[c]):.1f}–"
               f"{max(n['phase_s'] for n in by[c]):.1f})" for c in order)
           + f" | {np.median([n['phase_s'] for n in everyone]):.1f} |"]
    for label, mine, theirs in (("flow 1's goodput over the oracle's (95 % CI)", "flow1_mbps", "oracle_flow1_mbps"),
                                ("the competitor's goodput over its own beside the oracle", "competitor_mbps",
                                 "oracle_competitor_mbps")):
        out.append(f"| {label} | " + " | ".join(_ratio_row(by[c], mine, theirs) for c in order)
                   + f" | {_ratio_row(everyone, mine, theirs)} |")
    both = [dict(n, total=n["flow1_mbps"] + n["competitor_mbps"],
                 oracle_total=n["oracle_flow1_mbps"] + n["oracle_competitor_mbps"]) for n in everyone]
    by_total = {c: [b for b in both if b["competitor"] == c] for c in order}
    out.append("| both flows' goodput over the oracle's pair | " + " | ".join(
        _ratio_row(by_total[c], "total", "oracle_total") for c in order) + f" | {_ratio_row(both, 'total', 'oracle_total')} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="*", help="experiment output directories (with runs/)")
    ap.add_argument("--mode", default="mirror active", help="the mode whose phase is measured")
    ap.add_argument("--oracle", default="oracle", help="the mode it is compared with on the same networks")
    ap.add_argument("--json-out", help="write the record here")
    ap.add_argument("--table", help="print the table of a record written before")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.load(open(args.table))))
        return 0
    if not args.dirs:
        ap.error("give the experiments' output directories, or --table RECORD")
    record = measure(args.dirs, args.mode, args.oracle)
    if not record["networks"]:
        print(f"no network has both a {args.mode!r} and an {args.oracle!r} run with series in {args.dirs}",
              file=sys.stderr)
        return 1
    record = {"provenance": stamp(), **record}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(record, f, indent=1)
    print(table(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
