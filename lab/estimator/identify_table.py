"""The table of docs/estimator.md "Active identification" from committed records: an
identify_replay record (the commits and the most likely hypothesis at the end, per run)
and the experiment's summary (flow 1 on the probe and the oracle on the same networks).

    python -m lab.estimator.identify_table REPLAY_RECORD EXPERIMENT_RECORD
    python -m lab.estimator.identify_table REPLAY_RECORD EXPERIMENT_RECORD --passive PASSIVE_REPLAY_RECORD
    python -m lab.estimator.identify_table REPLAY_RECORD EXPERIMENT_RECORD --by-network

The experiment record is the run's summary.json in its results directory, whose
runs/*/series.csv give flow 1's seconds of zero goodput. The fairness rows pair each "mirror active" run with the oracle's run of the same
competitor and repeat (the same network): the difference of their |D|, its mean with a
95 % bootstrap CI (10,000 resamples, seed 0) and its mean absolute value."""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
from collections import Counter

import numpy as np
from scipy.stats import binomtest

CCAS = ("bbr", "cubic", "reno", "vegas")


NAMED = re.compile(r"(?:identified|verdict) (\w+)")


def most_likely(run: dict, checkpoint: str) -> str | None:
    """The hypothesis a run held most likely at a checkpoint, None where none was (not
    reached, no verdict yet, or a tie at the top: the uniform prior before any evidence
    names none, though the test's best() picks the first of the tied)."""
    said = run.get("best_at", {}).get(checkpoint)
    if not said:
        return None
    post = run.get("posterior_at", {}).get(checkpoint)
    if post:
        top = sorted(post.values(), reverse=True)
        if len(top) > 1 and top[0] - top[1] < 1e-3:
            return None
    return said[0]


