"""Per-flow counts at a node, in a bounded table: a queue's drops and a link's losses of
each flow, so the sink can put a flow's losses on its own drops and link losses rather
than on the node's totals, which every flow through it shares.

Keyed by the 5-tuple key of int_node.packet.flow_key (the sink's flow id is a hash of
it). The table holds at most ``max_flows`` flows; a new flow beyond that evicts the one
counted least recently (``evicted``). An evicted flow's count starts again from zero: the
sink sees its counter go backwards and falls back to the node's totals for that gap.
"""
from __future__ import annotations

from collections import OrderedDict

from .packet import flow_key, key_hash

DEFAULT_MAX_FLOWS = 4096


class FlowTally:
    __slots__ = ("counts", "max_flows", "evicted")

    def __init__(self, max_flows: int = DEFAULT_MAX_FLOWS):
        self.counts: "OrderedDict[bytes, int]" = OrderedDict()
        self.max_flows = max_flows
        self.evicted = 0

    def count(self, pkt) -> None:
        """One more for the packet's flow."""
        key = pkt.flow_id
        if key is None:
            key = pkt.flow_id = flow_key(pkt.data)
        c = self.counts
        n = c.get(key)
        if n is None:
            if len(c) >= self.max_flows:
                c.popitem(last=False)
                self.evicted += 1
            c[key] = 1
        else:
            c[key] = n + 1
            c.move_to_end(key)

    def of(self, pkt) -> int:
        """The packet's flow's count (0 for a flow never counted); per packet, so nothing
        is parsed while the table is empty."""
        if not self.counts:
            return 0
        key = pkt.flow_id
        if key is None:
            key = pkt.flow_id = flow_key(pkt.data)
        return self.counts.get(key, 0)

    def top(self, n: int = 32) -> dict:
        """{flow id (telemetry.flowid): count} of the ``n`` largest counts, for counters."""
        return {key_hash(k): v for k, v in sorted(self.counts.items(), key=lambda kv: -kv[1])[:n]}
