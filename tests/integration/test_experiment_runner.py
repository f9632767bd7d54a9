"""The experiment runner end to end: parallel testbeds under one CCP agent (root, BPF)."""
import csv
import os

from experiments.runs.runner import run_scenario
from experiments.runs.scenario import load
from experiments.testbed.teardown import list_testbeds


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_parallel_testbeds_give_each_run_its_own_flows(tmp_path):
    """--jobs 2: two testbeds run a repeat each, kernel cubic then ccp cubic. Each run's
    agent trace and kernel trace hold its own flow only (ports 5201 / 5301), and a
    repeat's two runs met the same loss draws."""
    sc = load("cubic_fidelity")
    sc.sweep, sc.repeats, sc.seconds, sc.seed, sc.kernel_trace = {"loss_pct": [5]}, 2, 4, 3, True
    records = run_scenario(sc, str(tmp_path), echo=lambda *_: None, jobs=2)
    assert [(r["algorithm"], r["repeat"]) for r in records] == [
        ("kernel cubic", 0), ("kernel cubic", 1), ("ccp cubic", 0), ("ccp cubic", 1)]
    assert records[0]["loss_seed"] == records[2]["loss_seed"] != records[1]["loss_seed"]
    for rep, port in ((0, "5201"), (1, "5301")):
        run = os.path.join(tmp_path, "runs", f"ccp-cubic_loss_pct-5_r{rep}")
        starts = [r for r in _rows(os.path.join(run, "trace.csv")) if r["event"] == "start"]
        assert starts and all(port in (r["src_port"], r["dst_port"]) for r in starts)
        reports = [r for r in _rows(os.path.join(run, "trace.csv")) if r["event"] != "start"]
        assert len(reports) > 10        # the data flow's decisions came with it
        for alg in ("ccp-cubic", "kernel-cubic"):
            ktrace = _rows(os.path.join(tmp_path, "runs", f"{alg}_loss_pct-5_r{rep}", "kernel_trace.csv"))
            assert ktrace and len({r["sport"] for r in ktrace if r["sport"]}) <= 2   # iperf3's control + data
        assert records[2 + rep]["goodput_mbps"] > 0.3
    assert not [p for p in os.listdir(os.path.join(tmp_path, "runs")) if p.endswith(".agent-trace.csv")]
    assert not {"exp", "exp1"} & set(list_testbeds())


def test_a_loss_sweep_on_a_dumbbell_built_at_zero_loss_applies_the_loss(tmp_path):
    """The dumbbell is built with loss_pct = 0; a sweep to 5 % must reach the bottleneck
    (before, the run labelled 5 % ran lossless: no loss element existed to write to)."""
    sc = load("congestion_fairness")
    sc.topology, sc.params = "dumbbell", {"loss_pct": 0.0}
    sc.algorithms = [a for a in sc.algorithms if a.label == "kernel cubic vs 3"]
    sc.sweep, sc.repeats, sc.seconds, sc.seed = {"loss_pct": [5]}, 1, 4, 5
    records = run_scenario(sc, str(tmp_path), echo=lambda *_: None)
    (rec,) = records
    assert rec["configured_loss_pct"] == 5 and rec["link_packets"] > 1000
    assert abs(rec["measured_configured_loss_pct"] - 5) <= 1.0, rec
    assert rec["loss_off"] is False
    # three competing flows, each measured (harm to each competitor)
    each = rec["competitors_goodput_mbps"]
    assert len(each) == 3 and all(g > 0 for g in each) and rec["competitor_goodput_mbps"] == sum(each)
    assert 0 < rec["jain_total"] <= 1 and 0 < rec["share"] < 1


def test_results_can_go_where_the_broker_user_cannot_read(tmp_path):
    """mosquitto reads its password file as its own user: that file lived in the results
    directory, and a results directory under a 0700 parent (mktemp -d) failed the run."""
    import subprocess
    import sys
    import tempfile
    parent = tempfile.mkdtemp(prefix="intcc-private-")      # 0700, root's
    try:
        out = os.path.join(parent, "x")
        res = subprocess.run([sys.executable, "-m", "intcc", "exp", "run", "lossy_link", "--quick", "--out", out,
                              "--algorithm", "cubic-int L1", "--loss", "5", "--seconds", "3", "--repeats", "1"],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        assert os.path.exists(os.path.join(out, "summary.json"))
        assert not os.path.exists(os.path.join(out, "broker", "mosquitto.passwd"))   # private files stay in /run
    finally:
        import shutil
        shutil.rmtree(parent, ignore_errors=True)


def test_a_run_serves_its_dashboard_while_it_runs(tmp_path):
    """--dashboard: the sinks publish to the run's broker and the dashboard shows the run's
    flow while it runs (kernel cubic: no INT-aware algorithm needed a broker before)."""
    import json
    import socket
    import subprocess
    import sys
    import time
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "intcc", "exp", "run", "lossy_link", "--quick", "--out",
                             str(tmp_path / "out"), "--algorithm", "kernel cubic", "--loss", "0", "--seconds", "10",
                             "--repeats", "1", "--dashboard", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    flows, deadline = {}, time.monotonic() + 120
    try:
        while not flows and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=2) as r:
                    flows = {k: v for k, v in json.load(r)["flows"].items() if v["latest"]["dport"] == 5201}
            except OSError:
                continue
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-2000:]
    assert f"dashboard: http://127.0.0.1:{port}/" in out
    assert flows and next(iter(flows.values()))["latest"]["packets"] > 0, out[-2000:]
    assert (tmp_path / "out" / "summary.json").exists()
