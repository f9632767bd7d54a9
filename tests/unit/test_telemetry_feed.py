"""The agent's telemetry is pushed: one subscription per flow, then every read takes what
has come without asking (the child's side, FeedServer, on a socketpair; no broker)."""
import dataclasses
import socket
import time

from ccp_agent.telemetry_feed import FeedServer, TelemetryFeed
from tests.unit.test_ccp_algs import flow_record

FLOW = "00112233aabbccdd"


def _pair(bufsize=None):
    agent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    if bufsize:
        child.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufsize)
        agent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufsize)
    child.setblocking(False)
    return TelemetryFeed("mqtt://unused").attach(agent), child


def _requests(child) -> list:
    out = []
    while True:
        try:
            out.append(child.recv(256))
        except BlockingIOError:
            return out


def test_a_flow_is_asked_for_once_then_every_record_is_pushed():
    feed, child = _pair()
    server = FeedServer(child)
    assert feed.flow(FLOW) is None                     # subscribes; nothing yet
    reqs = _requests(child)
    assert reqs == [f"sub flow {FLOW}".encode()]
    server.on_request(reqs[0])
    for packets in range(1, 101):
        server.on_record(dataclasses.replace(flow_record(), packets=packets))
        fresh = feed.flow(FLOW, max_age_s=1.0)
        assert fresh is not None and fresh.record.packets == packets     # the newest, at once
    assert _requests(child) == []                      # 100 reads, not one request among them
    assert feed.counters() == {"subscriptions": 1, "received": 100, "rejected": 0, "dropped": 0}


def test_only_the_subscribed_flows_are_pushed_and_a_subscription_gets_the_latest_known():
    feed, child = _pair()
    held = dataclasses.replace(flow_record(), packets=7)
    server = FeedServer(child, latest=lambda kind, key: (held, time.monotonic_ns()) if key == FLOW else None)
    server.on_record(flow_record())                    # before any subscription: not pushed
    assert feed.drain() == 0
    feed.flow(FLOW)
    server.on_request(_requests(child)[0])             # the child answers with what it has
    assert feed.flow(FLOW).record.packets == 7
    server.on_record(dataclasses.replace(flow_record(), flow_id="ffffffffffffffff"))
    assert feed.drain() == 0                           # another flow's record stays with the child
    feed.forget(FLOW)
    server.on_request(_requests(child)[0])
    server.on_record(flow_record())
    assert feed.drain() == 0 and feed._flows == {}


def test_an_older_push_does_not_replace_a_newer_one():
    feed, child = _pair()
    server = FeedServer(child)
    server.on_request(f"sub flow {FLOW}".encode())
    now = time.monotonic_ns()
    server.push(dataclasses.replace(flow_record(), packets=2), now)
    server.push(dataclasses.replace(flow_record(), packets=1), now - 5_000_000)   # the latest on subscribing
    feed._subscribed.add(("flow", FLOW))
    assert feed.flow(FLOW).record.packets == 2


def test_a_full_socket_drops_and_counts_and_garbage_is_rejected():
    feed, child = _pair(bufsize=4096)
    server = FeedServer(child)
    server.on_request(f"sub flow {FLOW}".encode())
    for _ in range(200):
        server.on_record(flow_record())
    assert server.dropped > 0 and server.pushed + server.dropped == 200
    assert feed.drain() == server.pushed
    child.send(b"short")
    server.on_record(flow_record())                    # tells the agent how many were dropped
    feed.drain()
    assert feed.rejected == 1 and feed.dropped == server.dropped
    child.send(b"\0" * 12 + b"not a record")
    feed.drain()
    assert feed.rejected == 2


def test_requests_that_are_not_subscriptions_are_ignored():
    _, child = _pair()
    server = FeedServer(child)
    for msg in (b"\xff\xfe", b"sub", b"sub hop x", b"sub cow 1", b"unsub flow never"):
        server.on_request(msg)
    assert server.flows == set() and server.hops == set()
