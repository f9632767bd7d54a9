"""FlowSlots and SlotTap: Dragonfly's first-packet-per-slot capture at a queue.

    slots :: FlowSlots(slot 1ms, keep 2s, sample 1, max_flows 256, queue q)
    ... -> SlotTap(slots, in) -> q :: Queue(100) -> LinkShaper(10Mbps) -> SlotTap(slots, out) -> ...
    ... (the reverse direction, as it reaches the node) -> SlotTap(slots, ack) -> ...

Per monitored TCP flow and slot, each side keeps the sequence number of the first packet
it saw in that slot, and nothing else: O(1) per packet, a slot's work bounded by one entry
whatever the flow's rate (Dragonfly's first-packet sampling, section III-C). From those,
telemetry.cbiq computes the flow's bytes in the queue (CBIQ) and its ingress bytes per
slot. ``sample`` < 1 keeps each packet with that probability first (the paper's random
sampling: fewer packets looked at, interpolation fills the gaps). With ``queue`` naming a
Queue whose per-flow byte count is on (``Queue(..., flow_bytes true)``), each entry also
carries that flow's exact bytes in the queue at that moment: the CBIQ the sequence numbers
estimate, to compare them. An ``ack`` tap on the other direction keeps, for flows the
table already monitors, the acknowledgement number of the first ACK per slot: with the
ingress sequence numbers, the flow's bytes in flight beyond this node (its sender's window,
seen from the network; beyond the paper, which reads one direction).

The table holds at most ``max_flows`` flows; a new flow beyond that evicts the one seen
least recently (counted: ``evicted``). Each flow keeps the last ``keep`` of slots. The
``slots`` read handler gives every flow's entries (flow id -> {"flow": [src, dst, proto,
sport, dport], "in": [[slot, seq, exact bytes or -1], ...], "out": [...], "ack": [[slot, ack,
-1], ...]}, a slot being
wall-clock ns // ``slot``); ``take`` gives those not taken before and empties the table's
entries (the paper's phase 2: a collector drains it every period)."""
from __future__ import annotations

import functools
import random
import struct
from collections import OrderedDict, deque

from ..element import Arg, ConfigError, Element, register
from ..packet import IP6_NH_OFF, IP6_PAYLOAD_OFF, NH_TCP, flow_key, flow_tuple, key_hash, upper_layer
from ..units import parse_fraction, parse_pos_int, parse_time_ns
from .basic import NoteTap
from .queues import Queue

_SEQ = struct.Struct("!I")
KEY_PROTO_BYTE = 32            # the protocol's byte in int_node.packet.flow_key's key
SIDES = ("in", "out", "ack")
ACK_SIDE = 2
TCP_FLAG_ACK = 0x10


class _FlowEntries:
    __slots__ = ("last_slot", "entries")

    def __init__(self, keep_slots: int):
        self.last_slot = [-1, -1, -1]                # per side: the slot of its last entry
        self.entries = (deque(maxlen=keep_slots), deque(maxlen=keep_slots), deque(maxlen=keep_slots))


def _sample_share(text: str) -> float:
    share = parse_fraction(text)
    if share <= 0:
        raise ValueError("sample must be above 0 (a share of the packets, up to 1)")
    return share


def _reversed(key: bytes) -> bytes:
    """The key (int_node.packet.flow_key's) of the other direction of a flow."""
    return key[16:32] + key[0:16] + key[32:33] + key[35:37] + key[33:35]


