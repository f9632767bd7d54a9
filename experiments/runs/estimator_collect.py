"""The estimator's training data (the ML-fairness paper, Table II): randomised dumbbell
runs of the scenario ``estimator_collect`` (experiments/runs/scenarios/), each run's
network and CCA pair drawn from the collection's seed (collection_plans.run_plan: pairs cycle
so every one of the 16 is equally represented), flow 1 kept as ``DIR/runs/<run>.npz``
(dataset_run.py). Runs already on disk are skipped: a collection can be stopped and resumed.
``jobs`` > 1 runs that many testbeds at once; their nodes then share the CPU, which adds some
jitter to the emulated links (see docs/estimator.md).
"""
from __future__ import annotations

import json
import os

from experiments.runs.collection_plans import Collection, plan_algorithm
from experiments.runs.dataset_run import CollectionError, npz_path
from experiments.runs.signals import restore as restore_signals, unwind_on_signals

__all__ = ["CollectionError", "collect"]     # CollectionError: a collection that cannot go on as asked


def _interrupt(signum):
    raise KeyboardInterrupt(f"signal {signum}")


def collect(out_dir: str, runs: int, seconds: float = 60.0, seed: int = 1, samples: int = 100,
            warmup_frac: float = 0.1, echo=print, without_vegas: bool = False,
            jobs: int = 1, node_python: str | None = None, distribution: str = "paper",
            node_rt_priority: int = 0, udp_cross: bool = False, cluster: str | None = None,
            retries: int = 2) -> dict:
    """Collect runs 0..runs-1 into out_dir (skipping those on disk), ``jobs`` testbeds
    at a time (the runner's: ``echo`` says each run's result and the time left).
    ``without_vegas`` leaves out the runs that need the CCP datapath (a later resume fills
    them in). ``node_python``: the INT nodes' interpreter
    (int_node/runtime.py; None: $INTCC_NODE_PYTHON, else cpython); ``node_rt_priority``
    their SCHED_FIFO priority (0: none; each run's meta says how far its links fell behind).
    ``udp_cross``: UDP cross traffic in half the runs (run_plan). ``cluster``: the address
    of a Ray cluster to run them on instead (experiments/cluster/), each tried ``retries``
    more times if it fails."""
    from experiments.runs import scenario as scenarios
    from experiments.runs.runner import run_scenario
    sc = scenarios.load("estimator_collect")
    sc.collection = Collection(distribution, udp_cross, samples, warmup_frac)
    sc.repeats, sc.seconds, sc.seed = runs, seconds, seed
    sc.node_rt_priority, sc.node_python = node_rt_priority, node_python
    sc.skip_repeats = frozenset(i for i in range(runs)
                                if without_vegas and plan_algorithm(sc.collection.plan(seed, i)).uses_ccp)
    # SIGTERM ends a collection like Ctrl-C: through the finally blocks that stop the
    # testbeds, the datapath and the agent (a run cut short is not kept)
    previous = unwind_on_signals(_interrupt)
    try:
        if cluster:
            from experiments.cluster.submit import run_on_cluster
            run_on_cluster(sc, out_dir, cluster, echo=echo, retries=retries)
        else:
            run_scenario(sc, out_dir, echo=echo, jobs=jobs)
    finally:
        restore_signals(previous)
    failed = []
    if os.path.exists(os.path.join(out_dir, "failed.json")):
        with open(os.path.join(out_dir, "failed.json")) as f:
            failed = [{"run": r["run"], "error": r["error"]} for r in json.load(f)]
    done = sum(os.path.exists(npz_path(out_dir, sc.collection.plan(seed, i))) for i in range(runs))
    return {"runs": runs, "done": done, "failed": failed, "left": runs - done - len(failed)}
