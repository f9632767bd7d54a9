"""An agent's helper processes (telemetry feed, estimator): forked before portus starts,
when the agent has no threads yet, and daemonic, so they end with it. pyportus holds
the agent's GIL for its whole life: work that must run between reports runs here."""
from __future__ import annotations

import multiprocessing as mp
import os


def fork_child(target, args: tuple, name: str) -> mp.Process:
    proc = mp.get_context("fork").Process(target=target, args=args, daemon=True, name=name)
    proc.start()
    return proc


def stop_child(proc: mp.Process | None, timeout_s: float = 2.0):
    if proc is not None and proc.is_alive():
        proc.terminate()
        proc.join(timeout_s)


GONE = object()                 # receive(): the agent is gone


def receive(conn, timeout_s: float):
    """The agent's next message within ``timeout_s``: None when none came, GONE when the
    agent is gone (the pipe closed)."""
    if not conn.poll(max(0.0, timeout_s)):
        return None
    try:
        return conn.recv()
    except (EOFError, OSError):
        return GONE



class ChildEnd:
    """The agent's end of a helper that takes flows and answers with verdicts (the
    estimator, the identification): ``SERVE(conn, *args, parent_pid, parent_end)`` runs in
    the child; ``observe``, ``local_changed`` and ``publish`` go to it, ``poll`` takes what
    it sent without blocking."""

    NAME = "intcc-child"

    def __init__(self, *args):
        self.args = args
        self._conn = None
        self._proc = None

    @staticmethod
    def serve(*args):
        raise NotImplementedError

    def start(self):
        ours, theirs = mp.get_context("fork").Pipe()
        self._proc = fork_child(type(self).serve, (theirs, *self.args, os.getpid(), ours), self.NAME)
        theirs.close()
        self._conn = ours
        return self

    def _send(self, *msg):
        try:
            self._conn.send(msg)
        except (OSError, ValueError):
            pass                   # the child is gone: its error was (or will be) polled

    def observe(self, sid: int, ccp_tuple: tuple, local_cca: str):
        self._send("observe", sid, ccp_tuple, local_cca)

    def local_changed(self, sid: int, cca: str):
        self._send("local", sid, cca)

    def publish(self, topic: str, payload: bytes):
        self._send("publish", 0, topic, payload)

    def poll(self) -> list[tuple]:
        """Everything the child has sent since the last poll: ("verdict", sid, Verdict) or
        ("error", sid or None, text). Never blocks."""
        out = []
        try:
            while self._conn.poll(0):
                out.append(self._conn.recv())
        except (EOFError, OSError):
            if self._proc is not None and not self._proc.is_alive():
                out.append(("error", None, f"the {self.NAME} process ended (exit {self._proc.exitcode})"))
                self._proc = None
        return out

    def stop(self):
        stop_child(self._proc)
