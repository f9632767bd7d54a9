"""Active identification when the competitor changes (issue 66: "a competitor that arrives
10 s late, one that is replaced by a flow of another CCA, and one that leaves: each
re-identified within the same targets; no second of zero goodput").

Reads a run of ``lab/scenarios/identify_changes.toml`` (summary.json and each run's
trace.csv and series.csv). Per run, the change is at T: the late competitor's start, the
replacement's start, or the competitor's leaving (the record's competitor_windows_s).

- late, replaced: the first commit after T (a "probe -> X: identified Y" switch): right
  where Y is the CCA of the competitor then; its time from T (within 3 s / 8 s, the issue's
  targets); the flow's verdict at the end (its last commit, none where it ends on the probe).
- leaves: whether the agent went back to the probe on "the competitor left" (or was on it
  already), how soon; flow 1's goodput over the bottleneck's rate from T + 5 s to the end.
- every arm: flow 1's seconds of zero goodput (its first 2 s and last one left out).

    python -m lab.estimator.competitor_changes RESULTS [--json-out FILE]
    python -m lab.estimator.competitor_changes --table FILE
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys

from experiments.runs.metrics import sender_rows
from lab.estimator.identify_table import wilson
from records.provenance import stamp

COMMIT_MARK = ": identified "


def events(trace_csv: str) -> tuple[list, list]:
    """(commits, returns to the probe) of flow 1's connection: [(s from its start, what)]."""
    rows = sender_rows(trace_csv)
    if not rows:
        return [], []
    start = next((float(r["t_s"]) for r in rows if r["event"] == "start"), float(rows[0]["t_s"]))
    commits, back = [], []
    for r in rows:
        if r["event"] != "switch" or " -> " not in r["reason"]:
            continue
        t, reason = float(r["t_s"]) - start, r["reason"]
        if reason.startswith("probe -> ") and COMMIT_MARK in reason:
            commits.append((t, reason.split(COMMIT_MARK, 1)[1].split(" ", 1)[0]))
        elif " -> probe: " in reason:
            back.append((t, reason.split(" -> probe: ", 1)[1]))
    return commits, back


def zero_goodput_s(series_csv: str) -> int:
    with open(series_csv) as f:
        rows = list(csv.DictReader(f))[2:-1]
    return sum(1 for r in rows if float(r["goodput_mbps"]) == 0)


def measure_run(rec: dict, run_dir: str) -> dict:
    windows = rec.get("competitor_windows_s")
    arm = rec["algorithm"]
    if arm == "late":
        change_s, truth = float(rec.get("competitor_delay_s", 0.0)), rec["competitor"]
    elif windows and len(windows) == 2:
        change_s, truth = float(windows[1][0]), (rec.get("competitor_ccas") or [None, None])[1]
    elif windows:
        change_s, truth = float(windows[0][0] + windows[0][1]), None
    else:
        raise ValueError(f"{run_dir}: no competitor change in its record (not identify_changes?)")
    commits, back = events(os.path.join(run_dir, "trace.csv"))
    out = {"arm": arm, "run": rec["run"], "competitor": rec["competitor"], "truth": truth, "change_s": change_s,
           "zero_goodput_s": zero_goodput_s(os.path.join(run_dir, "series.csv")),
           "buffer_bdp": rec["params"].get("buffer_bdp")}
    after = [(t, y) for t, y in commits if t >= change_s]
    last_commit = commits[-1] if commits else None
    ends_on_probe = bool(back) and (last_commit is None or back[-1][0] > last_commit[0])
    if truth is not None:
        first = after[0] if after else None
        out |= {"first_after": first[1] if first else None,
                "first_after_s": round(first[0] - change_s, 2) if first else None,
                "final": None if ends_on_probe or last_commit is None or last_commit[0] < change_s
                else last_commit[1]}
    else:
        left = [t for t, why in back if t >= change_s and "left" in why]
        before = sorted([(t, "commit") for t, _ in commits] + [(t, "probe") for t, _ in back])
        before = [kind for t, kind in before if t < change_s]
        on_probe_then = not before or before[-1] == "probe"      # alone on the probe: at the port's rate
        out |= {"noticed_s": round(left[0] - change_s, 2) if left else (0.0 if on_probe_then else None)}
        with open(os.path.join(run_dir, "series.csv")) as f:
            rows = [r for r in csv.DictReader(f) if float(r["t_s"]) > change_s + 5]
        rate = rec["params"].get("bottleneck_mbps")
        if rows and rate:
            out["link_use_after"] = round(statistics.mean(float(r["goodput_mbps"]) for r in rows) / rate, 3)
    return out


