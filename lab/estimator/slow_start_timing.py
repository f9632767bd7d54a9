"""When the competitors' slow starts end, on recorded runs (a development study of
2026-12-07): for each competitor, how the slow_start stage reads its end over the whole
run (estimator/identify/slow_start.py: "lost" where its first loss came first, "deep",
"held", "drained", or undecided) and when after its first packet at the bottleneck; and per
run whether every competitor's had ended by 3 s. Before a slow start ends, no stage's model
holds: it bounds what any reading of the competitor can say by then.

    python -m lab.estimator.slow_start_timing RESULTS_DIR [...] [--competitor-rtt oracle|flow1] [--json-out F]
    python -m lab.estimator.slow_start_timing --table F
"""
from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

BY_S = 3.0


def _one(job):
    from estimator.identify import slow_start
    from estimator.identify.bottleneck import BIN_S
    from lab.estimator.identify_replay import competitor_base_rtt_s, flow1_base_rtt_s, flow1_id, recorded_series
    run_dir, record, competitor_rtt = job
    p = record["params"]
    own = flow1_id(run_dir)
    if own is None:
        return None
    s, _ = recorded_series(run_dir, own, flow1_base_rtt_s(p))
    if s is None:
        return None
    rtt_s = competitor_base_rtt_s(p) if competitor_rtt == "oracle" else flow1_base_rtt_s(p)
    comps = []
    for f in range(s.comp.shape[0]):
        sent = np.flatnonzero(s.comp[f] > 0)
        what, at = slow_start.outcome(s, f, rtt_s)
        ended_s = None if at is None or not sent.size else round(float((at - sent[0]) * BIN_S), 2)
        comps.append({"outcome": what, "ended_s": ended_s})
    return {"run": record["run"], "truth": record["competitor"], "competitor_base_rtt_s": round(rtt_s, 4),
            "competitors": comps}


def table(rows) -> str:
    counts, times = Counter(), defaultdict(list)
    for r in rows:
        for c in r["competitors"]:
            counts[(r["truth"], c["outcome"])] += 1
            if c["ended_s"] is not None:
                times[(r["truth"], c["outcome"])].append(c["ended_s"])
    lines = ["| competitor | slow start read as | competitors | read after its first packet, s (median, 25th–75th) |",
             "|---|---|---|---|"]
    for (truth, what), n in sorted(counts.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        t = times.get((truth, what))
        span = f"{np.median(t):.1f} ({np.percentile(t, 25):.1f}–{np.percentile(t, 75):.1f})" if t else "–"
        lines.append(f"| {truth} | {what or 'undecided by the end'} | {n} | {span} |")
    ended = sum(all(c["ended_s"] is not None and c["ended_s"] <= BY_S for c in r["competitors"]) for r in rows)
    lines.append(f"\nruns whose every competitor's slow start was read as ended within {BY_S:g} s: {ended} of {len(rows)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    from lab.estimator.identify_replay import study_main
    return study_main(__doc__, _one, table, argv)


if __name__ == "__main__":
    raise SystemExit(main())
