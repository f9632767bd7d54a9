"""Scenarios on a Ray cluster (experiments/cluster/): a local cluster of two nodes on this
machine, each advertising one testbed, one of them removed mid-job, against a local
--jobs 2 run of the same seed (root: testbeds). The cluster runs in a process of its own
(cluster_job.py): this one never starts Ray, whose threads make a fork unsafe."""
import json
import os
import subprocess
import sys
import time

import pytest

from experiments.runs.runner import run_scenario
from experiments.testbed.teardown import list_testbeds, teardown
from tests.integration.cluster_job import scenario

pytest.importorskip("ray", reason="the cluster extra: pip install 'intcc[cluster]' (make setup)")


def _cluster_testbeds():
    return [t for t in list_testbeds() if t.startswith("cluster")]


def test_a_job_split_over_two_nodes_survives_one_dying_and_merges_as_a_local_run(tmp_path):
    out = tmp_path / "cl"
    try:
        job = subprocess.run([sys.executable, "-m", "tests.integration.cluster_job", str(out)], capture_output=True,
                             text=True, timeout=400, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    finally:
        # the removed node's worker takes its testbed down on its own (asserted below); a
        # job that crashed cannot
        deadline = time.monotonic() + 30
        while _cluster_testbeds() and time.monotonic() < deadline:
            time.sleep(0.5)
        left = _cluster_testbeds()
        for name in left:
            teardown(name)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert not left
    lines = job.stdout.splitlines()
    got = json.loads(lines[-1])
    assert "removed the second node" in lines
    assert any("worker died" in l for l in lines), job.stdout      # its run, tried again
    assert any("no run left" in l for l in lines)                  # the same job again: a resume
    records = sorted(got["records"], key=lambda r: r["run"])
    assert sorted(got["again"]) == [r["run"] for r in records]

    local = sorted(run_scenario(scenario(), str(tmp_path / "local"), echo=lambda *_: None, jobs=2),
                   key=lambda r: r["run"])
    assert [r["run"] for r in records] == [r["run"] for r in local]
    assert [sorted(r) for r in records] == [sorted(r) for r in local]
    assert [r["loss_seed"] for r in records] == [r["loss_seed"] for r in local]
    with open(out / "cluster.json") as f:
        where = json.load(f)["runs"]
    assert set(where) == {r["run"] for r in records}
    assert sum(w["attempts"] for w in where.values()) > len(where), where
    with open(out / "summary.json") as f:
        assert [r["run"] for r in json.load(f)["records"]] == [r["run"] for r in got["records"]]
    for r in records:
        assert os.path.exists(out / "runs" / r["run"] / "series.csv")
