"""Telemetry for an agent process, pushed.

pyportus holds the GIL for the agent's whole life (it blocks in recv between
reports), so a TelemetryView thread in the agent would starve. The view runs in
a child process instead. The agent subscribes once per flow (and per hop) it
reads; from then on the child pushes every record of those keys as it arrives,
over a datagram socketpair, and the agent drains what has come when it reads:
a read never sends a request and never waits.

    feed = TelemetryFeed("mqtt://127.0.0.1:1883").start()
    fresh = feed.flow(flow_id, max_age_s=0.2)       # None if absent or older

A push that finds the agent's socket full is dropped and counted (``dropped``,
reported with the next push that fits): the agent only wants the newest record.
"""
from __future__ import annotations

import os
import socket
import struct
import threading
import time

from broker.subscriber import Fresh, fresh
from telemetry.schema import SchemaError, decode

from .child import fork_child, stop_child

#: a push: when the record arrived at the child (time.monotonic_ns, one clock for both
#: processes), the pushes dropped so far; then the record as published
_PUSH = struct.Struct("<QI")
SOCKET_BUFFER_BYTES = 1 << 20


class FeedServer:
    """The child's side: the keys the agent subscribed to, and a push of every record of
    them (plus, on subscribing, the latest one already known)."""

    def __init__(self, sock: socket.socket, latest=None):
        self.sock = sock
        self.latest = latest or (lambda kind, key: None)     # (kind, key) -> (record, rx_ns) or None
        self.flows: set = set()
        self.hops: set = set()
        self.pushed = self.dropped = 0
        self._lock = threading.Lock()       # paho's thread pushes; the request loop subscribes

    def on_request(self, msg: bytes) -> None:
        """'sub flow ID', 'sub hop N', 'unsub flow ID', 'unsub hop N'; others ignored."""
        try:
            verb, kind, key = msg.decode().split(" ", 2)
        except (UnicodeDecodeError, ValueError):
            return
        keys = self.flows if kind == "flow" else self.hops if kind == "hop" and key.isdigit() else None
        if keys is None:
            return
        key = int(key) if kind == "hop" else key
        if verb == "unsub":
            keys.discard(key)
        elif verb == "sub":
            keys.add(key)
            known = self.latest(kind, key)
            if known is not None:
                self.push(*known)

    def on_record(self, rec, rx_ns: int | None = None) -> None:
        """A valid record from the broker: pushed if the agent subscribed to its key."""
        if (rec.flow_id in self.flows) if rec.type == "flow" else (rec.type == "hop" and rec.node_id in self.hops):
            self.push(rec, time.monotonic_ns() if rx_ns is None else rx_ns)

    def push(self, rec, rx_ns: int) -> None:
        from telemetry.schema import encode
        with self._lock:
            try:
                self.sock.send(_PUSH.pack(rx_ns, self.dropped & 0xFFFFFFFF) + encode(rec), socket.MSG_DONTWAIT)
                self.pushed += 1
            except (BlockingIOError, InterruptedError):
                self.dropped += 1
            except OSError:
                pass                       # the agent has gone: the child ends with it


def _serve(url: str, sock_fd: int, parent_pid: int):
    from broker.subscriber import TelemetryView
    sock = socket.socket(fileno=sock_fd)
    sock.settimeout(0.5)
    view = TelemetryView(url)

    def latest(kind, key):
        got = view.flow(key) if kind == "flow" else view.hop(key)
        return (got.record, got.received_ns) if got is not None else None
    server = FeedServer(sock, latest)
    view.on_record(lambda rec, topic: server.on_record(rec))
    view.start()
    while os.getppid() == parent_pid:     # die with the agent
        try:
            server.on_request(sock.recv(256))
        except socket.timeout:
            continue
        except OSError:
            break
    view.stop()


class TelemetryFeed:
    def __init__(self, url: str):
        self.url = url
        self.subscriptions = self.received = self.rejected = 0
        self.dropped = 0                  # pushes the child could not deliver (the socket was full)
        self._flows: dict = {}            # flow id -> (record, rx monotonic ns)
        self._hops: dict = {}
        self._subscribed: set = set()
        self._sock = None
        self._proc = None

    def start(self) -> "TelemetryFeed":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        for s in (ours, theirs):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
        self._proc = fork_child(_serve, (self.url, theirs.fileno(), os.getpid()), "intcc-telemetry-feed")
        theirs.close()
        self.attach(ours)
        return self

    def attach(self, sock: socket.socket) -> "TelemetryFeed":
        """Read pushes from ``sock`` (start() gives it the child's; a test, its own)."""
        sock.setblocking(False)
        self._sock = sock
        return self

    def stop(self):
        stop_child(self._proc)

    def flow(self, flow_id: str, max_age_s: float | None = None) -> Fresh | None:
        """The newest record of ``flow_id`` pushed so far (the first read subscribes)."""
        return self._read("flow", flow_id, self._flows, max_age_s)

    def hop(self, node_id: int, max_age_s: float | None = None) -> Fresh | None:
        return self._read("hop", int(node_id), self._hops, max_age_s)

    def forget(self, flow_id: str) -> None:
        """Stop the pushes of a flow that has ended."""
        if ("flow", flow_id) in self._subscribed:
            self._subscribed.discard(("flow", flow_id))
            self._flows.pop(flow_id, None)
            self._send(f"unsub flow {flow_id}")

    def _read(self, kind: str, key, table: dict, max_age_s: float | None) -> Fresh | None:
        if (kind, key) not in self._subscribed:
            self._subscribed.add((kind, key))
            self.subscriptions += 1
            self._send(f"sub {kind} {key}")
        self.drain()
        return fresh(table.get(key), max_age_s)

    def _send(self, msg: str) -> None:
        if self._sock is not None:
            try:
                self._sock.send(msg.encode())
            except OSError:
                pass                        # the child has gone: reads answer None from now on

    def drain(self) -> int:
        """Take every push that has come; returns how many."""
        n = 0
        while self._sock is not None:
            try:
                msg = self._sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            if len(msg) < _PUSH.size:
                self.rejected += 1
                continue
            rx_ns, self.dropped = _PUSH.unpack_from(msg)
            try:
                rec = decode(msg[_PUSH.size:])
            except SchemaError:
                self.rejected += 1
                continue
            n += 1
            self.received += 1
            table, key = (self._flows, rec.flow_id) if rec.type == "flow" else (self._hops, rec.node_id)
            held = table.get(key)
            if held is None or held[1] <= rx_ns:   # a subscription's first push may cross a newer one
                table[key] = (rec, rx_ns)
        return n

    def counters(self) -> dict:
        return {"subscriptions": self.subscriptions, "received": self.received, "rejected": self.rejected,
                "dropped": self.dropped}
