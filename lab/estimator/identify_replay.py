"""Active identification replayed on recorded runs (a development tool of 2026-12-02):
each run's hop records (``intcc exp run ... --record-telemetry``: runs/*/telemetry.jsonl.gz)
fed to an Identifier in the order they arrived, stepped every 0.25 s as the agent's child
does, flow 1 named by the run's identify records. Prints per run the truth, when the first
commit came (s after the first record) and to what, the final best hypothesis, and each
stage's median measurement: the stages can be changed and re-read without re-running.
Beside it, the live agent's own first commit (its identify records) and the run's
competitors, their start and the UDP beside them (the summary's record). A run of the
passive estimator (``--identify passive``) is read from its trace instead, scored alike.
With ``--agent-restarts fresh|keep`` the replay also starts the identification again where
the live agent does (once committed, the competitors differ from those named for
CHANGE_STEPS steps): "fresh" from the records to come (the agent before 2026-12-07), "keep"
from those since just before a joining competitor's first packet (Identifier.restart).

    python -m lab.estimator.identify_replay RESULTS_DIR [RESULTS_DIR ...] [--json-out F] [--threshold P]
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
from collections import defaultdict

import numpy as np

from estimator.identify.evidence import COMMIT_POSTERIOR
from ccp_agent.identification import CHANGE_STEPS
from estimator.identify.identifier import Identifier
from experiments.testbed.traffic import MAIN_PORT
from telemetry.ccas import CCA_LABELS
from experiments.runs.telemetry_record import read_records
from records.provenance import stamp

STEP_S = 0.25
#: the most likely hypothesis is kept at these times after the competitor's first packet
CHECKPOINTS_S = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0)
ACCESS_DELAY_MS = 1.0


def flow1_id(run_dir: str) -> str | None:
    """Flow 1: of the flows the agent published identify or switch records for (its data
    connection and iperf3's control connection), the one with the most packets through the
    nodes; not the one with the most records, which can tie (a run of few steps, or readers
    that dropped some) and was then picked by set order."""
    ids = {rec.flow_id for _, rec in read_records(run_dir, types=("identify", "switch"))}
    if len(ids) <= 1:
        return next(iter(ids), None)
    packets = dict.fromkeys(ids, 0)
    for _, rec in read_records(run_dir, types=("hop",)):
        for e in rec.top_flows or ():
            if e[0] in packets:
                packets[e[0]] += e[1]
    return max(sorted(ids), key=packets.get)


def live_switches(run_dir: str) -> list | None:
    """The live agent's switches of flow 1 (its trace.csv): [seconds after flow 1's start,
    reason], e.g. "probe -> cubic: identified cubic (97% posterior), mirror"; None where the
    run's trace was not kept."""
    path = os.path.join(run_dir, "trace.csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rows = list(csv.DictReader(f))
    starts = [float(r["t_s"]) for r in rows if r["event"] == "start" and r.get("dst_port") == str(MAIN_PORT)]
    if not starts:
        return []
    return [[round(float(r["t_s"]) - starts[0], 2), r["reason"]] for r in rows
            if r["event"] == "switch" and " -> " in r["reason"]]


def passive_timeline(run_dir: str, record: dict, out: dict) -> dict | None:
    """A run of the passive estimator (--identify passive), scored as a replay is: from its
    trace.csv, the estimate of each verdict row and the switches of flow 1, in seconds after
    flow 1's start; the competitor's arrival is its first packet at the bottleneck: its
    configured start and its access link's one-way delay (as a replay times it from the
    packet). None where the trace has no verdict rows."""
    path = os.path.join(run_dir, "trace.csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rows = list(csv.DictReader(f))
    starts = [r for r in rows if r["event"] == "start" and r.get("dst_port") == str(MAIN_PORT)]
    if not starts:
        return None
    sid, t0 = starts[0]["sid"], float(starts[0]["t_s"])
    verdicts = [(float(r["t_s"]) - t0, r["reason"].split(" ", 1)[0]) for r in rows
                if r["event"] == "verdict" and r["sid"] == sid and not r["reason"].startswith("identify")]
    if not verdicts:
        return None
    switches = [[round(float(r["t_s"]) - t0, 2), r["reason"].split("verdict ", 1)[1].split(" ", 1)[0]]
                for r in rows if r["event"] == "switch" and r["sid"] == sid and r["reason"].startswith("verdict ")]
    arrival = out["competitor_delay_s"] + (ACCESS_DELAY_MS + out["params"].get("comp_extra_delay_ms", 0.0)) / 1e3
    best_at = {}
    for c in CHECKPOINTS_S:
        said = [v for t, v in verdicts if t <= arrival + c]
        held = [v for t, v in switches if t <= arrival + c]
        if said and verdicts[-1][0] >= arrival + c:
            best_at[str(c)] = [said[-1], held[-1] if held else None]
    return {**out, "first_commit": tuple(switches[0]) if switches else None, "live_first_commit": None,
            "competitor_at_s": arrival, "commits": switches, "live_switches": live_switches(run_dir),
            "best_at": best_at, "final_verdict": switches[-1][1] if switches else None,
            "final_best": verdicts[-1][1], "final_posterior": None, "stages": {}, "passive": True}


#: where the competitors' base RTT comes from: as the live identifier reads it (the sink's
#: node measured it, where the records tell it; else flow 1's), flow 1's alone, or the run's
#: parameters (their access links' delay: a bound, no sender knows it)
COMPETITOR_RTTS = ("measured", "flow1", "oracle")


def competitor_base_rtt_s(params: dict) -> float:
    return 2 * (params["bottleneck_delay_ms"] + 2 * (ACCESS_DELAY_MS + params.get("comp_extra_delay_ms", 0.0))) / 1e3


def flow1_base_rtt_s(params: dict) -> float:
    return 2 * (params["bottleneck_delay_ms"] + 2 * (ACCESS_DELAY_MS + params.get("main_extra_delay_ms", 0.0))) / 1e3


def recorded_series(run_dir: str, own: str, base_rtt_s: float):
    """The bottleneck's series of a run's whole hop records (an Identifier keeping them all,
    its bottleneck as it reads it), and that Identifier; (None, it) without competitors."""
    idf = Identifier(own, base_rtt_s=base_rtt_s, keep_s=120.0)
    for _, rec in read_records(run_dir, types=("hop",)):
        idf.add(rec)
    node = idf._bottleneck()
    s = node.series(own, frozenset()) if node is not None else None
    return (s if s is not None and s.comp.shape[0] else None), idf


AGENT_RESTARTS = ("none", "fresh", "keep")


def add_forest_option(ap) -> None:
    from estimator import DEFAULT_IDENTIFY_FOREST
    ap.add_argument("--forest", default=DEFAULT_IDENTIFY_FOREST, metavar="MODEL|none",
                    help="the identification forest, as the live agent's --identify-forest (default: its release); "
                         "none: the stages alone")


def forest_arg(value: str) -> str:
    return "" if value == "none" else value


def replay(run_dir: str, record: dict, threshold: float = COMMIT_POSTERIOR, competitor_rtt: str = "measured",
           agent_restarts: str = "none", forest_model: str | None = None) -> dict:
    """``forest_model``: the identification forest's model as the live agent's
    --identify-forest ("": none; None: identifier.FOREST_MODEL's)."""
    p = record["params"]
    base_rtt_s = flow1_base_rtt_s(p)
    # a competitor outside the four (application-limited, a fixed window) is "unknown"
    outside = record.get("competitor_rate_mbps") or record["competitor"] not in CCA_LABELS
    out = {"run": record["run"], "truth": "unknown" if outside else record["competitor"], "params": p,
           "competitors": record.get("competitors", 1), "competitor_delay_s": record.get("competitor_delay_s", 0.0),
           "udp_cross_mbps": record.get("udp_cross_mbps", 0.0)}
    passive = passive_timeline(run_dir, record, out)
    if passive is not None:
        return passive
    if not os.path.exists(os.path.join(run_dir, "telemetry.jsonl.gz")):
        return {**out, "error": "no telemetry recorded and no passive verdicts in the trace"}
    own = flow1_id(run_dir)
    if own is None:
        return {**out, "error": "no identify record names flow 1"}
    def identifier():
        return Identifier(own, base_rtt_s=base_rtt_s, threshold=threshold, forest_model=forest_model,
                          competitor_base_rtt_s={"flow1": base_rtt_s, "oracle": competitor_base_rtt_s(p)}.get(competitor_rtt))
    idf = identifier()
    named, changed, restarts = None, 0, 0       # the agent's watch after a commit (ccp_agent/identification.py)
    t0 = next_step = first_ts = None
    first_commit = live_commit = before_tcp_commit = None
    commits: list = []            # [seconds after the first record, the verdict] at each change
    best_at: dict = {}
    posterior_at: dict = {}
    stages_at: dict = {}
    since_s = None
    stages = defaultdict(list)
    for rx_s, rec in read_records(run_dir, types=("hop", "identify")):
        if rec.type == "identify":
            if live_commit is None and rec.verdict is not None and rec.flow_id == own and t0 is not None:
                live_commit = (round(rx_s - t0, 2), rec.verdict)
            continue
        t0 = rx_s if t0 is None else t0
        first_ts = rec.ts_ns * 1e-9 if first_ts is None else first_ts
        next_step = rx_s + STEP_S if next_step is None else next_step
        idf.add(rec)
        if rx_s >= next_step:
            next_step += STEP_S
            if agent_restarts != "none":
                if named is None:
                    named = idf.competitors() if idf.verdict() is not None else None
                else:
                    now = idf.competitors()
                    changed = changed + 1 if now != named else 0
                    if changed >= CHANGE_STEPS:
                        if agent_restarts == "fresh":
                            idf = identifier()
                        else:
                            idf.restart(now - named)
                        named, changed, restarts = None, 0, restarts + 1
                        continue
            for ev in idf.step():
                stages[ev.stage].append(ev.measured)
            if first_commit is None and idf.verdict() is not None and idf.competitor_since_s is not None:
                first_commit = (round(rx_s - t0, 2), idf.verdict())
            if (commits[-1][1] if commits else None) != idf.verdict():
                commits.append([round(rx_s - t0, 2), idf.verdict()])
            if idf.competitor_since_s != since_s:      # UDP alone, then a TCP competitor: timed and scored from it
                since_s, best_at, posterior_at, stages_at = idf.competitor_since_s, {}, {}, {}
                if since_s is not None and first_commit is not None:
                    before_tcp_commit, first_commit = first_commit, None
            if idf.competitor_since_s is not None:
                since = rec.ts_ns * 1e-9 - idf.competitor_since_s
                for c in CHECKPOINTS_S:
                    if c not in best_at and since >= c:
                        best_at[c] = [idf.test.best()[0], idf.verdict()]
                        posterior_at[c] = {h: round(v, 3) for h, v in idf.test.posterior().items()}
                        # each stage's favourite then (stages whose evidence is flat left out)
                        stages_at[c] = {st: max(ll, key=ll.get) for st, ll in idf.test.stages.items()
                                        if max(ll.values()) - min(ll.values()) > 1e-6}
    best, post = idf.test.best()
    # each competitor's base RTT as read at the end over the path's (where the sink measured it)
    s = idf.series
    rtt_read = (idf.comp_base_rtts(s) / competitor_base_rtt_s(p)).round(4).tolist() \
        if s is not None and s.comp.shape[0] and idf.comp_rtts_known(s) else None
    # the competitor's first packet at the bottleneck, in seconds after the first record
    competitor_at = None if idf.competitor_since_s is None else round(idf.competitor_since_s - first_ts, 2)
    return {**out, "flow1": own, "first_commit": first_commit, "live_first_commit": live_commit, "competitor_at_s": competitor_at,
            "before_tcp_commit": before_tcp_commit, "commits": commits, "live_switches": live_switches(run_dir),
            "competitor_rtt_read_over_path": rtt_read, "agent_restarts": [agent_restarts, restarts], "best_at": {str(c): v for c, v in best_at.items()},
            "posterior_at": {str(c): v for c, v in posterior_at.items()},
            "stages_at": {str(c): v for c, v in stages_at.items()}, "final_verdict": idf.verdict(),
            "final_best": best, "final_posterior": round(post, 3),
            "stages": {k: [round(float(np.median(v)), 3), len(v)] for k, v in stages.items()},
            # each stage's evidence in the test at the end (log-likelihoods, clamped)
            "stage_loglik": {st: {h: round(v, 3) for h, v in ll.items()} for st, ll in idf.test.stages.items()}}


def recorded_runs(results, kept=("telemetry.jsonl.gz",), algorithm: str | None = None):
    """(run directory, its summary record) of each run of the given results directories that
    kept one of the files ``kept``, of ``algorithm`` only where given."""
    out = []
    for res in results:
        with open(os.path.join(res, "summary.json")) as f:
            records = {r["run"]: r for r in json.load(f)["records"]}
        for run_dir in sorted(glob.glob(os.path.join(res, "runs", "*"))):
            record = records.get(os.path.basename(run_dir))
            if record is None or (algorithm and record.get("algorithm", algorithm) != algorithm):
                continue
            if any(os.path.exists(os.path.join(run_dir, f)) for f in kept):
                out.append((run_dir, record))
    return out


def study_main(doc: str, one, table, argv=None) -> int:
    """The command line of a study over recorded active-identification runs: ``one((run
    directory, summary record, competitor RTT))`` per run in parallel (None: left out), the
    rows' ``table(rows)`` printed, and a record with its provenance; ``--table`` prints a
    record's table again."""
    import argparse
    from multiprocessing import Pool
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="*")
    ap.add_argument("--competitor-rtt", choices=("oracle", "flow1"), default="oracle",
                    help="each competitor's base RTT: the run's own (its path; the sink reads it within 1.5 %%) or flow 1's")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json-out")
    ap.add_argument("--table", metavar="JSON", help="the table of a record this wrote")
    args = ap.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(table(json.load(f)["runs"]))
        return 0
    if not args.results:
        ap.error("give results directories, or --table")
    jobs = [(d, r, args.competitor_rtt) for d, r in recorded_runs(args.results, algorithm="mirror active")]
    with Pool(args.jobs) as pool:
        rows = [r for r in pool.map(one, jobs) if r is not None]
    print(table(rows))
    if args.json_out:
        from records.provenance import stamp
        made = stamp()
        with open(args.json_out, "w") as f:
            json.dump({"provenance": made, "results": args.results, "competitor_rtt": args.competitor_rtt,
                       "runs": rows}, f, indent=1)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="an 'intcc exp run' output directory with recorded telemetry")
    ap.add_argument("--json-out")
    ap.add_argument("--threshold", type=float, default=COMMIT_POSTERIOR, help="the posterior a commit needs (the agent's default)")
    ap.add_argument("--competitor-rtt", choices=COMPETITOR_RTTS, default="measured",
                    help="the competitors' base RTT: as the live agent reads it (default), flow 1's, or the run's own")
    ap.add_argument("--agent-restarts", choices=AGENT_RESTARTS, default="none",
                    help="start again where the live agent does: none (one identification per run), "
                         "fresh (from the records to come), keep (from just before a joining competitor)")
    add_forest_option(ap)
    args = ap.parse_args(argv)
    # a passive run is scored from its trace: its record may keep that alone
    rows = [replay(run_dir, record, args.threshold, args.competitor_rtt, args.agent_restarts, forest_arg(args.forest))
            for run_dir, record in recorded_runs(args.results, ("telemetry.jsonl.gz", "trace.csv"))]
    right = wrong = final_right = 0
    for r in rows:
        if "error" in r:
            print(f"{r['run']}: {r['error']}")
            continue
        commit = r["first_commit"]
        ok = commit is not None and commit[1] == r["truth"]
        right += ok
        wrong += commit is not None and not ok
        final_right += r["final_best"] == r["truth"]
        p = r["params"]
        print(f"{r['truth']:6s} {p['bottleneck_mbps']:5.1f} Mbit/s {p['bottleneck_delay_ms']:5.1f} ms "
              f"{p['buffer_bdp']:5.1f} BDP  x{r['competitors']} +{r['competitor_delay_s']:4.1f} s "
              f"udp {r['udp_cross_mbps']:4.2f}  live {str(r['live_first_commit']):22s} commit {str(commit):22s} "
              f"{'right' if ok else 'undecided' if commit is None else 'WRONG'}  "
              f"final {r['final_best']} {r['final_posterior'] or 0:.2f}  "
              + " ".join(f"{k}={v[0]}({v[1]})" for k, v in sorted(r["stages"].items())))
    n = sum("error" not in r for r in rows)
    print(f"{n} runs: first commit right {right}, wrong {wrong}, undecided {n - right - wrong}; "
          f"the most likely hypothesis at the end right in {final_right}")
    if args.json_out:
        made = stamp()       # before the file is opened: rewriting a tracked record is no change to the code
        with open(args.json_out, "w") as f:
            json.dump({"provenance": made, "results": args.results, "threshold": args.threshold, "runs": rows},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
