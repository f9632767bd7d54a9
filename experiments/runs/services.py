"""What a scenario's runs share around them: one ``intcc exp run`` at a time on the exp
testbeds, and the dashboard on the run's broker."""
from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from contextlib import contextmanager

from experiments.testbed.teardown import RUN_ROOT


@contextmanager
def dashboard(broker_url: str, port: int, out_dir: str, echo):
    """``intcc dashboard`` on the run's broker while the scenario runs."""
    log = open(os.path.join(out_dir, "dashboard.log"), "wb")
    proc = subprocess.Popen([sys.executable, "-m", "intcc", "dashboard", "--broker", broker_url, "--listen",
                             f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    echo(f"dashboard: http://127.0.0.1:{port}/ (log {log.name})")
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def exclusive_testbeds():
    """One ``intcc exp run`` at a time: each begins by tearing down the testbeds it will
    use (leftovers of a killed run), which would pull them from under a running one."""
    os.makedirs(RUN_ROOT, exist_ok=True)
    with open(os.path.join(RUN_ROOT, "exp-run.lock"), "a+") as lock:   # closing it releases the lock
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise RuntimeError(f"another 'intcc exp run' (pid {lock.read().strip() or '?'}) is using the exp "
                               f"testbeds: wait for it or stop it first") from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        yield
