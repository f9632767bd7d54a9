"""How short the migrated flow's FCT can be without harming the main flow more than kernel
CUBIC does: an upper bound on its goodput from a reconfiguration_int record, against the
issue's target (a prolongation at most half of kernel CUBIC's).

The migrated flow is on the circuit (a path of its own) every other period, minus the
night; there it can have the whole path, g_none (its goodput without reconfiguration). On
the shared path the main flow keeps the path full (every setting's main flow stays near the
path's rate), so whatever the migrated flow gets there, the main flow loses; "no more harm
than kernel CUBIC" allows g_none - main_beside_cubic. So

    g_max = g_none * (P - D) / (2 P) + (g_none - main_beside_cubic)
    prolongation floor = 100 (g_none / g_max - 1)

    python -m lab.reconfig.harm_bound data/experiments/reconfiguration_int-seed7107-2026-12-05.json
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict


def period_and_night_ms(setting: str) -> tuple[float, float]:
    period, _, night = setting.partition("/")
    return float(period.removesuffix("ms")), float(night.removesuffix("ms") or 0)


def bound_rows(records: list[dict], baseline: str = "kernel cubic", candidate: str | None = None) -> list[dict]:
    by = defaultdict(list)
    for r in records:
        by[(r["algorithm"], r["reconfig"])].append(r)
    algorithms = sorted({a for a, _ in by})
    candidate = candidate or next((a for a in algorithms if a != baseline), None)
    g_none = statistics.mean(r["goodput_mbps"] for r in by[(baseline, "none")])
    rows = []
    for (alg, setting), runs in sorted(by.items(), key=lambda kv: (kv[0][0], period_and_night_ms(kv[0][1])
                                                                     if kv[0][1] != "none" else (0.0, 0.0))):
        if alg != baseline or setting == "none":
            continue
        period_ms, night_ms = period_and_night_ms(setting)
        main = statistics.mean(r["competitor_goodput_mbps"] for r in runs)
        g_kernel = statistics.mean(r["goodput_mbps"] for r in runs)
        g_max = g_none * (period_ms - night_ms) / (2 * period_ms) + max(g_none - main, 0.0)
        row = {"setting": setting, "g_none": g_none, "main_beside_cubic": main, "g_kernel": g_kernel,
               "g_max": g_max, "prolongation_kernel_pct": 100 * (g_none / g_kernel - 1),
               "prolongation_floor_pct": 100 * (g_none / g_max - 1)}
        row["target_pct"] = row["prolongation_kernel_pct"] / 2
        row["reachable"] = row["prolongation_floor_pct"] <= row["target_pct"]
        if candidate and by.get((candidate, setting)):
            g = statistics.mean(r["goodput_mbps"] for r in by[(candidate, setting)])
            row["candidate"] = candidate
            row["candidate_pct"] = 100 * (statistics.mean(r["goodput_mbps"] for r in by[(candidate, "none")]) / g - 1)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("record", help="a reconfiguration_int summary.json or its committed record")
    ap.add_argument("--baseline", default="kernel cubic")
    args = ap.parse_args(argv)
    rows = bound_rows(json.load(open(args.record))["records"], args.baseline)
    cand = rows[0].get("candidate") if rows else None
    head = ["setting", "main beside CUBIC, Mbit/s", "migrated at most, Mbit/s", "prolongation: kernel CUBIC %",
            "target (half) %", "floor without more harm %", "reachable"] + ([f"{cand} %"] if cand else [])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [r["setting"], f"{r['main_beside_cubic']:.2f}", f"{r['g_max']:.2f}", f"+{r['prolongation_kernel_pct']:.0f}",
                 f"+{r['target_pct']:.0f}", f"+{r['prolongation_floor_pct']:.0f}", "yes" if r["reachable"] else "no"]
        cells += [f"+{r['candidate_pct']:.0f}"] if "candidate_pct" in r else []
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
