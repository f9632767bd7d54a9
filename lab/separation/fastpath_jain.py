"""RTT separation on a fast-path node against one FIFO there (a study of 2026-12-07): the
`sepfast` topology, s1 at 2 ms and s2 at a longer RTT through n1's 10 Mbit/s bottleneck,
which runs on its tc BPF fast path with one FIFO (a buffer of one BDP of the longer RTT, as
`rtt_separation`'s baseline) or with 4 separated queues; two flows of one CCA started
together, goodput over the whole run, Jain's index of the two, flow 2's share. Each
(CCA, RTT, queueing) once per repeat, interleaved.

    python -m lab.separation.fastpath_jain --s2-delay-ms 10 --s2-delay-ms 50 --cca cubic --cca bbr \
        --seconds 20 --repeats 1 --json-out lab/records/separation/fastpath-jain-DATE.json
    python -m lab.separation.fastpath_jain --table RECORD
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading

from experiments.runs.scenario import TOPOLOGIES
from experiments.testbed.bed import Testbed
from experiments.testbed.topo import load_topo
from experiments.testbed.traffic import BackgroundFlow

PORTS = {"s1": 5201, "s2": 5202}
S1_DELAY_MS = 1.0
BOTTLENECK_MBPS = 10.0


def one_run(cca: str, s2_delay_ms: float, separation: int, seconds: float) -> dict:
    longer_rtt_s = 2 * (s2_delay_ms + 0.1) / 1e3
    bdp_pkts = max(8, round(BOTTLENECK_MBPS * 1e6 * longer_rtt_s / 8 / 1500))
    params = {"separation": separation, "s1_delay_ms": S1_DELAY_MS, "s2_delay_ms": s2_delay_ms,
              "bottleneck_mbps": BOTTLENECK_MBPS, "buffer_pkts": bdp_pkts}
    with Testbed(load_topo(os.path.join(TOPOLOGIES, "sepfast.toml"), params), "fjain").up(exporter="none") as tb:
        if "fast path on 2 ports" not in open(tb.node_info("n1")["log"]).read():
            raise RuntimeError("n1 did not put its fast path in place")
        together = threading.Barrier(len(PORTS))
        flows = [BackgroundFlow(tb, host, "r", cca, seconds, 1.0, port=port, start_together=together)
                 for host, port in PORTS.items()]
        outs = [f.join() for f in flows]
        counters = tb.counters("n1")
    goodput = [o["end"]["sum_received"]["bits_per_second"] / 1e6 for o in outs]
    return {"cca": cca, "s2_delay_ms": s2_delay_ms, "rtt_ratio": (2 * s2_delay_ms) / (2 * S1_DELAY_MS),
            "separation": separation, "buffer_pkts": bdp_pkts, "goodput_mbps": goodput,
            "jain": sum(goodput) ** 2 / (len(goodput) * sum(g * g for g in goodput)),
            "flow2_share": goodput[1] / sum(goodput),
            "separated_packets": counters.get("sep1", {}).get("packets", 0)}


def table(runs: list) -> str:
    lines = ["| CCA | s2's RTT (s1 2 ms) | one FIFO: Jain, s2's share | 4 queues: Jain, s2's share |", "|---|---|---|---|"]
    keys = sorted({(r["cca"], r["s2_delay_ms"]) for r in runs})
    for cca, d in keys:
        cells = []
        for sep in (0, 4):
            rs = [r for r in runs if (r["cca"], r["s2_delay_ms"], r["separation"]) == (cca, d, sep)]
            cells.append(", ".join(f"{r['jain']:.3f}, {r['flow2_share']:.2f}" for r in rs) or "-")
        lines.append(f"| {cca} | {2 * d:g} ms | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--s2-delay-ms", type=float, action="append", help="s2's one-way access delay (repeatable)")
    ap.add_argument("--cca", action="append", help="kernel CCA of both flows (repeatable)")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json-out")
    ap.add_argument("--table", metavar="RECORD")
    args = ap.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(table(json.load(f)["runs"]))
        return 0
    runs = []
    plan = [(c, d, sep) for _ in range(args.repeats) for c in (args.cca or ["cubic"])
            for d in (args.s2_delay_ms or [20.0]) for sep in (0, 4)]
    for i, (cca, d, sep) in enumerate(plan, 1):
        print(f"run {i}/{len(plan)}: {cca}, s2 at {2 * d:g} ms, {'4 queues' if sep else 'one FIFO'}",
              file=sys.stderr, flush=True)
        runs.append(one_run(cca, d, sep, args.seconds))
    print(table(runs))
    if args.json_out:
        from records.provenance import stamp
        with open(args.json_out, "w") as f:
            json.dump({"provenance": stamp(), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
