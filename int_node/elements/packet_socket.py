"""AF_PACKET plumbing for FromDevice and ToDevice (devices.py): the socket in a
namespace, its mmap'ed rings, the filter that refuses what the kernel would hand over
wrongly, and the kernel's counts of what it refused or dropped."""
from __future__ import annotations

import mmap
import socket
import struct

from ..compat import if_nametoindex
from ..element import ConfigError
from ..netns import netns
from ..packet import ETHERTYPE_IPV6

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_VERSION = 10
PACKET_QDISC_BYPASS = 20
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
PACKET_TX_RING = 13
PACKET_LOSS = 14
SO_ATTACH_FILTER = 26
TPACKET_V2 = 1
TP_STATUS_USER = 1
TP_STATUS_AVAILABLE = 0
TP_STATUS_SEND_REQUEST = 1
TX_DATA_OFF = 32            # TPACKET_ALIGN(sizeof(struct tpacket2_hdr)): a TX frame's data
TX_RETRY_NS = (200_000, 100_000_000)   # a flush the kernel refused is tried again: first, longest wait
ETH_P_ALL = 0x0003
TP2_HDR = struct.Struct("=IIIHHII")   # status, len, snaplen, mac, net, sec, nsec
U32 = struct.Struct("=I")
TP_STATS = struct.Struct("=II")       # tp_packets (frames that passed the filter), tp_drops
STATS_EVERY_NS = 100_000_000

# Classic BPF run by the kernel before the ring: refuse an 802.1Q tag still in the
# frame's metadata (sockets bound to all protocols see it), and frames for another
# host (PACKET_OTHERHOST): that is also what a tagged frame (VID != 0) becomes for a
# socket bound to IPv6 once the kernel, finding no VLAN device, strips the tag.
_SKF_AD_OFF = -0x1000
_LD_ANC = 0x30                 # BPF_LD | BPF_B | BPF_ABS on an ancillary offset
_JEQ_K, _RET_K = 0x15, 0x06
PACKET_OTHERHOST = 3
_REFUSAL_FILTER = [
    (_LD_ANC, 0, 0, (_SKF_AD_OFF + 48) & 0xFFFFFFFF),   # A = vlan tag present
    (_JEQ_K, 0, 3, 0),                                    # tagged -> refuse
    (_LD_ANC, 0, 0, (_SKF_AD_OFF + 4) & 0xFFFFFFFF),    # A = packet type
    (_JEQ_K, 1, 0, PACKET_OTHERHOST),                     # another host's -> refuse
    (_RET_K, 0, 0, 0xFFFFFFFF),                           # accept
    (_RET_K, 0, 0, 0),                                    # refuse
]


def attach_refusal_filter(sock) -> None:
    import ctypes
    insns = b"".join(struct.pack("=HBBI", *i) for i in _REFUSAL_FILTER)
    buf = ctypes.create_string_buffer(insns, len(insns))
    fprog = struct.pack("HL", len(_REFUSAL_FILTER), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def rx_packets(devstats, dev: str):
    """The interface's received-frame count from an open /proc/.../net/dev, None if absent."""
    devstats.seek(0)
    for line in devstats.read().decode().splitlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip() == dev:
            return int(rest.split()[1])
    return None


def map_ring(sock, option: int, frame_min_bytes: int, frames: int):
    """A TPACKET_V2 ring (PACKET_RX_RING or PACKET_TX_RING) of at least ``frames`` frames
    of at least ``frame_min_bytes``, mapped: (mmap, frame size, frame count)."""
    frame = 2048
    while frame < frame_min_bytes:
        frame *= 2
    block = max(frame, 1 << 16)
    per_block = block // frame
    blocks = max(1, -(-frames // per_block))
    sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
    sock.setsockopt(SOL_PACKET, option, struct.pack("IIII", block, blocks, frame, blocks * per_block))
    mm = mmap.mmap(sock.fileno(), block * blocks, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    return mm, frame, blocks * per_block


def parse_proto(text: str) -> int:
    t = text.strip().lower()
    if t == "ipv6":
        return ETHERTYPE_IPV6
    if t == "all":
        return ETH_P_ALL
    raise ValueError("proto must be ipv6 or all")


def open_packet_socket(dev: str, proto: int, ns):
    """(socket, ifindex) for ``dev`` in namespace ``ns``."""
    with netns(ns):
        try:
            ifindex = if_nametoindex(dev)
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(proto))
            sock.bind((dev, proto))
        except OSError as exc:
            where = f" in namespace '{ns}'" if ns else ""
            raise ConfigError(f"cannot open interface '{dev}'{where}: {exc.strerror}") from None
    return sock, ifindex
