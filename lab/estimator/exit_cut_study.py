"""How far each competitor's window falls after its first loss, on recorded runs (a
development study of 2026-12-07, the ground of estimator/identify/exit_cut.py's centres):
its mean window at the bottleneck over rounds a..b after the loss (a round: its base RTT and
the queue's delay) over its peak in the two rounds before, per CCA, at several a..b; and
the stage's own reading (exit_cut.exit_ratio) by the buffer's size in BDPs.

    python -m lab.estimator.exit_cut_study RESULTS_DIR [...] [--competitor-rtt oracle|flow1] [--json-out F]
    python -m lab.estimator.exit_cut_study --table F
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

#: (a, b): the window's mean over rounds a..b after the first loss
SHIFTS = ((1, 3), (2, 4), (4, 6), (6, 8))
BUFFERS_BDP = ((0.0, 1.5), (1.5, 4.0), (4.0, float("inf")))


def _one(job):
    from estimator.identify import exit_cut
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
    windows = s.comp_window(np.full(s.comp.shape[0], rtt_s))
    delay = s.queue_delay_s()
    comps = []
    for f in range(s.comp.shape[0]):
        sent = np.flatnonzero(s.comp[f] > 0)
        lost = np.flatnonzero(s.comp_lost[f] > 0)
        if not sent.size or sent[0] == 0 or not lost.size or lost[0] == 0:
            continue
        loss = int(lost[0])
        starts = [loss]
        while len(starts) <= max(b for _, b in SHIFTS) and starts[-1] < s.n:
            starts.append(starts[-1] + max(1, int(round((rtt_s + float(delay[min(starts[-1], s.n - 1)])) / BIN_S))))
        before = windows[f][max(0, loss - (starts[1] - loss) * exit_cut.PEAK_ROUNDS):loss + 1]
        before = before[np.isfinite(before)]
        peak = float(before.max()) if before.size else 0.0
        fell = {}
        for a, b in SHIFTS:
            if b < len(starts) and starts[b] <= s.n and peak > 0:
                after = windows[f][starts[a]:starts[b]]
                after = after[np.isfinite(after)]
                fell[f"{a}-{b}"] = round(float(after.mean()) / peak, 3) if after.size else None
        read = exit_cut.exit_ratio(s, f, rtt_s, windows[f])
        comps.append({"fell": fell, "peak_pkts": round(peak, 1),
                      "stage": None if read is None else round(read[0], 3),
                      "lost_after_s": round(float((loss - sent[0]) * BIN_S), 2)})
    bdp = s.port_pps * rtt_s
    return {"run": record["run"], "truth": record["competitor"], "buffer_bdp": round(s.buffer_pkts / bdp, 2) if bdp else None,
            "competitors": comps}


def _pct(v) -> str:
    return f"{np.median(v):.2f} ({np.percentile(v, 25):.2f}–{np.percentile(v, 75):.2f})" if v else "–"


def table(rows) -> str:
    ccas = sorted({r["truth"] for r in rows})
    by = defaultdict(list)
    stage = defaultdict(list)
    for r in rows:
        for c in r["competitors"]:
            for k, v in c["fell"].items():
                if v is not None:
                    by[(r["truth"], k)].append(v)
            if c["stage"] is not None and r["buffer_bdp"] is not None:
                band = next(f"{lo:g}–{hi:g}" for lo, hi in BUFFERS_BDP if lo <= r["buffer_bdp"] < hi)
                stage[(r["truth"], band)].append(c["stage"])
    lines = ["| window over its peak, rounds after the first loss (median, 25th–75th) | " + " | ".join(ccas) + " |",
             "|---|" + "---|" * len(ccas)]
    for a, b in SHIFTS:
        lines.append(f"| {a}–{b} | " + " | ".join(f"{_pct(by[(c, f'{a}-{b}')])}, {len(by[(c, f'{a}-{b}')])}" for c in ccas) + " |")
    for lo, hi in BUFFERS_BDP:
        band = f"{lo:g}–{hi:g}"
        lines.append(f"| the stage's reading, buffer {band} BDP | "
                     + " | ".join(f"{_pct(stage[(c, band)])}, {len(stage[(c, band)])}" for c in ccas) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from lab.estimator.identify_replay import study_main
    return study_main(__doc__, _one, table, argv)


if __name__ == "__main__":
    raise SystemExit(main())
