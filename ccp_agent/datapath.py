"""Start and watch the CCP datapath daemon (datapath/, Rust) and CCP agents as
child processes, for experiments and tests.

    with DatapathProcess() as dp, AgentProcess("const", ["--cwnd-pkts", "10"]) as agent:
        dp.wait_agent()            # the daemon has seen the agent
        ...                        # flows with TCP_CONGESTION "ccp" are now controlled
        dp.stats()["kernel"]["controlled_acks"]
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ccp_algs.contract import REPORT_REQUEST_MAGIC
from int_node.runtime import run_path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_STATE_DIR = run_path("datapath")
AVAILABLE_CCAS = "/proc/sys/net/ipv4/tcp_available_congestion_control"
AGENT_SOCKET = "/tmp/ccp/portus"
DATAPATH_SOCKET = "/tmp/ccp/intcc-datapath"


class DatapathError(RuntimeError):
    pass


class ReportRequester:
    """Asks the intcc datapath daemon for a report of a flow at its next ACK. pyportus runs
    the agent only in its callbacks, at the flow's reports (one a millisecond at most, one a
    round trip at least): news for the agent from elsewhere (a verdict of its estimator,
    another process) is read at the report this brings, within a round trip. Never raises:
    without the daemon (ccp-kernel) the agent reads it at the next report anyway."""

    def __init__(self, path: str = DATAPATH_SOCKET):
        self.path = path
        self._sock = None

    def request(self, ccp_sid: int) -> bool:
        """True when the daemon's socket took the request (whether the flow is one it serves,
        its stats count: report_requests, report_requests_unserved)."""
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sock.setblocking(False)
            self._sock.sendto(REPORT_REQUEST_MAGIC + int(ccp_sid).to_bytes(4, "little"), self.path)
        except (OSError, OverflowError):
            return False
        return True


def daemon_binary() -> str:
    """The daemon: $INTCC_DATAPATH_BIN, the repository's build, or one on PATH."""
    for candidate in (os.environ.get("INTCC_DATAPATH_BIN"), str(REPO / "datapath" / "build" / "intcc-datapath"),
                      shutil.which("intcc-datapath")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise DatapathError("intcc-datapath is not built: run 'make setup' (or 'make -C datapath')")


def ccp_registered() -> bool:
    with open(AVAILABLE_CCAS) as f:
        return "ccp" in f.read().split()


def ccp_holder() -> str:
    """Who holds the congestion control 'ccp': running daemons, BPF struct_ops
    registrations, ccp-kernel; for error messages that say what to stop."""
    found = []
    daemons = subprocess.run(["pgrep", "-a", "intcc-datapath"], capture_output=True, text=True).stdout.strip()
    if daemons:
        found.append("intcc-datapath running (" + "; ".join(daemons.splitlines()) + ")")
    try:
        out = subprocess.run(["bpftool", "-j", "struct_ops", "show"], capture_output=True, text=True,
                             timeout=10).stdout
        ops = [o for o in json.loads(out or "[]") if o.get("kernel_struct_ops") == "tcp_congestion_ops"]
    except (OSError, ValueError, subprocess.TimeoutExpired):
        ops = []
    if ops:
        found.append("BPF struct_ops " + ", ".join(f"{o.get('name')} (id {o.get('id')})" for o in ops)
                     + " ('bpftool struct_ops unregister id ID' if no daemon owns it)")
    if os.path.isdir("/sys/module/ccp"):
        found.append("the ccp-kernel module")
    return "; ".join(found) or "no daemon, struct_ops or module found (it may be going away)"


def _wait(predicate, timeout_s: float, what: str, proc=None, log_path=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            tail = Path(log_path).read_text()[-2000:] if log_path else ""
            raise DatapathError(f"{what}: process exited with {proc.returncode}\n{tail}")
        time.sleep(0.02)
    raise DatapathError(f"timed out after {timeout_s:.0f} s waiting for {what}")


class DatapathProcess:
    def __init__(self, state_dir: str | None = None, heartbeat_ms: int = 20, agent_timeout_ms: int = 200,
                 applied_log: str | None = None, agent: str = "portus", log_path: str | None = None,
                 per_ack_events: bool = False, check_fold: bool = False, rt_priority: int | None = None,
                 report_coalesce_us: int | None = None):
        self.state_dir = os.path.abspath(state_dir or tempfile.mkdtemp(prefix="intcc-datapath-"))
        self.args = ["--state-dir", self.state_dir, "--heartbeat-ms", str(heartbeat_ms),
                     "--agent-timeout-ms", str(agent_timeout_ms), "--agent", agent, "-v"]
        if applied_log:
            self.args += ["--applied-log", os.path.abspath(applied_log)]
        if per_ack_events:      # libccp folds every ACK in the daemon, not the kernel
            self.args.append("--per-ack-events")
        if check_fold:          # the kernel also sends each ACK it folds: the daemon compares
            self.args.append("--check-fold")
        if rt_priority is not None:     # the daemon's command thread's SCHED_FIFO priority (default 1; 0: none)
            self.args += ["--rt-priority", str(rt_priority)]
        if report_coalesce_us is not None:   # None: the daemon's default (0: every report wakes it)
            self.args += ["--report-coalesce-us", str(report_coalesce_us)]
        self.log_path = log_path or os.path.join(self.state_dir, "daemon.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 10) -> "DatapathProcess":
        if ccp_registered():
            raise DatapathError(f"a congestion control 'ccp' is already registered: {ccp_holder()}")
        os.makedirs(self.state_dir, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([daemon_binary(), *self.args], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        try:
            _wait(lambda: ccp_registered() and os.path.exists(self.stats_path), timeout_s,
                  "the datapath to register 'ccp'", self.proc, self.log_path)
        except DatapathError:
            self.stop()     # never leave a half-started daemon registered
            raise
        return self

    @property
    def stats_path(self) -> str:
        return os.path.join(self.state_dir, "stats.json")

    def stats(self) -> dict:
        """The daemon's counters, refreshed by it once a second."""
        with open(self.stats_path) as f:
            return json.load(f)

    def flows(self) -> list[dict]:
        try:
            with open(os.path.join(self.state_dir, "flows.json")) as f:
                return json.load(f)["flows"]
        except FileNotFoundError:
            return []

    def wait_agent(self, connected: bool = True, timeout_s: float = 10):
        _wait(lambda: self.stats().get("agent_connected") == connected, timeout_s + 1.5,
              f"the datapath to see the agent {'connect' if connected else 'leave'}", self.proc, self.log_path)

    def stop(self, timeout_s: float = 10) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else 0

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self.start() if self.proc is None else self

    def __exit__(self, *exc):
        self.stop()


class AgentProcess:
    """``intcc alg run NAME OPTIONS`` as a child process (portus owns its process)."""

    def __init__(self, name: str, options: list[str] | None = None, ipc: str = "unix",
                 log_path: str | None = None):
        self.cmd = [sys.executable, "-m", "intcc", "alg", "run", name, "--ipc", ipc, *(options or [])]
        self.log_path = log_path or tempfile.mktemp(prefix=f"intcc-agent-{name}-", suffix=".log")
        self.proc: subprocess.Popen | None = None
        self.stopped = False          # by stop() / kill(): its exit is not a failure

    def start(self, timeout_s: float = 15) -> "AgentProcess":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        try:
            _wait(lambda: _socket_bound(AGENT_SOCKET), timeout_s, f"the agent to bind {AGENT_SOCKET}",
                  self.proc, self.log_path)
        except BaseException:       # a timeout, or a SIGTERM to the run: no orphaned agent
            self.stop()
            raise
        return self

    def log(self) -> str:
        return Path(self.log_path).read_text(errors="replace")

    def failure(self) -> str | None:
        """The end of the log if the agent raised (in new_flow, on_report) or died on its
        own, else None: its flows then ran the datapath's fallback, which moves data too."""
        died = self.proc is not None and not self.stopped and self.proc.poll() is not None
        log = self.log()
        return log[-3000:] if died or "Traceback" in log else None

    def stop(self, sig=signal.SIGTERM, timeout_s: float = 10):
        """Signal the agent and wait until it is gone and its socket file removed (the
        agent's janitor does that, also after SIGKILL), so the next agent can start."""
        self.stopped = True
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            _wait(lambda: not os.path.exists(AGENT_SOCKET) or _socket_bound(AGENT_SOCKET), 3,
                  f"the stopped agent's {AGENT_SOCKET} to be removed")

    def kill(self):
        self.stop(signal.SIGKILL)

    def __enter__(self):
        return self.start() if self.proc is None else self

    def __exit__(self, *exc):
        self.stop()


def _socket_bound(path: str) -> bool:
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()
