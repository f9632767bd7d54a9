"""The one mapping from a 5-tuple to the ``<flow-id>`` of ``intcc/v1/flow/<flow-id>``.

The sink computes it from the packet it strips, the sender from its socket
(local address and port = src, remote = dst): both must agree byte for byte, so
addresses are normalised through ``ipaddress`` and the id is a hash of a fixed
37-byte key (src 16, dst 16, proto 1, sport 2, dport 2), the same layout
``int_node.packet.flow_key`` builds from a frame.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Union

from int_node.packet import key_hash

FLOW_ID_RE = re.compile(r"^[0-9a-f]{16}$")
PROTO_TCP, PROTO_UDP = 6, 17
_KEY_BYTES = 37

Address = Union[str, bytes, ipaddress.IPv6Address]


def _addr16(a: Address) -> bytes:
    if isinstance(a, (bytes, bytearray)) and len(a) == 16:
        return bytes(a)
    try:
        ip = ipaddress.ip_address(a if not isinstance(a, (bytes, bytearray)) else a.decode())
    except ValueError:
        raise ValueError(f"not an IP address: {a!r}") from None
    if ip.version == 4:
        ip = ipaddress.IPv6Address(f"::ffff:{ip}")   # IPv4-mapped, so v4 flows get ids too
    return ip.packed


def flow_key(src: Address, dst: Address, proto: int, sport: int, dport: int) -> bytes:
    for name, port in (("sport", sport), ("dport", dport)):
        if not 0 <= int(port) <= 0xFFFF:
            raise ValueError(f"{name} {port} is not a port number")
    if not 0 <= int(proto) <= 0xFF:
        raise ValueError(f"proto {proto} is not an IP protocol number")
    return _addr16(src) + _addr16(dst) + bytes((int(proto),)) + int(sport).to_bytes(2, "big") \
        + int(dport).to_bytes(2, "big")


def flow_id_from_key(key: bytes) -> str:
    """16 hex digits (64 bits of BLAKE2b): short, MQTT-topic safe, collision-free in practice."""
    if len(key) != _KEY_BYTES:
        raise ValueError(f"a flow key has {_KEY_BYTES} bytes, got {len(key)}")
    return key_hash(key)


def flow_id(src: Address, dst: Address, proto: int = PROTO_TCP, sport: int = 0, dport: int = 0) -> str:
    """Flow id of packets from ``src``:``sport`` to ``dst``:``dport``.

    >>> flow_id("2001:db8:1::1", "2001:db8:3::2", 6, 40000, 5201) == \\
    ...     flow_id("2001:db8:1:0::1", "2001:0db8:3::2", 6, 40000, 5201)
    True
    """
    return flow_id_from_key(flow_key(src, dst, proto, sport, dport))
