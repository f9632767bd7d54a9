"""The packet object passed between elements, and IPv6 header helpers.

A packet is a mutable Ethernet frame plus a few annotations (Click calls them
annotations too). Offsets are fixed for untagged Ethernet + IPv6, which is all
the testbed carries; anything else is classified as "other" before it gets here.
"""
from __future__ import annotations

import hashlib
import struct
import time

ETH_HDR_BYTES = 14
ETHERTYPE_IPV6 = 0x86DD
IPV6_HDR_BYTES = 40
IP6_OFF = ETH_HDR_BYTES                 # start of the IPv6 header in a frame
IP6_PLEN_OFF = IP6_OFF + 4              # payload length (16 bit)
IP6_NH_OFF = IP6_OFF + 6                # next header
IP6_HLIM_OFF = IP6_OFF + 7              # hop limit
IP6_SRC_OFF = IP6_OFF + 8
IP6_DST_OFF = IP6_OFF + 24
IP6_PAYLOAD_OFF = IP6_OFF + IPV6_HDR_BYTES

NH_HOPOPTS = 0
NH_TCP = 6
NH_UDP = 17
NH_ROUTING = 43
NH_FRAGMENT = 44
NH_ICMPV6 = 58
NH_NONE = 59
NH_DSTOPTS = 60
#: Extension headers whose length is (hdr_ext_len + 1) * 8 bytes.
EXT_HEADERS_8 = (NH_HOPOPTS, NH_ROUTING, NH_DSTOPTS)

_U16 = struct.Struct("!H")
_BYTE = [bytes((i,)) for i in range(256)]


class Packet:
    __slots__ = ("data", "rx_ns", "in_port", "flow_id", "drops_seen", "queue", "due_ns")

    def __init__(self, data: bytearray, rx_ns: int = 0, in_port: int = 0):
        self.data = data
        #: Arrival time, wall clock (CLOCK_REALTIME) nanoseconds.
        self.rx_ns = rx_ns or time.time_ns()
        #: Index of the FromDevice this packet came in on (node-local).
        self.in_port = in_port
        #: Cached flow key (bytes) once an element computed it.
        self.flow_id = None
        #: (the queue's drops, its flow's drops there) when it entered its egress queue
        self.drops_seen = None
        #: the last Queue it entered (where a scheduler serves several, INT reports this one)
        self.queue = None
        #: when the emulated link upstream had it due here (a Delay's release, a LinkShaper's
        #: last bit out, a Reconfigure's day start), monotonic ns; 0: not known (its arrival,
        #: rx_ns, is). A node's loop runs late at times: the next link's delay runs from this
        #: time and an element keeping a schedule (Reconfigure) meets the packet at it, not at
        #: the moment the loop got round to it
        self.due_ns = 0

    def __len__(self):
        return len(self.data)


def is_ipv6_frame(data) -> bool:
    """Ethernet frame carrying a plausible IPv6 header whose payload fits."""
    if len(data) < IP6_PAYLOAD_OFF:
        return False
    if data[12] != 0x86 or data[13] != 0xDD or (data[IP6_OFF] >> 4) != 6:
        return False
    return IP6_PAYLOAD_OFF + _U16.unpack_from(data, IP6_PLEN_OFF)[0] <= len(data)


def upper_layer(data):
    """Walk the extension header chain: (protocol, offset) of the upper layer.

    Returns (None, None) when the chain runs past the frame (malformed).
    """
    nh = data[IP6_NH_OFF]
    off = IP6_PAYLOAD_OFF
    end = len(data)
    for _ in range(8):  # bounded: a chain longer than 8 headers is not ours
        if nh in EXT_HEADERS_8:
            if off + 2 > end:
                return None, None
            nh, off = data[off], off + (data[off + 1] + 1) * 8
        elif nh == NH_FRAGMENT:
            if off + 8 > end:
                return None, None
            nh, off = data[off], off + 8
        else:
            return (nh, off) if off <= end else (None, None)
    return None, None


def flow_key(data) -> bytes:
    """5-tuple key (src, dst, proto, sport, dport) as bytes; ports 0 if absent."""
    nh = data[IP6_NH_OFF]
    if (nh == NH_TCP or nh == NH_UDP) and len(data) >= IP6_PAYLOAD_OFF + 4:
        # per-packet fast path (no extension headers): one join, no header walk
        return b"".join((data[IP6_SRC_OFF:IP6_PAYLOAD_OFF], _BYTE[nh],
                         data[IP6_PAYLOAD_OFF:IP6_PAYLOAD_OFF + 4]))
    proto, off = upper_layer(data)
    if proto in (NH_TCP, NH_UDP) and off + 4 <= len(data):
        ports = bytes(data[off:off + 4])
    else:
        ports = b"\0\0\0\0"
    return bytes(data[IP6_SRC_OFF:IP6_PAYLOAD_OFF]) + bytes((proto or 0,)) + ports


def key_hash(key: bytes) -> str:
    """The flow id of a key (telemetry.flowid.flow_id_from_key, which checks the key):
    16 hex digits, 64 bits of BLAKE2b."""
    return hashlib.blake2b(key, digest_size=8).hexdigest()


def flow_tuple(key: bytes) -> tuple:
    """(src, dst, proto, sport, dport) of a key built by :func:`flow_key`, addresses as text."""
    import ipaddress
    return (str(ipaddress.IPv6Address(bytes(key[0:16]))), str(ipaddress.IPv6Address(bytes(key[16:32]))),
            key[32], int.from_bytes(key[33:35], "big"), int.from_bytes(key[35:37], "big"))
