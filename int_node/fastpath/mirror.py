"""The sink's telemetry under the fast path: the egress program sends a copy of each INT
packet, stamped by every hop, to a veth inside the node before it strips the original;
this reader takes the copies off its peer and hands them to the INTSink elements'
exporters, which publish exactly what they publish when the Python node strips. Off the
forwarding path: a copy the reader cannot keep up with is a counted receive drop
(``fastpath.mirror``), never a delayed packet.
"""
from __future__ import annotations

import logging
import socket
import time
from typing import Dict

from .. import ioam
from ..elements.packet_socket import open_packet_socket
from ..packet import ETHERTYPE_IPV6, flow_key

log = logging.getLogger("intcc.node.fastpath")
_BATCH = 256


class MirrorReader:
    def __init__(self, router, devname: str, sinks_by_mac: Dict[bytes, object]):
        self.router = router
        self.sock, _ = open_packet_socket(devname, ETHERTYPE_IPV6, router.netns)
        self.sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)    # SO_RCVBUFFORCE: bursts at line rate
        self.sock.setblocking(False)
        # every copy reaches the one mirror; the sink that would have stripped it is the one
        # of the port it left by, known by its source MAC (EtherRewrite's, the port's own)
        self._sinks = dict(sinks_by_mac)
        self._any_sink = next(iter(self._sinks.values()), None)
        self.copies = self.malformed = 0
        router.loop.add_reader(self.sock.fileno(), self._read)

    def _read(self) -> None:
        for _ in range(_BATCH):
            try:
                frame = bytearray(self.sock.recv(65536))
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("fast path mirror: %s", exc)
                return
            self.copies += 1
            sink = self._sinks.get(bytes(frame[6:12]), self._any_sink)
            try:
                s = ioam.strip_int(frame)
            except ioam.IOAMError:
                self.malformed += 1
                if sink is not None:
                    sink.malformed += 1
                continue
            if sink is None:
                continue
            sink.stripped += 1
            sink._exporter.export(flow_key(s.frame), s.trace_raw, s.e2e_raw, time.time_ns())

    def close(self) -> None:
        try:
            self.router.loop.remove_reader(self.sock.fileno())
        except Exception:
            pass
        self.sock.close()
