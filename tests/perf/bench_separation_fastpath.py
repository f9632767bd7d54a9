"""Benchmark: what RTT separation costs the node's fast path (tc BPF, `--fast-path`).

Two identical testbeds h1 -- n1 -- n2 -- h2 (line2), both nodes on their fast path: n1 inserts
and stamps INT and shapes its port to n2 at a rate well above what the host can forward (so
that the queue never binds and the forwarding does), n2 only forwards (no INT role: its cost,
the same in both, small). One testbed has a single queue at n1 (tbf over a pfifo), one
with RTT separation in its place (4 queues: the programs time every TCP packet of both
directions, split each packet into its flow's queue, HTB serves the queues, and the control
loop runs on the maps every second). UDP packets per second and TCP goodput through each,
in interleaved rounds (single, separated, single, ...: this host's rate drifts over
minutes). Prints figures and a JSON record; asserts nothing about speed (shared machines
are noisy), only that the separated node tracked, split and timed the flows.

    python -m tests.perf.bench_separation_fastpath > data/bench/separation_fastpath-DATE.json
"""
from __future__ import annotations

import json
import os
import sys

from experiments.testbed.bed import Testbed
from experiments.testbed.teardown import teardown
from experiments.testbed.topo import load_topo
from tests.integration.tbutil import TOPO_DIR
from tests.perf import answer_help, rate_round_medians
from tests.perf.bench_forwarding import measure_rate

RATE_ROUNDS = 5
QUEUES = 4
#: the port's rate: far above the ~4 Gbit/s a 2-core host forwards, so the qdisc never binds
PORT_MBPS = 40_000


def _line(name: str, separation: int) -> Testbed:
    teardown(name)
    topo = load_topo(os.path.join(TOPO_DIR, "line2.toml"), {"fast_path": True, "mid_mbps": PORT_MBPS,
                                                           "mid_separation": separation})
    topo.nodes["n2"].update(int=[])
    tb = Testbed(topo, name).up(exporter="none")
    tb.run("h2", ["ip", "link", "set", "intcc-n2", "mtu", "1788"])
    for node in ("n1", "n2"):
        log = open(tb.node_info(node)["log"]).read()
        if "fast path on" not in log:
            tb.down()
            raise RuntimeError(f"{name}: {node} did not put its fast path in place:\n{log[-2000:]}")
    return tb


def run_benchmark(rounds: int = RATE_ROUNDS) -> dict:
    single = separated = None
    try:
        single, separated = _line("bsq", 0), _line("bss", QUEUES)
        out = {"port_mbps": PORT_MBPS, "queues": QUEUES, "rounds": []}
        for r in range(rounds):
            print(f"rate round {r + 1}/{rounds} (single queue, RTT separation)", file=sys.stderr, flush=True)
            a = measure_rate(single, "fast path, single queue")
            b = measure_rate(separated, f"fast path, RTT separation ({QUEUES} queues)")
            out["rounds"].append({"single": a, "separated": b, "pps_ratio": b["udp_rx_pps"] / a["udp_rx_pps"],
                                  "tcp_ratio": b["tcp_mbps"] / a["tcp_mbps"]})
        counters = separated.counters("n1")
        out["separated_counters"] = {k: v for k, v in counters.items()
                                     if k in ("rtt", "sepctl1") or k.startswith("sep") or k.startswith("fastpath.")}
        out["summary"] = summarize(out)
        return out
    finally:
        for tb in (separated, single):
            if tb is not None:
                tb.down()


def summarize(r: dict) -> dict:
    return rate_round_medians(r["rounds"], ("single", "separated"))


def report(r: dict) -> str:
    s = r["summary"]
    return "\n".join([
        f"RTT separation on the fast path ({len(r['rounds'])} interleaved rounds, port shaped at {r['port_mbps']:,} "
        f"Mbit/s, medians):",
        f"  {'':34}{'single queue':>14}{'separated':>12}{'ratio':>8}",
        f"  {'UDP forwarded, pps':34}{s['single_udp_pps_median']:>14,.0f}{s['separated_udp_pps_median']:>12,.0f}"
        f"{s['pps_ratio_median']:>8.2f}",
        f"  {'  ratio per round':34}" + " ".join(f"{x['pps_ratio']:.2f}" for x in r["rounds"]),
        f"  {'TCP goodput, Mbit/s':34}{s['single_tcp_mbps_median']:>14,.0f}{s['separated_tcp_mbps_median']:>12,.0f}"
        f"{s['tcp_ratio_median']:>8.2f}",
        "  target: >= 0.85x"])


def _separated_did_its_work(r: dict) -> bool:
    c = r["separated_counters"]
    return c["rtt"]["ts_samples"] > 0 and c["sep1"]["packets"] > 0 and c["sepctl1"]["rounds"] > 0


def test_separation_fastpath_benchmark():
    r = run_benchmark(rounds=1)
    print("\n" + report(r))
    assert _separated_did_its_work(r), r["separated_counters"]


if __name__ == "__main__":
    answer_help(__doc__)
    from records import stamp
    res = run_benchmark()
    print(report(res), file=sys.stderr)
    if not _separated_did_its_work(res):
        print("the separated node did not time, split or run its loop: the figures are not separation's",
              file=sys.stderr)
    print(json.dumps({**res, "provenance": stamp()}, indent=1))
