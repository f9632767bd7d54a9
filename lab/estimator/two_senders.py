"""Two intcc senders and one kernel competitor at one bottleneck (issue 66's "both right, Jain >= 0.9")

Two flows s1 -> r1 (ports 5201, 5203) under one ``intcc alg run adaptive --identify active``
agent (each the other's peer: estimator/identify, "two intcc senders"), and one kernel flow
s2 -> r2 (port 5202) of ``--competitor``, all started together on the dumbbell, each run on a
fresh testbed, broker and datapath. Per run: each intcc flow's switches (what it named), the
three flows' mean goodputs over the run's second half and their Jain index.

    python -m lab.estimator.two_senders --competitor cubic --competitor reno --repeats 3 \\
        [--seconds 30] [--mbps 10] [--delay-ms 20] [--buffer-bdp 5] [--out FILE.json]
    python -m lab.estimator.two_senders --table FILE.json      # the docs' table of a record

Needs root, the datapath built (make setup) and no other CCP datapath running.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import threading
from collections import Counter

import numpy as np

from broker.launch import BrokerProcess
from ccp_agent.datapath import AgentProcess, DatapathProcess
from experiments.runs.metrics import jain
from experiments.runs.scenario import TOPOLOGIES
from experiments.runs.services import free_port
from experiments.testbed.bed import Testbed
from experiments.testbed.topo import load_topo
from experiments.testbed.traffic import BackgroundFlow, series
from int_node.runtime import run_path
from records.provenance import stamp

INTCC_PORTS = (5201, 5203)
COMPETITOR_PORT = 5202
CREDS = run_path("two-senders-broker", "credentials.json")


def flows_in_trace(trace: str) -> dict[int, list[tuple[float, str]]]:
    """Per intcc port, the switches ((seconds from the run's first flow start, why)) of its
    data connection: the sid at that port with the most rows (iperf3's control connection
    goes to the same port and lives on a handful)."""
    rows = list(csv.DictReader(open(trace)))
    port_of = {r["sid"]: int(r["dst_port"]) for r in rows if r["event"] == "start" and r["dst_port"]}
    counts = Counter(r["sid"] for r in rows)
    t0 = min(float(r["t_s"]) for r in rows if r["event"] == "start")
    out = {}
    for port in INTCC_PORTS:
        sids = [s for s, p in port_of.items() if p == port]
        if not sids:
            out[port] = []
            continue
        sid = max(sids, key=lambda s: counts[s])
        out[port] = [(round(float(r["t_s"]) - t0, 2), r["reason"]) for r in rows
                     if r["sid"] == sid and r["event"] == "switch" and " -> " in r["reason"]]
    return out


def named(switches: list[tuple[float, str]]) -> str | None:
    """The CCA the last commit named (None: no commit): 'identified X' in its switch."""
    names = [why.split("identified ", 1)[1].split(" ", 1)[0] for _, why in switches if "identified " in why]
    return names[-1] if names else None


def one_run(competitor: str, seconds: int, mbps: float, delay_ms: float, buffer_bdp: float, work: str) -> dict:
    trace = os.path.join(work, "trace.csv")
    with BrokerProcess("mosquitto", port=free_port(), credentials_file=CREDS) as broker:
        url = f"{broker.url}?credentials={CREDS}"
        tb = Testbed(load_topo(os.path.join(TOPOLOGIES, "dumbbell.toml"),
                               {"bottleneck_mbps": mbps, "bottleneck_delay_ms": delay_ms, "buffer_bdp": buffer_bdp}),
                     "two").up(exporter=url)
        try:
            with DatapathProcess(state_dir=os.path.join(work, "dp")) as dp:
                agent = AgentProcess("adaptive", ["--identify", "active", "--trace", trace, "--algorithms",
                                                  "bbr,cubic,reno,vegas", "--broker", url, "--state-dir",
                                                  dp.state_dir], log_path=os.path.join(work, "agent.log")).start()
                try:
                    dp.wait_agent(True)
                    together = threading.Barrier(3)
                    flows = [BackgroundFlow(tb, "s2", "r2", competitor, seconds, 1.0, port=COMPETITOR_PORT,
                                            start_together=together)]
                    flows += [BackgroundFlow(tb, "s1", "r1", "ccp", seconds, 1.0, port=p, start_together=together)
                              for p in INTCC_PORTS]
                    outs = [f.join() for f in flows]
                    failure = agent.failure()
                finally:
                    agent.stop()
                    dp.wait_agent(False)
        finally:
            tb.down()
    if failure:
        raise SystemExit(f"the agent failed: {failure}")
    goodputs = [[row["goodput_mbps"] or 0.0 for row in series(o)] for o in outs]
    half = [float(np.mean(g[len(g) // 2:])) for g in goodputs]
    switches = flows_in_trace(trace)
    return {"competitor": competitor, "seconds": seconds,
            "goodput_second_half_mbps": {"competitor": half[0], **{str(p): h for p, h in zip(INTCC_PORTS, half[1:])}},
            "zero_goodput_s": {"competitor": sum(v == 0 for v in goodputs[0][2:-1]),
                               **{str(p): sum(v == 0 for v in g[2:-1]) for p, g in zip(INTCC_PORTS, goodputs[1:])}},
            "jain_second_half": jain(half) or 0.0,
            "named": {str(p): named(switches[p]) for p in INTCC_PORTS},
            "switches": {str(p): switches[p] for p in INTCC_PORTS}}


def table(record: dict) -> str:
    """The docs' table of a record: per competitor, both flows named it, when (the later of
    the two commits, from the flows' start), the Jain index and the seconds of zero goodput."""
    lines = ["| competitor | both named it | both committed by, s | Jain (second half) | seconds of zero goodput |",
             "|---|---|---|---|---|"]
    for comp in sorted({r["competitor"] for r in record["runs"]}):
        runs = [r for r in record["runs"] if r["competitor"] == comp]
        both = sum(all(v == comp for v in r["named"].values()) for r in runs)
        when = [max((s[0][0] for s in r["switches"].values() if s), default=float("nan")) for r in runs]
        zero = sum(sum(r["zero_goodput_s"].values()) for r in runs)
        lines.append(f"| {comp} | {both} of {len(runs)} | " + ", ".join(f"{t:.1f}" for t in when)
                     + " | " + ", ".join(f"{r['jain_second_half']:.3f}" for r in runs) + f" | {zero} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", metavar="RECORD", help="print the docs' table of a record (runs nothing)")
    ap.add_argument("--competitor", action="append", choices=["bbr", "cubic", "reno"],
                    help="the kernel competitor's CCA (the kernel here has these three built in)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--mbps", type=float, default=10.0)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--buffer-bdp", type=float, default=5.0)
    ap.add_argument("--out", help="the record (JSON): every run, with the date, commit and command")
    args = ap.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(table(json.load(f)))
        return 0
    if not args.competitor:
        ap.error("--competitor is required (or --table RECORD)")
    runs = []
    for competitor in args.competitor:
        for k in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="intcc-two-") as work:
                r = one_run(competitor, args.seconds, args.mbps, args.delay_ms, args.buffer_bdp, work)
            r["repeat"] = k
            runs.append(r)
            print(f"{competitor} #{k}: named {r['named']}, Jain {r['jain_second_half']:.3f}, second-half goodputs "
                  + ", ".join(f"{n} {v:.2f}" for n, v in r["goodput_second_half_mbps"].items()) + " Mbit/s",
                  flush=True)
    both = sum(all(v == r["competitor"] for v in r["named"].values()) for r in runs)
    fair = sum(r["jain_second_half"] >= 0.9 for r in runs)
    print(f"both named the competitor in {both} of {len(runs)} runs; Jain >= 0.9 in {fair} of {len(runs)} "
          f"(mean {np.mean([r['jain_second_half'] for r in runs]):.3f})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"provenance": stamp("python -m lab.estimator.two_senders "
                                           + " ".join(sys.argv[1:] if argv is None else argv)),
                       "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
