"""Routine reports share the daemon's wake-ups (--report-coalesce-us, off by default): a
reno flow on the bare veth reports every ~1 ms; at 2,000 us a good part of those reports
wait in the ring for the next wake-up, and none is lost on the way to the agent. With 0
(the default, the control) every report wakes the daemon and none waits."""
import csv

import pytest

from ccp_agent.datapath import AgentProcess, DatapathProcess
from tests.integration.tbutil import fresh_datapath_stats, require_ccp_free
from tests.perf.veth import VethPair

VETH = VethPair("rco", "10.95.3")
SECONDS = 3


def reno_flow_through_the_datapath(tmp_path, coalesce_us: int) -> tuple[dict, int]:
    """The daemon's and the kernel's counters over one flow, and the agent's report rows."""
    dp = DatapathProcess(state_dir=str(tmp_path / "dp"), report_coalesce_us=coalesce_us)
    trace = tmp_path / "trace.csv"
    agent = None
    VETH.up()
    try:
        dp.start()
        agent = AgentProcess("reno", ["--trace", str(trace)], log_path=str(tmp_path / "agent.log")).start()
        dp.wait_agent(True)
        before = fresh_datapath_stats(dp)
        VETH.iperf(SECONDS)
        after = fresh_datapath_stats(dp)      # a second later: a waiting report has been taken
    finally:
        if agent is not None:
            agent.stop()
        assert dp.stop() == 0, open(dp.log_path).read()[-2000:]
        VETH.down()
    assert agent.failure() is None, agent.failure()
    delta = {part: {k: v - before[part].get(k, 0) for k, v in after[part].items() if isinstance(v, int)}
             for part in ("daemon", "kernel")}
    reports = sum(1 for r in csv.DictReader(trace.open()) if r["event"] in ("report", "loss", "timeout", "undo"))
    return delta, reports


@pytest.mark.parametrize("coalesce_us", [2000, 0])
def test_routine_reports_wait_for_a_wake_up_and_none_is_lost(tmp_path, coalesce_us):
    require_ccp_free()
    delta, agent_reports = reno_flow_through_the_datapath(tmp_path, coalesce_us)
    kernel, daemon = delta["kernel"], delta["daemon"]
    assert kernel["kernel_reports"] >= 500, kernel     # ~1 ms apart for 3 s
    assert kernel["events_lost"] == 0, kernel
    if coalesce_us:
        assert kernel["reports_waited"] >= 0.2 * kernel["kernel_reports"], kernel
    else:
        assert kernel["reports_waited"] == 0, kernel
    # every report the kernel sent reached the daemon and the agent
    assert daemon["kernel_reports"] == kernel["kernel_reports"], (daemon, kernel)
    assert agent_reports >= 0.95 * kernel["kernel_reports"], (agent_reports, kernel)
