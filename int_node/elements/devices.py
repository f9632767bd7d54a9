"""FromDevice / ToDevice: AF_PACKET sockets on an interface, in a namespace.

FromDevice reads through a PACKET_RX_RING (TPACKET_V2, mmap): one wakeup drains
up to ``burst`` frames without a system call per frame, and the kernel's receive
timestamp becomes the packet's arrival time. It ignores frames this host sends
(PACKET_IGNORE_OUTGOING), so a ToDevice on the same interface is not looped back.

ToDevice writes frames into a PACKET_TX_RING and hands the kernel all it holds with
one system call after the node's current round of work (``EventLoop.defer``): a
receive burst of 100 frames leaves in one ``send`` instead of 100. A round's first
frame, with nothing waiting in the ring, leaves at once through a second, plain socket:
at low load a frame does not wait for the round's end (the order holds: the ring's
earlier frames are all with the kernel by then). A frame finding the ring full (the
kernel still sending every slot) is counted in ``send_drops``.

No frame is lost uncounted: the kernel's own count of frames its ring (or receive
buffer) had no room for (PACKET_STATISTICS) is read every 100 ms into
``kernel_drops``; frames the kernel refuses before the ring — another ethertype when
bound to IPv6, another host's unicast address, and 802.1Q-tagged frames (the kernel
would hand them over untagged, as if they were not) — are ``refused``: the
interface's received frames less those the socket saw.
"""
from __future__ import annotations

import errno
import logging
import socket
import time

from ..element import AGNOSTIC, PULL, PUSH, Arg, Element, parse_bool, register
from ..netns import interface_mtu, netns
from ..packet import ETH_HDR_BYTES, ETHERTYPE_IPV6, Packet
from ..units import parse_pos_int
from .packet_socket import (PACKET_IGNORE_OUTGOING, PACKET_LOSS, PACKET_QDISC_BYPASS, PACKET_RX_RING, PACKET_STATISTICS, PACKET_TX_RING, SOL_PACKET, STATS_EVERY_NS, TP2_HDR, TP_STATS, TP_STATUS_AVAILABLE, TP_STATUS_SEND_REQUEST, TP_STATUS_USER, TX_DATA_OFF, TX_RETRY_NS, U32, attach_refusal_filter, map_ring, open_packet_socket, parse_proto, rx_packets)
from .queues import find_upstream_queues

log = logging.getLogger("intcc.node")

