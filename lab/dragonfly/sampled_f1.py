"""Dragonfly's F1 when the node samples packets before its first-packet-per-slot capture:
models trained on full captures (`intcc estimator dragonfly train`) scored by `intcc
estimator dragonfly eval --json-out RECORD` on results of the same network captured at 1,
1/4 and 1/16 (lab/scenarios/dragonfly_fixed_sample*.toml; sampled captures are read
interpolated). This prints the table of such records.

    python -m lab.dragonfly.sampled_f1 RECORD...
"""
from __future__ import annotations

import json
import os
import sys

from lab.dragonfly import print_tables


def _sampling(results_dir: str) -> str:
    with open(os.path.join(results_dir, "summary.json")) as f:
        shares = {(r.get("params") or {}).get("flow_slots", True) for r in json.load(f)["records"]}
    share = shares.pop() if len(shares) == 1 else None
    if share is None:
        return "mixed"
    return "1" if share is True or float(share) >= 1 else f"1/{round(1 / float(share))}"


def table(records: list[dict]) -> list[str]:
    rows = ["| model | inputs | trained at sampling | scored on (flows) | capture sampling | "
            "macro F1 (95 % CI over flows) | F1 per class |",
            "|---|---|---|---|---|---|---|"]
    for r in records:
        (results,) = r["results"]
        lo, hi = r["macro_f1_ci95_by_flow"]
        trained = ", ".join(sorted({_sampling(d) for d in r["model_meta"]["trained_on"].split()}))
        rows.append(f"| `{os.path.basename(r['model'])}` | {', '.join(r.get('inputs', ['cbiq', 'ingress']))} | {trained} | "
                    f"`{os.path.basename(results.rstrip('/'))}` ({r['flows']}) | {_sampling(results)} | "
                    f"{r['macro_f1']:.2f} ({lo:.2f}–{hi:.2f}) | "
                    + ", ".join(f"{c} {v:.2f}" for c, v in r["f1"].items()) + " |")
    return rows


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0 if len(sys.argv) > 1 else 2)
    raise SystemExit(print_tables(sys.argv[1:], table))