def wilson(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(method="wilson") if n else None
    return f"{k}/{n} ({ci.low:.2f}–{ci.high:.2f})" if ci else "0/0"


def live_outcome(run: dict) -> dict:
    """What the live agent did with flow 1 (its switches, seconds since flow 1's start): its
    first commit from the competitor's start on and when, the hypothesis flow 1 ends on
    (None: back on the probe) and whether a switch was taken back, and the commits before
    the competitor's start (UDP alone competing then)."""
    arrival = run.get("competitor_delay_s", 0.0)
    switches = run.get("live_switches") or []
    # "identified X ..." (active) or "verdict X ..." (passive); a switch back to the probe names none
    said = [(t, NAMED.search(why)) for t, why in switches]
    named = [(t, m.group(1)) for t, m in said if m]
    after = [(t, h) for t, h in named if t >= arrival]
    final = named[-1][1] if said and said[-1][1] else None
    return {"first": after[0][1] if after else None, "since_competitor_s": after[0][0] - arrival if after else None,
            "final": final, "taken_back": any("made it worse" in why for _, why in switches),
            "before": [h for t, h in named if t < arrival]}


def breakdown_rows(replay: dict) -> list[str]:
    """The live agent's outcome (its switches) and the replay's, with Wilson 95 % intervals:
    commits about the competitor count from its start (before it, UDP alone may compete and
    "unknown" is then right; the competitor's arrival starts the identification anew)."""
    runs = [r for r in replay["runs"] if "error" not in r]
    if not any(r.get("live_switches") is not None for r in runs):     # no trace of the live agent kept
        return []
    n = len(runs)
    live = {r["run"]: live_outcome(r) for r in runs}
    right = [r for r in runs if live[r["run"]]["first"] == r["truth"]]
    wrong = [r for r in runs if live[r["run"]]["first"] not in (None, r["truth"])]
    within = {s: sum(live[r["run"]]["since_competitor_s"] <= s for r in right) for s in (3, 8)}
    ends = {"on the competitor's CCA": sum(live[r["run"]]["final"] == r["truth"] for r in runs),
            "on the probe": sum(live[r["run"]]["final"] is None for r in runs),
            "elsewhere": sum(live[r["run"]]["final"] not in (None, r["truth"]) for r in runs)}
    taken_back = sum(o["taken_back"] for o in live.values())
    rows = [f"| live: the first commit from the competitor's start on | right {wilson(len(right), n)}, wrong "
            f"{len(wrong)}" + (f" ({', '.join(live[r['run']]['first'] + ' for ' + r['truth'] for r in wrong)})" if wrong else "")
            + f", none {n - len(right) - len(wrong)} |",
            f"| live: committed right within 3 s / 8 s of the competitor's start | {wilson(within[3], n)} / "
            f"{wilson(within[8], n)} |",
            "| live: where flow 1 ends | " + ", ".join(f"{k} {v}" for k, v in ends.items())
            + f"; a switch taken back (its share clearly worse) in {taken_back} |"]
    before = [o["before"] for r, o in zip(runs, live.values()) if r.get("udp_cross_mbps") and o["before"]]
    if before:
        rows.append("| live: UDP alone before the competitor, named | "
                    + ", ".join(f"{h} {sum(b.count(h) for b in before)}" for h in sorted({h for b in before for h in b}))
                    + f" (in {len(before)} runs; the competitor's start then identified anew) |")
    after = [(r, commits_after(r)) for r in runs]
    committed = [(r, seq) for r, seq in after if seq]
    flips = sum(len(set(seq)) > 1 for _, seq in committed)
    rows.append(f"| replayed at the current code: committed after the competitor's start, right / wrong; a "
                f"commit followed by another (flip) | {wilson(sum(seq[0] == r['truth'] for r, seq in committed), n)} / "
                f"{sum(seq[0] != r['truth'] for r, seq in committed)}; {flips} of {len(committed)} |")
    checkpoints = sorted({float(c) for r in runs for c in r.get("best_at", {})})
    if checkpoints:
        # a record without the posteriors cannot tell a tie (the uniform prior) from a lead
        ties = (" (a tie at the top, as before any evidence, counted wrong)"
                if all(r.get("posterior_at") for r in runs) else "")
        rows.append(f"| replayed: the most likely hypothesis right{ties}, seconds after the competitor's first packet | "
                    + ", ".join(f"{c:g} s {wilson(sum(most_likely(r, str(c)) == r['truth'] for r in runs if str(c) in r['best_at']), sum(str(c) in r['best_at'] for r in runs))}"
                                for c in checkpoints) + " |")
    final = {c: [r["final_best"] == r["truth"] for r in runs if r["truth"] == c] for c in CCAS + ("unknown",)}
    rows.append(f"| replayed: the most likely hypothesis at the end | right in {sum(sum(v) for v in final.values())} "
                f"of {n}: " + ", ".join(f"{c} {wilson(sum(v), len(v))}" for c, v in final.items() if v) + " |")
    by_n = {k: [r["final_best"] == r["truth"] for r in runs if r.get("competitors", 1) == k] for k in (1, 2, 3)}
    by_udp = {label: [r["final_best"] == r["truth"] for r in runs if bool(r.get("udp_cross_mbps")) == has]
              for label, has in (("with UDP", True), ("without", False))}
    if sum(bool(v) for v in by_n.values()) + sum(bool(v) for v in by_udp.values()) > 2:      # the networks varied
        rows.append("| ... by the competitors' number; with UDP beside them or not | "
                    + ", ".join(f"{k} {wilson(sum(v), len(v))}" for k, v in by_n.items() if v) + "; "
                    + ", ".join(f"{k} {wilson(sum(v), len(v))}" for k, v in by_udp.items() if v) + " |")
    read = [x for r in runs for x in (r.get("competitor_rtt_read_over_path") or [])]
    if read:
        rows.append(f"| replayed: each competitor's base RTT as read (the sink's measure less the least queue) over "
                    f"its path's | median {np.median(read):.3f}, 5th–95th percentile {np.percentile(read, 5):.3f}–"
                    f"{np.percentile(read, 95):.3f}, {min(read):.3f}–{max(read):.3f} ({len(read)} competitors in "
                    f"{sum(bool(r.get('competitor_rtt_read_over_path')) for r in runs)} runs) |")
    return rows


def identification_rows(replay: dict) -> list[str]:
    runs = [r for r in replay["runs"] if "error" not in r]
    committed = [r for r in runs if r["first_commit"] is not None]
    right = [r for r in committed if r["first_commit"][1] == r["truth"]]
    when = ", ".join(f"{r['truth']} at {r['first_commit'][0]:.1f} s" for r in right)
    final = {c: (sum(r["final_best"] == c for r in runs if r["truth"] == c), sum(r["truth"] == c for r in runs))
             for c in CCAS + ("unknown",) if any(r["truth"] == c for r in runs)}
    rows = [f"| committed within the run | {len(committed)} of {len(runs)} (right: {len(right)}"
            + (f"; {when}" if when else "") + f"); wrong: {len(committed) - len(right)} |"]
    return rows + [f"| the most likely hypothesis at the end | right in {sum(k for k, _ in final.values())} of "
                   f"{len(runs)} (" + ", ".join(f"{c} {k}/{n}" for c, (k, n) in final.items()) + ") |"]


def fairness_rows(summary: dict) -> list[str]:
    by = {(r["algorithm"], r["competitor"], r["repeat"]): r for r in summary["records"]}
    pairs = [(r, by[("oracle", c, k)]) for (a, c, k), r in sorted(by.items())
             if a == "mirror active" and ("oracle", c, k) in by]
    if not pairs:          # no oracle (a competitor outside the four has no CCA to mirror)
        return []
    if any(r.get("abs_goodput_difference") is None for pair in pairs for r in pair):
        return jain_rows(pairs)         # more than one competitor: |D| is a pair's measure
    diff = np.array([p["abs_goodput_difference"] - o["abs_goodput_difference"] for p, o in pairs])
    rng = np.random.default_rng(0)
    boot = rng.choice(diff, (10_000, len(diff))).mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])

    def per_cca(alg, key="abs_goodput_difference"):
        return {c: [r[key] for (a, cc, _), r in by.items() if a == alg and cc == c] for c in CCAS}
    probe, oracle, jain = per_cca("mirror active"), per_cca("oracle"), per_cca("mirror active", "jain_mean")
    fmt = ", ".join
    return ["| the phase's own fairness: flow 1 on the probe (or where it switched, after), mean \\|D\\| | "
            + fmt(f"{c} {np.mean(v):.2f}" for c, v in probe.items() if v)
            + f" (Jain {min(min(v) for v in jain.values() if v):.2f}–{max(max(v) for v in jain.values() if v):.2f}) |",
            "| the oracle on the same networks (flow 1 runs the competitor's CCA), mean \\|D\\| | "
            + fmt(f"{c} {np.mean(v):.2f}" for c, v in oracle.items() if v)
            + f"; paired over the {len(diff)} networks, the probe's \\|D\\| minus the oracle's: mean {diff.mean():.2f} "
              f"(95 % bootstrap CI {lo:.2f} to {hi:.2f}), mean absolute difference {np.abs(diff).mean():.2f} |"]


