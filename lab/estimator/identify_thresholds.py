"""The commit threshold of active identification, read off development replays: each run of
identify_replay's records replayed at several posterior thresholds (the evidence is the
same; only where the test commits changes), and per threshold the first commit after the
competitor's start (right, wrong, none), right within 3 s / 8 s, the committed verdict at the
end, and commits followed by another hypothesis (flips).

    python -m lab.estimator.identify_thresholds --from-replays REPLAY.json [...] --json-out RECORD
        (REPLAY: identify_replay --threshold T --json-out REPLAY, any number of thresholds and seeds)
    python -m lab.estimator.identify_thresholds --table RECORD          (the table in docs/estimator.md)

The record keeps, per threshold and run, what the table needs (truth, the competitor's start,
the commits, the final verdict) and the replays' provenance."""
from __future__ import annotations

import argparse
import json
import statistics

from lab.estimator.identify_table import commits_after, wilson
from records.provenance import stamp


def _run_row(run: dict) -> dict:
    keep = ("run", "truth", "competitor_at_s", "first_commit", "commits", "final_verdict", "before_tcp_commit")
    return {k: run[k] for k in keep if k in run}


def collect(replays: list[dict], results: list[str]) -> dict:
    by_threshold: dict = {}
    for rep in replays:
        t = f"{rep['threshold']:g}"
        for run in rep["runs"]:
            if "error" not in run:
                by_threshold.setdefault(t, []).append(_run_row(run))
    return {"replays": [{"results": rep["results"], "threshold": rep["threshold"], "provenance": rep["provenance"]}
                        for rep in replays],
            "runs": by_threshold, "sources": results}


def row(threshold: str, runs: list[dict]) -> str:
    n = len(runs)
    firsts = []
    for r in runs:
        after = commits_after(r)
        if not after:
            firsts.append(None)
            continue
        at = r.get("competitor_at_s") or 0.0
        when = next(t for t, v in r["commits"] if v == after[0] and t >= at)
        firsts.append((when - at, after[0]))
    right = [f for f, r in zip(firsts, runs) if f is not None and f[1] == r["truth"]]
    wrong = sum(f is not None and f[1] != r["truth"] for f, r in zip(firsts, runs))
    final = sum(r["final_verdict"] == r["truth"] for r in runs)
    committed = [commits_after(r) for r in runs]
    commits = sum(len(c) for c in committed)
    flips = sum(sum(a != b for a, b in zip(c, c[1:])) for c in committed)
    median = f"{statistics.median(s for s, _ in right):.1f} s" if right else "–"
    return (f"| {threshold} | {wilson(len(right), n)} | {wrong} | {n - len(right) - wrong} | "
            f"{sum(s <= 3 for s, _ in right)} / {sum(s <= 8 for s, _ in right)} | {median} | {wilson(final, n)} | "
            f"{flips} of {commits} |")


def table(record: dict) -> list[str]:
    rows = ["| threshold | first commit after the competitor's start right | wrong | none | right within 3 s / 8 s | "
            "median time to a right one | committed verdict at the end right | commits followed by another |",
            "|---|---|---|---|---|---|---|---|"]
    return rows + [row(t, runs) for t, runs in sorted(record["runs"].items(), key=lambda kv: -float(kv[0]))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from-replays", nargs="+", metavar="REPLAY", help="identify_replay --json-out records")
    ap.add_argument("--json-out", help="the record to write (with --from-replays)")
    ap.add_argument("--table", metavar="RECORD", help="print the table of a record")
    args = ap.parse_args(argv)
    if bool(args.from_replays) == bool(args.table):
        ap.error("give --from-replays (with --json-out) or --table")
    if args.table:
        with open(args.table) as f:
            print("\n".join(table(json.load(f))))
        return 0
    replays = []
    for path in args.from_replays:
        with open(path) as f:
            replays.append(json.load(f))
    record = collect(replays, args.from_replays)
    print("\n".join(table(record)))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({**record, "provenance": stamp(
                "python -m lab.estimator.identify_thresholds --from-replays REPLAY... --json-out " + args.json_out)},
                f, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