@register
class FromDevice(Element):
    """``FromDevice(eth0)``; options ``burst 256`` (frames read per wakeup), ``batch 32``
    (frames pushed on together: one element call per batch where elements take batches;
    1: each frame alone), ``ring true``, ``proto ipv6|all``, ``rcvbuf_bytes 8388608``.
    Push output."""
    n_inputs = (0, 0)
    output_kind = PUSH
    ARGS = (Arg("devname", str), Arg("burst", parse_pos_int, 256), Arg("ring", parse_bool, True),
            Arg("proto", parse_proto, ETHERTYPE_IPV6), Arg("rcvbuf_bytes", parse_pos_int, 8 << 20),
            Arg("ring_frames", parse_pos_int, 4096), Arg("batch", parse_pos_int, 32))
    counter_names = ("packets", "bytes", "truncated", "element_errors", "ring_resyncs", "kernel_drops",
                     "refused")
    RESYNC_AFTER_NS = 2_000_000

    def initialize(self):
        self._empty_since_ns = 0
        self.sock, self.ifindex = open_packet_socket(self.devname, self.proto, self.router.netns)
        attach_refusal_filter(self.sock)
        self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        # /proc/thread-self/net follows this thread's namespace when opened, and keeps it
        with netns(self.router.netns):
            self._devstats = open("/proc/thread-self/net/dev", "rb", buffering=0)
        self._seen_pkts = 0                 # tp_packets summed: frames the socket accepted
        self._rx_base = None                # interface rx count minus _seen_pkts at the first read
        self._read_kernel_stats()
        self._stats_timer = self.router.loop.timer(self._poll_kernel_stats)
        self._stats_timer.schedule_after(STATS_EVERY_NS)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, 33, self.rcvbuf_bytes)  # SO_RCVBUFFORCE
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf_bytes)
        self.sock.setblocking(False)
        self.mtu = interface_mtu(self.sock, self.devname)
        self.mac = self.sock.getsockname()[4]
        self.port_id = self.ifindex   # IOAM ingress interface id
        self._mm = None
        if self.ring:
            self._setup_ring()
            self.router.loop.add_reader(self.sock.fileno(), self._read_ring)
        else:
            self._buf = bytearray(65536)
            self._bufmv = memoryview(self._buf)
            self.router.loop.add_reader(self.sock.fileno(), self._read_plain)
        self._err_logged = 0

    def _read_kernel_stats(self) -> None:
        """Fold the kernel's counts in (reading PACKET_STATISTICS resets them)."""
        if getattr(self, "sock", None) is None:
            return
        seen, drops = TP_STATS.unpack(self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, TP_STATS.size))
        self._seen_pkts += seen                 # the kernel's tp_packets includes its drops
        self.kernel_drops += drops
        rx = rx_packets(self._devstats, self.devname)
        if rx is not None:
            if self._rx_base is None:
                self._rx_base = rx - self._seen_pkts
            self.refused = max(0, rx - self._rx_base - self._seen_pkts)

    def _poll_kernel_stats(self):
        self._read_kernel_stats()
        self._stats_timer.schedule_after(STATS_EVERY_NS)

    def counters(self):
        self._read_kernel_stats()
        return super().counters()

    def _setup_ring(self):
        self._mm, self._frame_size, self._nframes = map_ring(
            self.sock, PACKET_RX_RING, self.mtu + ETH_HDR_BYTES + 96, self.ring_frames)
        self._idx = 0
        self._mv = memoryview(self._mm)

    def _deliver(self, batch):
        try:
            out = self._out[0]
            out[0].push_batch(out[1], batch)
        except Exception:  # elements count their packets' errors; this is the last resort
            self.element_errors += 1
            if self._err_logged < 5:
                self._err_logged += 1
                log.exception("%s: element error on a batch of %d packets (counted once)", self.name, len(batch))

    def _read_ring(self):
        mv, fs, nf, idx = self._mv, self._frame_size, self._nframes, self._idx
        unpack, set_status, port = TP2_HDR.unpack_from, U32.pack_into, self.port_id
        batch, batch_max = [], self.batch
        for n in range(self.burst):
            off = idx * fs
            status, length, snap, mac, _, sec, nsec = unpack(mv, off)
            if not status & TP_STATUS_USER:
                if n == 0:
                    idx = self._woken_empty(idx)
                break
            data = bytearray(mv[off + mac:off + mac + snap])
            set_status(mv, off, 0)
            idx = idx + 1 if idx + 1 < nf else 0
            if snap < length:
                self.truncated += 1
                continue
            self.packets += 1
            self.bytes += snap
            batch.append(Packet(data, sec * 1_000_000_000 + nsec, port))
            if len(batch) >= batch_max:
                self._idx = idx
                self._deliver(batch)
                batch = []
            self._empty_since_ns = 0
        self._idx = idx
        if batch:
            self._deliver(batch)

    def _woken_empty(self, idx: int) -> int:
        """The socket polls readable (the kernel's newest frame is ours) but the
        frame we expect next is still the kernel's. A frame another CPU is still
        copying clears this in microseconds; after an overrun of the ring we
        have seen the two ends stay apart for good (the node spun at 100 % and
        forwarded nothing more). Past RESYNC_AFTER_NS, continue at the oldest
        frame the kernel handed over, and count it."""
        now = time.monotonic_ns()
        if not self._empty_since_ns:
            self._empty_since_ns = now
            return idx
        if now - self._empty_since_ns < self.RESYNC_AFTER_NS:
            return idx
        self._empty_since_ns = 0
        mv, fs, nf, unpack = self._mv, self._frame_size, self._nframes, U32.unpack_from
        for step in range(1, nf):
            j = (idx + step) % nf
            if unpack(mv, j * fs)[0] & TP_STATUS_USER:
                self.ring_resyncs += 1
                log.warning("%s: receive ring out of step, resynchronised %d frames ahead (counted)",
                            self.name, step)
                return j
        return idx

    def _read_plain(self):
        recv_into, mv, port = self.sock.recv_into, self._bufmv, self.port_id
        batch, batch_max = [], self.batch
        for _ in range(self.burst):
            try:
                n = recv_into(self._buf, 0, socket.MSG_TRUNC)
            except BlockingIOError:
                break
            if n > len(self._buf):
                self.truncated += 1
                continue
            self.packets += 1
            self.bytes += n
            batch.append(Packet(bytearray(mv[:n]), time.time_ns(), port))
            if len(batch) >= batch_max:
                self._deliver(batch)
                batch = []
        if batch:
            self._deliver(batch)

    def cleanup(self):
        if getattr(self, "sock", None) is not None:
            self._read_kernel_stats()           # the final counters include the last drops
            self._stats_timer.cancel()
            self._devstats.close()
            self.router.loop.remove_reader(self.sock.fileno())
            if self._mm is not None:
                self._mv.release()
                self._mm.close()
            self.sock.close()
            self.sock = None


