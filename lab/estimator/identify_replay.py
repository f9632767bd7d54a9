"""Active identification replayed on recorded runs (a development tool of 2026-12-02):
each run's hop records (``intcc exp run ... --record-telemetry``: runs/*/telemetry.jsonl.gz)
fed to an Identifier in the order they arrived, stepped every 0.25 s as the agent's child
does, flow 1 named by the run's identify records. Prints per run the truth, when the first
commit came (s after the first record) and to what, the final best hypothesis, and each
stage's median measurement: the stages can be changed and re-read without re-running.

    python -m lab.estimator.identify_replay RESULTS_DIR [RESULTS_DIR ...] [--json-out F]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
from collections import defaultdict

import numpy as np

from estimator.identify.identifier import Identifier
from experiments.runs.telemetry_record import read_records
from records.provenance import stamp

STEP_S = 0.25
ACCESS_DELAY_MS = 1.0


def flow1_id(run_dir: str) -> str | None:
    ids = [rec.flow_id for _, rec in read_records(run_dir, types=("identify", "switch"))]
    return max(set(ids), key=ids.count) if ids else None


def replay(run_dir: str, record: dict) -> dict:
    own = flow1_id(run_dir)
    p = record["params"]
    base_rtt_s = 2 * (p["bottleneck_delay_ms"] + 2 * (ACCESS_DELAY_MS + p.get("main_extra_delay_ms", 0.0))) / 1e3
    out = {"run": record["run"], "truth": record["competitor"], "params": p, "flow1": own}
    if own is None:
        return {**out, "error": "no identify record names flow 1"}
    idf = Identifier(own, base_rtt_s=base_rtt_s)
    t0 = next_step = None
    first_commit = None
    stages = defaultdict(list)
    for rx_s, rec in read_records(run_dir):
        t0 = rx_s if t0 is None else t0
        next_step = rx_s + STEP_S if next_step is None else next_step
        idf.add(rec)
        if rx_s >= next_step:
            next_step += STEP_S
            for ev in idf.step():
                stages[ev.stage].append(ev.measured)
            if first_commit is None and idf.verdict() is not None:
                first_commit = (round(rx_s - t0, 2), idf.verdict())
    best, post = idf.test.best()
    return {**out, "first_commit": first_commit, "final_best": best, "final_posterior": round(post, 3),
            "stages": {k: [round(float(np.median(v)), 3), len(v)] for k, v in stages.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="an 'intcc exp run' output directory with recorded telemetry")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    rows = []
    for res in args.results:
        with open(os.path.join(res, "summary.json")) as f:
            records = {r["run"]: r for r in json.load(f)["records"]}
        for run_dir in sorted(glob.glob(os.path.join(res, "runs", "*"))):
            name = os.path.basename(run_dir)
            if name in records and os.path.exists(os.path.join(run_dir, "telemetry.jsonl.gz")):
                rows.append(replay(run_dir, records[name]))
    right = wrong = final_right = 0
    for r in rows:
        if "error" in r:
            print(f"{r['run']}: {r['error']}")
            continue
        commit = r["first_commit"]
        ok = commit is not None and commit[1] == r["truth"]
        right += ok
        wrong += commit is not None and not ok
        final_right += r["final_best"] == r["truth"]
        p = r["params"]
        print(f"{r['truth']:6s} {p['bottleneck_mbps']:5.1f} Mbit/s {p['bottleneck_delay_ms']:5.1f} ms "
              f"{p['buffer_bdp']:5.1f} BDP  commit {str(commit):22s} "
              f"{'right' if ok else 'undecided' if commit is None else 'WRONG'}  "
              f"final {r['final_best']} {r['final_posterior']:.2f}  "
              + " ".join(f"{k}={v[0]}({v[1]})" for k, v in sorted(r["stages"].items())))
    n = sum("error" not in r for r in rows)
    print(f"{n} runs: first commit right {right}, wrong {wrong}, undecided {n - right - wrong}; "
          f"the most likely hypothesis at the end right in {final_right}")
    if args.json_out:
        made = stamp()       # before the file is opened: rewriting a tracked record is no change to the code
        with open(args.json_out, "w") as f:
            json.dump({"provenance": made, "results": args.results, "runs": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
