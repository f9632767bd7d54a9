"""Loss draws keyed by what a packet is, not by when it comes: common random numbers
for paired runs.

An emulated lossy link decides each packet's fate with a uniform draw. Drawing from one
sequential generator gives the k-th packet the same fate in every run with the same seed,
but two runs of different algorithms stop sending the same k-th packet after the first
difference, and from there on their losses are unrelated: at 10-20 % link loss a pair of
20 s runs decorrelates within a second, and the comparison drowns in RTO-backoff luck.

Here the draw is a hash of the seed and the packet's identity within its flow, so the
same transmission meets the same fate in every run whatever else the sender did:

- a TCP segment with data, SYN or FIN: its sequence number relative to the flow's first
  one, and how many times that sequence number was sent before (the 2nd retransmission
  of a segment has its own draw, the same in every run);
- a pure TCP ACK: its acknowledgement number relative to the flow's first, and how many
  times that number was acknowledged before (the n-th duplicate ACK);
- anything else (UDP, ICMP, malformed TCP): its index within its flow.

Flows are told apart by the order they first appear in (ports and initial sequence
numbers differ between runs; the order of connections does not). Every draw is
independent and uniform on [0, 1), so a link losing p of its packets still does.
"""
from __future__ import annotations

import hashlib
import random
import struct

from .packet import IP6_PAYLOAD_OFF, IP6_PLEN_OFF, NH_TCP, flow_key, upper_layer

_KEY = struct.Struct("!IBII")
_U32 = struct.Struct("!I")
_TCP_SYN_FIN = 0x03
_TCP_ACK = 0x10
#: Remembered sequence/ack numbers per flow, and flows, before the oldest half is forgotten
#: (a retransmission of a segment 2^16 segments back does not happen).
MAX_NUMBERS_PER_FLOW = 1 << 16
MAX_FLOWS = 4096


class _Flow:
    __slots__ = ("ordinal", "base_seq", "base_ack", "sent", "acked", "packets")

    def __init__(self, ordinal: int):
        self.ordinal = ordinal
        self.base_seq = self.base_ack = None
        self.sent = {}      # relative seq -> transmissions so far
        self.acked = {}     # relative ack (pure ACKs) -> times so far
        self.packets = 0    # non-TCP: packets so far


def _bump(counts: dict, key: int) -> int:
    n = counts.get(key, 0)
    counts[key] = n + 1
    if len(counts) > MAX_NUMBERS_PER_FLOW:
        for old in list(counts)[:MAX_NUMBERS_PER_FLOW // 2]:
            del counts[old]
    return n


class PacketKeyedDraws:
    """``draw(data) -> float`` in [0, 1): the same for the same transmission in every run
    given ``seed`` (None: a random seed)."""

    def __init__(self, seed: int | str | None = None):
        if seed is None:
            seed = random.SystemRandom().getrandbits(64)
        self._hash_key = hashlib.blake2b(str(seed).encode(), digest_size=16).digest()
        self._flows: dict[bytes, _Flow] = {}
        self._flows_seen = 0    # ordinals are never reused, also after the oldest are forgotten

    def draw(self, data) -> float:
        fkey = flow_key(data)
        flow = self._flows.get(fkey)
        if flow is None:
            if len(self._flows) >= MAX_FLOWS:
                for old in list(self._flows)[:MAX_FLOWS // 2]:
                    del self._flows[old]
            flow = self._flows[fkey] = _Flow(self._flows_seen)
            self._flows_seen += 1
        kind, number, count = self._identity(flow, data)
        digest = hashlib.blake2b(_KEY.pack(flow.ordinal, kind, number, count), digest_size=8,
                                 key=self._hash_key).digest()
        return int.from_bytes(digest, "big") / 2.0 ** 64

    @staticmethod
    def _identity(flow: _Flow, data):
        proto, off = upper_layer(data)
        end = IP6_PAYLOAD_OFF + (data[IP6_PLEN_OFF] << 8 | data[IP6_PLEN_OFF + 1])
        if proto == NH_TCP and off + 20 <= end <= len(data):
            header_bytes = (data[off + 12] >> 4) * 4
            if header_bytes >= 20 and off + header_bytes <= end:
                seq, ack = _U32.unpack_from(data, off + 4)[0], _U32.unpack_from(data, off + 8)[0]
                flags = data[off + 13]
                if flow.base_seq is None:
                    flow.base_seq = seq
                if flow.base_ack is None and flags & _TCP_ACK:
                    flow.base_ack = ack
                if end - off - header_bytes > 0 or flags & _TCP_SYN_FIN or not flags & _TCP_ACK:
                    rel = (seq - flow.base_seq) & 0xFFFFFFFF
                    return 0, rel, _bump(flow.sent, rel)
                rel = (ack - flow.base_ack) & 0xFFFFFFFF
                return 1, rel, _bump(flow.acked, rel)
        flow.packets += 1
        return 2, flow.packets & 0xFFFFFFFF, 0
