"""Two intcc senders identifying at one bottleneck beside one kernel competitor (a study of
2026-12-05): flows 1 and 3 (s1 -> r1, both on the CCP datapath under one `adaptive
--identify active` agent: each other's peers) and flow 2 (s2 -> r2, kernel CCA), started
together on the dumbbell. Per repeat: each adaptive flow's switches (from the agent's
trace), every flow's mean goodput and Jain's index over the three.

    python -m lab.estimator.identify_two --competitor cubic --repeats 2 --seconds 40 --json-out F

Needs root, the datapath built (make setup) and no other 'ccp' congestion control loaded."""
from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
import threading

import numpy as np

ADAPTIVE_PORTS = (5201, 5203)
COMPETITOR_PORT = 5202


def switches(trace: str, port: int) -> list:
    """(s since the flow's start, why) of each switch of the flow to ``port``."""
    rows = [r for r in csv.DictReader(open(trace)) if r.get("dst_port") == str(port)]
    starts = [float(r["t_s"]) for r in rows if r["event"] == "start"]
    if not starts:
        return []
    return [(round(float(r["t_s"]) - starts[0], 2), r["reason"]) for r in rows
            if r["event"] == "switch" and "->" in r["reason"]]


def one_run(competitor: str, seconds: int, params: dict, work: str) -> dict:
    from broker.launch import BrokerProcess
    from ccp_agent.datapath import AgentProcess, DatapathProcess
    from experiments.runs.services import free_port
    from experiments.testbed.bed import Testbed
    from experiments.testbed.topo import load_topo
    from experiments.testbed.traffic import BackgroundFlow, series
    topo = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "testbed", "topologies",
                        "dumbbell.toml")
    with BrokerProcess("mosquitto", port=free_port()) as broker:
        tb = Testbed(load_topo(topo, params), "two").up(exporter=broker.url)
        try:
            with DatapathProcess(state_dir=os.path.join(work, "dp")) as dp:
                trace = os.path.join(work, "trace.csv")
                agent = AgentProcess("adaptive", ["--identify", "active", "--trace", trace, "--algorithms",
                                                  "bbr,cubic,reno,vegas", "--broker", broker.url,
                                                  "--state-dir", dp.state_dir],
                                     log_path=os.path.join(work, "agent.log")).start()
                try:
                    dp.wait_agent(True)
                    together = threading.Barrier(3)
                    flows = [BackgroundFlow(tb, "s1", "r1", "ccp", seconds, 1.0, port=p, start_together=together)
                             for p in ADAPTIVE_PORTS]
                    flows.append(BackgroundFlow(tb, "s2", "r2", competitor, seconds, 1.0, port=COMPETITOR_PORT,
                                                start_together=together))
                    outs = [f.join() for f in flows]
                    failure = agent.failure()
                finally:
                    agent.stop()
                    dp.wait_agent(False)
        finally:
            tb.down()
    goodput = [float(np.mean([row["goodput_mbps"] for row in series(o)])) for o in outs]
    x = np.array(goodput)
    return {"competitor": competitor, "params": params, "goodput_mbps": [round(g, 3) for g in goodput],
            "jain": round(float(x.sum() ** 2 / (len(x) * (x ** 2).sum())), 4), "agent_failure": failure,
            "switches": {str(p): switches(trace, p) for p in ADAPTIVE_PORTS},
            "named_right": [bool(s) and s[0][1].startswith(f"probe -> {competitor}") and f"identified {competitor}"
                            in s[0][1] for s in (switches(trace, p) for p in ADAPTIVE_PORTS)]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--competitor", default="cubic", help="the kernel CCA of flow 2")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seconds", type=int, default=40)
    ap.add_argument("--mbps", type=float, default=10.0)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--buffer-bdp", type=float, default=5.0)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    from records.provenance import stamp
    params = {"bottleneck_mbps": args.mbps, "bottleneck_delay_ms": args.delay_ms, "buffer_bdp": args.buffer_bdp}
    runs = []
    for k in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="intcc-two-") as work:
            r = one_run(args.competitor, args.seconds, params, work)
        runs.append(r)
        print(f"[{k + 1}/{args.repeats}] {args.competitor}: goodput {r['goodput_mbps']} Mbit/s, Jain {r['jain']}, "
              f"named right {r['named_right']}, switches {r['switches']}", flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"runs": runs, "provenance": stamp()}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
