import time

import pytest

from int_node.element import ConfigError
from int_node.eventloop import EventLoop
from int_node.elements.wireless import MCS_TABLE, mcs_for_rssi, per_for
from int_node.packet import IP6_HLIM_OFF, Packet
from tests.helpers import MAC_A, heap_frozen, ipv6_frame, push, router


def test_queue_drops_at_capacity_and_counts():
    r = router("Idle -> q :: Queue(3) -> Unqueue -> Discard;")
    q = r.elements["q"]
    q._listeners = []   # keep packets queued: Unqueue drains only when woken
    for _ in range(5):
        push(r, "q", ipv6_frame(100))
    assert (q.enqueued, q.drops, q.depth_pkts, q.depth_bytes) == (3, 2, 3, 3 * 154)
    assert q.pull(0) is not None and q.depth_pkts == 2


def test_queue_byte_capacity():
    r = router("Idle -> q :: Queue(capacity 100, capacity_bytes 400) -> Unqueue -> Discard;")
    q = r.elements["q"]
    q._listeners = []
    for _ in range(4):
        push(r, "q", ipv6_frame(100))
    assert q.depth_pkts == 2 and q.drops == 2 and q.capacity_limit_bytes == 400


def test_random_loss_fraction_and_runtime_change():
    r = router("Idle -> l :: RandomLoss(p 5%, seed 3) -> d :: Discard;")
    l = r.elements["l"]
    for _ in range(20000):
        push(r, "l", ipv6_frame(10))
    assert abs(l.dropped / 20000 - 0.05) < 0.006
    l.write_handler("p", "0")
    push(r, "l", ipv6_frame(10))
    assert l.passed == 20000 - l.dropped + 1
    with pytest.raises(ConfigError):
        l.write_handler("p", "2")


def test_wireless_channel_rssi_mcs_rate_and_losses():
    assert mcs_for_rssi(-50) == 7 and mcs_for_rssi(-78) == 1 and mcs_for_rssi(-95) == 0
    assert per_for(40, 7, 1500) < 1e-6 and per_for(MCS_TABLE[3][2], 3, 1500) == pytest.approx(0.1)
    r = router("Idle -> w :: WirelessChannel(distance_m 10, shadowing_sigma_db 0, loss 10%, seed 1) -> Discard;")
    w = r.elements["w"]
    assert w.rssi_dbm == pytest.approx(20 - 40.05 - 30) and w.mcs == 7 and w.data_rate_kbps == 65000
    for _ in range(10000):
        push(r, "w", ipv6_frame(1400))
    assert abs(w.link_losses / 10000 - 0.10) < 0.01 and w.error_losses == 0
    w.write_handler("distance_m", "150")         # far away: low MCS, errors appear
    w.write_handler("loss", "0")
    assert w.mcs < 7
    w.write_handler("distance_m", "400")
    before = w.error_losses
    for _ in range(2000):
        push(r, "w", ipv6_frame(1400))
    assert w.error_losses > before and w.mcs == 0


@pytest.mark.parametrize("config,counter", [
    ("RandomLoss(p 20%)", "dropped"),
    ("WirelessChannel(distance_m 10, shadowing_sigma_db 4, coherence 1ns, loss 20%)", "configured_losses")])
def test_a_written_seed_replays_the_same_losses_packet_by_packet(config, counter):
    """Common random numbers: every run given a seed sees the k-th packet's same fate,
    whatever came before the seed was written or how the packets were spaced."""
    r = router(f"Idle -> l :: {config} -> Discard;")
    el = r.elements["l"]

    def fates(n, spacing_ns):
        out = []
        for k in range(n):
            pkt = ipv6_frame(1400)
            before = getattr(el, counter)
            push(r, "l", pkt, rx_ns=k * spacing_ns)
            out.append(getattr(el, counter) > before)
        return out
    el.write_handler("seed", "42")
    first = fates(500, 1_000)
    fates(37, 5)                                  # other traffic in between
    el.write_handler("seed", "42")
    assert fates(500, 2_000_000) == first         # the same fates, other timing
    el.write_handler("seed", "43")
    assert fates(500, 1_000) != first
    assert 0.12 < sum(first) / 500 < 0.28
    with pytest.raises(ConfigError):
        el.write_handler("seed", "x")


