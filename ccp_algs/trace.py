"""The decision trace (``intcc alg run NAME --trace CSV``): a row per decision of every
flow an agent controls."""
from __future__ import annotations

import csv
import time
from contextlib import contextmanager

TRACE_FIELDS = ["t_s", "mono_ns", "sid", "event", "cwnd_bytes", "ssthresh_bytes", "rtt_us",
                "acked_bytes", "loss_pkts", "timeout", "inflight_pkts", "reason", "cwnd_before_bytes",
                "src_port", "dst_port",     # on a flow's start row: which connection (one agent, many flows)
                "cause_mono_ns"]            # on a switch row: when what caused it happened (a verdict's sending)


class Trace:
    """CSV rows, line-buffered: portus ends the process with exit() on SIGTERM."""

    def __init__(self, path: str | None):
        self.listeners: list = []       # each called with every row's fields (ccp_agent's decision feed)
        self.listener_errors = 0
        self._file = open(path, "w", buffering=1, newline="") if path else None
        self._csv = csv.DictWriter(self._file, TRACE_FIELDS) if self._file else None
        if self._csv:
            self._csv.writeheader()
        self._t0 = time.monotonic_ns()
        self._held: list | None = None

    @contextmanager
    def held(self):
        """Rows within are written (and given to the listeners) when it ends, in order and
        with the times they were made: a switch's command reaches the datapath before its
        rows reach the disk. Nested: the outermost writes."""
        if self._held is not None:
            yield
            return
        self._held = []
        try:
            yield
        finally:
            rows, self._held = self._held, None
            for mono_ns, fields in rows:
                self.row(mono_ns, **fields)

    def row(self, mono_ns: int | None = None, **fields):
        if self._held is not None:
            self._held.append((mono_ns or time.monotonic_ns(), fields))
            return
        for listener in self.listeners:
            try:
                listener(fields)
            except Exception:         # a listener must never stop a flow's control
                self.listener_errors += 1
        if not self._csv:
            return
        now = mono_ns or time.monotonic_ns()
        self._csv.writerow({"t_s": f"{(now - self._t0) / 1e9:.6f}", "mono_ns": now, **fields})
