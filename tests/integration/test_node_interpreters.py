"""A node forwards and stamps INT under each interpreter (CPython, PyPy), and a
polling core is given back when the testbed goes down, even after kill -9."""
import os
import signal
import sys

import pytest

from experiments.testbed import bed as testbed
from experiments.testbed.bed import Testbed
from experiments.testbed.topo import load_topo
from int_node import runtime
from tests.integration.tbutil import TOPO_DIR, ping_rtts_ms

QOS = "/sys/devices/system/cpu/cpu{}/power/pm_qos_resume_latency_us"


def line(**node):
    topo = load_topo(os.path.join(TOPO_DIR, "line.toml"))
    topo.nodes["n1"].update(node)
    return topo


@pytest.mark.parametrize("python", ["cpython", "pypy"])
def test_a_node_forwards_and_stamps_under(python):
    if python == "pypy" and not os.access(runtime.PYPY_PYTHON, os.X_OK):
        pytest.fail(f"PyPy missing at {runtime.PYPY_PYTHON}: 'make setup' installs it")
    tb = Testbed(line(), "itinterp").up(exporter="none", node_python=python)
    try:
        tb.run("h2", ["ip", "link", "set", "intcc-n1", "mtu", "1788"])   # no sink: INT reaches h2
        st = tb.status()["nodes"]["n1"]
        expected = sys.executable if python == "cpython" else runtime.PYPY_PYTHON
        assert st["python"] == expected
        with open(f"/proc/{st['pid']}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[0].decode() == expected
        assert len(ping_rtts_ms(tb, "h1", tb.addr("h2"), count=10, interval=0.05)) == 10
        assert tb.counters("n1")["tr1"]["stamped"] >= 10
    finally:
        tb.down()


def test_an_unknown_interpreter_is_a_clear_error():
    with pytest.raises(testbed.TestbedError, match="not an executable"):
        Testbed(line(), "itinterp").up(exporter="none", node_python="/nonexistent/python")


def test_a_polling_core_is_released_on_down_even_after_kill_9():
    cpu = os.cpu_count() - 1
    with open(QOS.format(cpu)) as f:
        before = f.read().strip()
    tb = Testbed(line(cpu=cpu, poll_idle=True), "itinterp").up(exporter="none")
    try:
        with open(QOS.format(cpu)) as f:
            assert f.read().strip() == "n/a"
        os.kill(tb.status()["nodes"]["n1"]["pid"], signal.SIGKILL)
    finally:
        tb.down()
    with open(QOS.format(cpu)) as f:
        assert f.read().strip() == before


def test_a_busy_polling_node_forwards_and_is_told_so():
    tb = Testbed(line(busy_poll_us=2000), "itinterp").up(exporter="none")
    try:
        tb.run("h2", ["ip", "link", "set", "intcc-n1", "mtu", "1788"])
        with open(f"/proc/{tb.status()['nodes']['n1']['pid']}/cmdline", "rb") as f:
            argv = f.read().decode().split("\0")
        assert argv[argv.index("--busy-poll-us") + 1] == "2000"
        assert len(ping_rtts_ms(tb, "h1", tb.addr("h2"), count=10, interval=0.05)) == 10
    finally:
        tb.down()


@pytest.mark.parametrize("python", ["cpython", "pypy"])
def test_real_time_nodes_run_under_sched_fifo_and_forward(python):
    """node_rt_priority: every node under SCHED_FIFO (the emulated links' timers then wait for
    no host process: docs/fairness.md, several testbeds on two cores)."""
    if python == "pypy" and not os.access(runtime.PYPY_PYTHON, os.X_OK):
        pytest.fail(f"PyPy missing at {runtime.PYPY_PYTHON}: 'make setup' installs it")
    tb = Testbed(line(), "itinterp").up(exporter="none", node_python=python, node_rt_priority=7)
    try:
        pid = tb.status()["nodes"]["n1"]["pid"]
        assert tb.node_info("n1")["rt_priority"] == 7
        assert os.sched_getscheduler(pid) == os.SCHED_FIFO
        assert os.sched_getparam(pid).sched_priority == 7
        assert len(ping_rtts_ms(tb, "h1", tb.addr("h2"), count=10, interval=0.05)) == 10
    finally:
        tb.down()
    with pytest.raises(testbed.TestbedError, match="busy-polling nodes"):
        Testbed(line(busy_poll_us=100), "itinterp").up(exporter="none", node_rt_priority=7)