def test_lookup_longest_prefix_and_no_route():
    r = router("""Idle -> rt :: IPv6Lookup(2001:db8::/32 0, 2001:db8::2/128 1);
                  rt[0] -> a :: Counter -> Discard; rt[1] -> b :: Counter -> Discard;""")
    push(r, "rt", ipv6_frame(dst=2))
    push(r, "rt", ipv6_frame(dst=3))
    f = ipv6_frame()
    f[38] = 0x30   # 3001:... no route
    push(r, "rt", f)
    assert (r.elements["a"].packets, r.elements["b"].packets, r.elements["rt"].no_route) == (1, 1, 1)


def test_hop_limit_and_ether_filter():
    r = router("""Idle -> e :: EtherFilter(02:00:00:00:00:01) -> h :: DecHopLimit -> c :: Counter -> Discard;""")
    push(r, "e", ipv6_frame(hlim=5))
    push(r, "e", ipv6_frame(hlim=1))
    push(r, "e", ipv6_frame(dst_mac=b"\x33\x33\0\0\0\1"))
    assert r.elements["c"].packets == 1 and r.elements["h"].expired == 1 and r.elements["e"].other_dst == 1


def test_flow_meter_counts_flows_and_rate():
    r = router("Idle -> m :: FlowMeter(interval 10ms) -> Discard;")
    m = r.elements["m"]
    t0 = 1_000_000_000
    for i in range(1000):     # 1000 packets over 1 s from 4 flows
        r.elements["m"].push(0, Packet(ipv6_frame(sport=1000 + i % 4), t0 + i * 1_000_000))
    assert m.flow_count == 4
    assert m.arrival_rate_pps == pytest.approx(1000, rel=0.1)


def _run_loop(r, seconds):
    r.loop.call_later(int(seconds * 1e9), r.loop.stop)
    r.loop.run(handle_signals=())


def test_link_shaper_rate_and_delay_on_the_real_event_loop():
    r = router("""Idle -> q :: Queue(1000) -> s :: LinkShaper(8Mbps) -> d :: Delay(20ms) -> c :: Counter -> Discard;""")
    times = []
    c = r.elements["c"]
    orig = c.push
    c.push = lambda port, pkt: (times.append(time.monotonic_ns()), orig(port, pkt))
    with heap_frozen():
        start = time.monotonic_ns()
        for _ in range(200):      # 200 x 1000 bytes at 8 Mbit/s = 200 ms of serialisation
            push(r, "q", bytearray(1000))
        _run_loop(r, 0.35)
    assert len(times) == 200
    first_ms = (times[0] - start) / 1e6
    span_ms = (times[-1] - times[0]) / 1e6
    s, d = r.elements["s"], r.elements["d"]
    reported_late_ms = (s.behind_us_total + s.late_us_max + d.late_us_max) / 1e3
    # 1 ms serialisation + 20 ms delay; never early, late only by what a shared machine
    # may add to a wake-up (25.04 ms seen in make test) or what the elements report as late
    # (31.1 ms seen in a clean-clone make test)
    assert 20.5 < first_ms < 30 + reported_late_ms, (first_ms, s.counters(), d.counters())
    # At the nominal rate, plus only the wake-ups the elements report as late
    # (a descheduled test process once stretched 199 ms to 247 in make test).
    assert 199 * 0.95 < span_ms < 199 * 1.05 + reported_late_ms, (span_ms, s.counters(), d.counters())


def test_a_delay_runs_from_the_packets_arrival_not_from_when_the_loop_got_round_to_it():
    r = router("Idle -> d :: Delay(1ms) -> Discard;")
    d = r.elements["d"]
    arrived_wall_ns = time.time_ns() - 600_000          # in the kernel 0.6 ms before the loop read it
    before = time.monotonic_ns()
    push(r, "d", ipv6_frame(100), rx_ns=arrived_wall_ns)
    release_ns = d._held[0][0]
    assert before + 300_000 <= release_ns <= time.monotonic_ns() + 500_000     # 1 ms from the arrival
    push(r, "d", ipv6_frame(100), rx_ns=arrived_wall_ns - 10**6)                # due before the one ahead
    assert d._held[1][0] == release_ns                                          # FIFO: not before it
    push(r, "d", ipv6_frame(100), rx_ns=time.time_ns() - 3600 * 10**9)          # a wall clock stepped back
    assert d._held[2][0] >= time.monotonic_ns() + 900_000 - 100_000             # from now, not an hour ago


