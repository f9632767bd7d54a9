"""Two builds of the datapath daemon alternated on the benchmark's veth: the daemon's and the
agent's CPU and the throughput, each build's rounds paired with the other's.

    python -m tests.perf.ab_datapath OLD_BINARY NEW_BINARY [--rounds 6]

Each round runs ``bench_datapath.ccp_round`` (a fresh daemon and reno agent, 6 s of iperf3
-C ccp) under each binary, the order alternating. Not part of ``make bench`` (it needs two
builds); keep the old binary before rebuilding:
``cp datapath/build/intcc-datapath /tmp/old``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from experiments.reports.compare import ratio_ci
from tests.perf import bench_datapath


def one_round(binary: str, tmp: str) -> dict:
    os.environ["INTCC_DATAPATH_BIN"] = binary
    run, _ = bench_datapath.ccp_round(tmp)
    return {"gbps": run["gbps"], "daemon_cores": run["process_cores"][0], "agent_cores": run["process_cores"][1],
            "daemon_wakeups_per_s": run["process_wakeups_per_s"][0], "retransmits": run["retransmits"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="the daemon binary to compare against")
    ap.add_argument("new", help="the daemon binary under test")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args(argv)
    for b in (args.old, args.new):
        if not os.access(b, os.X_OK):
            ap.error(f"{b}: not an executable daemon binary")
    if bench_datapath.ccp_registered():
        ap.error("'ccp' is already registered: stop the running datapath first")
    tmp = tempfile.mkdtemp(prefix="intcc-ab-dp-")
    runs = {"old": [], "new": []}
    bench_datapath.VETH.up()
    try:
        for i in range(args.rounds):
            for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
                r = one_round(getattr(args, name), tmp)
                runs[name].append(r)
                print(f"round {i + 1}/{args.rounds} {name}: {r['gbps']:.2f} Gbit/s, daemon {r['daemon_cores']:.4f} "
                      f"cores, agent {r['agent_cores']:.3f}, daemon wake-ups {r['daemon_wakeups_per_s']:.0f}/s, "
                      f"{r['retransmits']} retransmits", flush=True)
    finally:
        bench_datapath.VETH.down()
    for name in ("old", "new"):
        print(f"{name}: daemon {statistics.median(r['daemon_cores'] for r in runs[name]):.4f} cores (median), "
              f"{statistics.median(r['gbps'] for r in runs[name]):.2f} Gbit/s (median)")
    for key, what in (("daemon_cores", "daemon cores"), ("gbps", "throughput")):
        m, lo, hi = ratio_ci([r[key] for r in runs["new"]], [r[key] for r in runs["old"]], paired=True)
        print(f"{what} new / old, paired by round: {m:.2f} (95 % CI {lo:.2f}-{hi:.2f})")


if __name__ == "__main__":
    main()
