"""An agent's helper processes (telemetry feed, estimator): forked before portus starts,
when the agent has no threads yet, and daemonic, so they end with it. pyportus holds
the agent's GIL for its whole life: work that must run between reports runs here."""
from __future__ import annotations

import multiprocessing as mp


def fork_child(target, args: tuple, name: str) -> mp.Process:
    proc = mp.get_context("fork").Process(target=target, args=args, daemon=True, name=name)
    proc.start()
    return proc


def stop_child(proc: mp.Process | None, timeout_s: float = 2.0):
    if proc is not None and proc.is_alive():
        proc.terminate()
        proc.join(timeout_s)