def jain_rows(pairs: list) -> list[str]:
    """Fairness where runs have several competitors: Jain's index over every flow's goodput
    (flow 1's while the competitors ran), the probe's run against the oracle's on the same
    network, paired (95 % bootstrap CI, 10,000 resamples, seed 0)."""
    diff = np.array([p["jain_total"] - o["jain_total"] for p, o in pairs])
    rng = np.random.default_rng(0)
    lo, hi = np.percentile(rng.choice(diff, (10_000, len(diff))).mean(axis=1), [2.5, 97.5])

    def per_cca(k):
        return ", ".join(f"{c} {np.mean([pair[k]['jain_total'] for pair in pairs if pair[k]['competitor'] == c]):.2f}"
                         for c in CCAS if any(pair[k]["competitor"] == c for pair in pairs))
    return [f"| Jain's index over all flows, flow 1 on the probe (or where it switched, after) / the oracle (flow 1 "
            f"on the competitor's CCA), mean | {per_cca(0)} / {per_cca(1)}; paired over the {len(diff)} networks, "
            f"the probe's minus the oracle's: mean {diff.mean():+.2f} (95 % bootstrap CI {lo:+.2f} to {hi:+.2f}), "
            f"mean absolute difference {np.abs(diff).mean():.2f} |"]


def network(run: dict) -> tuple:
    """A run's network: its competitor and repeat (the same draws in every mode)."""
    return run["truth"], run["run"].rsplit("_r", 1)[1]


