"""Benchmark: what running a scenario on a Ray cluster costs against the local runner.

The same runs (cubic_aa's kernel cubic pair at 10 % link loss, short runs on one network)
four ways, one after another on this machine:

1. locally with --jobs 1, and on a cluster of one node advertising one testbed: the
   cluster's overhead per run is the difference of their wall times over the runs
   (target: <= 2 s per run). The cluster's wall time includes starting its workers.
2. locally with --jobs 2, and on a cluster of two nodes (one testbed each) on this one
   machine: runs per hour each way.
3. A projection of the 100-network fairness evaluation (the committed records of
   fairness_switching and fairness_pairs, seed 2617: their runs and seconds) on 10 hosts
   like this one, from the measured fixed cost of a run (wall time less flow time, --jobs
   1), the cluster's overhead per run and one testbed build per network (measured: a
   dumbbell up and down), at 2 testbeds per 2-core host: the capacity those records
   measured (--jobs 2 on this kind of host: the share of runs whose emulated links fell
   behind, emulation_off, is printed beside it).

Needs root (testbeds) and the cluster extra (Ray). As a script it prints the figures on
stderr and a JSON record with its provenance on stdout (for data/bench/).

    python -m tests.perf.bench_cluster      (part of make bench)
"""
from __future__ import annotations

import glob
import json
import os
import sys
import tempfile
import time

import pytest

from tests.perf import answer_help

RUNS_SECONDS = 3.0
REPEATS = 4                   # x 2 algorithms: 8 runs
FAIRNESS_RECORDS = ("data/experiments/fairness_switching-seed2617-*.json", "data/experiments/fairness_pairs-seed2617-*.json")
HOSTS, TESTBEDS_PER_HOST = 10, 2


def _scenario():
    from experiments.runs.scenario import load
    sc = load("cubic_aa", quick=True)
    sc.seed, sc.seconds, sc.repeats, sc.sweep = 11, RUNS_SECONDS, REPEATS, {"loss_pct": [10]}
    return sc


def _local(jobs: int) -> float:
    from experiments.runs.runner import run_scenario
    with tempfile.TemporaryDirectory() as out:
        t0 = time.monotonic()
        run_scenario(_scenario(), out, echo=lambda *_: None, jobs=jobs)
        return time.monotonic() - t0


def _cluster(nodes: int) -> float:
    """Seconds for the runs on a local cluster of ``nodes`` nodes, in a process of its own
    (a Ray driver's threads make this process's later forks, its testbeds', unsafe)."""
    import subprocess
    out = subprocess.run([sys.executable, "-m", "tests.perf.bench_cluster", "--cluster-nodes", str(nodes)],
                         capture_output=True, text=True, check=True, timeout=900,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return float(out.stdout.split()[-1])


def _cluster_here(nodes: int) -> float:
    import ray
    from ray.cluster_utils import Cluster
    from experiments.cluster.submit import run_on_cluster
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                          "resources": {"intcc_testbed": 1}})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1, resources={"intcc_testbed": 1})
    cluster.wait_for_nodes()
    try:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.monotonic()
            run_on_cluster(_scenario(), out, cluster.address, echo=lambda *_: None)
            return time.monotonic() - t0
    finally:
        ray.shutdown()
        cluster.shutdown()


def _testbed_build_s() -> float:
    """A dumbbell of fairness_switching's kind up and down."""
    from experiments.testbed.bed import Testbed
    from experiments.testbed.teardown import teardown
    from experiments.testbed.topo import load_topo
    from experiments.runs.scenario import load
    sc = load("fairness_switching")
    teardown("benchcl")
    topo = load_topo(sc.topology_path, {"bottleneck_mbps": 5.0, "bottleneck_delay_ms": 20.0, "buffer_bdp": 5.0})
    t0 = time.monotonic()
    Testbed(topo, "benchcl").up().down()
    return time.monotonic() - t0


