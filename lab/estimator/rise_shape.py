"""Does the shape of a competitor's recovery after its own loss tell Reno from CUBIC? (a study of 2026-11-30)

Reno against CUBIC is the estimator's limit (docs/estimator.md), worst with a competitor
whose RTT is 2-4x flow 1's, and its cut after a loss (0.5 against 0.7) is the only
difference the features see. The growth between losses differs too: Reno's window grows
one segment per RTT, a straight line; CUBIC's is concave up to the window it lost at and
convex beyond it, the same in time whatever the RTT. After each of a competing flow's own
loss events (as ``flow_features.own_loss_cuts``) its rate (packets per 20 ms bin, a moving
mean over max(flow 1's RTT, 0.2 s)) from the lowest point in the first half of the segment
to the next event or the window's end, normalised to [0, 1] between that low and the
segment's end, has an area under it of 0.5 for a straight line, above for a concave rise,
below for a convex one. Columns per row (over the last 30 s, -1 where no segment rose):

  ol_rise_area     median area over the segments
  ol_rise_dev      median |area - 0.5|
  ol_rise_share    share of the events whose segment rose (BBR's rate does not dip and rise)

Pooled 5-fold cross-validation (whole runs, ``evaluate.fold_of``) of the shared forest with
the shipped hard-v4 features, and with these three beside them; the paired per-run
difference with a bootstrap 95 % CI, per competitor and by the competitor's RTT factor.

    python -m lab.estimator.rise_shape [--out FILE.json] DATA_DIR...
"""
from __future__ import annotations

import json

import numpy as np

from estimator.evaluate import CONDITIONS, fold_of
from estimator.int_features import busy_pps
from estimator.flow_features import CompetitorSeries
from estimator.own_loss_features import (OWN_LOSS_BIN_S, OWN_LOSS_MIN_PACKETS_PER_BIN, OWN_LOSS_MIN_RTT_S,
                                         OWN_LOSS_QUIET_RTTS, _loss_windows)
from lab.estimator import paired, run_inputs, runs_with_columns
from lab.estimator.competitor_rtt_oracle import cross_validated

FEATURE_SET = "table1+int+flows+response+dips+ownloss+qcut"
RISE_FEATURES = ("ol_rise_area", "ol_rise_dev", "ol_rise_share")
RISE_MIN_SMOOTH_S = 0.2
RISE_MIN_SEGMENT_SMOOTHS = 4        # a segment spans at least this many smoothing windows
RISE_MIN_RISE = 0.2                 # ... and its end is this much (of the end's rate) above its low