@register
class ToDevice(Element):
    """``ToDevice(eth1)`` sends frames out of an interface. Push input, or pull
    input behind a Queue (then it drains up to ``burst`` frames per wakeup).
    Frames larger than the interface MTU are dropped and counted (``too_big``);
    a full device backlog or transmit ring is counted in ``send_drops``, frames shorter
    than an Ethernet header in ``runts``; ``sent_at_once`` (of ``packets``): frames that
    began a round and left through the plain socket. ``tx_ring false`` sends each frame
    with a system call of its own (``tx_ring_frames``: the ring's size)."""
    n_outputs = (0, 0)
    input_kind = AGNOSTIC
    ARGS = (Arg("devname", str), Arg("burst", parse_pos_int, 64), Arg("qdisc_bypass", parse_bool, False),
            Arg("tx_ring", parse_bool, True), Arg("tx_ring_frames", parse_pos_int, 1024))
    counter_names = ("packets", "bytes", "too_big", "runts", "send_drops", "send_retries", "sent_at_once")

    def initialize(self):
        self.sock, self.ifindex = self._open_send_socket()
        self.sock.setsockopt(socket.SOL_SOCKET, 32, 4 << 20)  # SO_SNDBUFFORCE
        self.mtu = interface_mtu(self.sock, self.devname)
        self.mac = self.sock.getsockname()[4]
        self._max_frame = self.mtu + ETH_HDR_BYTES
        self._tx_mm = None
        if self.tx_ring:
            self._setup_tx_ring()
            self._send = self._send_ring
        if self.resolved_in_kind == PULL:
            for q in find_upstream_queues(self):
                q.add_listener(self._wake)
            self._task = self.router.loop.timer(self._drain)

    def _open_send_socket(self):
        sock, ifindex = open_packet_socket(self.devname, 0, self.router.netns)
        if self.qdisc_bypass:
            sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
        sock.setblocking(False)
        return sock, ifindex

    def _setup_tx_ring(self):
        # a frame the kernel finds malformed is skipped, not left to stop the ring
        # (this element sends none: it checks the length first)
        self.sock.setsockopt(SOL_PACKET, PACKET_LOSS, 1)
        self._tx_mm, self._tx_frame, self._tx_nframes = map_ring(
            self.sock, PACKET_TX_RING, TX_DATA_OFF + self._max_frame, self.tx_ring_frames)
        self._tx_idx = 0
        self._tx_mv = memoryview(self._tx_mm)
        # a socket with a ring sends only from it: the round's first frame needs another
        self._direct, _ = self._open_send_socket()
        self._round_open = False         # a frame went this round: the ring is flushed at its end
        self._ring_written = 0           # frames in the ring since the last flush
        self._retry = self.router.loop.timer(self._flush)
        self._retry_ns = TX_RETRY_NS[0]
        self._err_logged = 0

    def _unsendable(self, n: int) -> bool:
        """Counts a frame of ``n`` bytes no interface would send (the callers test the
        bounds inline first: no call per frame on the hot path)."""
        if n > self._max_frame:
            self.too_big += 1
        elif n < ETH_HDR_BYTES:
            self.runts += 1
        else:
            return False
        return True

    def _send_ring(self, data):
        n = len(data)
        if (n > self._max_frame or n < ETH_HDR_BYTES) and self._unsendable(n):
            return
        if not self._round_open:
            self._round_open = True
            self.router.loop.defer(self._end_round)
            if not self._retry.scheduled and self._sent_at_once(data, n):
                return
        mv, off = self._tx_mv, self._tx_idx * self._tx_frame
        if U32.unpack_from(mv, off)[0] != TP_STATUS_AVAILABLE:
            self._flush()       # the kernel frees the slots of frames it has sent
            if U32.unpack_from(mv, off)[0] != TP_STATUS_AVAILABLE:
                self.send_drops += 1
                return
        mv[off + TX_DATA_OFF:off + TX_DATA_OFF + n] = data
        U32.pack_into(mv, off + 4, n)                        # tp_len
        U32.pack_into(mv, off, TP_STATUS_SEND_REQUEST)       # the frame is the kernel's now
        self._tx_idx = self._tx_idx + 1 if self._tx_idx + 1 < self._tx_nframes else 0
        self._ring_written += 1
        self.packets += 1
        self.bytes += n

    def _sent_at_once(self, data, n: int) -> bool:
        """The round's first frame through the plain socket; False: no room there now (the
        ring keeps it for the round's flush)."""
        try:
            self._direct.send(data)
        except OSError:
            return False
        self.sent_at_once += 1
        self.packets += 1
        self.bytes += n
        return True

    def _end_round(self):
        self._round_open = False
        if self._ring_written:
            self._flush()

    def _flush(self):
        """Hand the kernel every frame written to the ring since the last flush."""
        self._ring_written = 0
        try:
            self.sock.send(b"")
        except OSError as exc:
            # The frames stay in the ring for the next flush: no send buffer left (the
            # kernel still holds earlier frames), or the interface is down.
            if exc.errno not in (errno.EAGAIN, errno.ENOBUFS, errno.ENOMEM) and self._err_logged < 5:
                self._err_logged += 1
                log.warning("%s: the kernel refused the transmit ring's frames (%s); retrying (counted)",
                            self.name, exc.strerror)
            self._retry_later()
            return
        # The kernel also stops early, and says nothing, when the send buffer runs out:
        # the last frame written still waiting means some were not taken.
        last = (self._tx_idx - 1) % self._tx_nframes
        if U32.unpack_from(self._tx_mv, last * self._tx_frame)[0] == TP_STATUS_SEND_REQUEST:
            self._retry_later()
            return
        self._retry_ns = TX_RETRY_NS[0]

    def _retry_later(self):
        self.send_retries += 1
        if not self._retry.scheduled:
            self._retry.schedule_after(self._retry_ns)
            self._retry_ns = min(2 * self._retry_ns, TX_RETRY_NS[1])

    def _send(self, data):
        n = len(data)
        if (n > self._max_frame or n < ETH_HDR_BYTES) and self._unsendable(n):
            return
        try:
            self.sock.send(data)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.ENOBUFS, errno.ENOMEM):
                self.send_drops += 1
                return
            if exc.errno == errno.EMSGSIZE:
                self.too_big += 1
                return
            raise
        self.packets += 1
        self.bytes += len(data)

    def push(self, port, pkt):
        self._send(pkt.data)

    def _wake(self):
        if not self._task.scheduled:
            self._drain()

    def _drain(self):
        up = self._in[0]
        for _ in range(self.burst):
            pkt = up[0].pull(up[1])
            if pkt is None:
                return
            self._send(pkt.data)
        self._task.schedule_at(0)   # more left: continue after other work

    def cleanup(self):
        if getattr(self, "sock", None) is not None:
            if self._tx_mm is not None:
                self._flush()           # nothing written is left unsent
                self._retry.cancel()
                self._tx_mv.release()
                self._tx_mm.close()
                self._direct.close()
            self.sock.close()
            self.sock = None
