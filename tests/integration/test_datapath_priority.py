"""The daemon takes the agent's commands on a thread under SCHED_FIFO unless told not to,
and its reports' thread is not real-time; a host that refuses it gets a warning and a
working daemon, not a failed start (the default is the daemon's choice, not the
operator's); an explicit priority that cannot be had is an error."""
import os
import signal
import subprocess

import pytest

from ccp_agent.datapath import DatapathProcess, _wait, ccp_registered, daemon_binary
from tests.integration.tbutil import require_ccp_free

# root without CAP_SYS_NICE (and RLIMIT_RTPRIO 0): sched_setscheduler(SCHED_FIFO) is refused
NO_SYS_NICE = ["setpriv", "--bounding-set", "-sys_nice", "--inh-caps", "-sys_nice", "--"]
COMMAND_THREAD = "intcc-commands"


def threads(pid: int) -> dict[str, int]:
    """The daemon's threads: name -> tid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            out[f.read().strip()] = int(tid)
    return out


@pytest.mark.parametrize("rt_priority, policy", [(None, os.SCHED_FIFO), (0, os.SCHED_OTHER), (3, os.SCHED_FIFO)])
def test_the_daemon_is_real_time_by_default_and_not_when_told(tmp_path, rt_priority, policy):
    require_ccp_free()
    with DatapathProcess(state_dir=str(tmp_path / "dp"), rt_priority=rt_priority) as dp:
        tids = threads(dp.proc.pid)
        assert os.sched_getscheduler(tids[COMMAND_THREAD]) == policy
        if policy == os.SCHED_FIFO:
            assert os.sched_getparam(tids[COMMAND_THREAD]).sched_priority == (rt_priority or 1)
        # the kernel's reports go to the agent from the main thread, never real-time
        assert os.sched_getscheduler(dp.proc.pid) == os.SCHED_OTHER
        assert all(os.sched_getscheduler(tid) == os.SCHED_OTHER for name, tid in tids.items() if name != COMMAND_THREAD)


def _start_without_sys_nice(tmp_path, *args):
    """The daemon as root without CAP_SYS_NICE: (the process, its log)."""
    argv = [*NO_SYS_NICE, daemon_binary(), *DatapathProcess(state_dir=str(tmp_path / "dp")).args, *args]
    log = tmp_path / "daemon.log"
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT), log


def test_a_host_that_refuses_real_time_gets_a_warning_and_a_daemon(tmp_path):
    require_ccp_free()
    proc, log = _start_without_sys_nice(tmp_path)
    try:
        _wait(ccp_registered, 10, "the datapath to register 'ccp'", proc, str(log))
        assert all(os.sched_getscheduler(tid) == os.SCHED_OTHER for tid in threads(proc.pid).values())
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    text = log.read_text()
    assert "cannot run under SCHED_FIFO" in text and "running without real-time priority" in text, text


def test_an_explicit_priority_the_host_refuses_is_an_error(tmp_path):
    require_ccp_free()
    proc, log = _start_without_sys_nice(tmp_path, "--rt-priority", "2")
    assert proc.wait(timeout=10) != 0
    assert "--rt-priority 2: cannot run under SCHED_FIFO" in log.read_text()
    assert not ccp_registered()
