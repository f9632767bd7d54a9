"""Dragonfly's captures during a run (``record_slots`` in a scenario, ``intcc exp run
--record-slots``; the topology's links with ``flow_slots``): every FlowSlots table of the
run's testbed drained each PERIOD_S through its node's control socket (the ``take``
handler), kept in ``runs/<run>/slots.json.gz``:

    {"slot_ns": 1000000, "tables": {"<node>/<element>": {"<flow id>": {"flow": [src, dst,
     proto, sport, dport], "in": [[slot, seq, exact bytes queued or -1], ...], "out": [...],
     "ack": [[slot, ack, -1], ...]}}}}

Entries from before the run (an earlier run's flows) are drained and dropped at the start.
A node that does not answer a drain is counted (``missed_takes``), never fatal: its entries
stay in its table, bounded by its ``keep``, and the next drain takes them."""
from __future__ import annotations

import gzip
import json
import logging
import os
import threading

SLOT_FILE = "slots.json.gz"
PERIOD_S = 0.5

log = logging.getLogger(__name__)


class SlotRecorder:
    def __init__(self, tb, run_dir: str, period_s: float = PERIOD_S):
        self.tb, self.run_dir, self.period_s = tb, run_dir, period_s
        self.tables: dict = {}           # "<node>/<element>" -> flow id -> {"flow", "in", "out"}
        self.slot_ns: int | None = None
        self.missed_takes = 0
        self._stop = threading.Event()
        self._thread = None

    def _tables(self) -> list[tuple[str, str]]:
        found = []
        for node in self.tb.state["nodes"]:
            reply = self.tb.node_request(node, {"cmd": "elements"})
            found += [(node, e["name"]) for e in reply.get("elements", []) if e["class"] == "FlowSlots"]
        return found

    def _take(self, keep: bool = True) -> None:
        for node, element in self._where:
            try:
                reply = self.tb.node_request(node, {"cmd": "read", "element": element, "handler": "take"})
            except OSError:
                reply = {"ok": False}
            if not reply.get("ok"):
                self.missed_takes += 1
                continue
            if not keep:
                continue
            table = self.tables.setdefault(f"{node}/{element}", {})
            for fid, got in reply["value"].items():
                mine = table.setdefault(fid, {"flow": got["flow"], "in": [], "out": [], "ack": []})
                for side in ("in", "out", "ack"):
                    mine[side] += got.get(side, [])

    def __enter__(self) -> "SlotRecorder":
        self._where = self._tables()
        if not self._where:
            log.warning("record_slots: no FlowSlots table on the testbed (no link with flow_slots = true)")
        for node, element in self._where[:1]:
            reply = self.tb.node_request(node, {"cmd": "read", "element": element, "handler": "slot"})
            self.slot_ns = int(reply["value"]) if reply.get("ok") else None
        self._take(keep=False)           # what earlier runs left
        self._thread = threading.Thread(target=self._loop, name="slot-recorder", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._take()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._take()
        with gzip.open(os.path.join(self.run_dir, SLOT_FILE), "wt", encoding="utf-8") as f:
            json.dump({"slot_ns": self.slot_ns, "missed_takes": self.missed_takes, "tables": self.tables}, f,
                      separators=(",", ":"))


def read_slots(run_dir: str) -> dict:
    """A run's recorded captures (the format above)."""
    with gzip.open(os.path.join(run_dir, SLOT_FILE), "rt", encoding="utf-8") as f:
        return json.load(f)


def labelled_flows(results_dir: str, min_entries: int = 100):
    """Every data flow a results directory's runs captured at their bottleneck, with its
    CCA: [(run, FlowSeries, cca)]. A flow is named by its port (flow 1's: MAIN_PORT + the
    testbed's PORT_STRIDE; competitor k's one above plus k, its CCA in the record's
    competitor_ccas or competitor); flows with fewer than ``min_entries`` entries a side
    (iperf3's control connections) and ports of no known flow (UDP) are left out. The
    bottleneck's table is the one that saw flow 1's data (the other direction carries ACKs).
    A run whose capture sampled packets (``flow_slots`` below 1) is interpolated between its
    sampled slots, as the paper does."""
    from estimator.dragonfly.dataset import flow_series
    from experiments.testbed.traffic import MAIN_PORT, PORT_STRIDE
    with open(os.path.join(results_dir, "summary.json")) as f:
        records = json.load(f)["records"]
    out = []
    for rec in records:
        run_dir = os.path.join(results_dir, "runs", rec["run"])
        if not os.path.exists(os.path.join(run_dir, SLOT_FILE)):
            continue
        slots_param = (rec.get("params") or {}).get("flow_slots", True)
        sampled = not isinstance(slots_param, bool) and float(slots_param) < 1
        ccas = [rec["flow1"]] + list(rec.get("competitor_ccas") or [rec.get("competitor")] * rec.get("competitors", 0))
        for table in read_slots(run_dir)["tables"].values():
            flows = [f for f in table.values() if min(len(f["in"]), len(f["out"])) >= min_entries]
            named = [(f, (f["flow"][4] - MAIN_PORT) % PORT_STRIDE) for f in flows if f["flow"][4] >= MAIN_PORT]
            if not any(k == 0 for _, k in named):
                continue                 # not flow 1's direction
            for f, k in named:
                if k < len(ccas) and ccas[k]:
                    series = flow_series(f, interpolate=sampled)
                    if series is not None:
                        out.append((rec["run"], series, ccas[k]))
    return out
