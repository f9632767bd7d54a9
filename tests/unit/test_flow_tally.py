"""Per-flow drops and link losses at a node: counted per 5-tuple in bounded
tables, stamped into each packet's slot as its own flow's, read back by the sink's decoder."""
from int_node import ioam, ioam_decode
from int_node.flow_tally import FlowTally
from int_node.packet import Packet, flow_key, key_hash
from tests.helpers import ipv6_frame, push, router


def int_frame(sport):
    return ioam.insert_int(ipv6_frame(200, sport=sport), 2, 0, 0)


def test_a_full_queue_counts_each_flows_drops_and_the_transit_stamps_the_packets_own():
    r = router("Idle -> q :: Queue(2) -> Unqueue -> Discard; "
               "Idle -> loss :: RandomLoss(p 1.0) -> Discard; "
               "Idle -> t :: INTTransit(node_id 1, queue q, link loss) -> Discard;")
    q = r.elements["q"]
    q._listeners = []
    for sport in (1, 1, 1, 2, 1, 2, 2):          # 2 fit; then flow 1 loses 2, flow 2 loses 3
        push(r, "q", int_frame(sport))
    for _ in range(4):                            # flow 2 loses 4 packets on the link
        r.elements["loss"].push(0, Packet(int_frame(2)))
    assert q.drops == 5 and r.elements["loss"].dropped == 4
    stamped = {}
    for sport in (1, 2, 3):
        pkt = Packet(int_frame(sport))
        r.elements["t"].push(0, pkt)
        node = ioam_decode.decode_trace(ioam.strip_int(pkt.data).trace_raw).nodes[0]
        stamped[sport] = (node.state.queue_drops, node.state.flow_queue_drops, node.state.link_losses,
                          node.state.flow_link_losses)
    assert stamped == {1: (5, 2, 4, 0), 2: (5, 3, 4, 4), 3: (5, 0, 4, 0)}
    # the counters name each flow by the sink's flow id
    key1 = flow_key(ioam.strip_int(int_frame(1)).frame)
    assert q.counters()["flow_drops"][key_hash(key1)] == 2


def test_the_table_is_bounded_and_evicts_the_flow_counted_least_recently():
    t = FlowTally(max_flows=2)
    pkts = {s: Packet(int_frame(s)) for s in (1, 2, 3)}
    t.count(pkts[1])
    t.count(pkts[2])
    t.count(pkts[1])                 # flow 1 counted last: flow 2 goes first
    t.count(pkts[3])
    assert (t.of(pkts[1]), t.of(pkts[2]), t.of(pkts[3]), t.evicted) == (2, 0, 1, 1)
    assert FlowTally().of(Packet(bytearray(b"\x00" * 10))) == 0     # an empty table parses nothing


def test_a_packet_carries_the_drops_as_it_entered_the_queue_not_as_it_left():
    # A queued, then B of the same flow dropped behind it: A must not count B's drop, or
    # the sink would put it in the gap before A instead of the one B leaves
    r = router("Idle -> q :: Queue(1) -> Unqueue -> Discard; "
               "Idle -> t :: INTTransit(node_id 1, queue q) -> Discard;")
    q = r.elements["q"]
    q._listeners = []
    push(r, "q", int_frame(1))
    push(r, "q", int_frame(1))
    assert q.drops == 1
    a = q.pull(0)
    r.elements["t"].push(0, a)
    node = ioam_decode.decode_trace(ioam.strip_int(a.data).trace_raw).nodes[0]
    assert (node.state.queue_drops, node.state.flow_queue_drops) == (0, 0)
    push(r, "q", int_frame(1))                    # the next one of the flow counts it
    c = q.pull(0)
    r.elements["t"].push(0, c)
    node = ioam_decode.decode_trace(ioam.strip_int(c.data).trace_raw).nodes[0]
    assert (node.state.queue_drops, node.state.flow_queue_drops) == (1, 1)


def test_a_wired_port_stamps_its_rate_and_a_changed_rate_at_once():
    r = router("Idle -> q :: Queue(10) -> shape :: LinkShaper(8Mbps) -> Discard; "
               "Idle -> t :: INTTransit(node_id 1, queue q, shaper shape) -> Discard; "
               "Idle -> bare :: INTTransit(node_id 2) -> Discard;")

    def rate_kbps(transit):
        pkt = Packet(int_frame(1))
        r.elements[transit].push(0, pkt)
        return ioam_decode.decode_trace(ioam.strip_int(pkt.data).trace_raw).nodes[0].state.data_rate_kbps
    assert rate_kbps("t") == 8000 and rate_kbps("bare") == 0
    r.elements["shape"].rate = 2_000_000          # a link's rate changed at run time (linkctl)
    assert rate_kbps("t") == 2000
