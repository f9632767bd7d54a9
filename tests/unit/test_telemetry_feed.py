"""The agent's telemetry is pushed into shared memory: one subscription per flow, then the
child writes each record of it into the flow's slot, each over the last, and every read
takes the newest without asking (the child's side, FeedServer, in-process; no broker)."""
import dataclasses
import socket
import time

from ccp_agent.telemetry_feed import FeedServer, Slots, TelemetryFeed
from tests.unit.test_ccp_algs import flow_record

FLOW = "00112233aabbccdd"


def _pair(latest=None, slots=8):
    agent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    child.setblocking(False)
    shared = Slots(slots=slots)
    return TelemetryFeed("mqtt://unused", slots=shared).attach(agent), FeedServer(shared, latest), child


def _requests(child) -> list:
    out = []
    while True:
        try:
            out.append(child.recv(256))
        except BlockingIOError:
            return out


def test_a_flow_is_asked_for_once_then_every_read_has_the_newest_record():
    feed, server, child = _pair()
    assert feed.flow(FLOW) is None                     # subscribes; nothing yet
    reqs = _requests(child)
    assert reqs == [f"sub flow {FLOW} 0".encode()]
    server.on_request(reqs[0])
    for packets in range(1, 101):
        server.on_record(dataclasses.replace(flow_record(), packets=packets))
        fresh = feed.flow(FLOW, max_age_s=1.0)
        assert fresh is not None and fresh.record.packets == packets     # the newest, at once
    assert _requests(child) == []                      # 100 reads, not one request among them
    assert feed.counters() == {"subscriptions": 1, "received": 100, "rejected": 0, "oversize": 0}


def test_an_agent_that_reads_nothing_for_a_while_still_reads_the_newest():
    """A queue of pushes filled while the agent read nothing (congestion avoidance without
    a loss), and its next read found records seconds old: a slot holds the newest only."""
    feed, server, child = _pair()
    feed.flow(FLOW)
    server.on_request(_requests(child)[0])
    for packets in range(1, 10_001):                    # 100 s of records at 100 a second, unread
        server.on_record(dataclasses.replace(flow_record(), packets=packets))
    assert feed.flow(FLOW, max_age_s=0.5).record.packets == 10_000


def test_a_subscription_gets_the_latest_known_and_other_flows_stay_out():
    held = dataclasses.replace(flow_record(), packets=7)
    feed, server, child = _pair(latest=lambda kind, key: (held, time.monotonic_ns()) if key == FLOW else None)
    server.on_record(flow_record())                    # before any subscription: nowhere to go
    feed.flow(FLOW)
    server.on_request(_requests(child)[0])             # the child writes what it has
    assert feed.flow(FLOW).record.packets == 7
    server.on_record(dataclasses.replace(flow_record(), flow_id="ffffffffffffffff", packets=9))
    assert feed.flow(FLOW).record.packets == 7         # another flow's record stays with the child
    feed.forget("flow", FLOW)
    server.on_request(_requests(child)[0])
    server.on_record(flow_record())
    assert server.flows == {} and feed.slots.read(0) is None


def test_when_every_slot_is_taken_the_least_recently_read_flow_gives_its_up():
    feed, server, child = _pair(slots=2)
    for fid in ("a" * 16, "b" * 16):
        feed.flow(fid)
    feed.flow("a" * 16)                                  # read again: b is the least recent
    feed.flow("c" * 16)
    for msg in _requests(child):
        server.on_request(msg)
    assert server.flows == {"a" * 16: 0, "c" * 16: 1}
    server.on_record(dataclasses.replace(flow_record(), flow_id="c" * 16))
    assert feed.flow("c" * 16) is not None and feed.flow("b" * 16) is None


def test_a_torn_or_foreign_slot_is_not_read_and_an_oversize_record_is_counted():
    feed, server, child = _pair()
    feed.flow(FLOW)
    server.on_request(_requests(child)[0])
    shared = feed.slots
    shared.write(0, b"not a record", time.monotonic_ns())
    assert feed.flow(FLOW) is None and feed.rejected == 1
    shared.write(0, flow_record().__class__.__name__.encode(), time.monotonic_ns())
    assert feed.flow(FLOW) is None and feed.rejected == 2
    base = 0
    seq = int.from_bytes(shared.mem[base:base + 8], "little")
    shared.mem[base:base + 8] = (seq + 1).to_bytes(8, "little")     # a write under way: odd
    assert shared.read(0) is None
    assert not shared.write(1, b"x" * shared.slot_bytes, 0) and shared.oversize == 1


def test_requests_that_are_not_subscriptions_are_ignored():
    _, server, _ = _pair()
    for msg in (b"\xff\xfe", b"sub", b"sub hop x 1", b"sub cow 1 1", b"sub flow abc", b"sub flow abc 99",
                b"unsub flow never"):
        server.on_request(msg)
    assert server.flows == {} and server.hops == {}
