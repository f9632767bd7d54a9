"""The worker: one testbed on one host, as a Ray actor. It takes the first free slot of
its host (a lock file under the run directory, held for its life: two workers of a host
never share a testbed) and names its testbed ``cluster<slot>``.

The runs themselves go on in a child process of its own (``python -m
experiments.cluster.worker``), not in Ray's worker: the testbed forks (namespaces,
pyroute2, the nodes), and a fork of Ray's multi-threaded worker crashes. The child keeps
one session (SESSIONS: a scenario's RunSession, or the live evaluation's) open while the
job stays the same, so a run costs what it costs under ``--jobs`` (the testbed stays up
between runs of one network), and when its actor dies
(its node gone) the child reads the end of its input and takes the testbed down. Each
unit's run directory goes back as a gzipped tar, and is removed here."""
from __future__ import annotations

import fcntl
import io
import os
import pickle
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from contextlib import nullcontext

from experiments.testbed.teardown import RUN_ROOT

MAX_SLOTS = 32
SLOT_PREFIX = "cluster"       # the testbed's name: cluster<slot> (12 characters at most)


def take_slot() -> tuple[int, object]:
    """The first slot of this host no live worker holds: (slot, its locked file)."""
    os.makedirs(RUN_ROOT, exist_ok=True)
    for slot in range(MAX_SLOTS):
        f = open(os.path.join(RUN_ROOT, f"{SLOT_PREFIX}-slot{slot}.lock"), "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            continue
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        return slot, f
    raise RuntimeError(f"{socket.gethostname()}: all {MAX_SLOTS} testbed slots are held by live workers")


def run_files(runs_dir: str, name: str) -> list[str]:
    """What a run left in ``runs_dir``: its directory and the files beside it named after
    it (a collection's <run>.npz)."""
    if not os.path.isdir(runs_dir):
        return []
    return sorted(os.path.join(runs_dir, f) for f in os.listdir(runs_dir)
                  if f == name or (f.startswith(name + ".") and os.path.isfile(os.path.join(runs_dir, f))))


def pack(paths: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in paths:
            tar.add(path, arcname=os.path.basename(path))
    return buf.getvalue()


def _send(f, obj) -> None:
    data = pickle.dumps(obj)
    f.write(struct.pack("!Q", len(data)) + data)
    f.flush()


def _receive(f):
    """The next message, None at the end of the stream."""
    head = f.read(8)
    if len(head) < 8:
        return None
    (n,), data = struct.unpack("!Q", head), b""
    while len(data) < n:
        chunk = f.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return pickle.loads(data)


class TestbedWorker:
    """Wrapped by ray.remote in submit.py (this module imports no Ray)."""
    __test__ = False        # not a pytest class

    def __init__(self):
        from experiments.testbed.teardown import teardown
        self.slot, self._slot_lock = take_slot()
        self.testbed_name = f"{SLOT_PREFIX}{self.slot}"
        # what a worker of this slot killed outright left (SIGKILL: its nodes still forwarding)
        teardown(self.testbed_name)
        self.host = socket.gethostname()
        self.work_dir = tempfile.mkdtemp(prefix=f"intcc-{self.testbed_name}-")
        self.log_path = os.path.join(self.work_dir, "worker.log")
        self.child: subprocess.Popen | None = None

    def info(self) -> dict:
        """Where it runs and which code: the submitter refuses a worker on other code."""
        from records import stamp
        from experiments.runs.algorithm import PROJECT
        return {"host": self.host, "slot": self.slot, "testbed": self.testbed_name, "pid": os.getpid(),
                "commit": stamp().get("commit"), "project": PROJECT}

    def _child(self) -> subprocess.Popen:
        if self.child is None or self.child.poll() is not None:
            from experiments.runs.algorithm import PROJECT
            log = open(self.log_path, "ab")
            self.child = subprocess.Popen([sys.executable, "-m", "experiments.cluster.worker", self.testbed_name,
                                           self.work_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=log, cwd=PROJECT, start_new_session=True)
            log.close()
        return self.child

    def run(self, kind: str, blob: bytes, submitter_project: str, unit) -> dict:
        """One unit of a job of ``kind`` (SESSIONS) with these settings: its session's
        answer, with "seconds", "host" and "slot". An error outside the run's flows (the
        testbed, the agent) is raised: the submitter retries the unit."""
        child = self._child()
        try:
            _send(child.stdin, ("run", kind, blob, submitter_project, unit))
            reply = _receive(child.stdout)
        except BrokenPipeError:
            reply = None
        if reply is None:
            child.wait()
            raise RuntimeError(f"{self.host} slot {self.slot}: the testbed's process ended (exit {child.returncode}): "
                               f"{self._log_tail()}")
        if reply[0] == "error":
            raise RuntimeError(f"{self.host} slot {self.slot}: {reply[1]}")
        return {**reply[1], "host": self.host, "slot": self.slot}

    def _log_tail(self, lines: int = 12) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:]).strip()
        except OSError:
            return "(no log)"

    def close(self) -> None:
        """The testbed down (the child ends its session and exits)."""
        child, self.child = self.child, None
        if child is not None and child.poll() is None:
            child.stdin.close()
            try:
                child.wait(120)
            except subprocess.TimeoutExpired:
                child.kill()


class ScenarioSession:
    """A scenario's runs (``intcc exp run --cluster``): the runner's RunSession on this
    worker's testbed; a unit (units.Unit) gives its record or failure, and its files."""

    def __init__(self, sc, testbed_name: str, work_dir: str):
        from experiments.runs.runner import RunSession
        self.sc, self.runs_dir = sc, os.path.join(work_dir, "runs")
        os.makedirs(self.runs_dir, exist_ok=True)
        # the actor's slot lock guards the testbed (held for its life), not exp-run.lock
        self.session = RunSession(sc, work_dir, [testbed_name], echo=lambda m: print(m, file=sys.stderr),
                                  lock=nullcontext()).__enter__()

    def run(self, unit) -> dict:
        from experiments.cluster.units import unit_batch
        outcome, = self.session.run_batch(*unit_batch(self.sc, unit))
        paths = run_files(self.runs_dir, outcome.name)
        files = pack(paths) if paths else b""
        for path in paths:
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        return {"record": outcome.record, "failure": outcome.failure, "warnings": list(outcome.warnings),
                "files": files}

    def close(self) -> None:
        self.session.__exit__(None, None, None)


class LiveSession:
    """The estimator's live evaluation (``intcc estimator live-eval --cluster``): a unit is
    a plan's run (estimator_live.PlanUnit); its result, or its failure."""

    def __init__(self, settings: dict, testbed_name: str, work_dir: str):
        from experiments.runs.estimator_live import LiveEvaluation
        self.live = LiveEvaluation(**settings, testbed_name=testbed_name).__enter__()

    def run(self, unit) -> dict:
        from experiments.testbed.traffic import RunFailed
        try:
            return {"result": self.live.run(unit.index), "failure": None}
        except RunFailed as e:
            return {"result": None, "failure": {"run": unit.run, "error": str(e)}}

    def close(self) -> None:
        self.live.__exit__(None, None, None)


SESSIONS = {"scenario": ScenarioSession, "live": LiveSession}


def serve(testbed_name: str, work_dir: str) -> None:
    """The child: runs units from stdin until its end, one session per job (kind and
    settings) at a time."""
    from experiments.cluster.units import relocate
    proto_in, proto_out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)         # what the code prints goes to the log, not into the replies
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)      # nor does a process it starts read the requests
    os.close(null)
    session, key = None, None

    def end_session():
        nonlocal session, key
        if session is not None:
            session.close()
        session, key = None, None
    try:
        while True:
            msg = _receive(proto_in)
            if msg is None:
                break
            _, kind, blob, submitter_project, unit = msg
            t0 = time.monotonic()
            try:
                if key != (kind, blob):
                    end_session()
                    session = SESSIONS[kind](relocate(pickle.loads(blob), submitter_project), testbed_name, work_dir)
                    key = (kind, blob)
                reply = session.run(unit)
            except Exception:
                end_session()       # a session that failed is not trusted with the next unit
                _send(proto_out, ("error", traceback.format_exc(limit=8)))
                continue
            _send(proto_out, ("ok", {**reply, "seconds": time.monotonic() - t0}))
    finally:
        end_session()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
