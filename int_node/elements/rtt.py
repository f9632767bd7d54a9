"""FlowRTT and RTTTap: per-flow round-trip times measured passively at the node.

    rtt :: FlowRTT(max_flows 1024, max_pending 64)
    ... -> RTTTap(rtt) -> ...        (on every path a flow's packets cross, both directions)

Two measurements per TCP flow, both from packets the node forwards anyway:

- **ACK matching** (the RTT-separation paper's: a data segment's expected ACK, eACK = its
  sequence number plus its length, stored with the time it passed; the first ACK of the other
  direction that acknowledges exactly that eACK gives a sample). Beside a sender this is the
  flow's RTT; in the middle of a path it is the part beyond the node (node -> receiver ->
  node). Karn's rule: a segment sent again (its eACK not above the highest seen) cancels the
  samples it could confuse. A delayed or cumulative ACK matches only the segment it names
  exactly; older segments it covers are dropped without a sample (their ACK waited).
- **TCP timestamps** (Linux sends them by default): the time a TSval first passed, matched
  with the first packet of the other direction echoing it (TSecr). Each direction gives the
  part of the path beyond the node as its packets go; the two together are the flow's
  whole round trip, wherever the node sits (``full``).

State is bounded: at most ``max_flows`` directions (the least recently seen evicted,
counted) and ``max_pending`` outstanding eACKs and TSvals each. A full table times no new
ones until ACKs and echoes drain it: the oldest are the next to be answered, so a window or
a round trip larger than the table thins the samples but never stops them (evicting the
oldest instead would lose every one) — except an oldest entry that has waited longer than the
least sample so far, which could not lower the minimum and makes room. Per direction: samples, the last, the minimum and a
smoothed value (RFC 6298's 1/8 gain). Handler ``rtts``: flow id -> {"flow": [src, dst,
proto, sport, dport], "ack": {...}, "ts": {...}, "full_us": ...}, times in microseconds."""
from __future__ import annotations

import struct
from collections import OrderedDict

from ..element import Arg, ConfigError, Element, register
from ..packet import IP6_NH_OFF, IP6_PAYLOAD_OFF, IP6_PLEN_OFF, NH_TCP, flow_key, flow_tuple, key_hash, upper_layer
from ..units import parse_pos_int
from .basic import NoteTap

_TCP = struct.Struct("!HHIIBB")          # ports, seq, ack, data offset, flags
_U32 = struct.Struct("!I")
_U16 = struct.Struct("!H")
_TS_PAIR = struct.Struct("!II")
LINUX_TS_PREFIX = bytes((1, 1, 8, 10))    # NOP NOP, then timestamps (kind 8, length 10)
SYN, FIN = 0x02, 0x01
OPT_END, OPT_NOP, OPT_TS = 0, 1, 8
SRTT_GAIN = 0.125                         # RFC 6298's alpha
SEQ_HALF = 1 << 31


def _after(a: int, b: int) -> bool:
    """Sequence number a is after b (modulo 2**32)."""
    return 0 < ((a - b) & 0xFFFFFFFF) < SEQ_HALF


def reverse_key(key: bytes) -> bytes:
    """The flow key of the other direction (int_node.packet.flow_key's layout)."""
    return key[16:32] + key[0:16] + key[32:33] + key[35:37] + key[33:35]


def _timestamps(data, off: int, end: int):
    """(TSval, TSecr) from the TCP options between off and end, or None."""
    while off < end:
        kind = data[off]
        if kind == OPT_END:
            return None
        if kind == OPT_NOP:
            off += 1
            continue
        if off + 1 >= end or data[off + 1] < 2:
            return None                       # malformed: stop reading options
        if kind == OPT_TS and data[off + 1] == 10 and off + 10 <= end:
            return _U32.unpack_from(data, off + 2)[0], _U32.unpack_from(data, off + 6)[0]
        off += data[off + 1]
    return None


def _make_room(pending: "OrderedDict[int, int]", min_us: float | None, now_ns: int) -> None:
    """A full table gives up its oldest entry once that has waited longer than the least
    sample so far: its answer could not lower the minimum. Without it a table filled while the
    flow sat in a long queue timed none of its first packets into an empty one (where its
    minimum shows). Before any sample nothing is given up."""
    if min_us is not None and pending and (now_ns - next(iter(pending.values()))) / 1e3 > min_us:
        pending.popitem(last=False)