@register
class FlowSlots(Element):
    """Dragonfly's capture table: ``FlowSlots(slot 1ms, keep 2s, sample 1, max_flows 256,
    queue q)``, per flow and slot the first packet's sequence number on each side, filled
    by SlotTaps (no ports: an information element, like Click's AddressInfo)."""
    n_inputs = n_outputs = (0, 0)
    ARGS = (Arg("slot", parse_time_ns, 1_000_000), Arg("keep", parse_time_ns, 2_000_000_000),
            Arg("sample", parse_fraction, 1.0), Arg("max_flows", parse_pos_int, 256),
            Arg("queue", str, ""), Arg("seed", int, 0))
    write_handlers = {"sample": _sample_share}       # sampling changed on a running node
    counter_names = ("seen", "sampled_out", "entries", "evicted")

    def configured(self):
        if self.keep < self.slot:
            raise ConfigError("FlowSlots: keep must be at least one slot")
        if self.sample <= 0:
            raise ConfigError("FlowSlots: sample must be above 0 (a share of the packets, up to 1)")
        self.keep_slots = int(self.keep // self.slot)
        self.flows: "OrderedDict[bytes, _FlowEntries]" = OrderedDict()
        # the key an ACK of each monitored flow carries (its reverse): one lookup per ACK
        self.by_ack_key: "dict[bytes, _FlowEntries]" = {}
        self._rng = random.Random(self.seed)
        self._queue = None

    def initialize(self):
        if self.queue:
            self._queue = self.router.find(self.queue, Queue, user=f"FlowSlots {self.name}")
            if self._queue.flow_bytes is None:
                raise ConfigError(f"FlowSlots {self.name}: queue '{self.queue}' does not count bytes per flow "
                                  f"(give it 'flow_bytes true')")

    def note(self, side: int, pkt, now_ns: int) -> None:
        """A packet passing a tap on ``side`` (0: ingress, 1: egress) at ``now_ns``. Per
        packet only a lookup and a comparison; a slot's first packet of a TCP flow is parsed."""
        self.seen += 1
        if self.sample < 1.0 and self._rng.random() >= self.sample:
            self.sampled_out += 1
            return
        key = pkt.flow_id
        if key is None:
            key = pkt.flow_id = flow_key(pkt.data)
        slot = now_ns // self.slot
        f = self.flows.get(key)
        if f is not None and slot == f.last_slot[side]:
            return                                   # not the slot's first: nothing to keep
        if key[KEY_PROTO_BYTE] != NH_TCP:
            return                                   # not TCP: no sequence number to keep
        data = pkt.data
        off = IP6_PAYLOAD_OFF if data[IP6_NH_OFF] == NH_TCP else upper_layer(data)[1]
        if off is None or off + 8 > len(data):
            raise IndexError("TCP header truncated")
        flows = self.flows
        if f is None:
            if len(flows) >= self.max_flows:
                del self.by_ack_key[_reversed(flows.popitem(last=False)[0])]
                self.evicted += 1
            f = flows[key] = self.by_ack_key[_reversed(key)] = _FlowEntries(self.keep_slots)
        else:
            flows.move_to_end(key)                   # seen in a new slot: the least recent go first
        f.last_slot[side] = slot
        exact = self._queue.flow_bytes.get(key, 0) if self._queue is not None else -1
        f.entries[side].append((slot, _SEQ.unpack_from(data, off + 4)[0], exact))
        self.entries += 1

    def note_ack(self, pkt, now_ns: int) -> None:
        """A packet of the other direction at ``now_ns``: if it acknowledges a flow the table
        monitors, the slot's first acknowledgement number is kept. Never adds a flow (the
        ACK direction is not a monitored flow of this queue), so it evicts nothing."""
        key = pkt.flow_id
        if key is None:
            key = pkt.flow_id = flow_key(pkt.data)
        f = self.by_ack_key.get(key)
        slot = now_ns // self.slot
        if f is None or slot == f.last_slot[ACK_SIDE]:
            return
        data = pkt.data
        off = IP6_PAYLOAD_OFF if data[IP6_NH_OFF] == NH_TCP else upper_layer(data)[1]
        if off is None or off + 14 > len(data):
            raise IndexError("TCP header truncated")
        if not data[off + 13] & TCP_FLAG_ACK:
            return                                   # a SYN: no acknowledgement number yet
        f.last_slot[ACK_SIDE] = slot
        f.entries[ACK_SIDE].append((slot, _SEQ.unpack_from(data, off + 8)[0], -1))
        self.entries += 1

    def read_handler(self, handler: str):
        if handler in ("slots", "take"):
            out = {key_hash(k): {"flow": list(flow_tuple(k)),
                                 **{side: [list(e) for e in f.entries[i]] for i, side in enumerate(SIDES)}}
                   for k, f in self.flows.items()}
            if handler == "take":        # a collector's read: each entry handed over once
                for f in self.flows.values():
                    for d in f.entries:
                        d.clear()
                out = {fid: sides for fid, sides in out.items() if sides["in"] or sides["out"] or sides["ack"]}
            return out
        return super().read_handler(handler)

    def counters(self):
        c = super().counters()
        c["flows"] = len(self.flows)
        return c


@register
class SlotTap(NoteTap):
    """Notes each TCP packet passing here in a FlowSlots table, as its ingress (``in``,
    before the queue) or egress (``out``, after the port), or as an acknowledgement of a
    monitored flow (``ack``, on the other direction); passes every packet on."""
    ARGS = (Arg("slots", str), Arg("side", str))

    def configured(self):
        if self.side not in SIDES:
            raise ConfigError(f"SlotTap: side must be 'in', 'out' or 'ack', not {self.side!r}")
        super().configured()

    def initialize(self):
        slots = self.router.find(self.slots, FlowSlots, user=f"SlotTap {self.name}")
        self._noter = slots.note_ack if self.side == "ack" else functools.partial(slots.note, SIDES.index(self.side))
