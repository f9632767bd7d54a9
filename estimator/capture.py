"""Observe flow 1 from the sender side only: a packet capture at the sender's
interface (as paper 002 does at s1), turned into a ``SenderTrace``.

Why packets and not socket statistics: a capture works for every CCA (kernel
bbr/cubic/reno, Vegas or anything on the CCP datapath) without touching the
sender's stack, gives every ACK (``ss``/TCP_INFO poll and miss most of them),
and the same parser serves recorded and live data.

From the capture, per flow (the 4-tuple that sent the most payload):
- every data segment sent: time, and whether it is a retransmission (its end
  sequence number is not beyond the highest one sent before);
- every ACK received: time, newly acknowledged bytes, and an RTT sample:
  time since the first transmission of the segment it acknowledges, skipped for
  retransmitted segments (Karn); ACKs without a sample carry the last one.

Only headers are needed: ``tcpdump -s 128``. Reads classic pcap (Ethernet,
IPv4/IPv6); truncated files and foreign formats give a TraceError.
"""
from __future__ import annotations

import bisect
import ipaddress
import os
import signal
import struct
import subprocess
from collections import defaultdict

import numpy as np

from .features import SenderTrace, TraceError

PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
              b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
LINKTYPE_ETHERNET = 1


def read_pcap(path: str):
    """Yield (time_s, frame bytes) from a classic pcap file."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) == 0:
            raise TraceError(f"{path}: empty capture")
        if len(head) < 24 or head[:4] not in PCAP_MAGIC:
            raise TraceError(f"{path}: not a pcap file (pcapng? capture with 'tcpdump -w' or convert with editcap -F pcap)")
        endian, unit = PCAP_MAGIC[head[:4]]
        linktype = struct.unpack(endian + "I", head[20:24])[0]
        if linktype != LINKTYPE_ETHERNET:
            raise TraceError(f"{path}: link type {linktype}, only Ethernet (1) is read")
        rec = struct.Struct(endian + "IIII")
        while True:
            h = f.read(16)
            if not h:
                return
            if len(h) < 16:
                raise TraceError(f"{path}: truncated record header")
            sec, frac, caplen, _ = rec.unpack(h)
            data = f.read(caplen)
            if len(data) < caplen:
                raise TraceError(f"{path}: truncated packet record")
            yield sec + frac * unit, data


def parse_tcp(frame: bytes):
    """(src, dst, sport, dport, seq, ack, flags, payload_len) or None for non-TCP frames."""
    if len(frame) < 14:
        return None
    etype = struct.unpack_from("!H", frame, 12)[0]
    off = 14
    if etype == 0x8100 and len(frame) >= 18:           # one VLAN tag
        etype = struct.unpack_from("!H", frame, 16)[0]
        off = 18
    if etype == 0x86DD:
        if len(frame) < off + 40 or frame[off + 6] != 6:   # TCP right after the fixed header only
            return None
        plen = struct.unpack_from("!H", frame, off + 4)[0]
        src, dst = frame[off + 8:off + 24], frame[off + 24:off + 40]
        tcp = off + 40
        ip_payload = plen
    elif etype == 0x0800:
        if len(frame) < off + 20 or frame[off + 9] != 6:
            return None
        ihl = (frame[off] & 0x0F) * 4
        total = struct.unpack_from("!H", frame, off + 2)[0]
        src, dst = frame[off + 12:off + 16], frame[off + 16:off + 20]
        tcp = off + ihl
        ip_payload = total - ihl
    else:
        return None
    if len(frame) < tcp + 20:
        return None
    sport, dport, seq, ack, doff_flags = struct.unpack_from("!HHIIH", frame, tcp)
    thl = (doff_flags >> 12) * 4
    return (bytes(src), bytes(dst), sport, dport, seq, ack, doff_flags & 0x3F, max(0, ip_payload - thl))


def _unwrap(x: int, ref: int) -> int:
    """32-bit sequence number nearest to the unwrapped reference."""
    base = ref - (ref & 0xFFFFFFFF) + x
    if base - ref > 1 << 31:
        base -= 1 << 32
    elif ref - base > 1 << 31:
        base += 1 << 32
    return base


def sender_trace(path: str, sender: str | None = None) -> SenderTrace:
    """The SenderTrace of the flow that sent the most payload (from ``sender`` if given)."""
    pkts = [(t, p) for t, fr in read_pcap(path) if (p := parse_tcp(fr)) is not None]
    if not pkts:
        raise TraceError(f"{path}: no TCP packets")
    sender_b = ipaddress.ip_address(sender).packed if sender else None
    volume = defaultdict(int)
    for _, p in pkts:
        if p[7] and (sender_b is None or p[0] == sender_b):
            volume[(p[0], p[1], p[2], p[3])] += p[7]
    if not volume:
        raise TraceError(f"{path}: no TCP flow carried data" + (f" from {sender}" if sender else ""))
    src, dst, sport, dport = max(volume, key=volume.get)

    send_t, retrans = [], []
    seg_end, seg_time, seg_retx = [], [], []     # first transmissions, by end sequence (sorted)
    ack_t, acked, rtt = [], [], []
    high = None          # highest end sequence sent
    snd_una = None
    last_rtt = None
    for t, (s, d, sp, dp, seq, ack, flags, plen) in pkts:
        if (s, d, sp, dp) == (src, dst, sport, dport) and plen:
            ref = high if high is not None else seq
            start = _unwrap(seq, ref)
            if snd_una is None:
                snd_una = start         # the capture's first data: everything before is acked
            end = start + plen
            is_retx = high is not None and end <= high
            send_t.append(t)
            retrans.append(is_retx)
            if is_retx:
                i = bisect.bisect_left(seg_end, end)
                if i < len(seg_end) and seg_end[i] == end:
                    seg_retx[i] = True
            else:
                seg_end.append(end)
                seg_time.append(t)
                seg_retx.append(False)
                high = end
        elif (s, d, sp, dp) == (dst, src, dport, sport) and flags & 0x10 and high is not None:
            a = _unwrap(ack, high)
            newly = max(0, a - snd_una)
            if newly:
                snd_una = a
                i = bisect.bisect_right(seg_end, a) - 1      # highest segment this ACK covers
                if i >= 0 and not seg_retx[i] and seg_end[i] <= a and t > seg_time[i]:
                    last_rtt = t - seg_time[i]
            if last_rtt is None:
                continue                                       # no RTT known yet: not usable
            ack_t.append(t)
            acked.append(newly)
            rtt.append(last_rtt)
    if len(ack_t) < 2:
        raise TraceError(f"{path}: the flow has {len(ack_t)} usable ACKs (capture too short or one-way?)")
    return SenderTrace(np.array(ack_t), np.array(rtt), np.array(acked, dtype=float), np.array(send_t),
                       np.array(retrans, dtype=bool)).validate()


class Capture:
    """tcpdump (headers only) on an interface inside a network namespace."""

    def __init__(self, netns: str, interface: str, path: str, snaplen: int = 128):
        self.cmd = ["ip", "netns", "exec", netns, "tcpdump", "-n", "-s", str(snaplen), "-i", interface,
                    "--immediate-mode", "-U", "-w", path, "tcp"]
        self.path = path
        self.proc = None

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # tcpdump prints "listening on ..." once the socket is open
        line = self.proc.stderr.readline().decode(errors="replace")
        if "listening" not in line:
            self.proc.kill()
            raise TraceError(f"tcpdump did not start: {line.strip() or self.proc.stderr.read().decode()}")
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if not os.path.exists(self.path):
            raise TraceError(f"tcpdump wrote no file {self.path}")
