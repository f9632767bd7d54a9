"""The cluster's plan and its file hand-over (experiments/cluster/): no Ray, no root."""
import io
import os
import tarfile

import pytest

from experiments.cluster.submit import ClusterError, _resume, _unpack
from experiments.cluster.units import network_key, plan_units, relocate, unit_batch
from experiments.cluster.worker import pack, run_files
from experiments.runs.run_record import write_summary
from experiments.runs.scenario import load


def _aa(seed=5):
    sc = load("cubic_aa", quick=True)
    sc.seed = seed
    return sc


def test_the_plan_is_the_local_runners_order_and_names():
    sc = _aa()
    units = plan_units(sc)
    assert [u.run for u in units] == [f"{slug}_loss_pct-{loss}_r{rep}" for rep in range(sc.repeats)
                                      for loss in sc.sweep["loss_pct"] for slug in ("kernel-cubic", "kernel-cubic-again")]
    assert [u.index for u in units] == list(range(len(units)))
    alg, sweep, reps = unit_batch(sc, units[1])
    assert (alg.label, sweep, reps) == ("kernel cubic again", {"loss_pct": units[1].value}, [0])


def test_a_plan_needs_its_seed_and_a_unit_its_algorithm():
    sc = _aa()
    sc.seed = None
    with pytest.raises(ValueError, match="seed"):
        plan_units(sc)
    units = plan_units(_aa())
    sc = _aa()
    sc.algorithms = sc.algorithms[:1]
    with pytest.raises(ValueError, match="kernel cubic again"):
        unit_batch(sc, units[1])


def test_drawn_networks_key_the_runs_that_share_a_testbed():
    sc = load("fairness_switching")
    sc.seed = 3
    units = plan_units(sc)
    keys = [network_key(sc, u) for u in units]
    same_net = [k for u, k in zip(units, keys) if u.repeat == 0 and u.value == units[0].value]
    assert len(same_net) == len(sc.algorithms) and len(set(same_net)) == 1
    assert len(set(keys)) == sc.repeats * len(sc.sweep["competitor"])     # each competitor's networks its own
    assert network_key(sc, units[0]) == keys[0]                           # the same every time


def test_relocate_moves_the_submitters_paths_under_the_workers_checkout():
    sc = _aa()
    sc.topology = "/home/me/intcc/experiments/testbed/topologies/wireless.toml"
    sc.algorithms[0].options = ["--model", "/home/me/intcc/estimator/models/cca_rf.joblib", "/etc/other"]
    moved = relocate(sc, "/home/me/intcc", "/opt/intcc")
    assert moved.topology == "/opt/intcc/experiments/testbed/topologies/wireless.toml"
    assert moved.algorithms[0].options == ["--model", "/opt/intcc/estimator/models/cca_rf.joblib", "/etc/other"]
    assert sc.topology.startswith("/home/me")                   # the submitter's copy untouched
    assert relocate(sc, "/opt/intcc", "/opt/intcc") is sc


def test_a_runs_files_travel_whole_and_nothing_else(tmp_path):
    src = tmp_path / "worker" / "runs"
    (src / "run01").mkdir(parents=True)
    (src / "run01" / "series.csv").write_text("t_s\n0\n")
    (src / "run01.npz").write_bytes(b"npz")
    (src / "run011").mkdir()                       # another run whose name starts alike
    (src / "run01x.npz").write_bytes(b"other")
    paths = run_files(str(src), "run01")
    assert [os.path.basename(p) for p in paths] == ["run01", "run01.npz"]
    dest = tmp_path / "out" / "runs"
    (dest / "run01").mkdir(parents=True)
    (dest / "run01" / "stale.csv").write_text("from an earlier attempt")
    _unpack(pack(paths), str(dest), "run01")
    assert sorted(os.listdir(dest)) == ["run01", "run01.npz"]
    assert os.listdir(dest / "run01") == ["series.csv"]


def test_files_outside_the_run_are_refused(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"x"
        info = tarfile.TarInfo("run02/../../escape")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ClusterError, match="outside runs/run01"):
        _unpack(buf.getvalue(), str(tmp_path), "run01")
    assert not os.listdir(tmp_path)


def test_resume_keeps_the_runs_on_disk_and_their_seed(tmp_path):
    sc = _aa(seed=None)
    assert _resume(sc, str(tmp_path), print) == (sc, [])
    write_summary(str(tmp_path), "cubic_aa", [{"run": "kernel-cubic_loss_pct-10_r0", "seed": 42}])
    lines = []
    sc, kept = _resume(_aa(seed=None), str(tmp_path), lines.append)
    assert sc.seed == 42 and [r["run"] for r in kept] == ["kernel-cubic_loss_pct-10_r0"]
    assert "1 runs on disk" in lines[0]
    with pytest.raises(ClusterError, match="seed 42, not --seed 5"):
        _resume(_aa(seed=5), str(tmp_path), print)
    with pytest.raises(ClusterError, match="not 'lossy_link'"):
        _resume(load("lossy_link", quick=True), str(tmp_path), print)
