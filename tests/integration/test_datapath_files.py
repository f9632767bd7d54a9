"""The daemon's control loop never waits for its files (stats.json, flows.json, the applied
log). On ext4 a write or rename can wait for a journal commit, measured at up to 1.8 s on
this kind of VM; while the loop waited the heartbeat stopped (flows fell back to Reno) and
no report reached the agent. Here a state file that blocks for good stands in for the
disk: the file's temporary is a FIFO nobody reads, so opening it to write never returns."""
import csv
import os

from ccp_agent.datapath import AgentProcess, DatapathProcess
from tests.integration.tbutil import require_ccp_free
from tests.perf.veth import VethPair

VETH = VethPair("dfl", "10.95.0")
SECONDS = 4


def test_a_state_file_that_blocks_stops_neither_reports_nor_commands_nor_the_exit(tmp_path):
    require_ccp_free()
    state = tmp_path / "dp"
    state.mkdir()
    os.mkfifo(state / "stats.json.tmp")          # stats.json is replaced through it: blocks
    (state / "stats.json").write_text("{}")      # a stale one: what start() waits for is there
    trace = tmp_path / "trace.csv"
    dp = DatapathProcess(state_dir=str(state))
    agent = None
    VETH.up()
    try:
        dp.start()
        # the agent cannot be awaited through stats.json (it never comes): its trace tells
        agent = AgentProcess("reno", ["--trace", str(trace)], log_path=str(tmp_path / "agent.log")).start()
        VETH.iperf(SECONDS)
    finally:
        if agent is not None:
            agent.stop()
        rc = dp.stop(timeout_s=10)
        VETH.down()
    log = open(dp.log_path).read()
    rows = [r for r in csv.DictReader(trace.open()) if r["event"] == "report"] if trace.exists() else []
    assert rows, "no report reached the agent: the daemon's loop waited for its stats file\n" + log[-2000:]
    times_s = sorted(int(r["mono_ns"]) / 1e9 for r in rows)
    gaps_s = [b - a for a, b in zip(times_s, times_s[1:])] or [0.0]
    assert times_s[-1] - times_s[0] > SECONDS / 2, "reports stopped early"
    assert max(gaps_s) < 0.5, f"the agent heard nothing for {max(gaps_s):.2f} s"
    assert rc == 0, log[-2000:]                             # SIGTERM ended it, not the SIGKILL after 10 s
    assert "not written within 2 s" in log, log[-2000:]     # and it said what it left unwritten
