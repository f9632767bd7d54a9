"""Decoding IOAM data (the sink's side of int_node/ioam.py).

Every parser raises :class:`IOAMError` on malformed input and never reads past
the buffer it is given. The trace type intcc nodes write (INTCC_TRACE_TYPE,
76-byte slots) has a fast path, one struct call per hop: the sink decodes every
packet it strips.
"""
from __future__ import annotations

import struct
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Tuple

from .ioam import (_NODE_SLOT, _TT_FIELDS, _TT_UNDEFINED, FLAG_OVERFLOW, INTCC_STATE, INTCC_STATE_V1,
                   INTCC_STATE_V2, INTCC_STATE_V3, INTCC_STATE_V4, SCHEMA_INTCC_V3, SCHEMA_INTCC_V4, SCHEMA_INTCC_V5,
                   INTCC_TRACE_TYPE, IOAM_E2E, NODE_LEN_WORDS, NODE_SLOT_BYTES, SCHEMA_INTCC_V1, SCHEMA_INTCC_V2,
                   TRACE_HDR, TRANSIT_DELAY_MAX,
                   TT_BUFFER_OCCUPANCY, TT_HOPLIM_NODEID, TT_HOPLIM_NODEID_WIDE, TT_IF_IDS, TT_OPAQUE,
                   TT_QUEUE_DEPTH, TT_TRANSIT_DELAY, TT_TS_FRAC, TT_TS_SEC, E2E_SEQ32, E2E_SEQ64,
                   E2E_TS_FRAC, E2E_TS_SEC, IntccState, IOAMError)