def test_a_packet_the_node_got_after_its_delay_was_up_goes_straight_on_counted_late():
    r = router("Idle -> d :: Delay(1ms) -> c :: Counter -> Discard;")
    d, c = r.elements["d"], r.elements["c"]
    push(r, "d", ipv6_frame(100), rx_ns=time.time_ns() - 3_000_000)    # read 3 ms after it arrived
    assert c.packets == 1 and not d._held and 1900 <= d.late_us_max < 100_000


def test_a_delay_behind_a_shaper_runs_from_the_shapers_last_bit_out():
    r = router("Idle -> q :: Queue(10) -> s :: LinkShaper(8Mbps, catchup 1s) -> d :: Delay(1ms) -> Discard;")
    s, d = r.elements["s"], r.elements["d"]
    d.push = lambda port, pkt: d._held.append((pkt.due_ns, pkt))
    start = time.monotonic_ns()
    push(r, "q", bytearray(1000))
    push(r, "q", bytearray(1000))        # 1 ms each at 8 Mbit/s: the second waits in the queue
    first = s._inflight
    assert 0 <= first.due_ns - start - 1_000_000 <= time.monotonic_ns() - start
    s._on_timer()                        # the timer, however late: the first goes on, due at its last bit
    assert [due for due, _ in d._held] == [first.due_ns]
    assert s._inflight.due_ns == s.busy_until_ns == first.due_ns + 1_000_000


def test_writable_handlers_report_unknown_names():
    r = router("Idle -> d :: Delay(1ms) -> Discard;")
    d = r.elements["d"]
    d.write_handler("delay", "5ms")
    assert d.read_handler("delay") == 5_000_000
    with pytest.raises(ConfigError, match="not writable"):
        d.write_handler("packets", "3")


def _fake_ring(statuses, frame_bytes=256, batches=None, config=("eth0",)):
    """A FromDevice reading a TPACKET_V2 ring held in memory (no socket); ``batches``
    collects the sizes of the batches it pushed."""
    import struct
    from int_node.elements.devices import FromDevice
    buf = bytearray(frame_bytes * len(statuses))
    for i, st in enumerate(statuses):
        # status, len, snaplen, mac offset, net offset, sec, nsec; payload at 64
        struct.pack_into("=IIIHHII", buf, i * frame_bytes, st, 60, 60, 64, 78, 1, i)
        buf[i * frame_bytes + 64:i * frame_bytes + 64 + 60] = bytes([i]) * 60
    fd = FromDevice("in")
    fd.configure(list(config))
    fd._mv, fd._frame_size, fd._nframes, fd._idx = memoryview(buf), frame_bytes, len(statuses), 0
    fd._empty_since_ns, fd.port_id = 0, 1
    got = []

    class Sink:
        def push_batch(self, port, batch):
            got.extend(pkt.data[0] for pkt in batch)
            if batches is not None:
                batches.append(len(batch))
    fd._out = [(Sink(), 0)]
    return fd, got


def test_from_device_pushes_what_it_read_in_batches_of_at_most_batch():
    sizes = []
    fd, got = _fake_ring([1] * 7 + [0], batches=sizes, config=("eth0", "batch 3"))
    fd._read_ring()
    assert got == list(range(7)) and sizes == [3, 3, 1] and fd.packets == 7


def test_from_device_resynchronises_a_ring_whose_ends_drifted_apart():
    # Frame 0 is the kernel's, 3-5 are ours: stuck until RESYNC_AFTER_NS passes.
    fd, got = _fake_ring([0, 0, 0, 1, 1, 1, 0, 0])
    fd.RESYNC_AFTER_NS = 1_000_000
    fd._read_ring()
    fd._read_ring()
    assert got == [] and fd.ring_resyncs == 0      # a frame in flight is waited for
    time.sleep(0.002)
    fd._read_ring()                                 # moves to the oldest handed-over frame
    fd._read_ring()
    assert fd.ring_resyncs == 1 and got == [3, 4, 5] and fd._idx == 6


