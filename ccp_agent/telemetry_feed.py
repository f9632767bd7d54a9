"""Telemetry for an agent process, pushed into shared memory.

pyportus holds the GIL for the agent's whole life (it blocks in recv between
reports), so a TelemetryView thread in the agent would starve. The view runs in
a child process instead. The agent subscribes once per flow (and per hop) it
reads, naming a slot of a memory both processes share (mapped before the fork);
from then on the child writes every record of that key into its slot as it
arrives, each over the last, and a read copies the slot: always the newest record,
never a request, never a wait.

    feed = TelemetryFeed("mqtt://127.0.0.1:1883").start()
    fresh = feed.flow(flow_id, max_age_s=0.2)       # None if absent or older

A queue of pushes would not do: an agent that reads nothing for a while (congestion
avoidance without a loss) let it fill, and at its next loss it read records seconds old
while the newest were dropped at the full socket. A slot holds the newest only.

Each slot is guarded by a sequence counter (odd while the child writes; a read that sees
it odd or changed reads again). A record larger than a slot is dropped and counted.
"""
from __future__ import annotations

import mmap
import os
import socket
import struct
import threading
import time

from broker.subscriber import Fresh, fresh
from telemetry.schema import SchemaError, decode, encode

from .child import fork_child, stop_child

SLOTS = 256
SLOT_BYTES = 16 * 1024
_HEAD = struct.Struct("<QQI")      # sequence (odd: being written), arrival (time.monotonic_ns), length
READ_TRIES = 8


class Slots:
    """SLOTS slots of SLOT_BYTES in one anonymous shared mapping (made before the fork)."""

    def __init__(self, slots: int = SLOTS, slot_bytes: int = SLOT_BYTES):
        self.slots, self.slot_bytes = slots, slot_bytes
        self.mem = mmap.mmap(-1, slots * slot_bytes)
        self.oversize = 0

    def write(self, slot: int, payload: bytes, rx_ns: int) -> bool:
        if len(payload) > self.slot_bytes - _HEAD.size:
            self.oversize += 1
            return False
        base = slot * self.slot_bytes
        seq = _HEAD.unpack_from(self.mem, base)[0]
        _HEAD.pack_into(self.mem, base, seq + 1, 0, 0)                   # odd: being written
        self.mem[base + _HEAD.size:base + _HEAD.size + len(payload)] = payload
        _HEAD.pack_into(self.mem, base, seq + 2, rx_ns, len(payload))    # even: whole
        return True

    def read(self, slot: int) -> tuple[int, int, bytes] | None:
        """(sequence, arrival ns, payload) of the slot's record; None if empty or torn every try."""
        base = slot * self.slot_bytes
        for _ in range(READ_TRIES):
            seq, rx_ns, length = _HEAD.unpack_from(self.mem, base)
            if seq == 0:
                return None
            if seq % 2:
                continue
            payload = bytes(self.mem[base + _HEAD.size:base + _HEAD.size + length])
            if _HEAD.unpack_from(self.mem, base)[0] == seq:
                return seq, rx_ns, payload
        return None

    def clear(self, slot: int) -> None:
        """Empty (sequence 0): the agent's, when it gives a slot to another key."""
        _HEAD.pack_into(self.mem, slot * self.slot_bytes, 0, 0, 0)


class FeedServer:
    """The child's side: the keys the agent subscribed to, each with its slot, and every
    record of them written there (on subscribing, the latest one already known)."""

    def __init__(self, slots: Slots, latest=None):
        self.slots = slots
        self.latest = latest or (lambda kind, key: None)     # (kind, key) -> (record, rx_ns) or None
        self.flows: dict = {}        # flow id -> slot
        self.hops: dict = {}         # node id -> slot
        self.written = 0
        self._lock = threading.Lock()       # paho's thread writes; the request loop subscribes

    def on_request(self, msg: bytes) -> None:
        """'sub flow ID SLOT', 'sub hop N SLOT', 'unsub flow ID', 'unsub hop N'; others ignored."""
        try:
            verb, kind, key, *rest = msg.decode().split(" ")
        except (UnicodeDecodeError, ValueError):
            return
        table = self.flows if kind == "flow" else self.hops if kind == "hop" and key.isdigit() else None
        if table is None:
            return
        key = int(key) if kind == "hop" else key
        with self._lock:
            if verb == "unsub":
                table.pop(key, None)
                return
            if verb != "sub" or len(rest) != 1 or not rest[0].isdigit() or int(rest[0]) >= self.slots.slots:
                return
            for other in (self.flows, self.hops):       # a slot the agent reuses leaves its old key
                for k in [k for k, s in other.items() if s == int(rest[0])]:
                    del other[k]
            table[key] = int(rest[0])
        known = self.latest(kind, key)
        if known is not None:
            self.write(kind, key, *known)

    def on_record(self, rec, rx_ns: int | None = None) -> None:
        """A valid record from the broker: written to its slot if the agent subscribed to it."""
        if rec.type in ("flow", "hop"):
            key = rec.flow_id if rec.type == "flow" else rec.node_id
            self.write(rec.type, key, rec, time.monotonic_ns() if rx_ns is None else rx_ns)

    def write(self, kind: str, key, rec, rx_ns: int) -> None:
        with self._lock:
            slot = (self.flows if kind == "flow" else self.hops).get(key)
            if slot is not None and self.slots.write(slot, encode(rec), rx_ns):
                self.written += 1


