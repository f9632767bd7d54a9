"""`intcc exp run` stopped mid-run by SIGTERM or Ctrl-C tears down as a finished run does:
no namespace, datapath registration, socket file or child process is left behind, even
when a second signal comes during the teardown (root)."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from experiments.testbed.kernel_trace import KernelTcpTrace
from experiments.testbed.teardown import list_testbeds


def _processes_of_session(sid: int) -> list[str]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,sid=,comm="], capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if line.split()[1:2] == [str(sid)]]


LOSSY = ["lossy_link", "--algorithm", "ccp cubic", "--loss", "5", "--repeats", "1"]
# two testbeds, a broker, the adaptive agent and its estimator
FAIRNESS = ["fairness_switching", "--algorithm", "mirror int w50", "--sweep-value", "bbr", "--repeats", "2",
            "--jobs", "2"]


@pytest.mark.parametrize("args, signals", [(LOSSY, (signal.SIGTERM,)), (LOSSY, (signal.SIGINT,)),
                                           (FAIRNESS, (signal.SIGTERM, signal.SIGTERM))],
                         ids=["sigterm", "sigint", "fairness-jobs2-sigterm-twice"])
def test_a_run_stopped_mid_flow_leaves_nothing_behind(tmp_path, args, signals):
    # ccp algorithms: the run holds a datapath daemon and an agent besides the testbeds
    cmd = [sys.executable, "-m", "intcc", "exp", "run", *args, "--seconds", "30", "--seed", "3",
           "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any(line.startswith("testbed exp:") for line in lines):          # bringing the testbed up
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        while "exp" not in list_testbeds() or not _flow_running(args[0]):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        time.sleep(2)                                                   # mid-flow
        for k, sig in enumerate(signals):
            os.kill(proc.pid, sig)                                       # the process alone, as kill does
            time.sleep(0.3 * (k + 1))
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            subprocess.run([sys.executable, "-m", "intcc", "testbed", "down"], capture_output=True)
    reader.join(timeout=5)
    assert code == 128 + signals[0], "".join(lines)
    assert "exp" not in list_testbeds()
    assert not [ns for ns in _netns() if ns.startswith("intcc-exp")]
    assert "ccp" not in open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    assert not os.path.exists("/tmp/ccp/portus")
    time.sleep(0.5)
    assert _processes_of_session(proc.pid) == []                        # no node, agent, iperf3 or daemon
    # nor a socket the kernel keeps retransmitting for the killed flow (its timeouts would
    # show in the next run's kernel trace, which sees every namespace): silence on its port
    with KernelTcpTrace(port=5201) as trace:
        time.sleep(5)
    assert trace.rows == [], trace.rows[:3]


def _netns() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _flow_running(scenario: str) -> bool:
    sender = "intcc-exp-sta1" if scenario == "lossy_link" else "intcc-exp-s1"
    out = subprocess.run(["ip", "netns", "exec", sender, "ss", "-tn", "state", "established"],
                         capture_output=True, text=True).stdout
    return ":5201" in out
