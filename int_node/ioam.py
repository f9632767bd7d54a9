"""IOAM wire format (RFC 9197 data fields, RFC 9486 IPv6 options).

Layout inserted by INTSource right after the IPv6 header (docs/wire-format.md
gives every byte):

    Hop-by-Hop header   NH=60, len, PadN(0)           4 bytes
      IOAM option 0x31  len, reserved, type 0 (Pre-allocated Trace)
        trace header    namespace, NodeLen|Flags|RemainingLen, trace type
        node data list  max_hops x 68-byte slots, filled from the end
        [PadN 4 bytes]  when max_hops is odd (the header is 8n bytes)
    Destination Options NH=<original>, len, PadN(0)   4 bytes
      IOAM option 0x11  len, reserved, type 3 (E2E): namespace, E2E type,
                        32-bit sequence number, timestamp seconds + nanoseconds

Both options start 4n-aligned from their header, as RFC 9486 requires (Linux
drops a misaligned 0x31 option). Every parser here raises :class:`IOAMError`
on malformed input and never reads past the buffer it is given.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional, Tuple

from .packet import IP6_NH_OFF, IP6_PAYLOAD_OFF, IP6_PLEN_OFF, NH_DSTOPTS, NH_HOPOPTS

OPT_PAD1 = 0x00
OPT_PADN = 0x01
OPT_IOAM_HBH = 0x31          # RFC 9486, Hop-by-Hop option (may change en route)
OPT_IOAM_DST = 0x11          # RFC 9486, Destination option
IOAM_PREALLOC_TRACE = 0
IOAM_INCREMENTAL_TRACE = 1
IOAM_E2E = 3

#: Private-use IOAM namespace (RFC 9197 §7.3: 0x8000-0xFFFF); INTSource/INTTransit namespace_id change it.
DEFAULT_NAMESPACE = 0x8CC0
#: Opaque state snapshot schemas (docs/wire-format.md): v5 is written; v4 (without the port's
#: reconfiguration schedule, 36 bytes), v3 (without the packet's queue among its port's either,
#: 32 bytes), v2 (without this flow's own counters either, 28 bytes) and v1 (without rx_drops
#: either, 24 bytes) still decoded.
SCHEMA_INTCC_V1 = 0x1CC001
SCHEMA_INTCC_V2 = 0x1CC002
SCHEMA_INTCC_V3 = 0x1CC003
SCHEMA_INTCC_V4 = 0x1CC004
SCHEMA_INTCC_V5 = 0x1CC005

# Trace type bits, bit 0 = most significant of the 24-bit field.
def _bit(n: int) -> int:
    return 1 << (23 - n)

TT_HOPLIM_NODEID = _bit(0)
TT_IF_IDS = _bit(1)
TT_TS_SEC = _bit(2)
TT_TS_FRAC = _bit(3)
TT_TRANSIT_DELAY = _bit(4)
TT_NS_DATA = _bit(5)
TT_QUEUE_DEPTH = _bit(6)
TT_CHECKSUM = _bit(7)
TT_HOPLIM_NODEID_WIDE = _bit(8)
TT_IF_IDS_WIDE = _bit(9)
TT_NS_DATA_WIDE = _bit(10)
TT_BUFFER_OCCUPANCY = _bit(11)
TT_OPAQUE = _bit(22)
#: (bit, field name(s), width in bytes) in wire order for bits 0..11.
_TT_FIELDS = (
    (TT_HOPLIM_NODEID, 4), (TT_IF_IDS, 4), (TT_TS_SEC, 4), (TT_TS_FRAC, 4),
    (TT_TRANSIT_DELAY, 4), (TT_NS_DATA, 4), (TT_QUEUE_DEPTH, 4), (TT_CHECKSUM, 4),
    (TT_HOPLIM_NODEID_WIDE, 8), (TT_IF_IDS_WIDE, 8), (TT_NS_DATA_WIDE, 8), (TT_BUFFER_OCCUPANCY, 4),
)
_TT_UNDEFINED = sum(_bit(n) for n in range(12, 22))

INTCC_TRACE_TYPE = (TT_HOPLIM_NODEID | TT_IF_IDS | TT_TS_SEC | TT_TS_FRAC | TT_TRANSIT_DELAY
                    | TT_QUEUE_DEPTH | TT_BUFFER_OCCUPANCY | TT_OPAQUE)
FLAG_OVERFLOW = 0x8          # of the 4-bit flags field

E2E_SEQ64, E2E_SEQ32, E2E_TS_SEC, E2E_TS_FRAC = 0x8000, 0x4000, 0x2000, 0x1000
INTCC_E2E_TYPE = E2E_SEQ32 | E2E_TS_SEC | E2E_TS_FRAC

# Node slot for INTCC_TRACE_TYPE: 7 words of standard fields + opaque header + 8 words.
NODE_FIXED = struct.Struct("!IHHIIIII")            # 28 bytes, NodeLen = 7
OPAQUE_HDR = struct.Struct("!I")                   # length (words) | schema id
INTCC_STATE = struct.Struct("!bBHIIIIIIHHBBHHHHBB")     # 44 bytes, schema v5
INTCC_STATE_V4 = struct.Struct("!bBHIIIIIIHHBBH")  # 36 bytes, schema v4: no reconfiguration
INTCC_STATE_V3 = struct.Struct("!bBHIIIIIIHH")     # 32 bytes, schema v3: no queue index
INTCC_STATE_V2 = struct.Struct("!bBHIIIIII")       # 28 bytes, schema v2: no per-flow counters
INTCC_STATE_V1 = struct.Struct("!bBHIIIII")        # 24 bytes, schema v1: no rx_drops either
NODE_LEN_WORDS = NODE_FIXED.size // 4
NODE_SLOT_BYTES = NODE_FIXED.size + OPAQUE_HDR.size + INTCC_STATE.size   # 76
#: The option's data length is one byte: 2 + trace header 8 + slots <= 255.
MAX_HOPS = (255 - 2 - 8) // NODE_SLOT_BYTES        # 3
_NODE_SLOT = struct.Struct("!IHHIIIII" + "I" + "bBHIIIIIIHHBBHHHHBB")
_OPAQUE_HDR_V5 = ((INTCC_STATE.size // 4) << 24) | SCHEMA_INTCC_V5
#: reconfig_flags: the packet's flow is one a reconfiguration migrates; it took the circuit
RECONFIG_MIGRATED, RECONFIG_ON_CIRCUIT = 0x1, 0x2
#: reconfig_next_ms when no night is scheduled (no reconfiguration at the port)
RECONFIG_NEXT_NONE = 0xFFFF
TRACE_HDR = struct.Struct("!HBBI")                 # namespace, nodelen|flags, flags|remlen, type<<8
E2E_BODY = struct.Struct("!BBHHIII")               # reserved, type, ns, e2e type, seq, sec, ns
HBH_PREFIX_BYTES = 4 + 4 + TRACE_HDR.size          # NH,len,PadN + option hdr + trace hdr
DOH_BYTES = 24
TRANSIT_DELAY_MAX = (1 << 31) - 1
NONE_U32 = 0xFFFFFFFF


class IOAMError(ValueError):
    """Malformed or unsupported IOAM data; the message says what is wrong."""


@dataclass
class IntccState:
    """The opaque state snapshot under SCHEMA_INTCC_V1 (fields IOAM has no slot for)."""
    rssi_dbm: int = -128            # -128: not a wireless link
    mcs: int = 0xFF                 # 0xFF: not a wireless link
    flow_count: int = 0
    data_rate_kbps: int = 0
    queue_drops: int = 0            # cumulative, wraps at 2^32
    link_losses: int = 0            # cumulative, wraps at 2^32
    arrival_rate_pps: int = 0
    queue_capacity_bytes: int = 0
    rx_drops: Optional[int] = 0     # cumulative frames the node's receive rings dropped (wraps); None: v1
    # this packet's flow's own queue drops and link losses at this node (16 bits, wrap);
    # None: schema v1/v2, which carry only the node's totals
    flow_queue_drops: Optional[int] = 0
    flow_link_losses: Optional[int] = 0
    # the packet's queue among its egress port's (RTT separation's K queues under DRR): its
    # index, how many there are (1: one FIFO; 0: no queue known) and the scheduler's weight of
    # it; None: schema v1-v3
    queue_index: Optional[int] = 0
    queue_count: Optional[int] = 1
    queue_weight: Optional[int] = 1
    # the egress port's path reconfiguration (int_node/elements/reconfig.py): its period and
    # downtime (0: none), the ms until the next night starts (RECONFIG_NEXT_NONE: none), the
    # migrations so far (wraps at 256) and RECONFIG_* flags of this packet; None: schema v1-v4
    reconfig_period_ms: Optional[int] = 0
    reconfig_downtime_ms: Optional[int] = 0
    reconfig_next_ms: Optional[int] = RECONFIG_NEXT_NONE
    reconfig_epoch: Optional[int] = 0
    reconfig_flags: Optional[int] = 0

    def pack(self) -> bytes:
        return INTCC_STATE.pack(self.rssi_dbm, self.mcs, self.flow_count, self.data_rate_kbps,
                                self.queue_drops & NONE_U32, self.link_losses & NONE_U32,
                                self.arrival_rate_pps, self.queue_capacity_bytes, (self.rx_drops or 0) & NONE_U32,
                                (self.flow_queue_drops or 0) & 0xFFFF, (self.flow_link_losses or 0) & 0xFFFF,
                                (self.queue_index or 0) & 0xFF, (self.queue_count or 0) & 0xFF,
                                (self.queue_weight or 0) & 0xFFFF, (self.reconfig_period_ms or 0) & 0xFFFF,
                                (self.reconfig_downtime_ms or 0) & 0xFFFF,
                                RECONFIG_NEXT_NONE if self.reconfig_next_ms is None else self.reconfig_next_ms & 0xFFFF,
                                (self.reconfig_epoch or 0) & 0xFF, (self.reconfig_flags or 0) & 0xFF)


_NO_RECONFIG = (0, 0, RECONFIG_NEXT_NONE, 0, 0)


# -- building --------------------------------------------------------------------
def build_hbh(next_header: int, max_hops: int, namespace_id: int = DEFAULT_NAMESPACE) -> bytes:
    """A Hop-by-Hop header with an empty pre-allocated trace for ``max_hops`` nodes."""
    if not 1 <= max_hops <= MAX_HOPS:
        raise ValueError(f"max_hops must be 1..{MAX_HOPS} (the option data length is one byte)")
    space = max_hops * NODE_SLOT_BYTES
    opt_len = 2 + TRACE_HDR.size + space
    total = HBH_PREFIX_BYTES + space
    tail = bytes((OPT_PADN, 2, 0, 0)) if total % 8 else b""    # the header is 8n bytes long
    total += len(tail)
    return (bytes((next_header, total // 8 - 1, OPT_PADN, 0, OPT_IOAM_HBH, opt_len, 0, IOAM_PREALLOC_TRACE))
            + TRACE_HDR.pack(namespace_id, NODE_LEN_WORDS << 3, space // 4, INTCC_TRACE_TYPE << 8)
            + bytes(space) + tail)


def inserted_bytes(max_hops: int) -> int:
    """Bytes INTSource adds to every packet for a trace of ``max_hops`` nodes: the
    Hop-by-Hop header (its pre-allocated slots are on the wire filled or not) and the
    Destination Options header."""
    return len(build_hbh(0, max_hops)) + DOH_BYTES


def build_doh(next_header: int, seq: int, ts_ns: int, namespace_id: int = DEFAULT_NAMESPACE) -> bytes:
    """A Destination Options header carrying the IOAM E2E option."""
    sec, frac = divmod(ts_ns, 1_000_000_000)
    return (bytes((next_header, DOH_BYTES // 8 - 1, OPT_PADN, 0, OPT_IOAM_DST, E2E_BODY.size))
            + E2E_BODY.pack(0, IOAM_E2E, namespace_id, INTCC_E2E_TYPE, seq & NONE_U32,
                            sec & NONE_U32, frac))


def pack_node(buf, off, hop_limit, node_id, ingress_if, egress_if, ts_ns, transit_delay_ns,
              qdepth_bytes, occupancy, rssi_dbm, mcs, flow_count, rate_kbps, qdrops,
              link_losses, arrival_pps, capacity_bytes, rx_drops=0, flow_qdrops=0, flow_link_losses=0,
              queue_index=0, queue_count=1, queue_weight=1, reconfig=None) -> None:
    # Masks rather than clamps: this runs per packet; callers pass in-range ints
    # (rssi_dbm in -128..127), and cumulative counters wrap as documented. ``reconfig``:
    # (period ms, downtime ms, next night in ms, epoch, flags) of the port, None: none there.
    sec, frac = divmod(ts_ns, 1_000_000_000)
    period_ms, downtime_ms, next_ms, epoch, flags = reconfig or _NO_RECONFIG
    _NODE_SLOT.pack_into(buf, off, ((hop_limit & 0xFF) << 24) | (node_id & 0xFFFFFF),
                         ingress_if & 0xFFFF, egress_if & 0xFFFF, sec & NONE_U32, frac,
                         transit_delay_ns if 0 <= transit_delay_ns <= TRANSIT_DELAY_MAX else (1 << 31),
                         qdepth_bytes & NONE_U32, occupancy & NONE_U32, _OPAQUE_HDR_V5,
                         rssi_dbm, mcs & 0xFF, flow_count & 0xFFFF, rate_kbps & NONE_U32,
                         qdrops & NONE_U32, link_losses & NONE_U32, arrival_pps & NONE_U32,
                         capacity_bytes & NONE_U32, rx_drops & NONE_U32, flow_qdrops & 0xFFFF,
                         flow_link_losses & 0xFFFF, queue_index & 0xFF, queue_count & 0xFF, queue_weight & 0xFFFF,
                         period_ms & 0xFFFF, downtime_ms & 0xFFFF, next_ms & 0xFFFF, epoch & 0xFF, flags & 0xFF)


# -- locating ----------------------------------------------------------------------
def _options(buf, start: int, end: int):
    """Yield (type, offset of type byte, data offset, data length) of each option."""
    off = start
    while off < end:
        t = buf[off]
        if t == OPT_PAD1:
            off += 1
            continue
        if off + 2 > end:
            raise IOAMError(f"option header truncated at offset {off}")
        ln = buf[off + 1]
        if off + 2 + ln > end:
            raise IOAMError(f"option 0x{t:02x} at offset {off} runs past its header ({ln} bytes)")
        yield t, off, off + 2, ln
        off += 2 + ln


def _ext_header(buf, off: int) -> Tuple[int, int]:
    """(next header, length in bytes) of the extension header at ``off``."""
    if off + 2 > len(buf):
        raise IOAMError("extension header truncated")
    length = (buf[off + 1] + 1) * 8
    if off + length > len(buf):
        raise IOAMError(f"extension header of {length} bytes runs past the packet")
    return buf[off], length


def find_trace(frame) -> Optional[int]:
    """Offset of the pre-allocated trace header (namespace id) in an Ethernet
    frame, None if the packet carries no IOAM trace. Validates lengths."""
    if len(frame) < IP6_PAYLOAD_OFF or frame[IP6_NH_OFF] != NH_HOPOPTS:
        return None
    hbh = IP6_PAYLOAD_OFF
    _, length = _ext_header(frame, hbh)
    for t, toff, doff, dlen in _options(frame, hbh + 2, hbh + length):
        if t != OPT_IOAM_HBH:
            continue
        if (toff - hbh) & 3:
            raise IOAMError(f"IOAM option not 4n-aligned (offset {toff - hbh} in its header)")
        if dlen < 2 or frame[doff + 1] != IOAM_PREALLOC_TRACE:
            raise IOAMError("IOAM option is not a pre-allocated trace")
        if dlen < 2 + TRACE_HDR.size or (dlen - 2 - TRACE_HDR.size) % 4:
            raise IOAMError(f"trace option length {dlen} is not 10 + 4n")
        trace = doff + 2
        remaining = frame[trace + 3] & 0x7F
        if remaining * 4 > dlen - 2 - TRACE_HDR.size:
            raise IOAMError(f"RemainingLen {remaining} exceeds the node data space")
        return trace
    return None


def stamp_default(frame, trace_off: int, *values) -> bool:
    """Fill this node's slot (``values`` as for :func:`pack_node` after the
    offset) if the trace is of INTCC_TRACE_TYPE and there is room. Returns
    False when the Overflow flag had to be set instead. The caller has
    validated the trace with :func:`find_trace`."""
    hdr2 = frame[trace_off + 2]
    remaining = frame[trace_off + 3] & 0x7F
    need = NODE_SLOT_BYTES // 4
    if remaining < need:
        frame[trace_off + 2] = hdr2 | (FLAG_OVERFLOW >> 1)
        return False
    remaining -= need
    pack_node(frame, trace_off + TRACE_HDR.size + remaining * 4, *values)
    frame[trace_off + 3] = (frame[trace_off + 3] & 0x80) | remaining
    return True


def trace_is_default(frame, trace_off: int) -> bool:
    return (frame[trace_off + 2] >> 3) == NODE_LEN_WORDS and \
        int.from_bytes(frame[trace_off + 4:trace_off + 7], "big") == INTCC_TRACE_TYPE


# -- inserting and stripping --------------------------------------------------------------
class Inserter:
    """Inserts the INT headers from a prebuilt template: per packet, one slice
    insertion and three small writes (the source runs this for every packet)."""

    def __init__(self, max_hops: int, namespace_id: int = DEFAULT_NAMESPACE):
        hbh = build_hbh(NH_DSTOPTS, max_hops, namespace_id)
        self.template = hbh + build_doh(0, 0, 0, namespace_id)
        self.doh_off = IP6_PAYLOAD_OFF + len(hbh)
        self.size = len(self.template)

    def insert(self, frame: bytearray, seq: int, ts_ns: int) -> bytearray:
        """Insert in place (the frame grows); the caller checks there is no HbH yet."""
        plen = len(frame) - IP6_PAYLOAD_OFF + self.size
        if plen > 0xFFFF:
            raise IOAMError("payload would exceed 65535 bytes")
        nh = frame[IP6_NH_OFF]
        frame[IP6_PAYLOAD_OFF:IP6_PAYLOAD_OFF] = self.template
        frame[IP6_NH_OFF] = NH_HOPOPTS
        _U16.pack_into(frame, IP6_PLEN_OFF, plen)
        d = self.doh_off
        frame[d] = nh
        sec, frac = divmod(ts_ns, 1_000_000_000)
        _E2E_DATA.pack_into(frame, d + 12, seq & NONE_U32, sec & NONE_U32, frac)
        return frame


_U16 = struct.Struct("!H")
_E2E_DATA = struct.Struct("!III")


def insert_int(frame, max_hops: int, seq: int, ts_ns: int,
               namespace_id: int = DEFAULT_NAMESPACE) -> bytearray:
    """A new frame with the HbH trace and the DOH E2E option after the IPv6 header."""
    return Inserter(max_hops, namespace_id).insert(bytearray(frame), seq, ts_ns)


@dataclass
class Stripped:
    frame: bytearray
    trace_raw: bytes            # trace header + node data, as on the wire
    e2e_raw: bytes              # E2E option body, empty if there was none


def strip_int(frame) -> Stripped:
    """Remove the IOAM Hop-by-Hop header and, if it follows, the Destination
    Options header carrying the IOAM E2E option; restore next header and
    payload length. Raises IOAMError if the headers are inconsistent."""
    trace_off = find_trace(frame)
    if trace_off is None:
        raise IOAMError("no IOAM trace in this packet")
    hbh = IP6_PAYLOAD_OFF
    nh, hbh_len = _ext_header(frame, hbh)
    opt_len = frame[trace_off - 3]
    trace_raw = bytes(frame[trace_off:trace_off + opt_len - 2])
    cut_end, e2e_raw = hbh + hbh_len, b""
    if nh == NH_DSTOPTS:
        nh2, doh_len = _ext_header(frame, cut_end)
        for t, _, doff, dlen in _options(frame, cut_end + 2, cut_end + doh_len):
            if t == OPT_IOAM_DST and dlen >= 2 and frame[doff + 1] == IOAM_E2E:
                e2e_raw = bytes(frame[doff:doff + dlen])
                nh, cut_end = nh2, cut_end + doh_len
                break
    removed = cut_end - hbh
    plen = struct.unpack_from("!H", frame, IP6_PLEN_OFF)[0]
    if plen < removed or IP6_PAYLOAD_OFF + plen > len(frame):
        raise IOAMError("payload length inconsistent with the extension headers")
    out = bytearray(frame[:hbh])
    out += frame[cut_end:IP6_PAYLOAD_OFF + plen]
    out[IP6_NH_OFF] = nh
    struct.pack_into("!H", out, IP6_PLEN_OFF, plen - removed)
    return Stripped(out, trace_raw, e2e_raw)
