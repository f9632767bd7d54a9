"""The competitor's window at the bottleneck against the kernel's own (a development study of
2026-12-07 for the loss cut's bias): runs of active identification recorded with
``--record-telemetry --kernel-trace`` hold both the hop records the identifier reads and
each competitor's per-ACK kernel state (tcp_probe: snd_nxt − snd_una, its packets in flight).

For each competitor: its window as Series.comp_window reads it, with the base RTT of

  flow1   flow 1's (what the identifier uses: the only base RTT a sender knows)
  own     the competitor's own (from the run's parameters: its access links are longer)

against its kernel in-flight on the same 10 ms grid (aligned by the lag that best correlates
its packets at the bottleneck with the bytes its ACKs cover), as the median ratio; and the
loss cut (estimator.identify.loss_cut, not the first loss: the slow-start exit) read both
ways, beside the sender's own cut at its loss episodes (its packets in flight, read alike).

    intcc exp run lab/scenarios/identify_hard.toml --seed S --repeats 3 --algorithm "mirror active" \
        --record-telemetry --kernel-trace --out RESULTS_DIR
    python -m lab.estimator.window_truth RESULTS_DIR [...] [--json-out F]
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
from collections import defaultdict
from multiprocessing import Pool

import numpy as np

from estimator.identify import loss_cut
from estimator.identify.bottleneck import BIN_S, moving_mean
from lab.estimator.identify_replay import (competitor_base_rtt_s, flow1_base_rtt_s, flow1_id, recorded_runs,
                                           recorded_series)

MSS_BYTES = 1428
MAIN_PORT = 5201
MAX_LAG_BINS = 100           # after the coarse match of first packets, the offset is searched within +-1 s
SMOOTH_BINS = 10             # rates are correlated over 100 ms (10 ms bins of a few packets are mostly noise)
TRACE_FILES = ("kernel_trace.csv", "kernel_trace.csv.gz")    # as the run wrote it, or as committed
MIN_INFLIGHT_PKTS = 4        # a ratio over fewer packets is mostly counting noise


def kernel_inflight(path: str) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per competitor port: (t_s, packets in flight, bytes newly acknowledged) at each ACK of
    its busiest socket (iperf3's control connection shares the port)."""
    rows = defaultdict(list)
    recoveries = defaultdict(list)
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        for r in csv.DictReader(f):
            if int(r["dport"]) == MAIN_PORT:
                continue
            if r["event"] == "tcp_probe":
                rows[(int(r["dport"]), int(r["sport"]))].append((float(r["t_s"]), int(r["snd_una"]), int(r["snd_nxt"]),
                                                                 int(r["srtt_us"])))
            elif r["event"] == "tcp_cong_state_set":
                recoveries[(int(r["dport"]), int(r["sport"]))].append((float(r["t_s"]), r["ca_state"]))
    busiest = {}
    for key, v in rows.items():
        if len(v) > len(busiest.get(key[0], (None, []))[1]):
            busiest[key[0]] = (key, v)
    out = {}
    for dport, (key, v) in busiest.items():
        a = np.array(v, dtype=float)
        una = np.unwrap(a[:, 1], period=2 ** 32)
        nxt = np.unwrap(a[:, 2], period=2 ** 32)
        inflight = (nxt - una) / MSS_BYTES
        out[dport] = (a[:, 0], inflight, np.diff(una, prepend=una[0]) / MSS_BYTES,
                      sender_cuts(a[:, 0], inflight, a[:, 3] / 1e6, recoveries.get(key, [])))
    return out


def sender_cuts(t_s, inflight, srtt_s, states) -> list[float]:
    """The sender's own cut at each loss episode but its first (the slow-start exit): its
    packets in flight over the two RTTs after the episode ended (back to Open: during
    recovery snd_nxt - snd_una counts the holes' SACKed segments too), over the RTT before
    it began, where no other episode began in the two RTTs before."""
    out = []
    starts = [(i, t) for i, (t, st) in enumerate(states) if st in ("recovery", "loss")
              and (i == 0 or states[i - 1][1] not in ("recovery", "loss"))]
    for (_, prev), (i, t) in zip(starts, starts[1:]):
        r = float(np.interp(t, t_s, srtt_s))
        ended = next((u for u, st in states[i:] if st == "open"), None)
        if t - prev < 2 * r or ended is None:
            continue
        before = inflight[(t_s >= t - r) & (t_s < t)]
        after = inflight[(t_s >= ended) & (t_s < ended + 2 * r)]
        if before.size and after.size and before.mean() > 0:
            out.append(round(float(after.mean() / before.mean()), 3))
    return out


def on_grid(t_s, values, t0_s: float, n: int, how: str) -> np.ndarray:
    """``values`` on n 10 ms bins from t0_s: the last value in or before each bin ("last"), or their sum ("sum")."""
    idx = np.floor((t_s - t0_s) / BIN_S).astype(int)
    if how == "sum":
        ok = (idx >= 0) & (idx < n)
        return np.bincount(idx[ok], weights=values[ok], minlength=n).astype(float)
    out = np.full(n, np.nan)
    ok = (idx >= 0) & (idx < n)
    out[idx[ok]] = values[ok]          # the last ACK in a bin wins (ascending times)
    filled = np.flatnonzero(~np.isnan(out))
    if filled.size:
        pos = np.searchsorted(filled, np.arange(n), side="right") - 1
        out = np.where(pos >= 0, out[filled[np.maximum(pos, 0)]], np.nan)
    return out


