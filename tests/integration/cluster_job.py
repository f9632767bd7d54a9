"""The cluster side of test_cluster.py, in a process of its own: a Ray driver's threads
make every later fork of its process unsafe (pyroute2's namespaces fork), so the test
process never starts Ray. A local cluster of two nodes on this machine, each advertising
one testbed; SCENARIO's runs submitted; the node the driver is not connected to removed
once the first run is back; then the same job again into the same directory (a resume:
nothing left). Prints the progress lines and, last, a JSON line of the records.

    python -m tests.integration.cluster_job OUT
"""
from __future__ import annotations

import json
import sys
import threading
import time

import ray
from ray.cluster_utils import Cluster

from experiments.cluster.submit import run_on_cluster
from experiments.runs.scenario import load


def scenario():
    sc = load("cubic_aa", quick=True)
    sc.seed, sc.seconds, sc.repeats, sc.sweep = 7, 3, 2, {"loss_pct": [10]}
    return sc


def main(out_dir: str) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                          "resources": {"intcc_testbed": 1}})
    cluster.add_node(num_cpus=1, resources={"intcc_testbed": 1})
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        driver_node = ray.get_runtime_context().get_node_id()
        other = next(n for n in cluster.list_all_nodes() if n.node_id != driver_node)
        lines, result = [], []

        def echo(line):
            lines.append(line)
            print(line, flush=True)
        job = threading.Thread(target=lambda: result.append(run_on_cluster(scenario(), out_dir, cluster.address,
                                                                           echo=echo)))
        job.start()
        deadline = time.monotonic() + 90
        while not any(l.startswith("[1/") for l in lines) and time.monotonic() < deadline and job.is_alive():
            time.sleep(0.1)
        cluster.remove_node(other)
        print("removed the second node", flush=True)
        job.join(300)
        again = run_on_cluster(scenario(), out_dir, cluster.address, echo=echo)
        print(json.dumps({"records": result[0] if result else None, "again": [r["run"] for r in again]}))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