def paired_rows(active: dict, passive: dict) -> list[str]:
    """The active replay's most likely hypothesis against the passive estimator's verdict
    (its trace) on the same networks, at each checkpoint after the competitor's first packet
    and at the end: right in each, and the paired difference (active minus passive, 95 %
    bootstrap CI, 10,000 resamples, seed 0)."""
    a = {network(r): r for r in active["runs"] if "error" not in r}
    p = {network(r): r for r in passive["runs"] if "error" not in r and r.get("passive")}
    both = sorted(set(a) & set(p))
    if not both:
        return []
    rng = np.random.default_rng(0)

    def compare(label, right_a, right_p):
        d = np.array(right_a, float) - np.array(right_p, float)
        lo, hi = np.percentile(rng.choice(d, (10_000, len(d))).mean(axis=1), [2.5, 97.5])
        return (f"| {label} | active {wilson(sum(right_a), len(d))}, passive {wilson(sum(right_p), len(d))}; "
                f"paired difference {d.mean():+.2f} ({lo:+.2f} to {hi:+.2f}) |")
    rows = []
    for c in CHECKPOINTS:
        # the passive estimator says nothing before its first verdict row: counted wrong, as undecided is
        ra = [most_likely(a[k], c) == k[0] for k in both]
        rp = [most_likely(p[k], c) == k[0] for k in both]
        rows.append(compare(f"paired with the passive estimator on the same {len(both)} networks: most likely "
                            f"right {float(c):g} s after the competitor's first packet", ra, rp))
    rows.append(compare("... the first switch after the competitor's start on its CCA (active: its first commit, "
                        "replayed; passive: its first verdict switch)",
                        [_first_after(a[k]) == k[0] for k in both], [_first_after(p[k]) == k[0] for k in both]))
    rows.append(compare("... the last verdict held at the end (active: committed, replayed; passive: its last switch)",
                        [a[k]["final_verdict"] == k[0] for k in both], [p[k]["final_verdict"] == k[0] for k in both]))
    return rows


CHECKPOINTS = ("0.5", "1.0", "2.0", "3.0", "5.0", "10.0", "20.0")


def commits_after(run: dict) -> list:
    """The hypotheses a run committed to from the competitor's start on, in order: a replay
    that scores its first commit from the TCP competitor's start (UDP alone before it) gives
    it (``before_tcp_commit`` in its record); else the commits after the competitor's arrival."""
    at = run.get("competitor_at_s") or 0.0
    named = [(t, v) for t, v in run.get("commits", []) if v is not None]
    if "before_tcp_commit" in run:
        if run["first_commit"] is None:
            return []
        t0 = run["first_commit"][0]
        return [v for t, v in named if t >= t0]
    return [v for t, v in named if t >= at]


def _first_after(run: dict) -> str | None:
    named = commits_after(run)
    return named[0] if named else None


def _on_probe(run_dir: str) -> callable:
    """When flow 1 (the connection with the most rows in the run's trace) was on the probe:
    a predicate on its seconds from the run's start (the trace's clock)."""
    with open(os.path.join(run_dir, "trace.csv")) as f:
        rows = list(csv.DictReader(f))
    counts = Counter(r["sid"] for r in rows)
    sid = counts.most_common(1)[0][0] if counts else None
    moves = [(float(r["t_s"]), r["reason"].split(":", 1)[0].split(" -> ", 1)[1]) for r in rows
             if r["sid"] == sid and r["event"] == "switch" and " -> " in r["reason"]]

    def on_probe(t_s: float) -> bool:
        current = "probe"
        for at, to in moves:
            if at <= t_s:
                current = to
        return current == "probe"
    return on_probe


def stall_row(results_dir: str) -> str:
    """Flow 1's seconds of zero goodput (runs/*/series.csv, its first 2 s and last one left
    out: start-up and the end of the run), per mode; in the active mode also those with the
    probe in control (the trace's switches), and the competitors' after their first second
    of goodput (in buffers of seconds a loss holds anyone's in-order data back an RTT)."""
    out = {}
    for mode, label in (("mirror-active", "active"), ("oracle", "the oracle")):
        seconds = runs = probe_s = comp_s = comp_runs = 0
        paths = sorted(glob.glob(os.path.join(results_dir, "runs", f"{mode}_*", "series.csv")))
        for path in paths:
            with open(path) as f:
                rows = list(csv.DictReader(f))[2:-1]
            zero = [float(r["t_s"]) for r in rows if float(r["goodput_mbps"]) == 0]
            seconds, runs = seconds + len(zero), runs + bool(zero)
            if mode == "mirror-active" and os.path.exists(os.path.join(os.path.dirname(path), "trace.csv")):
                on_probe = _on_probe(os.path.dirname(path))
                probe_s += sum(on_probe(t - 0.5) for t in zero)       # (the second's middle)
            started, comp_zero = False, 0
            for r in rows:
                if float(r.get("competitor_goodput_mbps") or 0) > 0:
                    started = True
                elif started:
                    comp_zero += 1
            comp_s, comp_runs = comp_s + comp_zero, comp_runs + bool(comp_zero)
        if not paths:
            out[label] = f"{label}: not run"
            continue
        out[label] = (f"{label} {seconds} s in {runs} of {len(paths)} runs"
                      + (f" ({probe_s} s with the probe in control)" if mode == "mirror-active" else "")
                      + f", its competitors {comp_s} s in {comp_runs}")
    return "| seconds of zero goodput of flow 1 (after its first 2 s) | " + "; ".join(out.values()) + " |"


