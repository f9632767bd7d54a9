"""Live CCA switching on real flows: the adaptive agent (real datapath, real portus agent,
the estimator capturing the flow in its sender's namespace) moves a ccp flow from cubic
to bbr against a kernel bbr competitor, without a second of zero goodput, and leaves it on
cubic against a kernel cubic competitor."""
import csv
import os

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


def adaptive_against(tb, dp, tmp_path, competitor: str):
    trace = tmp_path / "trace.csv"
    agent = AgentProcess("adaptive", ["--model", MODEL, "--state-dir", dp.state_dir, "--trace", str(trace),
                                      "--min-dwell-s", "3", "--window", "20", "-v"],
                         log_path=str(tmp_path / "agent.log")).start()
    try:
        dp.wait_agent(True)
        other = BackgroundFlow(tb, "s2", "r2", competitor, SECONDS, 1.0, port=5202)
        out = iperf(tb, "s1", "r1", "ccp", SECONDS, 1.0, port=5201)
        other.join()
        assert not agent.failure(), agent.failure()
    finally:
        agent.stop()
        dp.wait_agent(False)
    rows = list(csv.DictReader(open(trace)))
    start = min(float(r["t_s"]) for r in rows if r["event"] == "start" and r["dst_port"] == "5201")
    switches = [(float(r["t_s"]) - start, r["reason"]) for r in rows if r["event"] == "switch"]
    return out, switches, agent.log()


def test_against_kernel_bbr_the_flow_moves_to_bbr_without_a_stall(bench, tmp_path):
    tb, dp = bench
    out, switches, log = adaptive_against(tb, dp, tmp_path, "bbr")
    to_bbr = [(t, why) for t, why in switches if why.startswith("cubic -> bbr")]
    assert to_bbr, (switches, log[-2000:])
    assert to_bbr[0][0] <= 15.0, switches
    goodputs = [row["goodput_mbps"] for row in series(out)]
    assert min(goodputs) > 0, goodputs


def test_against_kernel_cubic_the_flow_stays_on_cubic(bench, tmp_path):
    tb, dp = bench
    out, switches, log = adaptive_against(tb, dp, tmp_path, "cubic")
    assert not [s for s in switches if s[1].startswith("cubic ->")], switches