def test_from_device_in_step_ring_never_resyncs():
    fd, got = _fake_ring([1, 1, 0, 0])
    fd.RESYNC_AFTER_NS = 0
    for _ in range(3):      # empty wake-ups with nothing handed over: nothing to skip to
        fd._read_ring()
    assert got == [0, 1] and fd.ring_resyncs == 0 and fd._idx == 2


@pytest.mark.parametrize("nh", [6, 17])
def test_flow_key_is_the_same_before_int_insertion_and_after_stripping(nh):
    # the source keys a frame without extension headers (fast path), the sink
    # after stripping, attribution after walking HbH + DOH: all must agree
    from int_node import ioam
    from int_node.packet import flow_key
    frame = ipv6_frame(nh=nh, sport=1234, dport=80)
    with_int = ioam.insert_int(frame, 2, seq=7, ts_ns=1)
    key = flow_key(frame)
    assert key == flow_key(bytes(frame)) == flow_key(with_int)
    assert key == flow_key(ioam.strip_int(with_int).frame)
    assert key[32] == nh and key[33:] == bytes.fromhex("04d20050")


def _stamped(r, frame, rx_ns):
    from int_node import ioam, ioam_decode
    pkt = Packet(ioam.insert_int(frame, 2, 0, 0), rx_ns)
    r.elements["t"].push(0, pkt)
    return ioam_decode.decode_trace(ioam.strip_int(pkt.data).trace_raw)


def test_transit_stamps_the_receive_time_and_the_time_spent_as_transit_delay():
    r = router("Idle -> t :: INTTransit(node_id 1) -> Discard;")
    rx_ns = time.time_ns() - 5_000_000                      # received 5 ms ago
    node = _stamped(r, ipv6_frame(100), rx_ns).nodes[0]
    assert node.ts_sec * 1_000_000_000 + node.ts_frac == rx_ns   # RFC 9197: when the node received it
    assert 5_000_000 <= node.transit_delay_ns < 500_000_000


def test_int_namespace_is_private_use_and_foreign_traces_are_left_alone():
    from int_node import ioam
    assert 0x8000 <= ioam.DEFAULT_NAMESPACE <= 0xFFFF
    for elem in ("INTSource(namespace_id 0x1CC0)", "INTTransit(node_id 1, namespace_id 7424)"):
        with pytest.raises(Exception, match="private-use range"):
            router(f"Idle -> {elem} -> Discard;")
    r = router("Idle -> t :: INTTransit(node_id 1, namespace_id 0x9000) -> Discard;")
    trace = _stamped(r, ipv6_frame(100), time.time_ns())     # a trace of the default namespace
    assert trace.nodes == [] and r.elements["t"].foreign_namespace == 1


def test_deferred_callbacks_run_once_after_the_rounds_work_and_may_defer_more():
    loop = EventLoop()
    order = []

    def flush():
        order.append("flush")
        loop.defer(lambda: order.append("after flush"))

    def timer_work(tag):
        order.append(tag)
        if "flush-due" not in order:
            order.append("flush-due")
            loop.defer(flush)

    due_ns = time.monotonic_ns() + 1_000_000
    for tag in ("t1", "t2"):
        loop.timer(lambda tag=tag: timer_work(tag)).schedule_at(due_ns)
    loop.call_later(50_000_000, loop.stop)
    loop.run(handle_signals=())
    # both timers of the round ran before the one deferred flush, which deferred one more
    assert order == ["t1", "flush-due", "t2", "flush", "after flush"], order
    loop.close()


# -- batches (FastClick's model): the same packets, counters and order as one at a time --

BATCH_PATH = ("src :: Idle -> EtherFilter(02:00:00:00:00:01) -> cls :: Classifier(tcp, -); cls[1] -> other :: Discard;"
              "cls -> INTSource(max_hops 2, mtu 9000) -> rt :: IPv6Lookup(2001:db8::2/128 0, ::/0 1);"
              "rt[0] -> DecHopLimit -> m :: FlowMeter -> q :: Queue(3) -> Unqueue"
              " -> INTTransit(node_id 1, queue q, meter m) -> EtherRewrite(02:00:00:00:00:03, 02:00:00:00:00:04)"
              " -> c0 :: Counter -> out0 :: Discard;"
              "rt[1] -> c1 :: Counter -> out1 :: Discard;")