def measure(results: str) -> dict:
    with open(os.path.join(results, "summary.json")) as f:
        summary = json.load(f)
    runs = []
    for rec in summary["records"]:
        if "error" in rec or "run" not in rec:
            continue
        run_dir = os.path.join(results, "runs", rec["run"])
        if os.path.exists(os.path.join(run_dir, "trace.csv")):
            runs.append(measure_run(rec, run_dir))
    return {"source": summary.get("provenance"), "runs": runs}


def _median(xs) -> str:
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):.1f} s" if xs else "–"


def table(record: dict) -> str:
    runs = record["runs"]
    out = ["| competitor change (at T) | runs | first commit after T right | ... within 3 s / 8 s of T "
           "| median time to it | verdict at the end right | zero goodput of flow 1 |", "|---|---|---|---|---|---|---|"]
    for arm, label in (("late", "arrives 10 s after flow 1"), ("replaced", "replaced 20 s after its start")):
        rs = [r for r in runs if r["arm"] == arm]
        if not rs:
            continue
        right = [r for r in rs if r["first_after"] == r["truth"]]
        in3 = sum(1 for r in right if r["first_after_s"] <= 3)
        in8 = sum(1 for r in right if r["first_after_s"] <= 8)
        zero = [r["zero_goodput_s"] for r in rs]
        out.append(f"| {label} | {len(rs)} | {wilson(len(right), len(rs))} | {wilson(in3, len(rs))} / "
                   f"{wilson(in8, len(rs))} | {_median(r['first_after_s'] for r in right)} "
                   f"| {wilson(sum(1 for r in rs if r['final'] == r['truth']), len(rs))} "
                   f"| {sum(zero)} s in {sum(1 for z in zero if z)} runs |")
    rs = [r for r in runs if r["arm"] == "leaves"]
    if rs:
        noticed = [r for r in rs if r.get("noticed_s") is not None]
        use = [r["link_use_after"] for r in rs if r.get("link_use_after") is not None]
        zero = [r["zero_goodput_s"] for r in rs]
        out.append(f"| leaves 20 s after its start: back to the probe, alone | {len(rs)} | "
                   f"{wilson(len(noticed), len(rs))} | – | {_median(r['noticed_s'] for r in noticed)} | flow 1's "
                   f"goodput over the link's rate from T + 5 s: median {statistics.median(use):.2f} "
                   f"({min(use):.2f}–{max(use):.2f}) | {sum(zero)} s in {sum(1 for z in zero if z)} runs |"
                   if use else f"| leaves | {len(rs)} | {wilson(len(noticed), len(rs))} | – | – | – | – |")
    wrong = [f"{r['run']}: {r.get('first_after')} for {r['truth']}" for r in runs
             if r["arm"] in ("late", "replaced") and r.get("first_after") != r["truth"]]
    if wrong:
        out += ["", "Not right first: " + "; ".join(wrong) + "."]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="?", help="the experiment's output directory (summary.json, runs/)")
    ap.add_argument("--json-out", help="write the record here")
    ap.add_argument("--table", help="print the table of a record written before")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.load(open(args.table))))
        return 0
    if not args.results:
        ap.error("give the experiment's output directory, or --table RECORD")
    try:
        record = {"provenance": stamp(), **measure(args.results)}
    except (OSError, ValueError, KeyError) as e:
        print(f"competitor_changes: {e}", file=sys.stderr)
        return 1
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(record, f, indent=1)
    print(table(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