def _serve(url: str, slots: Slots, sock_fd: int, parent_pid: int):
    from broker.subscriber import TelemetryView
    sock = socket.socket(fileno=sock_fd)
    sock.settimeout(0.5)
    view = TelemetryView(url)

    def latest(kind, key):
        got = view.flow(key) if kind == "flow" else view.hop(key)
        return (got.record, got.received_ns) if got is not None else None
    server = FeedServer(slots, latest)
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
    def __init__(self, url: str, slots: Slots | None = None):
        self.url = url
        self.slots = slots or Slots()
        self.subscriptions = self.received = self.rejected = 0
        self._slot_of: dict = {}          # (kind, key) -> slot, in the order of their last read
        self._decoded: dict = {}          # slot -> (sequence, record): a record is decoded once
        self._sock = None
        self._proc = None

    def start(self) -> "TelemetryFeed":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._proc = fork_child(_serve, (self.url, self.slots, theirs.fileno(), os.getpid()),
                                "intcc-telemetry-feed")
        theirs.close()
        return self.attach(ours)

    def attach(self, sock: socket.socket) -> "TelemetryFeed":
        """Send subscriptions on ``sock`` (start() gives it the child's; a test, its own)."""
        sock.setblocking(False)
        self._sock = sock
        return self

    def stop(self):
        stop_child(self._proc)

    def flow(self, flow_id: str, max_age_s: float | None = None) -> Fresh | None:
        """The newest record of ``flow_id`` (the first read subscribes: None until it comes)."""
        return self._read("flow", flow_id, max_age_s)

    def hop(self, node_id: int, max_age_s: float | None = None) -> Fresh | None:
        return self._read("hop", int(node_id), max_age_s)

    def forget(self, kind: str, key) -> None:
        """Stop the records of a flow (or hop) that has ended; its slot is free again."""
        slot = self._slot_of.pop((kind, key), None)
        if slot is not None:
            self._send(f"unsub {kind} {key}")
            self._decoded.pop(slot, None)
            self.slots.clear(slot)

    def _read(self, kind: str, key, max_age_s: float | None) -> Fresh | None:
        slot = self._slot_of.pop((kind, key), None)
        if slot is None:
            slot = self._subscribe(kind, key)
        self._slot_of[(kind, key)] = slot               # the most recently read last
        got = self.slots.read(slot)
        if got is None:
            return None
        seq, rx_ns, payload = got
        held = self._decoded.get(slot)
        if held is None or held[0] != seq:
            try:
                rec = decode(payload)
            except SchemaError:
                self.rejected += 1
                return None
            self.received += 1
            held = self._decoded[slot] = (seq, rec)
        rec = held[1]
        if (rec.flow_id if kind == "flow" else rec.node_id) != key:
            return None          # the slot's last key's record, written as it was given up
        return fresh((rec, rx_ns), max_age_s)

    def _subscribe(self, kind: str, key) -> int:
        used = set(self._slot_of.values())
        free = [s for s in range(self.slots.slots) if s not in used]
        if free:
            slot = free[0]
        else:                                            # every slot taken: the least recently read goes
            old = next(iter(self._slot_of))
            slot = self._slot_of[old]
            self.forget(*old)
        self.slots.clear(slot)
        self._decoded.pop(slot, None)
        self.subscriptions += 1
        self._send(f"sub {kind} {key} {slot}")
        return slot

    def _send(self, msg: str) -> None:
        if self._sock is not None:
            try:
                self._sock.send(msg.encode())
            except OSError:
                pass                        # the child has gone: reads answer None from now on

    def counters(self) -> dict:
        return {"subscriptions": self.subscriptions, "received": self.received, "rejected": self.rejected,
                "oversize": self.slots.oversize}
