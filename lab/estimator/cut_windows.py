"""The loss cut read over later windows (a development tool of 2026-12-07): for each recorded
active-identification run, the competitors' window at the bottleneck (Series.comp_window) over
RTTs a..b after each of their losses (not the first: the slow-start exit), over its mean in
the RTT before, as loss_cut reads it at (1, 3); the median per run, then over the runs of each
CCA. The shipped stage reads every CCA's cut at ~0.9 of its constant: this shows where along
the recovery and regrowth that comes from.

    python -m lab.estimator.cut_windows RESULTS_DIR [...] [--json-out F]
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from multiprocessing import Pool

import numpy as np

from estimator.identify.bottleneck import BIN_S
from lab.estimator.identify_replay import flow1_base_rtt_s, flow1_id, recorded_runs, recorded_series

#: (a, b): the window's mean over RTTs a..b after the loss; loss_cut reads (1, 3)
SHIFTS = ((1, 3), (2, 4), (3, 5), (4, 6))
QUIET_RTTS, MIN_PACKETS_BEFORE = 2, 8        # as loss_cut


def cuts(run_dir: str, record: dict):
    """(the competitors' CCA, {str(shift): [the cut of each loss event]}), None without records."""
    base = flow1_base_rtt_s(record["params"])
    own = flow1_id(run_dir)
    if own is None:
        return None
    s, _ = recorded_series(run_dir, own, base)
    if s is None:
        return None
    rtt_bins = np.maximum(np.round((base + s.queue_delay_s()) / BIN_S).astype(int), 1)
    windows = s.comp_window(base)
    out = {str(sh): [] for sh in SHIFTS}
    last_b = max(b for _, b in SHIFTS)
    for f in range(s.comp.shape[0]):
        lost, packets, w = s.comp_lost[f], s.comp[f], windows[f]
        had = np.concatenate(([0], np.cumsum(lost > 0)))
        for k in np.flatnonzero(lost > 0)[1:]:          # the first: the slow-start exit
            r = int(rtt_bins[k])
            if k < QUIET_RTTS * r or k + last_b * r > len(packets) or had[k] - had[k - QUIET_RTTS * r] > 0 \
                    or packets[k - r:k].sum() < MIN_PACKETS_BEFORE:
                continue
            was = w[k - r:k].mean()
            if not np.isfinite(was) or was <= 0:
                continue
            for a, b in SHIFTS:
                out[str((a, b))].append(float(w[k + a * r:k + b * r].mean() / was))
    return record["competitor"], out


def job(args):
    return cuts(*args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    jobs = recorded_runs(args.results, algorithm="mirror active")
    agg = defaultdict(lambda: defaultdict(list))
    with Pool(2) as pool:
        for r in pool.imap_unordered(job, jobs):
            if r is None:
                continue
            cca, out = r
            for sh, v in out.items():
                if v:
                    agg[cca][sh].append(float(np.median(v)))
    summary = {cca: {sh: {"runs": len(v), "median": round(float(np.median(v)), 3)} for sh, v in by.items()}
               for cca, by in sorted(agg.items())}
    for cca, by in summary.items():
        print(cca, "  ".join(f"RTTs {sh}: {x['median']:.3f} ({x['runs']} runs)" for sh, x in by.items()))
    if args.json_out:
        from records.provenance import stamp
        made = stamp()       # before the file is opened: rewriting a tracked record is no change to the code
        with open(args.json_out, "w") as f:
            json.dump({"provenance": made, "results": args.results, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