def best_lag(a: np.ndarray, b: np.ndarray, around: int) -> tuple[int, float]:
    """The shift of b (bins), within MAX_LAG_BINS of ``around``, that best correlates it with
    a over 100 ms, and that correlation."""
    a, b = moving_mean(a, SMOOTH_BINS), moving_mean(b, SMOOTH_BINS)
    best = (around, -1.0)
    for lag in range(around - MAX_LAG_BINS, around + MAX_LAG_BINS + 1):
        x, y = (a[lag:], b[:len(b) - lag]) if lag >= 0 else (a[:lag], b[-lag:])
        if len(x) < 100 or x.std() == 0 or y.std() == 0:
            continue
        c = float(np.corrcoef(x, y)[0, 1])
        if c > best[1]:
            best = (lag, c)
    return best


def shifted(x: np.ndarray, lag: int) -> np.ndarray:
    """x moved by lag bins (NaN where nothing moved in)."""
    out = np.full(len(x), np.nan)
    if lag >= 0:
        out[lag:] = x[:len(x) - lag]
    else:
        out[:lag] = x[-lag:]
    return out


def study(run_dir: str, record: dict) -> dict | None:
    trace = next((p for p in (os.path.join(run_dir, f) for f in TRACE_FILES) if os.path.exists(p)), None)
    own = flow1_id(run_dir)
    if own is None or trace is None:
        return None
    p = record["params"]
    base = {"flow1": flow1_base_rtt_s(p), "own": competitor_base_rtt_s(p)}
    s, _ = recorded_series(run_dir, own, base["flow1"])
    if s is None:
        return None
    kernel = kernel_inflight(trace)
    t0 = min(v[0][0] for v in kernel.values())     # the kernel's clock at bin 0, up to the lag found below
    windows = {k: s.comp_window(b) for k, b in base.items()}
    out = {"run": os.path.basename(run_dir), "cca": record["competitor"], "rtt_factor": base["own"] / base["flow1"],
           "flows": []}
    for f in range(s.comp.shape[0]):
        # each bottleneck flow against each kernel socket: the pair and lag that correlate best
        match = None
        first = np.flatnonzero(s.comp[f] > 0)
        for dport, (t, inflight, acked, _) in kernel.items():
            acked_bins = on_grid(t, acked, t0, s.n, "sum")
            sent = np.flatnonzero(acked_bins > 0)
            if not first.size or not sent.size:
                continue
            lag, corr = best_lag(s.comp[f], acked_bins, int(first[0] - sent[0]))
            if match is None or corr > match[2]:
                match = (dport, lag, corr, on_grid(t, inflight, t0, s.n, "last"))
        if match is None:
            continue
        dport, lag, corr, inflight = match
        truth = shifted(inflight, lag)
        row = {"dport": dport, "lag_s": lag * BIN_S, "corr": round(corr, 3)}
        ok = np.isfinite(truth) & (truth >= MIN_INFLIGHT_PKTS)
        for k, w in windows.items():
            good = ok & np.isfinite(w[f])
            row[f"window_ratio_{k}"] = round(float(np.median(w[f][good] / truth[good])), 3) if good.any() else None
        # the loss cut read both ways, and the kernel's in-flight over the same bins
        for k in base:
            rtt_bins = np.maximum(np.round((base[k] + s.queue_delay_s()) / BIN_S).astype(int), 1)
            events = loss_cut.loss_cut_events(s.comp[f], s.comp_lost[f], rtt_bins, windows[k][f])
            first_loss = np.flatnonzero(s.comp_lost[f] > 0)
            events = [e for e in events if first_loss.size and e[0] != first_loss[0]]
            row[f"cuts_{k}"] = [round(c, 3) for _, c, _ in events]
        row["sender_cuts"] = kernel[dport][3]
        out["flows"].append(row)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    jobs = recorded_runs(args.results, kept=TRACE_FILES, algorithm="mirror active")
    with Pool(2) as pool:
        runs = [r for r in pool.starmap(study, jobs) if r is not None]
    by = defaultdict(lambda: defaultdict(list))
    for r in runs:
        for fl in r["flows"]:
            print(f"{r['run']:40s} {r['cca']:6s} rtt x{r['rtt_factor']:.2f} port {fl['dport']} lag {fl['lag_s']:+.2f} s "
                  f"corr {fl['corr']:.2f}  window/kernel flow1 {fl['window_ratio_flow1']} own {fl['window_ratio_own']}  "
                  f"cuts flow1 {np.median(fl['cuts_flow1']) if fl['cuts_flow1'] else '-'} "
                  f"own {np.median(fl['cuts_own']) if fl['cuts_own'] else '-'} "
                  f"sender {np.median(fl['sender_cuts']) if fl['sender_cuts'] else '-'}")
            by[r["cca"]]["sender_cuts"] += fl["sender_cuts"]
            for k in ("flow1", "own"):
                by[r["cca"]][f"cuts_{k}"] += fl[f"cuts_{k}"]
                if fl[f"window_ratio_{k}"] is not None:
                    by[r["cca"]][f"window_ratio_{k}"].append(fl[f"window_ratio_{k}"])
    summary = {cca: {k: {"n": len(v), "median": round(float(np.median(v)), 3) if v else None} for k, v in d.items()}
               for cca, d in sorted(by.items())}
    for cca, d in summary.items():
        print(cca, "  ".join(f"{k} {x['median']} ({x['n']})" for k, x in d.items()))
    if args.json_out:
        from records.provenance import stamp
        made = stamp()       # before the file is opened: rewriting a tracked record is no change to the code
        with open(args.json_out, "w") as f:
            json.dump({"provenance": made, "results": args.results, "summary": summary, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
