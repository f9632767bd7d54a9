"""Live CCA switching on real flows (real datapath, real portus agent, dumbbell with a
kernel competitor): a flow switched between cubic and bbr every second keeps moving;
the adaptive agent's estimator finds and captures the flow in its sender's namespace and
votes on it. Whether the verdicts move the flow the right way (to bbr against kernel bbr
within 15 s, not away from cubic against kernel cubic) is the estimator's accuracy on
this path: the shipped Table I model named kernel bbr vegas, then cubic, here, and
kernel cubic cubic or bbr from run to run (issue 28). Not a CI test until it holds.
"""
import csv
import os
import subprocess
import sys

import pytest

import estimator
from ccp_agent.datapath import AgentProcess, DatapathProcess, ccp_holder, ccp_registered
from experiments.traffic import BackgroundFlow, iperf, series
from tests.integration.tbutil import start_testbed

MODEL = os.path.join(os.path.dirname(estimator.__file__), "models", "cca_rf.joblib")
SECONDS = 25


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    if ccp_registered():
        pytest.fail(f"a 'ccp' congestion control is already registered, so these tests cannot run: {ccp_holder()}")
    state = tmp_path_factory.mktemp("adaptive")
    tb = start_testbed("dumbbell", "adap", bottleneck_mbps=10.0, bottleneck_delay_ms=20.0, buffer_bdp=2.0)
    try:
        with DatapathProcess(state_dir=str(state / "dp")) as dp:
            yield tb, dp
    finally:
        tb.down()


def switch_rows(trace):
    rows = list(csv.DictReader(open(trace)))
    start = min(float(r["t_s"]) for r in rows if r["event"] == "start" and r["dst_port"] == "5201")
    return [(float(r["t_s"]) - start, r["reason"]) for r in rows if r["event"] == "switch" and "->" in r["reason"]]


def test_a_flow_switched_every_second_keeps_moving(bench, tmp_path):
    """Scripted verdicts (tests/perf/bench_switching.py), the real everything else: the
    window and pacing hand-over must never stall the flow."""
    tb, dp = bench
    trace = str(tmp_path / "trace.csv")
    agent = subprocess.Popen([sys.executable, "-c", "from tests.perf.bench_switching import scripted_agent; "
                              f"scripted_agent({trace!r}, period_s=1.0)"],
                             stdout=subprocess.DEVNULL, stderr=open(tmp_path / "agent.log", "wb"))
    try:
        dp.wait_agent(True)
        other = BackgroundFlow(tb, "s2", "r2", "cubic", 15, 1.0, port=5202)
        out = iperf(tb, "s1", "r1", "ccp", 15, 1.0, port=5201)
        other.join()
    finally:
        agent.terminate()
        agent.wait(10)
        dp.wait_agent(False)
    switches = switch_rows(trace)
    assert len(switches) >= 8, (switches, (tmp_path / "agent.log").read_text()[-2000:])
    assert {why.split(":")[0] for _, why in switches} == {"cubic -> bbr", "bbr -> cubic"}
    goodputs = [row["goodput_mbps"] for row in series(out)]
    assert min(goodputs) > 0.5, goodputs


def test_the_estimator_finds_and_votes_on_the_live_flow(bench, tmp_path):
    """The adaptive agent's estimator child finds the flow's socket in s1's namespace,
    captures it there and votes all along (a verdict per interval after the warm-up). The
    agent runs cubic only here, so no verdict can move the flow: whether the verdicts are
    right is the estimator's accuracy on this path (issue 28), not asserted."""
    tb, dp = bench
    trace = tmp_path / "trace.csv"
    agent = AgentProcess("adaptive", ["--model", MODEL, "--state-dir", dp.state_dir, "--trace", str(trace),
                                      "--algorithms", "cubic", "--window", "20", "-v"],
                         log_path=str(tmp_path / "agent.log")).start()
    try:
        dp.wait_agent(True)
        other = BackgroundFlow(tb, "s2", "r2", "bbr", 20, 1.0, port=5202)
        out = iperf(tb, "s1", "r1", "ccp", 20, 1.0, port=5201)
        other.join()
        assert not agent.failure(), agent.failure()
    finally:
        agent.stop()
        dp.wait_agent(False)
    log = agent.log()
    assert "estimation failed" not in log, log[-2000:]
    assert log.count(": verdict ") >= 15, log[-2000:]       # 20 s, 5 s of warm-up, one per 0.5 s
    assert not switch_rows(trace)
    assert min(row["goodput_mbps"] for row in series(out)) > 0
