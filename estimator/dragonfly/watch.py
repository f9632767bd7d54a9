"""``intcc estimator dragonfly watch``: a node's FlowSlots tables drained through its
control socket each period, every flow through them classified (live.LiveClassifier), the
verdicts published on ``intcc/v1/cca/<flow-id>`` with the sink's login (its ACL covers
``cca/#``). A node that does not answer a drain is counted and asked again next period:
its table keeps the entries meanwhile, bounded by its ``keep``."""
from __future__ import annotations

import logging
import threading

from int_node.control import request

from .live import PERIOD_S, LiveClassifier

log = logging.getLogger(__name__)


class NodeTables:
    """The FlowSlots tables of one node, found by class through its control socket."""

    def __init__(self, control_path: str, node_id: int | None = None):
        self.control_path = control_path
        reply = self._ask({"cmd": "elements"})
        elements = reply["elements"]
        self.tables = [e["name"] for e in elements if e["class"] == "FlowSlots"]
        if not self.tables:
            raise ValueError(f"{control_path}: the node has no FlowSlots table (a link with flow_slots = true, "
                             "or FlowSlots in its configuration)")
        self.slot_ns = int(self._ask({"cmd": "read", "element": self.tables[0], "handler": "slot"})["value"])
        if node_id is None:
            transit = [e["name"] for e in elements if e["class"] == "INTTransit"]
            if not transit:
                raise ValueError(f"{control_path}: no INTTransit to take the node's id from: give --node-id")
            node_id = int(self._ask({"cmd": "read", "element": transit[0], "handler": "node_id"})["value"])
        self.node_id = node_id
        self.missed_takes = 0

    def _ask(self, req: dict) -> dict:
        reply = request(self.control_path, req)
        if not reply.get("ok"):
            raise ValueError(f"{self.control_path}: {reply.get('error', 'no answer')}")
        return reply

    def take(self) -> dict:
        """Every table's new entries, merged by flow id (a flow is in one table per node
        direction; two tables seeing one flow would be two queues, kept apart by id)."""
        out = {}
        for name in self.tables:
            try:
                reply = request(self.control_path, {"cmd": "read", "element": name, "handler": "take"})
            except OSError:
                reply = {"ok": False}
            if not reply.get("ok"):
                self.missed_takes += 1
                continue
            out.update(reply["value"])
        return out


def watch(control_path: str, model, broker_url: str | None = None, period_s: float = PERIOD_S,
          node_id: int | None = None, stop: threading.Event | None = None, on_record=None) -> LiveClassifier:
    """Drain, classify and publish every ``period_s`` until ``stop`` is set; ``on_record``
    (if given) sees each record too. Returns the classifier (its counters)."""
    from broker import client as mqttc
    from broker.auth import SINK_USER
    from telemetry.schema import cca_topic, encode
    node = NodeTables(control_path, node_id)
    live = LiveClassifier(model, node.node_id, node.slot_ns)
    node.take()                        # what was there before: another interval's flows
    client = mqttc.logged_in(broker_url, SINK_USER, "intcc-dragonfly")[0] if broker_url else None
    stop = stop or threading.Event()
    log.info("watching %d FlowSlots table(s) of node %d (%s), %g s intervals", len(node.tables), node.node_id,
             control_path, live.n_slots * node.slot_ns / 1e9)
    try:
        while not stop.wait(period_s):
            live.feed(node.take())
            for rec in live.classify():
                if client is not None:
                    client.publish(cca_topic(rec.flow_id), encode(rec), qos=0)
                if on_record is not None:
                    on_record(rec)
    finally:
        if client is not None:
            mqttc.stop(client)
    live.counters["missed_takes"] = node.missed_takes
    return live