def rise_areas(packets, lost, bin_s: float, rtt_s: float) -> tuple[list, int]:
    """One competing flow's segments after its loss events: (the normalised areas of those
    that rose, the number of events)."""
    w = max(1, int(round(max(rtt_s, OWN_LOSS_MIN_RTT_S, RISE_MIN_SMOOTH_S) / bin_s)))
    quiet = OWN_LOSS_QUIET_RTTS * max(1, int(round(max(rtt_s, OWN_LOSS_MIN_RTT_S) / bin_s)))
    if len(packets) < quiet + RISE_MIN_SEGMENT_SMOOTHS * w:
        return [], 0
    moving = np.convolve(packets, np.ones(w) / w, mode="valid")      # moving[i]: mean of packets[i:i + w]
    events = np.flatnonzero(lost > 0)
    had_loss = np.concatenate(([0.0], np.cumsum(lost > 0)))
    areas, n_events = [], 0
    for k in events:
        if k < quiet or had_loss[k] - had_loss[k - quiet] > 0:
            continue
        if float(packets[k - quiet:k].mean()) < OWN_LOSS_MIN_PACKETS_PER_BIN:
            continue
        n_events += 1
        later = events[events > k + quiet]        # losses within ``quiet`` of it are the same event
        end = (int(later[0]) if len(later) else len(packets)) - w + 1
        seg = moving[k + 1:end]                   # windows wholly after the event, before the next
        if len(seg) < RISE_MIN_SEGMENT_SMOOTHS * w:
            continue
        low_at = int(np.argmin(seg[:len(seg) // 2]))
        rise = seg[low_at:]
        top = float(rise[-1])
        if top <= 0 or top - rise[0] < RISE_MIN_RISE * top or len(rise) < 2 * w:
            continue
        areas.append(float(np.clip((rise - rise[0]) / (top - rise[0]), 0, 1.5).mean()))
    return areas, n_events


def rise_response(comp: CompetitorSeries | None, at_t, base_rtt_s, series=None, busy=None) -> np.ndarray:
    """The RISE_FEATURES per time of ``at_t``; with flow 1's INT record ``series`` (and the
    link's ``busy`` packet rate per time) of the rate times the RTT of its bin (flow 1's
    base RTT + the queue's delay): the flow's window, which for Reno rises in a straight
    line where its rate saturates as the queue fills."""
    at_t = np.asarray(at_t, dtype=float)
    out = np.full((len(at_t), len(RISE_FEATURES)), -1.0)
    if comp is None or comp.empty or comp.lost is None:
        return out
    base = np.broadcast_to(np.asarray(base_rtt_s, dtype=float), at_t.shape)
    for i, lo, n, flows, rebin in _loss_windows(comp, at_t, OWN_LOSS_BIN_S):
        rtt = 1.0
        if series is not None:
            mid = lo + (np.arange(n) + 0.5) * OWN_LOSS_BIN_S
            rtt = float(base[i]) + np.interp(mid, series[:, 0], series[:, 1]) / (max(float(busy[i]), 1.0) * 1500.0)
        areas, events = [], 0
        for f in flows:
            a, e = rise_areas(rebin(comp.packets[f]) * rtt, rebin(comp.lost[f]), OWN_LOSS_BIN_S, float(base[i]))
            areas += a
            events += e
        if areas:
            a = np.asarray(areas)
            out[i] = [float(np.median(a)), float(np.median(np.abs(a - 0.5))), len(a) / max(events, 1)]
        elif events:
            out[i, 2] = 0.0
    return out


def rise_columns(path: str) -> tuple:
    """(run key, the rise columns of the rate and of the window at the rows load_dataset keeps)."""
    r = run_inputs(path)
    comp, series, at_t, base = r["comp"], r["series"], r["at_t"], r["base_rtt_s"]
    cols = np.hstack([rise_response(comp, at_t, base),
                      rise_response(comp, at_t, base, series, busy_pps(series, at_t))])
    return tuple(r["run"].key), cols[r["keep"]]


def main(argv=None) -> None:
    args, runs, extra = runs_with_columns(__doc__, argv, rise_columns, FEATURE_SET,
                                          "write the figures and every run's accuracy here (JSON)")
    n = len(RISE_FEATURES)
    variants = {"+rise (rate)": slice(0, n), "+rise (window)": slice(n, 2 * n)}
    fold = fold_of(runs, 5, 0)
    print(f"{len(runs)} runs, 5-fold CV, shared forest", flush=True)
    rows = np.vstack([extra[tuple(r.key)] for r in runs])
    labels = np.concatenate([[r.competitor_cca] * len(r.X) for r in runs])
    for name, cols in variants.items():
        for c in ("bbr", "cubic", "reno", "vegas"):
            x = rows[labels == c][:, cols]
            a = x[x[:, 0] >= 0, 0]
            q = np.percentile(a, [25, 50, 75]) if len(a) else [-1, -1, -1]
            print(f"  {name:15s} {c:6s} rows with a rise {len(a) / max(len(x), 1):.2f}, area median {q[1]:.3f} "
                  f"(p25 {q[0]:.3f}, p75 {q[2]:.3f})", flush=True)
    base_res, base = cross_validated(runs, fold)
    print(f"baseline        mean {base_res['mean_accuracy']:.3f}  w50 {base_res['table4']['50']['mean']:.3f}",
          flush=True)
    results = {"baseline": {"mean_accuracy": base_res["mean_accuracy"], "vote50": base_res["table4"]["50"]["mean"],
                            "table3": base_res["table3"], "per_run": {f"{s}:{i}": v for (s, i), v in sorted(base.items())}}}
    for name, cols in variants.items():
        res, acc = cross_validated([r.with_features(np.hstack([r.X, extra[tuple(r.key)][:, cols]])) for r in runs], fold)
        p = paired(base, acc)
        print(f"{name:15s} mean {res['mean_accuracy']:.3f}  w50 {res['table4']['50']['mean']:.3f}  paired "
              f"{p['mean']:+.3f} ({p['ci95'][0]:+.3f} to {p['ci95'][1]:+.3f}; better {p['better_runs']}, worse "
              f"{p['worse_runs']})", flush=True)
        by = {}
        for label, keep in [(f"competitor {c}", lambda r, c=c: r.competitor_cca == c)
                            for c in ("bbr", "cubic", "reno", "vegas")] \
                + [(f"rtt {v}", lambda r, v=v: CONDITIONS["rtt"](r.meta) == v)
                   for v in ("0-1x flow 1's RTT", "1-2x flow 1's RTT", ">= 2x flow 1's RTT")]:
            keys = [tuple(r.key) for r in runs if keep(r)]
            q = paired({k: base[k] for k in keys}, {k: acc[k] for k in keys})
            by[label] = {"runs": len(keys), "baseline": float(np.mean([base[k] for k in keys])), "paired": q}
            print(f"  {label:26s} {len(keys):4d} runs  baseline {by[label]['baseline']:.3f}  paired {q['mean']:+.3f} "
                  f"({q['ci95'][0]:+.3f} to {q['ci95'][1]:+.3f})", flush=True)
        results[name] = {"mean_accuracy": res["mean_accuracy"], "vote50": res["table4"]["50"]["mean"],
                         "table3": res["table3"], "paired_vs_baseline": p, "by": by,
                         "per_run": {f"{s}:{i}": v for (s, i), v in sorted(acc.items())}}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
