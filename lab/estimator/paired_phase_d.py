"""Two fairness_switching records of the same networks (seed, competitor, repeat), run by
two versions of one mode, compared run by run: the goodput difference D over the whole run
and per phase (before the first commit, on the right CCA), beside the oracle's D on the
same network, and the mean paired change in |D| per competitor.

    python -m lab.estimator.paired_phase_d BEFORE.json AFTER.json BASE.json [--mode 'mirror active']

BEFORE and AFTER may each be several records joined by commas (a seed run in parts).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics


def phase_d(record: dict, phase: str) -> float:
    """A phase's mean D: its part of the run's D over its share of the run's seconds."""
    parts = record["goodput_difference_parts"]
    seconds = parts["seconds"][phase]
    return parts["parts"][phase] / seconds * record["seconds"] if seconds else math.nan


def _mean_phase(pairs: list, which: int, phase: str = "start") -> float:
    """The mean of a phase's D over the pairs' runs that had it (BEFORE's: which 0)."""
    ds = [phase_d(p[which], phase) for p in pairs]
    ds = [d for d in ds if not math.isnan(d)]
    return statistics.mean(ds) if ds else math.nan


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", help="summary.json or record of the mode before the change")
    ap.add_argument("after", help="... after it, on the same seed")
    ap.add_argument("base", help="the record holding the oracle's runs of the same networks")
    ap.add_argument("--oracle", default="oracle", help="the mode whose D is printed beside (default oracle)")
    ap.add_argument("--mode", help="only the runs of this mode in BEFORE and AFTER (where they hold several)")
    args = ap.parse_args(argv)

    def runs(paths: str) -> list[dict]:
        records = [r for p in paths.split(",") for r in json.load(open(p))["records"]]
        return [r for r in records if args.mode is None or r["algorithm"] == args.mode]
    before = {(r["competitor"], r["repeat"]): r for r in runs(args.before)}
    oracle = {(r["competitor"], r["repeat"]): r for p in args.base.split(",") for r in json.load(open(p))["records"]
              if r["algorithm"] == args.oracle}
    paired: dict[str, list] = {}
    for r in runs(args.after):
        key = (r["competitor"], r["repeat"])
        if key not in before:
            continue
        b, o = before[key], oracle.get(key)
        paired.setdefault(r["competitor"], []).append((b, r))
        print(f"{key[0]:6} r{key[1]}  D before {b['goodput_difference']:+.3f} after {r['goodput_difference']:+.3f}"
              f" oracle {o['goodput_difference'] if o else math.nan:+.3f} | on the right CCA before"
              f" {phase_d(b, 'right'):+.3f} after {phase_d(r, 'right'):+.3f} | before a commit before"
              f" {phase_d(b, 'start'):+.3f} after {phase_d(r, 'start'):+.3f} | ends on {b['final_algorithm']}"
              f" / {r['final_algorithm']}")
    for competitor, pairs in paired.items():
        change = [abs(a["goodput_difference"]) - abs(b["goodput_difference"]) for b, a in pairs]
        sd = statistics.stdev(change) if len(change) > 1 else math.nan
        print(f"{competitor}: {len(pairs)} networks, mean |D| before {statistics.mean(abs(b['goodput_difference']) for b, _ in pairs):.3f}"
              f" after {statistics.mean(abs(a['goodput_difference']) for _, a in pairs):.3f},"
              f" paired change {statistics.mean(change):+.3f} (sd {sd:.3f}, se {sd / math.sqrt(len(change)):.3f});"
              f" before a commit, mean D before {_mean_phase(pairs, 0):+.3f} after {_mean_phase(pairs, 1):+.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
