"""FlowRTT / RTTTap: per-flow RTT from ACK matching (eACK) and TCP timestamps, on packets
built with known times."""
import struct

import pytest

from int_node.config import ConfigSyntaxError
from int_node.packet import Packet
from tests.helpers import IP6_PAYLOAD, ipv6_frame, router

CONFIG = "rtt :: FlowRTT(max_flows 8, max_pending 4); Idle -> tap :: RTTTap(rtt) -> Discard;"
MS = 1_000_000


def seg(seq, ack, payload=0, fwd=True, flags=0x10, ts=None):
    """A TCP segment of the flow 1:40000 -> 2:5201 (fwd) or its reverse, with a TS option."""
    opts = b"\x01\x01\x08\x0a" + struct.pack("!II", *ts) if ts else b""
    hdr = struct.pack("!HHIIBBHHH", *((40000, 5201) if fwd else (5201, 40000)), seq & 0xFFFFFFFF,
                      ack & 0xFFFFFFFF, (5 + len(opts) // 4) << 4, flags, 65535, 0, 0) + opts
    frame = ipv6_frame(len(hdr) + payload, src=1 if fwd else 2, dst=2 if fwd else 1)
    frame[IP6_PAYLOAD:IP6_PAYLOAD + len(hdr)] = hdr
    return frame


def at(r, frame, t_ns):
    """The frame arrives at t_ns (pushed: the tap times it by its arrival)."""
    pkt = Packet(frame)
    pkt.rx_ns = t_ns
    r.elements["tap"].push(0, pkt)


def data_direction(r):
    return next(v for v in r.elements["rtt"].read_handler("rtts").values() if v["flow"][3] == 40000)


def test_an_ack_naming_a_segments_end_gives_its_rtt_and_a_cumulative_one_only_the_segment_it_names():
    r = router(CONFIG)
    at(r, seg(1000, 1, payload=100), 0)
    at(r, seg(1100, 1, payload=100), 1 * MS)
    at(r, seg(1200, 1, payload=100), 2 * MS)
    at(r, seg(1, 1100, fwd=False), 30 * MS)          # exactly the first's end: 30 ms
    at(r, seg(1, 1300, fwd=False), 42 * MS)          # delayed, covers two: the third's 40 ms only
    ack = data_direction(r)["ack"]
    assert ack["samples"] == 2 and ack["min_us"] == 30_000 and ack["last_us"] == 40_000
    assert r.elements["rtt"].counters()["ack_samples"] == 2


def test_a_resent_segment_gives_no_sample_karns_rule():
    r = router(CONFIG)
    at(r, seg(1000, 1, payload=100), 0)
    at(r, seg(1100, 1, payload=100), 1 * MS)
    at(r, seg(1000, 1, payload=100), 200 * MS)       # the first again: an RTO
    at(r, seg(1, 1100, fwd=False), 230 * MS)         # which copy does it answer? none counted
    at(r, seg(1, 1200, fwd=False), 231 * MS)
    assert data_direction(r)["ack"]["samples"] == 0
    assert r.elements["rtt"].counters()["retransmits"] == 1
    at(r, seg(1200, 1, payload=100), 232 * MS)       # new data after it is measured again
    at(r, seg(1, 1300, fwd=False), 262 * MS)
    assert data_direction(r)["ack"]["last_us"] == 30_000


def test_timestamps_give_each_directions_far_part_and_together_the_whole_round_trip():
    """The node sits 10 ms from the sender and 40 ms from the receiver (one way)."""
    r = router(CONFIG)
    t = 0
    for k in range(3):
        at(r, seg(1000 + 100 * k, 1, payload=100, ts=(500 + k, 900 + k)), t)          # data passes
        at(r, seg(1, 1100 + 100 * k, fwd=False, ts=(900 + k + 1, 500 + k)), t + 80 * MS)  # its ACK: 80 ms later
        t += 100 * MS       # the sender's next data echoes the ACK's TSval: 10 ms there, 10 back
    fwd = data_direction(r)
    assert fwd["ts"]["min_us"] == 80_000              # node -> receiver -> node
    back = next(v for v in r.elements["rtt"].read_handler("rtts").values() if v["flow"][3] == 5201)
    assert back["ts"]["min_us"] == 20_000             # node -> sender -> node
    assert fwd["full_min_us"] == 100_000 and back["full_min_us"] == 100_000


def test_a_delayed_acks_echo_waits_for_the_second_segment_and_the_whole_round_trip_takes_the_ack_match():
    """The receiver 40 ms from the node acknowledges every second segment, echoing the first's
    TSval: its echo waited the 5 ms until the second came; the ACK names the second's end."""
    r = router(CONFIG)
    at(r, seg(1000, 1, payload=100, ts=(500, 900)), 0)
    at(r, seg(1100, 1, payload=100, ts=(505, 900)), 5 * MS)
    at(r, seg(1, 1200, fwd=False, ts=(901, 500)), 85 * MS)          # both, 80 ms after the second
    at(r, seg(1200, 1, payload=100, ts=(520, 901)), 105 * MS)       # the sender echoes: 20 ms there and back
    fwd = data_direction(r)
    assert fwd["ts"]["min_us"] == 85_000 and fwd["ack"]["min_us"] == 80_000
    assert fwd["full_min_us"] == 100_000                             # 80 + 20, not 85 + 20


def test_a_window_of_hundreds_of_segments_and_ticks_in_flight_still_gives_samples():
    """200 ms round trips, 400 segments a round trip, a TSval tick per millisecond, a table
    of 4: samples thinned, never stopped."""
    r = router(CONFIG)
    rtt_ms, per_ms = 200, 2
    for t in range(3 * rtt_ms * per_ms):             # half a millisecond apart
        now = t * MS // per_ms
        at(r, seg(1000 + 100 * t, 1, payload=100, ts=(10_000 + now // MS, 1)), now)
        if now >= rtt_ms * MS:                       # each segment's ACK 200 ms after it
            k = t - rtt_ms * per_ms
            at(r, seg(1, 1100 + 100 * k, fwd=False, ts=(1, 10_000 + k // per_ms)), now)
    d = data_direction(r)
    assert d["ack"]["samples"] >= 2 and d["ack"]["min_us"] == 200_000
    assert d["ts"]["samples"] >= 2 and d["ts"]["min_us"] == 200_000


def test_state_is_bounded_and_evictions_are_counted():
    r = router(CONFIG)
    for k in range(10):
        at(r, seg(1000 + 100 * k, 1, payload=100), k * MS)
    assert r.elements["rtt"].counters()["pending_full"] == 6          # 4 timed, the rest not
    for port in range(10):
        frame = seg(1, 1, payload=10)
        frame[IP6_PAYLOAD:IP6_PAYLOAD + 2] = struct.pack("!H", 41000 + port)
        at(r, frame, 20 * MS)
    c = r.elements["rtt"].counters()
    assert c["flows"] == 8 and c["evicted"] == 3


def test_a_truncated_tcp_header_is_counted_and_the_packet_forwarded():
    r = router(CONFIG)
    frame = seg(1000, 1, payload=0)[:IP6_PAYLOAD + 10]
    frame[18:20] = struct.pack("!H", 10)                            # payload length: 10 bytes
    at(r, frame, 0)
    assert r.elements["tap"].counters()["errors"] == 1
    at(r, ipv6_frame(50, nh=17), 0)                                 # UDP: nothing to measure, no error
    assert r.elements["tap"].counters()["errors"] == 1
    batch = [Packet(f) for f in (seg(1000, 1, payload=100), frame, seg(1, 1100, fwd=False))]
    for pkt, t_ns in zip(batch, (0, 1 * MS, 30 * MS)):
        pkt.rx_ns = t_ns
    r.elements["tap"].push_batch(0, batch)                          # a bad one amid a batch
    assert r.elements["tap"].counters()["errors"] == 2
    assert data_direction(r)["ack"]["last_us"] == 30_000             # the others noted


def test_a_table_for_one_direction_only_is_refused():
    with pytest.raises(ConfigSyntaxError, match="max_flows must be at least 2"):
        router("FlowRTT(max_flows 1);")


def test_a_full_table_gives_up_entries_older_than_the_least_sample_to_time_a_queue_draining():
    """A 30 ms flow: sampled once, then a window of 4 (the table) waits in a long queue, then
    its queue empties: the first segment after is timed at the 30 ms again."""
    r = router(CONFIG)
    at(r, seg(1000, 1, payload=100), 0)
    at(r, seg(1, 1100, fwd=False), 30 * MS)                  # the least so far: 30 ms
    for k in range(4):                                       # the table fills, in a queue of 200 ms
        at(r, seg(1100 + 100 * k, 1, payload=100), (40 + k) * MS)
    at(r, seg(1500, 1, payload=100), 100 * MS)               # the queue empties: this one is timed ...
    at(r, seg(1, 1600, fwd=False), 130 * MS)                 # ... answered by the ACK that names it
    ack = data_direction(r)["ack"]
    assert ack["samples"] == 2 and ack["last_us"] == 30_000
    assert r.elements["rtt"].counters()["pending_full"] == 0