_OPAQUE_HDR_DEFAULT = ((INTCC_STATE.size // 4) << 24) | SCHEMA_INTCC_V5
#: the fields a schema before v5 does not carry
_NO_RECONFIG = dict(reconfig_period_ms=None, reconfig_downtime_ms=None, reconfig_next_ms=None, reconfig_epoch=None,
                    reconfig_flags=None)


@dataclass
class NodeData:
    hop_limit: Optional[int] = None
    node_id: Optional[int] = None
    ingress_if: Optional[int] = None
    egress_if: Optional[int] = None
    ts_sec: Optional[int] = None
    ts_frac: Optional[int] = None     # nanoseconds (PTP truncated format)
    transit_delay_ns: Optional[int] = None
    transit_delay_overflow: bool = False
    queue_depth_bytes: Optional[int] = None
    buffer_occupancy: Optional[int] = None   # packets in the egress queue
    state: Optional[IntccState] = None
    opaque_schema: Optional[int] = None
    opaque_raw: bytes = b""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["opaque_raw"] = self.opaque_raw.hex()
        return d


@dataclass
class Trace:
    namespace_id: int
    node_len: int
    flags: int
    remaining_len: int
    trace_type: int
    nodes: List[NodeData] = field(default_factory=list)   # path order: first hop first

    @property
    def overflow(self) -> bool:
        return bool(self.flags & FLAG_OVERFLOW)


@dataclass
class E2E:
    namespace_id: int
    e2e_type: int
    seq: Optional[int] = None
    ts_sec: Optional[int] = None
    ts_frac: Optional[int] = None


def _field_bytes(trace_type: int) -> int:
    n = sum(w for bit, w in _TT_FIELDS if trace_type & bit)
    return n + 4 * bin(trace_type & _TT_UNDEFINED).count("1")


def decode_trace(buf, off: int = 0, length: Optional[int] = None) -> Trace:
    """Decode a pre-allocated trace (header + node data) of ``length`` bytes."""
    end = len(buf) if length is None else off + length
    if end > len(buf) or end - off < TRACE_HDR.size:
        raise IOAMError("trace header truncated")
    ns, b2, b3, tt = TRACE_HDR.unpack_from(buf, off)
    node_len, flags, remaining, trace_type = b2 >> 3, ((b2 & 7) << 1) | (b3 >> 7), b3 & 0x7F, tt >> 8
    trace = Trace(ns, node_len, flags, remaining, trace_type)
    if trace_type & 1:
        raise IOAMError("trace type bit 23 (reserved) is set")
    if _field_bytes(trace_type) != node_len * 4:
        raise IOAMError(f"NodeLen {node_len} does not match trace type 0x{trace_type:06x}")
    pos = off + TRACE_HDR.size + remaining * 4
    if pos > end:
        raise IOAMError(f"RemainingLen {remaining} exceeds the node data space")
    if node_len == 0 and not trace_type & TT_OPAQUE:
        return trace
    if trace_type == INTCC_TRACE_TYPE and node_len == NODE_LEN_WORDS and (end - pos) % NODE_SLOT_BYTES == 0:
        fast = _decode_default_slots(buf, pos, end)
        if fast is not None:
            trace.nodes = fast
            return trace
    nodes = []
    while pos < end:
        node, pos = _decode_node(buf, pos, end, trace_type)
        nodes.append(node)
    trace.nodes = nodes[::-1]   # the wire has the most recent hop first
    return trace


def _decode_node(buf, pos: int, end: int, tt: int) -> Tuple[NodeData, int]:
    n = NodeData()
    need = _field_bytes(tt)
    if pos + need > end:
        raise IOAMError("node data truncated")
    u32 = struct.unpack_from
    for bit, width in _TT_FIELDS:
        if not tt & bit:
            continue
        if bit == TT_HOPLIM_NODEID:
            v = u32("!I", buf, pos)[0]
            n.hop_limit, n.node_id = v >> 24, v & 0xFFFFFF
        elif bit == TT_IF_IDS:
            n.ingress_if, n.egress_if = u32("!HH", buf, pos)
        elif bit == TT_TS_SEC:
            n.ts_sec = u32("!I", buf, pos)[0]
        elif bit == TT_TS_FRAC:
            n.ts_frac = u32("!I", buf, pos)[0]
        elif bit == TT_TRANSIT_DELAY:
            v = u32("!I", buf, pos)[0]
            n.transit_delay_ns, n.transit_delay_overflow = v & TRANSIT_DELAY_MAX, bool(v >> 31)
        elif bit == TT_QUEUE_DEPTH:
            n.queue_depth_bytes = u32("!I", buf, pos)[0]
        elif bit == TT_BUFFER_OCCUPANCY:
            n.buffer_occupancy = u32("!I", buf, pos)[0]
        elif bit == TT_HOPLIM_NODEID_WIDE and n.node_id is None:
            v = u32("!Q", buf, pos)[0]
            n.hop_limit, n.node_id = v >> 56, v & ((1 << 56) - 1)
        pos += width
    pos += 4 * bin(tt & _TT_UNDEFINED).count("1")
    if tt & TT_OPAQUE:
        if pos + 4 > end:
            raise IOAMError("opaque state snapshot header truncated")
        hdr = u32("!I", buf, pos)[0]
        olen, schema = (hdr >> 24) * 4, hdr & 0xFFFFFF
        if pos + 4 + olen > end:
            raise IOAMError("opaque state snapshot runs past the node data")
        raw = bytes(buf[pos + 4:pos + 4 + olen])
        n.opaque_schema, n.opaque_raw = schema, raw
        if schema == SCHEMA_INTCC_V5 and olen >= INTCC_STATE.size:
            n.state = IntccState(*INTCC_STATE.unpack_from(raw, 0))
        elif schema == SCHEMA_INTCC_V4 and olen >= INTCC_STATE_V4.size:
            n.state = IntccState(*INTCC_STATE_V4.unpack_from(raw, 0), **_NO_RECONFIG)
        elif schema == SCHEMA_INTCC_V3 and olen >= INTCC_STATE_V3.size:
            n.state = IntccState(*INTCC_STATE_V3.unpack_from(raw, 0), queue_index=None, queue_count=None,
                                 queue_weight=None, **_NO_RECONFIG)
        elif schema == SCHEMA_INTCC_V2 and olen >= INTCC_STATE_V2.size:
            n.state = IntccState(*INTCC_STATE_V2.unpack_from(raw, 0), flow_queue_drops=None, flow_link_losses=None,
                                 queue_index=None, queue_count=None, queue_weight=None, **_NO_RECONFIG)
        elif schema == SCHEMA_INTCC_V1 and olen >= INTCC_STATE_V1.size:
            n.state = IntccState(*INTCC_STATE_V1.unpack_from(raw, 0), rx_drops=None, flow_queue_drops=None,
                                 flow_link_losses=None, queue_index=None, queue_count=None, queue_weight=None,
                                 **_NO_RECONFIG)
        pos += 4 + olen
    return n, pos


def decode_e2e(buf, off: int, length: int) -> E2E:
    """Decode an IOAM E2E option body (after the option type and length bytes)."""
    if length < 6 or off + length > len(buf):
        raise IOAMError("E2E option truncated")
    if buf[off + 1] != IOAM_E2E:
        raise IOAMError(f"IOAM option type {buf[off + 1]} is not E2E")
    ns, etype = struct.unpack_from("!HH", buf, off + 2)
    e = E2E(ns, etype)
    pos, end = off + 6, off + length
    for bit, width, name in ((E2E_SEQ64, 8, "seq"), (E2E_SEQ32, 4, "seq"),
                             (E2E_TS_SEC, 4, "ts_sec"), (E2E_TS_FRAC, 4, "ts_frac")):
        if etype & bit:
            if pos + width > end:
                raise IOAMError("E2E data shorter than its E2E type says")
            setattr(e, name, int.from_bytes(buf[pos:pos + width], "big"))
            pos += width
    return e


def _decode_default_slots(buf, pos: int, end: int) -> Optional[List[NodeData]]:
    """Slots of INTCC_TRACE_TYPE with our opaque schema, path order; None if any
    slot has another opaque header (the generic decoder then handles it)."""
    nodes = []
    unpack = _NODE_SLOT.unpack_from
    while pos < end:
        (hn, in_if, eg_if, sec, frac, transit, qdepth, occ, ohdr,
         rssi, mcs, flows, rate, drops, losses, arrival, capacity, rx_drops, fdrops, flosses,
         q_index, q_count, q_weight, rc_period, rc_downtime, rc_next, rc_epoch, rc_flags) = unpack(buf, pos)
        if ohdr != _OPAQUE_HDR_DEFAULT:
            return None
        nodes.append(NodeData(hn >> 24, hn & 0xFFFFFF, in_if, eg_if, sec, frac, transit & TRANSIT_DELAY_MAX,
                              bool(transit >> 31), qdepth, occ,
                              IntccState(rssi, mcs, flows, rate, drops, losses, arrival, capacity, rx_drops,
                                         fdrops, flosses, q_index, q_count, q_weight, rc_period, rc_downtime,
                                         rc_next, rc_epoch, rc_flags),
                              SCHEMA_INTCC_V5, bytes(buf[pos + NODE_SLOT_BYTES - INTCC_STATE.size:pos + NODE_SLOT_BYTES])))
        pos += NODE_SLOT_BYTES
    nodes.reverse()   # the wire has the most recent hop first
    return nodes