def _mixed_frames():
    """TCP to two destinations, UDP, another host's MAC, an expiring hop limit."""
    frames = []
    for k in range(40):
        if k % 7 == 3:
            frames.append(ipv6_frame(100, nh=17, sport=k))
        elif k % 11 == 5:
            frames.append(ipv6_frame(100, dst_mac=bytes(6), sport=k))
        elif k % 13 == 6:
            frames.append(ipv6_frame(100, hlim=1, sport=k))
        else:
            frames.append(ipv6_frame(100, dst=2 if k % 3 else 9, sport=k))
    return frames


def test_a_batch_gives_what_frames_one_at_a_time_give():
    frames = _mixed_frames()
    one, many = router(BATCH_PATH), router(BATCH_PATH)
    first, port = one.elements["src"]._out[0]
    for f in frames:
        first.push(port, Packet(bytearray(f), 1))
    first, port = many.elements["src"]._out[0]
    first.push_batch(port, [Packet(bytearray(f), 1) for f in frames])
    c, c_one = many.counters(), one.counters()
    # the queue held the batch's frames until its puller woke: its high-water mark is
    # the batch's; every count is the same
    assert c_one["q"].pop("highwater_pkts") == 1 and c["q"].pop("highwater_pkts") == 3
    assert c_one == c
    assert c["q"]["drops"] == 0 and c["c0"]["packets"] > 10 and c["c1"]["packets"] > 5   # Queue(3): the puller woke
    assert c["other"]["dropped"] > 0 and many.element_errors == 0


def test_a_packet_that_raises_is_counted_and_the_rest_of_its_batch_goes_on():
    r = router("src :: Idle -> DecHopLimit -> d :: Discard;")
    first, port = r.elements["src"]._out[0]
    first.push_batch(port, [Packet(bytearray(ipv6_frame(10)), 1), Packet(bytearray(b"short"), 1),
                            Packet(bytearray(ipv6_frame(10)), 1)])
    assert r.element_errors == 1 and r.elements["d"].dropped == 2


def test_a_queue_fed_a_batch_drops_as_frames_do_when_its_puller_is_busy():
    r = router("Idle -> q :: Queue(3) -> Unqueue -> d :: Discard;")
    q = r.elements["q"]
    q._listeners = []       # a puller that takes nothing now (a link busy sending)
    q.push_batch(0, [Packet(bytearray(ipv6_frame(100)), 1) for _ in range(5)])
    assert (q.enqueued, q.drops, q.highwater_pkts) == (3, 2, 3)


@pytest.mark.parametrize("second_arrives_ms, behind_ms", [(0.5, 7), (9.0, 0)])
def test_link_shaper_counts_behind_only_the_time_a_packet_waited_for_a_late_wakeup(monkeypatch, second_arrives_ms,
                                                                                 behind_ms):
    """1 ms per packet; the timer of the first fires at 10 ms, 9 late: with catchup 2 ms the
    second starts at 8 ms. Waiting since 1 ms (it came at 0.5), the link lost 7 ms; come at
    9 ms, it lost nothing (the link had idled, not fallen behind)."""
    import int_node.elements.link as link
    clock = {"mono": 1_000_000_000}
    wall_minus_mono = 5_000_000_000

    class FakeTime:
        monotonic_ns = staticmethod(lambda: clock["mono"])
        time_ns = staticmethod(lambda: clock["mono"] + wall_minus_mono)
    monkeypatch.setattr(link, "time", FakeTime)
    r = router("Idle -> q :: Queue(10) -> s :: LinkShaper(8Mbps) -> c :: Counter -> Discard;")
    s, t0 = r.elements["s"], clock["mono"]
    r.elements["q"].push(0, Packet(bytearray(1000), t0 + wall_minus_mono))
    r.elements["q"].push(0, Packet(bytearray(1000), t0 + int(second_arrives_ms * 1e6) + wall_minus_mono))
    clock["mono"] = t0 + 10_000_000
    s._on_timer()
    assert r.elements["c"].packets == 2 and s.behind_us_total == behind_ms * 1000   # the second due by 10 ms: out too
    assert s.late_us_max == 9000
