"""Builders shared by the tests: frames, routers on an idle event loop."""
from __future__ import annotations

import contextlib
import gc
import struct

from int_node.eventloop import EventLoop
from int_node.packet import Packet
from int_node.router import Router

MAC_A = bytes.fromhex("020000000001")
MAC_B = bytes.fromhex("020000000002")
IP6_PAYLOAD = 14 + 40      # Ethernet + IPv6 header


def ipv6_frame(payload_len: int = 100, nh: int = 6, src: int = 1, dst: int = 2, hlim: int = 64,
               sport: int = 40000, dport: int = 5201, dst_mac: bytes = MAC_A) -> bytearray:
    l4 = struct.pack("!HH", sport, dport) + bytes(max(0, payload_len - 4))
    l4 = l4[:payload_len]
    ip6 = struct.pack("!IHBB", 6 << 28, len(l4), nh, hlim) + (b"\x20\x01\x0d\xb8" + bytes(11) + bytes((src,))) \
        + (b"\x20\x01\x0d\xb8" + bytes(11) + bytes((dst,)))
    return bytearray(dst_mac + MAC_B + b"\x86\xdd" + ip6 + l4)


@contextlib.contextmanager
def heap_frozen():
    """What the node does after configuring (int_node/node.py): keep the objects
    already alive out of GC scans, here pytest's, whose full collections take
    ~35 ms and would otherwise land inside a timed event-loop run."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def router(config: str) -> Router:
    r = Router(config, loop=EventLoop())
    r.initialize()
    return r


def push(r: Router, element: str, frame, rx_ns: int = 0) -> None:
    r.elements[element].push(0, Packet(bytearray(frame), rx_ns))


def tcp_frame(seq: int, ack: int = 0, flags: int = 0x10, payload_len: int = 0, sport: int = 40000,
              dport: int = 5201, src: int = 1, dst: int = 2) -> bytearray:
    """An Ethernet + IPv6 + TCP frame (20-byte header, zero payload); flags 0x10 = ACK."""
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
    frame = ipv6_frame(len(tcp) + payload_len, nh=6, src=src, dst=dst)
    frame[IP6_PAYLOAD:IP6_PAYLOAD + len(tcp)] = tcp
    return frame
