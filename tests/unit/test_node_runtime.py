"""Which interpreter runs a node, and the PyPy fallbacks for calls its stdlib lacks."""
import os
import socket
import sys

import pytest
from click.testing import CliRunner

from int_node import compat, runtime
from int_node.cli import node_group
from int_node.eventloop import EventLoop


def test_cpython_and_paths_resolve_and_missing_ones_name_the_problem(tmp_path, monkeypatch):
    monkeypatch.delenv(runtime.ENV_VAR, raising=False)
    assert runtime.node_python("cpython") == sys.executable
    assert runtime.node_python(sys.executable) == sys.executable
    with pytest.raises(runtime.InterpreterError, match="not an executable"):
        runtime.node_python(str(tmp_path / "nope"))


def test_pypy_missing_says_how_to_install_and_cpython_is_the_default(monkeypatch, tmp_path):
    monkeypatch.setattr(runtime, "PYPY_PYTHON", str(tmp_path / "bin" / "python"))
    monkeypatch.delenv(runtime.ENV_VAR, raising=False)
    with pytest.raises(runtime.InterpreterError, match="make setup"):
        runtime.node_python("pypy")
    assert runtime.node_python() == sys.executable
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert runtime.node_python("pypy") == str(fake)
    assert runtime.node_python() == sys.executable          # installed is not chosen
    monkeypatch.setenv(runtime.ENV_VAR, "pypy")
    assert runtime.node_python() == str(fake)               # the environment variable decides


def test_another_interpreter_finds_this_checkout():
    assert "PYTHONPATH" not in runtime.node_env(sys.executable) or \
        runtime.node_env(sys.executable)["PYTHONPATH"] == os.environ.get("PYTHONPATH")
    env = runtime.node_env("/opt/elsewhere/python")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == runtime.PROJECT_ROOT
    assert os.path.isdir(os.path.join(env["PYTHONPATH"].split(os.pathsep)[0], "int_node"))


def test_libc_fallbacks_agree_with_the_stdlib(monkeypatch):
    assert compat.if_nametoindex("lo") == socket.if_nametoindex("lo")
    monkeypatch.delattr(socket, "if_nametoindex")         # as under PyPy
    assert compat.if_nametoindex("lo") == 1
    with pytest.raises(OSError, match="no interface 'intcc-none0'"):
        compat.if_nametoindex("intcc-none0")


def test_poll_idle_needs_a_cpu(tmp_path):
    conf = tmp_path / "n.click"
    conf.write_text("Idle -> Discard;\n")
    res = CliRunner().invoke(node_group, ["run", str(conf), "--poll-idle"])
    assert res.exit_code != 0 and "--poll-idle needs --cpu" in res.output


def test_a_real_time_node_that_busy_polls_is_refused(tmp_path):
    conf = tmp_path / "n.click"
    conf.write_text("Idle -> Discard;\n")
    res = CliRunner().invoke(node_group, ["run", str(conf), "--rt-priority", "5", "--busy-poll-us", "100"])
    assert res.exit_code != 0 and "--rt-priority with --busy-poll-us" in res.output
    res = CliRunner().invoke(node_group, ["run", str(conf), "--rt-priority", "100"])
    assert res.exit_code != 0 and "--rt-priority" in res.output


def test_a_negative_busy_poll_is_refused_by_name(tmp_path):
    conf = tmp_path / "n.click"
    conf.write_text("Idle -> Discard;\n")
    res = CliRunner().invoke(node_group, ["run", str(conf), "--busy-poll-us", "-1"])
    assert res.exit_code != 0 and "--busy-poll-us" in res.output
    with pytest.raises(ValueError, match="busy_poll_us must be >= 0"):
        EventLoop(busy_poll_us=-1)


class _RecordingEpoll:
    """The loop's epoll, with the timeout of every wait written down."""
    def __init__(self, ep):
        self.ep, self.timeouts = ep, []

    def poll(self, timeout=-1):
        self.timeouts.append(timeout)
        return self.ep.poll(timeout)

    def __getattr__(self, name):
        return getattr(self.ep, name)


@pytest.mark.parametrize("busy_poll_us", [0, 30_000])
def test_a_busy_polling_loop_polls_without_sleeping_after_an_event_and_then_sleeps(busy_poll_us):
    loop = EventLoop(busy_poll_us=busy_poll_us)
    ep = loop._ep = _RecordingEpoll(loop._ep)
    r, w = os.pipe()
    os.write(w, b"x")
    loop.add_reader(r, lambda: os.read(r, 1))
    loop.call_later(150_000_000, loop.stop)        # 150 ms: after the 30 ms of polling
    try:
        loop.run()
    finally:
        loop.remove_reader(r)
        loop.close()
        os.close(r), os.close(w)
    # the byte was ready before the loop began: its first wait sleeps, nothing came before
    assert ep.timeouts[0] == -1
    if not busy_poll_us:
        assert set(ep.timeouts) == {-1}
        return
    first_sleep = ep.timeouts.index(-1, 1)
    assert first_sleep > 2 and set(ep.timeouts[1:first_sleep]) == {0}     # polled, then slept
    assert ep.timeouts[first_sleep:] == [-1]       # slept until the timer stopped the loop


@pytest.mark.parametrize("prefer_cffi", [False, True])
def test_timerfd_fires_at_its_deadline_through_either_binding(prefer_cffi):
    import select
    import time

    from int_node.timerfd import FFI, TimerFd
    if prefer_cffi and FFI is None:
        pytest.skip("no cffi here (PyPy always has it)")
    t = TimerFd(prefer_cffi=prefer_cffi)
    try:
        ep = select.epoll()
        ep.register(t.fileno(), select.EPOLLIN)
        start = time.monotonic_ns()
        t.arm(start + 20_000_000)
        assert ep.poll(1.0)
        assert time.monotonic_ns() - start >= 20_000_000 - 1_000     # never early
        t.clear()
        t.arm(time.monotonic_ns() + 10_000_000)
        t.arm(0)                                                      # disarmed: nothing fires
        assert ep.poll(0.05) == []
    finally:
        t.close()


def test_one_run_directory_for_every_part_and_intcc_run_dir_moves_it_all(tmp_path):
    import subprocess
    import sys
    code = ("from ccp_agent.datapath import DEFAULT_STATE_DIR; from ccp_agent.flows import DEFAULT_STATE_DIR as F; "
            "from broker.auth import DEFAULT_CREDENTIALS; from broker.launch import PRIVATE_ROOT; "
            "from experiments.testbed.teardown import RUN_ROOT; from experiments.runs.runner import CREDS; "
            "print('\\n'.join([DEFAULT_STATE_DIR, F, DEFAULT_CREDENTIALS, PRIVATE_ROOT, RUN_ROOT, CREDS]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "INTCC_RUN_DIR": str(tmp_path)}).stdout.split()
    assert len(out) == 6 and all(p.startswith(str(tmp_path)) for p in out), out
