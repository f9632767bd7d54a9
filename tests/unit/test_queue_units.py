"""INT advertises queue depth and capacity in one unit: depth <= capacity always,
so the free capacity Eq. (1) reads is never negative (frames with INT headers
are larger than the 1500 B a packet-bounded queue's capacity counts)."""
from hypothesis import given, settings
from hypothesis import strategies as st

from int_node import ioam, ioam_decode
from int_node.packet import Packet
from tests.helpers import ipv6_frame, push, router

ops = st.lists(st.one_of(st.integers(60, 1666 - 54), st.just(None)), max_size=300)


@settings(max_examples=200, deadline=None)
@given(capacity=st.integers(1, 50), capacity_bytes=st.sampled_from([0, 1500, 20000, 75000, 150000]), ops=ops)
def test_advertised_depth_never_exceeds_advertised_capacity(capacity, capacity_bytes, ops):
    r = router(f"Idle -> q :: Queue(capacity {capacity}, capacity_bytes {capacity_bytes}) -> Unqueue -> Discard;")
    q = r.elements["q"]
    q._listeners = []
    for op in ops:      # a payload size enqueues, None dequeues
        if op is None:
            q.pull(0)
        else:
            push(r, "q", ipv6_frame(op))
        assert 0 <= q.advertised_depth_bytes <= q.capacity_limit_bytes
    if q.depth_pkts == capacity:
        assert q.advertised_depth_bytes == q.capacity_limit_bytes   # full reads as full


def test_a_full_queue_of_int_frames_is_stamped_as_exactly_full():
    # 100 packets of 1,706 B (1,514 B frame + 192 B INT): a depth in frame bytes said 170,600 of 150,000
    r = router("Idle -> q :: Queue(100) -> Unqueue -> Discard; Idle -> t :: INTTransit(node_id 1, queue q) -> Discard;")
    q = r.elements["q"]
    q._listeners = []
    for _ in range(100):
        push(r, "q", ioam.insert_int(ipv6_frame(1460), 2, 0, 0))
    assert q.depth_bytes == 100 * 1706
    pkt = Packet(ioam.insert_int(ipv6_frame(1460), 2, 0, 0))
    r.elements["t"].push(0, pkt)
    node = ioam_decode.decode_trace(ioam.strip_int(pkt.data).trace_raw).nodes[0]
    assert (node.queue_depth_bytes, node.state.queue_capacity_bytes, node.buffer_occupancy) == (150_000, 150_000, 100)