def fairness_runs() -> dict:
    records = []
    for pattern in FAIRNESS_RECORDS:
        for path in sorted(glob.glob(pattern)):
            with open(path) as f:
                records += json.load(f)["records"]
    networks = {(r["repeat"], r.get("competitor")) for r in records}
    return {"runs": len(records), "networks": len(networks), "flow_s": sum(r["seconds"] for r in records),
            "jobs": sorted({r.get("jobs") for r in records}),
            "emulation_off": sum(bool(r.get("emulation_off")) for r in records)}


def measure() -> dict:
    n = 2 * REPEATS
    local1, cluster1 = _local(1), _cluster(1)
    local2, cluster2 = _local(2), _cluster(2)
    build_s = _testbed_build_s()
    fixed_s = max(0.0, (local1 - n * RUNS_SECONDS) / n)
    overhead_s = (cluster1 - local1) / n
    fr = fairness_runs()
    per_run_s = fr["flow_s"] / fr["runs"] + fixed_s + max(0.0, overhead_s) + build_s * fr["networks"] / fr["runs"]
    return {
        "runs": n, "run_seconds": RUNS_SECONDS,
        "local_jobs1_s": round(local1, 1), "cluster_1x1_s": round(cluster1, 1),
        "overhead_per_run_s": round(overhead_s, 2), "overhead_target_s": 2.0,
        "local_jobs2_s": round(local2, 1), "cluster_2x1_s": round(cluster2, 1),
        "runs_per_hour": {"local_jobs2": round(n / local2 * 3600), "cluster_2x1": round(n / cluster2 * 3600)},
        "fixed_per_run_s": round(fixed_s, 2), "testbed_build_s": round(build_s, 2),
        "fairness": fr,
        "projection_hours": {
            "one_host_jobs2": round(fr["runs"] * per_run_s / TESTBEDS_PER_HOST / 3600, 1),
            f"{HOSTS}_hosts": round(fr["runs"] * per_run_s / (HOSTS * TESTBEDS_PER_HOST) / 3600, 2)},
    }


def report(m: dict) -> str:
    fr = m["fairness"]
    return "\n".join([
        f"{m['runs']} runs of {m['run_seconds']:g} s: local --jobs 1 {m['local_jobs1_s']} s, cluster of 1 testbed "
        f"{m['cluster_1x1_s']} s -> overhead {m['overhead_per_run_s']:+.2f} s per run (target <= 2 s)",
        f"local --jobs 2 {m['local_jobs2_s']} s ({m['runs_per_hour']['local_jobs2']} runs/h), cluster of 2 nodes "
        f"x 1 testbed {m['cluster_2x1_s']} s ({m['runs_per_hour']['cluster_2x1']} runs/h)",
        f"a run's fixed cost {m['fixed_per_run_s']} s, a dumbbell built and taken down {m['testbed_build_s']} s",
        f"fairness evaluation (seed 2617 records): {fr['runs']} runs, {fr['networks']} networks, "
        f"{fr['flow_s'] / 3600:.1f} h of flows, run at --jobs {fr['jobs']} with {fr['emulation_off']} runs' links "
        f"behind -> one host {m['projection_hours']['one_host_jobs2']} h, {HOSTS} hosts x {TESTBEDS_PER_HOST} "
        f"testbeds {m['projection_hours'][f'{HOSTS}_hosts']} h",
    ])


@pytest.mark.skipif(os.geteuid() != 0, reason="testbeds need root")
def test_cluster_benchmark():
    pytest.importorskip("ray")
    m = measure()
    print("\n" + report(m))
    assert m["runs_per_hour"]["cluster_2x1"] > 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cluster-nodes"]:           # a child of _cluster
        print(f"{_cluster_here(int(sys.argv[2])):.3f}")
        raise SystemExit(0)
    answer_help(__doc__)
    from records import stamp
    m = measure()
    print(report(m), file=sys.stderr)
    print(json.dumps({**m, "provenance": stamp()}, indent=1))
