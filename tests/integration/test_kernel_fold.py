"""The shared datapath program folded in the kernel (datapath/bpf/intcc_ccp_fold.h): a
real lossy CUBIC flow across the wireless testbed, the daemon in --check-fold (the kernel
also sends each ACK it folds, the daemon folds them as the program does and compares every
report field by field); a program the kernel does not know goes per ACK through libccp."""
import csv
import json

import pytest

from ccp_agent.datapath import AgentProcess, DatapathProcess
from ccp_algs.contract import CONTRACT_VERSION
from tests.integration.tbutil import (ccp_flow_with_a_blackout, fresh_datapath_stats, iperf3, require_ccp_free,
                                     start_testbed)


@pytest.fixture(scope="module")
def dp(tmp_path_factory):
    require_ccp_free()
    d = DatapathProcess(state_dir=str(tmp_path_factory.mktemp("dp")), check_fold=True)
    d.start()
    yield d
    assert d.stop() == 0, open(d.log_path).read()[-2000:]


@pytest.fixture(scope="module")
def tb(dp):
    t = start_testbed("wireless", "itkf", rate_mbps=10.0, delay_ms=10.0, buffer_pkts=100)
    yield t
    t.down()


def run_agent(dp, name, options, log_path, flow):
    agent = AgentProcess(name, options, log_path=log_path).start()
    try:
        dp.wait_agent(True)
        before = fresh_datapath_stats(dp)
        flow()
        after = fresh_datapath_stats(dp)
    finally:
        agent.stop()
        dp.wait_agent(False)
    assert agent.failure() is None, agent.failure()
    delta = {part: {k: v - before[part][k] for k, v in after[part].items() if isinstance(v, int)}
             for part in ("daemon", "kernel")}
    return delta


def test_the_kernels_fold_reports_what_the_program_would(tb, dp, tmp_path):
    """2 % loss and a 1.2 s blackout: reports on losses and a timeout as well as per round,
    each equal, field by field, to the program's fold of the same ACKs."""
    trace = tmp_path / "cubic.csv"
    delta = run_agent(dp, "cubic", ["--trace", str(trace)], str(tmp_path / "agent.log"),
                      lambda: ccp_flow_with_a_blackout(tb, 5230, seconds=8, dark_at_s=3, dark_s=1.2, loss_pct=2))
    daemon, kernel = delta["daemon"], delta["kernel"]
    log = open(dp.log_path).read()
    assert daemon["fold_mismatches"] == 0, [line for line in log.splitlines() if "differs" in line][:5]
    assert daemon["fold_checks"] >= 100, daemon
    # reports, not ACKs, cross to userspace
    assert kernel["kernel_reports"] >= 100 and kernel["folded_acks"] >= 3 * kernel["kernel_reports"], kernel
    assert daemon["measures"] < kernel["folded_acks"] / 20, (daemon, kernel)
    rows = [r for r in csv.DictReader(open(trace)) if r["event"] != "start"]
    assert any(int(r["loss_pkts"] or 0) > 0 for r in rows), "no report told a loss"
    assert any(r["event"] == "timeout" for r in rows), "the blackout's timeout was not reported"


def test_a_program_the_kernel_does_not_know_goes_per_ack_through_libccp(tb, dp, tmp_path):
    """The agent told it runs on ccp-kernel (no capabilities) installs the program with
    the slow start folded in: another compiled program, which the kernel must not fold."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "contract.json").write_text(json.dumps({"contract_version": CONTRACT_VERSION, "capabilities": []}))
    outs = []
    delta = run_agent(dp, "reno", ["--state-dir", str(state)], str(tmp_path / "agent.log"),
                      lambda: outs.append(iperf3(tb, "sta1", "sta2", seconds=3, extra=["-C", "ccp"], port=5231)))
    assert delta["kernel"]["folded_acks"] == 0 and delta["daemon"]["kernel_reports"] == 0, delta
    # every ACK the kernel controlled crossed to the agent's side as a measurement (the count
    # itself follows the machine's load: 963 in a 3 s flow under a full suite, ~1,300 alone)
    assert delta["kernel"]["controlled_acks"] > 300, delta
    assert delta["daemon"]["measures"] >= 0.95 * delta["kernel"]["controlled_acks"], delta
    assert outs[0]["end"]["sum_received"]["bits_per_second"] > 5e6      # 10 Mbit/s hop: the flow runs
    assert "is not the one the kernel folds" in open(dp.log_path).read()
