"""An agent's decisions published for the dashboard (``--broker``): each trace row of a flow
becomes a DecisionRecord on ``intcc/v1/decision/<flow-id>`` (docs/telemetry.md), so the
page can show why a sender did what it did.

The agent never waits on the network: rows go down a pipe to a child process (pyportus
holds the agent's GIL) that names each flow (its ports in the start row, its full tuple
in the datapath's flows.json) and publishes as the agent user. Rate-limited in the agent:
at most ``MAX_REPORTS_PER_S`` report rows per flow and second, every loss, timeout,
switch and start row (at most one per ``MIN_GAP_S``).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time

from .child import fork_child, stop_child

MAX_REPORTS_PER_S = 10
MIN_GAP_S = 0.005
_ALWAYS = ("start", "loss", "timeout", "switch")


class DecisionFeed:
    """The agent's end: a Trace listener (``feed(fields)``), rate-limited, never blocking."""

    def __init__(self, broker_url: str, state_dir: str, algorithm: str):
        self.args = (broker_url, state_dir, algorithm)
        self.sent = self.dropped = 0
        self._last: dict = {}          # (sid, kind) -> monotonic s of the last row sent
        self._conn = None
        self._proc = None

    def start(self) -> "DecisionFeed":
        ours, theirs = mp.get_context("fork").Pipe(duplex=False)
        self._proc = fork_child(_serve, (ours, *self.args, os.getpid(), theirs), "intcc-decision-feed")
        ours.close()
        self._conn = theirs
        return self

    def __call__(self, fields: dict) -> None:
        event = fields.get("event")
        if event not in ("report",) + _ALWAYS or self._conn is None:
            return
        now = time.monotonic()
        kind = "always" if event in _ALWAYS else "report"
        key = (fields.get("sid"), kind)
        gap = MIN_GAP_S if kind == "always" else 1.0 / MAX_REPORTS_PER_S
        if now - self._last.get(key, -1e9) < gap:
            self.dropped += 1
            return
        self._last[key] = now
        try:
            self._conn.send(fields)
            self.sent += 1
        except (OSError, ValueError):
            self._conn = None             # the child is gone: decisions stop, control goes on

    def stop(self):
        stop_child(self._proc)


def _serve(reader, broker_url, state_dir, algorithm, parent_pid, writer):
    writer.close()                        # the agent's end, inherited through fork
    from estimator.online import Publisher
    from telemetry.schema import DecisionRecord, decision_topic, encode
    from .flows import FlowDirectory, entry_flow_id
    pub = Publisher(broker_url)
    directory = FlowDirectory(state_dir)
    ports, ids, current = {}, {}, {}      # sid -> (sport, dport), flow id, algorithm in control
    try:
        while os.getppid() == parent_pid:
            if not reader.poll(0.5):
                continue
            try:
                row = reader.recv()
            except (EOFError, OSError):
                break
            sid = row.get("sid")
            if row.get("event") == "start" and row.get("src_port"):
                ports[sid] = (int(row["src_port"]), int(row["dst_port"]))
            if row.get("event") == "switch" and "->" in str(row.get("reason", "")):
                current[sid] = str(row["reason"]).split("->", 1)[1].split(":")[0].strip()
            fid = ids.get(sid) or (entry_flow_id(directory.by_ports(*ports[sid])) if sid in ports else None)
            if fid is None:
                continue
            ids[sid] = fid
            rec = DecisionRecord(flow_id=fid, ts_ns=time.time_ns(), algorithm=current.get(sid, algorithm),
                                 event=row["event"], cwnd_bytes=int(row.get("cwnd_bytes") or 0),
                                 reason=str(row.get("reason") or "")[:200],
                                 rtt_us=int(row["rtt_us"]) if row.get("rtt_us") not in (None, "") else None,
                                 ssthresh_bytes=_int_or_none(row.get("ssthresh_bytes")))
            pub.client.publish(decision_topic(fid), encode(rec), qos=0)
    finally:
        pub.close()


def _int_or_none(v):
    try:
        return int(v) if v not in (None, "") and float(v) != float("inf") else None
    except (TypeError, ValueError, OverflowError):
        return None
