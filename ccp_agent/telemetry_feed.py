"""Telemetry for an agent process.

pyportus holds the GIL for the agent's whole life (it blocks in recv between
reports), so a TelemetryView thread in the agent would starve. The view runs in
a child process instead, which keeps the latest record per flow and hop; the
agent asks it for one when it decides (a request/reply on a datagram
socketpair, tens of microseconds), so the answer is always the newest record:

    feed = TelemetryFeed("mqtt://127.0.0.1:1883").start()
    fresh = feed.flow(flow_id, max_age_s=0.2)       # None if absent or older
"""
from __future__ import annotations

import os
import socket
import struct
import time

from telemetry.schema import SchemaError, decode
from broker.subscriber import Fresh

from .child import fork_child, stop_child

_REPLY = struct.Struct("<IQ")    # request id, the record's age at the child in ns; then the record
REPLY_TIMEOUT_S = 0.05


def _serve(url: str, sock_fd: int, parent_pid: int):
    from telemetry.schema import encode
    from broker.subscriber import TelemetryView
    sock = socket.socket(fileno=sock_fd)
    sock.settimeout(0.5)
    view = TelemetryView(url).start()
    while os.getppid() == parent_pid:     # die with the agent
        try:
            req_id, kind, key = sock.recv(256).decode().split(" ", 2)
        except socket.timeout:
            continue
        except (OSError, ValueError, UnicodeDecodeError):
            break
        fresh = view.flow(key) if kind == "flow" else view.hop(int(key)) if kind == "hop" and key.isdigit() \
            else None
        payload = encode(fresh.record) if fresh is not None else b""
        sock.send(_REPLY.pack(int(req_id), int(fresh.age_s * 1e9) if fresh else 0) + payload)
    view.stop()


class TelemetryFeed:
    def __init__(self, url: str):
        self.url = url
        self.requests = self.answered = self.timeouts = self.rejected = 0
        self._sock = None
        self._proc = None

    def start(self) -> "TelemetryFeed":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._proc = fork_child(_serve, (self.url, theirs.fileno(), os.getpid()), "intcc-telemetry-feed")
        theirs.close()
        ours.settimeout(REPLY_TIMEOUT_S)
        self._sock = ours
        return self

    def stop(self):
        stop_child(self._proc)

    def _ask(self, request: str, max_age_s: float | None) -> Fresh | None:
        if self._sock is None:
            return None
        self.requests += 1
        req_id = self.requests & 0xFFFFFFFF
        try:
            self._sock.send(f"{req_id} {request}".encode())
            while True:     # skip late replies to earlier requests that timed out
                msg = self._sock.recv(1 << 16)
                if len(msg) >= _REPLY.size and _REPLY.unpack_from(msg)[0] == req_id:
                    break
        except socket.timeout:
            self.timeouts += 1
            return None
        age_ns = _REPLY.unpack_from(msg)[1]
        if len(msg) == _REPLY.size:
            return None     # nothing for that key
        try:
            rec = decode(msg[_REPLY.size:])
        except SchemaError:
            self.rejected += 1
            return None
        self.answered += 1
        age_s = age_ns / 1e9
        if max_age_s is not None and age_s > max_age_s:
            return None
        return Fresh(rec, age_s, time.monotonic_ns() - age_ns)

    def flow(self, flow_id: str, max_age_s: float | None = None) -> Fresh | None:
        return self._ask(f"flow {flow_id}", max_age_s)

    def hop(self, node_id: int, max_age_s: float | None = None) -> Fresh | None:
        return self._ask(f"hop {node_id}", max_age_s)