class RttStats:
    __slots__ = ("samples", "last_us", "min_us", "srtt_us")

    def __init__(self):
        self.samples, self.last_us, self.min_us, self.srtt_us = 0, None, None, None

    def add(self, rtt_us: float) -> None:
        self.samples += 1
        self.last_us = rtt_us
        self.min_us = rtt_us if self.min_us is None else min(self.min_us, rtt_us)
        self.srtt_us = rtt_us if self.srtt_us is None else self.srtt_us + SRTT_GAIN * (rtt_us - self.srtt_us)

    def as_dict(self) -> dict:
        r = (lambda v: None if v is None else round(v, 1))
        return {"samples": self.samples, "last_us": r(self.last_us), "min_us": r(self.min_us), "srtt_us": r(self.srtt_us)}


class _Direction:
    __slots__ = ("reverse", "high_eack", "eacks", "tsvals", "last_tsval", "ack", "ts")

    def __init__(self, reverse: bytes):
        self.reverse = reverse                    # the other direction's key
        self.high_eack = self.last_tsval = None
        self.eacks: "OrderedDict[int, int]" = OrderedDict()     # eACK -> ns it passed
        self.tsvals: "OrderedDict[int, int]" = OrderedDict()    # TSval -> ns it first passed
        self.ack, self.ts = RttStats(), RttStats()


def full_us(d: _Direction, back: "_Direction | None") -> float | None:
    """A flow's whole round trip from its two directions at the node (minima, microseconds):
    the part beyond the node on the data's side, timed by its TSvals' echoes and by ACK
    matching, whichever is less (an echo of a delayed ACK names the first of the two segments
    it answers, and waited for the second; the ACK names the second), plus the part on the
    ACKs' side, timed by their TSvals' echoes in the data. None without timestamps each way."""
    if back is None or back.ts.min_us is None or d.ts.min_us is None:
        return None
    beyond = d.ts.min_us if d.ack.min_us is None else min(d.ts.min_us, d.ack.min_us)
    return beyond + back.ts.min_us


