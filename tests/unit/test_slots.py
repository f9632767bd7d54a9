"""FlowSlots / SlotTap at a queue (Dragonfly's first-packet-per-slot capture), and the
CBIQ telemetry.cbiq computes from what they keep against the queue's exact per-flow bytes."""
import numpy as np
import pytest

from int_node.config import ConfigSyntaxError
from int_node.element import ConfigError
from int_node.packet import Packet
from telemetry.cbiq import flight_bytes, per_slot, slot_inputs
from tests.helpers import router, tcp_frame, ipv6_frame

CONFIG = """
slots :: FlowSlots(slot 1ms, keep 1s, max_flows 2, queue q);
Idle -> tin :: SlotTap(slots, in) -> q :: Queue(100, flow_bytes true) -> tout :: SlotTap(slots, out) -> Discard;
Idle -> tack :: SlotTap(slots, ack) -> Discard;
"""
PAYLOAD = 1000


def bed(config=CONFIG):
    r = router(config)
    r.elements["q"]._listeners = []      # the test drains the queue itself
    return r


def arrive(r, seq, t_ns, sport=40000):
    tin = r.elements["tin"]
    tin.clock = lambda: t_ns
    tin.push(0, Packet(tcp_frame(seq, payload_len=PAYLOAD, sport=sport)))


def _pull_through(r, t_ns):
    """The queue's head leaves through the egress tap at ``t_ns``."""
    pkt = r.elements["q"].pull(0)
    tout = r.elements["tout"]
    tout.clock = lambda: t_ns
    tout.push(0, pkt)
    return pkt


