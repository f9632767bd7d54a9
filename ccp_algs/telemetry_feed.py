"""Telemetry for an agent process.

pyportus holds the GIL for the agent's whole life (it blocks in recv between
reports), so a TelemetryView thread in the agent would starve. The view runs in
a child process instead and forwards every valid record over a datagram
socketpair; the agent drains it, without blocking, whenever it asks for a record:

    feed = TelemetryFeed("mqtt://127.0.0.1:1883").start()
    fresh = feed.flow(flow_id, max_age_s=0.2)       # None if absent or older
"""
from __future__ import annotations

import multiprocessing as mp
import os
import socket
import struct
import time

from broker.schema import SchemaError, decode
from broker.subscriber import Fresh, fresh

_HDR = struct.Struct("<QH")      # received monotonic ns, topic length


def _forward(url: str, sock_fd: int, parent_pid: int):
    from broker.subscriber import TelemetryView
    from broker.schema import encode
    sock = socket.socket(fileno=sock_fd)
    view = TelemetryView(url)

    def send(record, topic):
        t = topic.encode()
        try:
            sock.send(_HDR.pack(time.monotonic_ns(), len(t)) + t + encode(record), socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass   # the agent is not reading: it will read newer records

    view.on_record(send)
    view.start()
    while os.getppid() == parent_pid:     # die with the agent
        time.sleep(0.5)
    view.stop()


class TelemetryFeed:
    def __init__(self, url: str):
        self.url = url
        self._flows: dict[str, tuple] = {}
        self._hops: dict[int, tuple] = {}
        self.received = self.rejected = 0
        self._sock = None
        self._proc = None

    def start(self) -> "TelemetryFeed":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        ctx = mp.get_context("fork")     # before portus starts: no threads yet
        self._proc = ctx.Process(target=_forward, args=(self.url, theirs.fileno(), os.getpid()),
                                 daemon=True, name="intcc-telemetry-feed")
        self._proc.start()
        theirs.close()
        ours.setblocking(False)
        self._sock = ours
        return self

    def stop(self):
        if self._proc is not None and self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(2)

    def poll(self) -> int:
        """Take in every record waiting; returns how many."""
        n = 0
        while self._sock is not None:
            try:
                msg = self._sock.recv(1 << 16)
            except BlockingIOError:
                break
            n += 1
            self.received += 1
            try:
                rx_ns, tlen = _HDR.unpack_from(msg)
                topic = msg[_HDR.size:_HDR.size + tlen].decode()
                rec = decode(msg[_HDR.size + tlen:], topic)
            except (SchemaError, struct.error, UnicodeDecodeError):
                self.rejected += 1
                continue
            if rec.type == "flow":
                self._flows[rec.flow_id] = (rec, rx_ns)
            elif rec.type == "hop":
                self._hops[rec.node_id] = (rec, rx_ns)
        return n

    def flow(self, flow_id: str, max_age_s: float | None = None) -> Fresh | None:
        self.poll()
        return fresh(self._flows.get(flow_id), max_age_s)

    def hop(self, node_id: int, max_age_s: float | None = None) -> Fresh | None:
        self.poll()
        return fresh(self._hops.get(node_id), max_age_s)