#: bands of the networks: the bottleneck's buffer in BDPs (the hard distribution draws 1-100,
#: log-uniform) and the competitors' base RTT (their path's, ms)
BUFFER_BANDS = ((1.0, 2.0), (2.0, 10.0), (10.0, float("inf")))
RTT_BANDS_MS = ((0.0, 150.0), (150.0, 250.0), (250.0, float("inf")))


def network_rows(replay: dict) -> list[str]:
    """The replay's commits by the bottleneck's buffer and by the competitors' round trip:
    where identification is slow. Its stages read the competitor in its own rounds (a slow
    start of ~10, stretches of 16), so a time limit is fewer of them on a longer path."""
    from lab.estimator.identify_replay import competitor_base_rtt_s
    runs = [r for r in replay["runs"] if "error" not in r]
    rows = ["| replayed, by the network | runs | first commit right | ... within 8 s of the competitor's first packet "
            "| committed at the end right |", "|---|---|---|---|---|"]
    bands = [(f"buffer {lo:g}–{hi:g} BDP".replace("–inf", " or more"), lambda r, lo=lo, hi=hi: lo <= r["params"]["buffer_bdp"] < hi)
             for lo, hi in BUFFER_BANDS]
    bands += [(f"competitors' RTT {lo:g}–{hi:g} ms".replace("–inf", " or more"),
               lambda r, lo=lo, hi=hi: lo <= competitor_base_rtt_s(r["params"]) * 1e3 < hi) for lo, hi in RTT_BANDS_MS]
    for label, inside in bands:
        band = [r for r in runs if inside(r)]
        if not band:
            continue
        right = [r for r in band if _first_after(r) == r["truth"]]
        fast = [r for r in right if r["first_commit"] is not None
                and r["first_commit"][0] - (r.get("competitor_at_s") or 0.0) <= 8.0]
        end = sum(r.get("final_verdict") == r["truth"] for r in band)
        rows.append(f"| {label} | {len(band)} | {wilson(len(right), len(band))} | {wilson(len(fast), len(band))} | "
                    f"{wilson(end, len(band))} |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("replay_record", help="lab/records/estimator/identify_active-*.json (identify_replay --json-out)")
    ap.add_argument("experiment_record", help="the run's summary.json, both modes (lab/records/experiments/)")
    ap.add_argument("--passive", metavar="REPLAY_RECORD",
                    help="identify_replay's record of the passive estimator's runs on the same networks: the "
                         "paired rows only")
    ap.add_argument("--by-network", action="store_true",
                    help="the replay's commits by the bottleneck's buffer and the competitors' RTT only")
    args = ap.parse_args(argv)
    if args.by_network:
        with open(args.replay_record) as f:
            print("\n".join(network_rows(json.load(f))))
        return 0
    if args.passive:
        with open(args.replay_record) as f, open(args.passive) as g:
            rows = paired_rows(json.load(f), json.load(g))
        print("| measured | result |\n|---|---|")
        print("\n".join(rows))
        return 0
    with open(args.replay_record) as f:
        replay = json.load(f)
    with open(args.experiment_record) as f:
        summary = json.load(f)
    print("| measured | result |\n|---|---|")
    breakdown = breakdown_rows(replay)
    for row in (breakdown or identification_rows(replay)) + fairness_rows(summary) + [stall_row(os.path.dirname(
            args.experiment_record))]:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