def test_only_each_slots_first_packet_is_kept_per_side_with_the_exact_bytes_queued():
    r = bed()
    ms = 1_000_000
    for i in range(6):                            # 3 packets a ms in, from slot 10
        arrive(r, 1000 + i * PAYLOAD, 10 * ms + i * ms // 3)
    for i in range(2):                            # 2 leave in slot 11
        _pull_through(r, 11 * ms + i * 100)
    flows = r.elements["slots"].read_handler("slots")
    (entries,) = flows.values()
    assert [e[:2] for e in entries["in"]] == [[10, 1000], [11, 4000]]
    frame = len(tcp_frame(0, payload_len=PAYLOAD))
    # the exact bytes queued as each slot's first packet passed: 0 and 3 frames at ingress;
    # at egress, after the first departure, 5 frames
    assert [e[2] for e in entries["in"]] == [0, 3 * frame]
    assert entries["out"] == [[11, 1000, 5 * frame]]
    assert r.elements["slots"].counters()["entries"] == 3


def test_cbiq_from_the_slots_matches_the_exact_bytes_on_a_steady_queue():
    """A flow sending 4 packets a ms into a port sending 3: the queue grows a packet a ms;
    the sequence-derived CBIQ is the queue's own count at each slot's end."""
    r = bed()
    ms, seq, exact = 1_000_000, 0, {}
    for slot in range(40):
        for k in range(4):
            arrive(r, seq, slot * ms + k * ms // 4)
            seq += PAYLOAD
        for k in range(3):
            _pull_through(r, slot * ms + k * ms // 3 + 1)
        exact[slot] = r.elements["q"].flow_bytes and next(iter(r.elements["q"].flow_bytes.values()))
    (entries,) = r.elements["slots"].read_handler("slots").values()
    (inseq, at_in), (outseq, _) = (per_slot(entries[side], 0, 40) for side in ("in", "out"))
    cbiq, thr = slot_inputs(inseq, outseq)
    frame = len(tcp_frame(0, payload_len=PAYLOAD))
    queued_pkts = np.array([exact[t] / frame for t in range(39)])
    assert (cbiq / PAYLOAD).tolist() == queued_pkts.tolist()
    # the exact count as each slot's first packet arrived: the queue at the slot before's end
    assert (at_in[1:] / frame).tolist() == queued_pkts.tolist()
    assert thr.tolist() == [4 * PAYLOAD] * 39


def acknowledge(r, ack, t_ns, sport=40000, flags=0x10):
    """The receiver's ACK of the flow from ``sport``, reaching the node at ``t_ns``."""
    tack = r.elements["tack"]
    tack.clock = lambda: t_ns
    tack.push(0, Packet(tcp_frame(0, ack=ack, flags=flags, sport=5201, dport=sport, src=2, dst=1)))


def test_the_ack_tap_keeps_each_slots_first_ack_of_a_monitored_flow_and_adds_no_flow():
    r = bed()
    ms = 1_000_000
    acknowledge(r, 500, 1 * ms)                    # not monitored yet: nothing kept
    arrive(r, 1000, 2 * ms)
    acknowledge(r, 1000, 3 * ms)
    acknowledge(r, 2000, 3 * ms + 10)               # the same slot: not its first
    acknowledge(r, 3000, 4 * ms, flags=0x02)        # a SYN carries no acknowledgement
    acknowledge(r, 4000, 5 * ms, sport=40001)       # another flow's ACK: not monitored
    slots = r.elements["slots"]
    assert slots.counters()["flows"] == 1 and slots.evicted == 0
    (entries,) = slots.read_handler("take").values()
    assert entries["ack"] == [[3, 1000, -1]]


def test_bytes_in_flight_are_the_ingress_sequence_less_the_ack_at_each_slots_end():
    """A window of 10 packets: the sender sends a packet for each one acknowledged, so
    what is beyond the node is its window, the queue included, less what the next slot's
    first ACK covers (read as acknowledged by the slot's end: here one packet)."""
    r = bed()
    ms, window = 1_000_000, 10
    for k in range(window):                         # slot 0: the window's first flight
        arrive(r, k * PAYLOAD, k * 1000)
    for slot in range(1, 30):                       # then one out, one acked, one in, a slot
        _pull_through(r, slot * ms)
        acknowledge(r, (slot - 1) * PAYLOAD + PAYLOAD, slot * ms + 10)
        arrive(r, (window + slot - 1) * PAYLOAD, slot * ms + 20)
    (entries,) = r.elements["slots"].read_handler("slots").values()
    (inseq, _), (ack, _) = per_slot(entries["in"], 0, 30), per_slot(entries["ack"], 0, 30)
    flight = flight_bytes(inseq, ack)
    assert flight.tolist() == [(window - 1) * PAYLOAD] * 29
    ack[21:] = np.nan                               # no ACK seen after slot 20: not known yet
    assert np.isnan(flight_bytes(inseq, ack)[20:]).all() and not np.isnan(flight_bytes(inseq, ack)[:20]).any()


def test_the_table_is_bounded_and_counts_its_evictions_and_leaves_udp_alone():
    r = bed()
    for sport in (1, 2, 3):
        arrive(r, 0, 0, sport=sport)
    slots = r.elements["slots"]
    assert slots.counters()["flows"] == 2 and slots.evicted == 1
    acknowledge(r, 500, 1_000_000, sport=1)           # the evicted flow's ACK: nothing kept
    acknowledge(r, 500, 1_000_000, sport=2)
    assert [len(f["ack"]) for f in slots.read_handler("slots").values()] == [1, 0]
    assert len(slots.by_ack_key) == 2
    r.elements["tin"].push(0, Packet(ipv6_frame(100, nh=17)))
    assert slots.counters()["flows"] == 2 and r.elements["q"].depth_pkts == 4


def test_a_truncated_tcp_header_is_counted_and_forwarded():
    r = bed()
    r.elements["tin"].push(0, Packet(ipv6_frame(6, nh=6)))
    assert r.elements["tin"].errors == 1 and r.elements["q"].depth_pkts == 1


def test_random_sampling_keeps_about_that_share():
    r = bed(CONFIG.replace("max_flows 2", "max_flows 2, sample 0.25, seed 1"))
    for i in range(4000):
        arrive(r, i * PAYLOAD, i * 10_000_000)            # one packet every 10 slots: each its slot's first
    slots = r.elements["slots"]
    assert slots.sampled_out / slots.seen == pytest.approx(0.75, abs=0.03)


def test_sampling_is_changed_on_a_running_node_and_a_share_of_zero_refused():
    r = bed()
    slots = r.elements["slots"]
    slots.write_handler("sample", "6.25 %")
    for i in range(4000):
        arrive(r, i * PAYLOAD, i * 10_000_000)
    assert slots.sampled_out / slots.seen == pytest.approx(15 / 16, abs=0.02)
    with pytest.raises(ConfigError, match="above 0"):
        slots.write_handler("sample", "0")
    assert slots.sample == pytest.approx(0.0625)


@pytest.mark.parametrize("config,message", [
    ("slots :: FlowSlots(queue q); Idle -> q :: Queue(10) -> Unqueue -> Discard;", "does not count bytes per flow"),
    ("slots :: FlowSlots(slot 2ms, keep 1ms);", "keep must be at least one slot"),
    ("slots :: FlowSlots(sample 0);", "sample"),
    ("slots :: FlowSlots; Idle -> SlotTap(slots, sideways) -> Discard;", "side must be 'in', 'out' or 'ack'"),
    ("Idle -> SlotTap(nothere, in) -> Discard;", "no element named 'nothere'"),
])
def test_configuration_errors_name_the_problem(config, message):
    with pytest.raises((ConfigError, ConfigSyntaxError), match=message):
        router(config)


def test_take_hands_each_entry_over_once():
    r = bed()
    arrive(r, 1000, 5_000_000)
    slots = r.elements["slots"]
    first = slots.read_handler("take")
    assert [e[:2] for (f,) in [first.values()] for e in f["in"]] == [[5, 1000]]
    assert slots.read_handler("take") == {}
    arrive(r, 2000, 5_500_000)                  # the same slot: not its first packet
    arrive(r, 3000, 6_000_000)
    assert [e[:2] for e in next(iter(slots.read_handler("take").values()))["in"]] == [[6, 3000]]
