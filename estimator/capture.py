"""Observe flow 1 from the sender side only: a packet capture at the sender's
interface (as the ML-fairness paper does at s1), turned into a ``SenderTrace``.

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


class _ArrayOf:
    """A numpy copy of an append-only list that converts only what was appended since the
    last read: a live estimate twice a second would otherwise convert the whole flow
    (40-80 ms at 50,000 ACKs, on a host whose INT nodes share the cores). Read-only views."""

    def __init__(self, items: list, dtype):
        self.items = items
        self._buf = np.empty(1024, dtype)
        self._n = 0

    def array(self) -> np.ndarray:
        n = len(self.items)
        if n > len(self._buf):
            grown = np.empty(max(n, 2 * len(self._buf)), self._buf.dtype)
            grown[:self._n] = self._buf[:self._n]
            self._buf = grown
        if n > self._n:
            self._buf[self._n:n] = self.items[self._n:n]
            self._n = n
        view = self._buf[:n]
        view.flags.writeable = False      # later appends go past it; nobody writes into it
        return view


class _Flow:
    """Sender-side state of one TCP flow (data direction src -> dst)."""

    def __init__(self):
        self.payload = 0
        self.send_t, self.retrans = [], []
        self.seg_end, self.seg_time, self.seg_retx = [], [], []   # first transmissions (sorted by end)
        self.ack_t, self.acked, self.rtt = [], [], []
        self._arrays = [_ArrayOf(self.ack_t, float), _ArrayOf(self.rtt, float), _ArrayOf(self.acked, float),
                        _ArrayOf(self.send_t, float), _ArrayOf(self.retrans, bool)]
        self.high = None        # highest end sequence sent
        self.snd_una = None
        self.last_rtt = None

    def data(self, t, seq, plen):
        start = _unwrap(seq, self.high if self.high is not None else seq)
        if self.snd_una is None:
            self.snd_una = start        # the capture's first data: everything before is acked
        end = start + plen
        is_retx = self.high is not None and end <= self.high
        self.payload += plen
        self.send_t.append(t)
        self.retrans.append(is_retx)
        if is_retx:
            i = bisect.bisect_left(self.seg_end, end)
            if i < len(self.seg_end) and self.seg_end[i] == end:
                self.seg_retx[i] = True
        else:
            self.seg_end.append(end)
            self.seg_time.append(t)
            self.seg_retx.append(False)
            self.high = end

    def ack(self, t, ack):
        if self.high is None:
            return
        a = _unwrap(ack, self.high)
        newly = max(0, a - self.snd_una)
        if newly:
            self.snd_una = a
            i = bisect.bisect_right(self.seg_end, a) - 1      # highest segment this ACK covers
            if i >= 0 and not self.seg_retx[i] and t > self.seg_time[i]:
                self.last_rtt = t - self.seg_time[i]           # Karn: never from a retransmission
        if self.last_rtt is None:
            return                                             # no RTT known yet: not usable
        self.ack_t.append(t)
        self.acked.append(newly)
        self.rtt.append(self.last_rtt)

    def trace(self, where: str) -> SenderTrace:
        if len(self.ack_t) < 2:
            raise TraceError(f"{where}: the flow has {len(self.ack_t)} usable ACKs (capture too short or one-way?)")
        return SenderTrace(*(a.array() for a in self._arrays)).validate()


class SenderObserver:
    """Packets in, SenderTrace of the busiest flow (from ``sender`` if given) out; incremental."""

    def __init__(self, sender: str | None = None):
        self.sender = ipaddress.ip_address(sender).packed if sender else None
        self.flows: dict = {}
        self.packets = 0

    def add(self, t: float, p) -> None:
        src, dst, sport, dport, seq, ack, flags, plen = p
        self.packets += 1
        if plen and (self.sender is None or src == self.sender):
            key = (src, dst, sport, dport)
            f = self.flows.get(key)
            if f is None:
                f = self.flows[key] = _Flow()
            f.data(t, seq, plen)
        if flags & 0x10:
            f = self.flows.get((dst, src, dport, sport))
            if f is not None:
                f.ack(t, ack)

    def busiest(self):
        if not self.flows:
            return None, None
        key = max(self.flows, key=lambda k: self.flows[k].payload)
        return key, self.flows[key]

    def flow_tuple(self):
        key, _ = self.busiest()
        if key is None:
            return None
        src, dst, sport, dport = key
        return str(ipaddress.ip_address(src)), str(ipaddress.ip_address(dst)), sport, dport

    def trace(self, where: str = "capture") -> SenderTrace:
        if not self.packets:
            raise TraceError(f"{where}: no TCP packets")
        _, f = self.busiest()
        if f is None:
            raise TraceError(f"{where}: no TCP flow carried data"
                             + (f" from {ipaddress.ip_address(self.sender)}" if self.sender else ""))
        return f.trace(where)


def sender_trace(path: str, sender: str | None = None) -> SenderTrace:
    """The SenderTrace of the flow that sent the most payload (from ``sender`` if given)."""
    obs = SenderObserver(sender)
    for t, fr in read_pcap(path):
        p = parse_tcp(fr)
        if p is not None:
            obs.add(t, p)
    return obs.trace(path)


class PcapTail:
    """Complete records appended to a pcap file being written (tcpdump -U -w)."""

    def __init__(self, path: str):
        self.path = path
        self._f = None
        self._buf = b""
        self._rec = None
        self._unit = 1e-6

    def read_new(self):
        if self._f is None:
            if not os.path.exists(self.path) or os.path.getsize(self.path) < 24:
                return []
            self._f = open(self.path, "rb")
            head = self._f.read(24)
            if head[:4] not in PCAP_MAGIC:
                raise TraceError(f"{self.path}: not a pcap file")
            endian, self._unit = PCAP_MAGIC[head[:4]]
            self._rec = struct.Struct(endian + "IIII")
        self._buf += self._f.read()
        out, off = [], 0
        while len(self._buf) - off >= 16:
            sec, frac, caplen, _ = self._rec.unpack_from(self._buf, off)
            if len(self._buf) - off - 16 < caplen:
                break                       # the rest of this record is not written yet
            out.append((sec + frac * self._unit, self._buf[off + 16:off + 16 + caplen]))
            off += 16 + caplen
        self._buf = self._buf[off:]
        return out


class Capture:
    """tcpdump (headers only) on an interface inside a network namespace (None: this
    process's); ``bpf_filter`` narrows it (tcpdump's syntax, e.g. one flow's ports)."""

    def __init__(self, netns: str | None, interface: str, path: str, snaplen: int = 128, bpf_filter: str = "tcp"):
        self.cmd = (["ip", "netns", "exec", netns] if netns else []) + [
            "tcpdump", "-n", "-s", str(snaplen), "-i", interface, "--immediate-mode", "-U", "-w", path, bpf_filter]
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
