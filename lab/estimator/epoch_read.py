"""How well the competitors' CUBIC epoch is read off their packets at the bottleneck
(Identifier.competitor_epoch), on recorded runs against kernel CUBIC: at each second of a
run where an epoch is read, the curve it gives is carried DELTA_S ahead and compared with
the competitor's window measured there (its rate over the base RTT and its queued packets,
bottleneck.Series.comp_window), where no loss of its came in between. Beside it, the curve
a CUBIC begun afresh at that moment would follow from the same window (K 0, origin the
window then): what a switch without the epoch went on along. (The epoch after a loss, read
from the competitor's last loss episode, gave twice the growth measured, where the fresh
curve's matched: competitor_epoch reads it before the first loss only.)

    python -m lab.estimator.epoch_read RESULTS_DIR [--delta 3] [--json-out F]
"""
from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

from estimator.identify.bottleneck import BIN_S
from estimator.identify.identifier import Identifier
from estimator.identify.queue_trend import CUBIC_C
from experiments.runs.telemetry_record import read_records
from lab.estimator.identify_replay import ACCESS_DELAY_MS, STEP_S, flow1_id
from records.provenance import stamp


def curve(origin: float, k_s: float, t_s: float) -> float:
    return origin + CUBIC_C * (t_s - k_s) ** 3


def run_points(run_dir: str, record: dict, delta_s: float) -> list:
    p = record["params"]
    base_rtt_s = 2 * (p["bottleneck_delay_ms"] + 2 * (ACCESS_DELAY_MS + p.get("main_extra_delay_ms", 0.0))) / 1e3
    own = flow1_id(run_dir)
    if own is None:
        return []
    idf = Identifier(own, base_rtt_s=base_rtt_s)
    reads, nxt, last_read = [], None, -1.0
    for rx, rec in read_records(run_dir, types=("hop",)):
        nxt = rx + STEP_S if nxt is None else nxt
        idf.add(rec)
        if rx < nxt:
            continue
        nxt += STEP_S
        idf.step()
        s = idf.series
        if s is None or not s.comp.shape[0]:
            continue
        now_s = s.t0_s + s.n * BIN_S
        if now_s - last_read < 1.0:
            continue
        last_read = now_s
        epoch = idf.competitor_epoch()
        if epoch is not None:
            f = int(np.argmax(s.comp[:, -100:].sum(axis=1)))
            w_now = float(np.nanmean(s.comp_window(base_rtt_s)[f][-int(1 / BIN_S):-int(0.5 / BIN_S)]))
            reads.append((now_s, s.comp_ids[f], epoch, w_now))
    # the measured windows, from the whole run's series at its end (keep_s covers the run)
    s = idf.series
    if s is None:
        return []
    out = []
    for now_s, fid, (origin, k_s, age_s), w_now in reads:
        if fid not in s.comp_ids:
            continue
        f = s.comp_ids.index(fid)
        lo = int(round((now_s - s.t0_s) / BIN_S))
        hi = int(round((now_s + delta_s - s.t0_s) / BIN_S))
        if hi + int(0.5 / BIN_S) >= s.n or s.comp_lost[f, lo:hi + 1].any() or not np.isfinite(w_now):
            continue
        measured = float(np.nanmean(s.comp_window(base_rtt_s)[f][hi - int(0.25 / BIN_S):hi + int(0.25 / BIN_S)]))
        if not np.isfinite(measured) or measured <= 0:
            continue
        ahead = curve(origin, k_s, age_s + delta_s)
        fresh = w_now + CUBIC_C * delta_s ** 3
        out.append({"run": os.path.basename(run_dir), "age_s": round(age_s, 2), "k_s": round(k_s, 2),
                    "window_now": round(w_now, 1), "measured": round(measured, 1),
                    "growth_measured": round(measured - w_now, 1), "growth_epoch": round(ahead - w_now, 1),
                    "growth_fresh": round(fresh - w_now, 1)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--delta", type=float, default=3.0, help="seconds ahead the curve is carried")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    points = []
    for res in args.results:
        with open(os.path.join(res, "summary.json")) as f:
            records = {r["run"]: r for r in json.load(f)["records"] if r.get("competitor") == "cubic"}
        for run_dir in sorted(glob.glob(os.path.join(res, "runs", "*"))):
            name = os.path.basename(run_dir)
            if name in records and os.path.exists(os.path.join(run_dir, "telemetry.jsonl.gz")):
                points += run_points(run_dir, records[name], args.delta)
    if not points:
        print("no point with an epoch read and no loss over the next", args.delta, "s")
        return 1
    m = np.array([p["growth_measured"] for p in points])
    e = np.array([p["growth_epoch"] for p in points])
    fr = np.array([p["growth_fresh"] for p in points])
    runs = len({p["run"] for p in points})
    print(f"{len(points)} points in {runs} runs, the competitor's window growth over the next {args.delta:g} s "
          f"(packets): measured median {np.median(m):.1f}")
    print(f"  their epoch's curve: median {np.median(e):.1f}, median |error| {np.median(np.abs(e - m)):.1f}")
    print(f"  a fresh curve:       median {np.median(fr):.1f}, median |error| {np.median(np.abs(fr - m)):.1f}")
    if args.json_out:
        made = stamp()
        with open(args.json_out, "w") as f:
            json.dump({"provenance": made, "results": args.results, "delta_s": args.delta, "points": points}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