@register
class FlowRTT(Element):
    """The per-flow RTT table: ``FlowRTT(max_flows 1024, max_pending 64)``, filled by
    RTTTaps (no ports: an information element, like FlowSlots). Per TCP flow and direction:
    data segment to the ACK naming its end (Karn's rule; a delayed ACK measured on the
    segment it names), and TSval to its echo each way (the two halves: the whole round trip
    wherever the node sits). At most ``max_flows`` directions (least recently seen evicted,
    counted) and ``max_pending`` outstanding segments and TSvals each (when full, new ones
    go untimed: ``pending_full``). Handler ``rtts``."""
    n_inputs = n_outputs = (0, 0)
    ARGS = (Arg("max_flows", parse_pos_int, 1024), Arg("max_pending", parse_pos_int, 64))
    counter_names = ("seen", "ack_samples", "ts_samples", "retransmits", "evicted", "pending_full")

    def configured(self):
        if self.max_flows < 2:
            raise ConfigError("FlowRTT: max_flows must be at least 2 (a flow's two directions)")
        self.flows: "OrderedDict[bytes, _Direction]" = OrderedDict()

    def _new_direction(self, key: bytes) -> _Direction:
        if len(self.flows) >= self.max_flows:
            self.flows.popitem(last=False)
            self.evicted += 1
        d = self.flows[key] = _Direction(reverse_key(key))
        return d

    def note(self, pkt, now_ns: int) -> None:
        """A packet passing a tap at ``now_ns``; IndexError for a truncated header."""
        if self.note_batch(((pkt, now_ns),)):
            raise IndexError("header truncated")

    def note_batch(self, timed_packets) -> int:
        """Packets passing a tap, as (packet, ns it passed) pairs; returns how many had a
        truncated header (noted no further). Every packet of a node's flows comes here:
        the common case (no extension header, Linux's NOP NOP TS options) is read inline,
        the table's state in locals for the whole batch."""
        flows, new_direction, move_to_end = self.flows, self._new_direction, self.flows.move_to_end
        unpack_tcp, unpack_u16, unpack_ts = _TCP.unpack_from, _U16.unpack_from, _TS_PAIR.unpack_from
        max_pending = self.max_pending
        seen = malformed = retransmits = full = ack_samples = ts_samples = 0
        for pkt, now_ns in timed_packets:
            seen += 1
            try:
                data = pkt.data
                if data[IP6_NH_OFF] == NH_TCP:
                    off = IP6_PAYLOAD_OFF
                else:
                    proto, off = upper_layer(data)
                    if proto != NH_TCP:
                        continue
                size = len(data)
                if off + 20 > size:
                    malformed += 1
                    continue
                _, _, seq, ack, doff, flags = unpack_tcp(data, off)
                hdr = (doff >> 4) * 4
                end = IP6_PAYLOAD_OFF + unpack_u16(data, IP6_PLEN_OFF)[0]
                if hdr < 20 or off + hdr > min(end, size):
                    malformed += 1
                    continue
                key = pkt.flow_id
                if key is None:
                    key = pkt.flow_id = flow_key(data)
                me = flows.get(key)
                if me is None:
                    me = new_direction(key)
                else:
                    move_to_end(key)
                seg_len = end - off - hdr + (1 if flags & (SYN | FIN) else 0)
                if seg_len > 0:
                    eack = (seq + seg_len) & 0xFFFFFFFF
                    high = me.high_eack
                    if high is None or 0 < ((eack - high) & 0xFFFFFFFF) < SEQ_HALF:      # new data
                        me.high_eack = eack
                        if len(me.eacks) >= max_pending:
                            _make_room(me.eacks, me.ack.min_us, now_ns)
                        if len(me.eacks) < max_pending:
                            me.eacks[eack] = now_ns
                        else:
                            full += 1
                    else:                         # sent again: its ACK cannot tell which copy it answers
                        retransmits += 1
                        for e in [e for e in me.eacks if not _after(seq, e)]:
                            del me.eacks[e]       # every segment at or after the resent one (Karn)
                other = flows.get(me.reverse)
                if other is not None and flags & 0x10:
                    pending = other.eacks
                    if pending:
                        t = pending.pop(ack, None)
                        if t is not None:
                            other.ack.add((now_ns - t) / 1e3)
                            ack_samples += 1
                        while pending and not _after(next(iter(pending)), ack):
                            pending.popitem(last=False)   # covered by this cumulative ACK: it waited, no sample
                if hdr <= 20:
                    continue
                if hdr >= 32 and data[off + 20:off + 24] == LINUX_TS_PREFIX:
                    tsval, tsecr = unpack_ts(data, off + 24)
                else:
                    ts = _timestamps(data, off + 20, off + hdr)
                    if ts is None:
                        continue
                    tsval, tsecr = ts
                if tsval != me.last_tsval:        # the first packet with this TSval
                    me.last_tsval = tsval
                    if len(me.tsvals) >= max_pending:
                        _make_room(me.tsvals, me.ts.min_us, now_ns)
                    if len(me.tsvals) < max_pending:
                        me.tsvals[tsval] = now_ns
                    else:
                        full += 1
                if other is not None:
                    pending = other.tsvals
                    if pending:
                        t = pending.pop(tsecr, None)
                        if t is not None:
                            other.ts.add((now_ns - t) / 1e3)
                            ts_samples += 1
                        while pending and _after(tsecr, next(iter(pending))):
                            pending.popitem(last=False)   # older TSvals: echoed late or never
            except (IndexError, struct.error):     # an extension header cut short
                malformed += 1
        self.seen += seen
        self.retransmits += retransmits
        self.pending_full += full
        self.ack_samples += ack_samples
        self.ts_samples += ts_samples
        return malformed

    def rtt_us(self, key: bytes) -> float | None:
        """The flow's round trip, microseconds, for a flow key of its data direction: the
        whole one from both directions' parts (full_us), else the part beyond the node from
        ACK matching (its minimum); None before a sample."""
        d = self.flows.get(key)
        if d is None:
            return None
        full = full_us(d, self.flows.get(reverse_key(key)))
        return full if full is not None else d.ack.min_us

    def read_handler(self, handler: str):
        if handler == "rtts":
            out = {}
            for key, d in self.flows.items():
                full = full_us(d, self.flows.get(reverse_key(key)))
                out[key_hash(key)] = {"flow": list(flow_tuple(key)), "ack": d.ack.as_dict(), "ts": d.ts.as_dict(),
                                      "full_min_us": None if full is None else round(full, 1)}
            return out
        return super().read_handler(handler)

    def counters(self):
        c = super().counters()
        c["flows"] = len(self.flows)
        return c


@register
class RTTTap(NoteTap):
    """Notes each TCP packet passing here in a FlowRTT table; passes every packet on. Put one
    on each direction's path through the node."""
    ARGS = (Arg("rtt", str),)

    def initialize(self):
        table = self.router.find(self.rtt, FlowRTT, user=f"RTTTap {self.name}")
        self._noter, self._batch_noter = table.note, table.note_batch
