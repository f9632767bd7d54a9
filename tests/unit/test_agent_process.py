"""AgentProcess.failure(): an agent that raised or died leaves its flows to the datapath's
fallback, which moves data too, so runs and tests ask it explicitly."""
import subprocess
import sys

from ccp_agent.datapath import AgentProcess


def agent_running(tmp_path, log_text, code):
    a = AgentProcess("cubic", log_path=str(tmp_path / "agent.log"))
    (tmp_path / "agent.log").write_text(log_text)
    a.proc = subprocess.Popen([sys.executable, "-c", code])
    return a


def test_a_healthy_agent_has_no_failure(tmp_path):
    a = agent_running(tmp_path, "intcc alg: cubic on portus\n", "import time; time.sleep(30)")
    try:
        assert a.failure() is None
    finally:
        a.kill()
    assert a.failure() is None            # stopped by us: not a failure


def test_an_agent_that_raised_or_exited_has_failed(tmp_path):
    a = agent_running(tmp_path, "Traceback (most recent call last):\n  ...\nException: Unknown field\n",
                      "import time; time.sleep(30)")
    try:
        assert "Unknown field" in a.failure()         # raised in a callback, still running
    finally:
        a.proc.kill()
        a.proc.wait()
    b = agent_running(tmp_path, "", "raise SystemExit(3)")
    b.proc.wait()
    assert b.failure() is not None
