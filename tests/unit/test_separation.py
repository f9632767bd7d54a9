"""RTT separation at the node: Jenks natural breaks, the Count-Min Sketch, DRR, FlowSplit and
the RTTSeparation control loop on packets and RTTs with known answers."""
import math
import random

import pytest

from int_node.config import ConfigSyntaxError
from int_node.element import ConfigError
from int_node.jenks import classify, goodness_of_variance_fit, natural_breaks
from int_node.packet import Packet, flow_key
from int_node.sketch import CountMinSketch
from tests.helpers import ipv6_frame, router

MS = 1_000_000


# -- Jenks ---------------------------------------------------------------------------------
def test_jenks_finds_the_obvious_groups_and_their_fit_is_near_one():
    rtts = [2.0, 2.2, 2.1, 20.0, 21.0, 40.5, 40.0, 39.5, 60.0, 61.0]
    breaks = natural_breaks(rtts, 4)
    assert breaks == [2.0, 2.2, 21.0, 40.5, 61.0]
    assert [classify(v, breaks) for v in (2.1, 20.0, 40.0, 60.0, 100.0)] == [0, 1, 2, 3, 3]
    assert goodness_of_variance_fit(rtts, breaks) > 0.99
    assert goodness_of_variance_fit(rtts, natural_breaks(rtts, 2)) < goodness_of_variance_fit(rtts, breaks)


def test_jenks_gives_jenkspys_breaks():
    jenkspy = pytest.importorskip("jenkspy")
    rng = random.Random(7)
    for _ in range(60):
        values = [round(rng.lognormvariate(3, 1), 3) for _ in range(rng.randint(6, 80))]
        k = rng.randint(2, 5)
        if len(set(values)) <= k:
            continue
        assert natural_breaks(values, k) == pytest.approx([float(b) for b in jenkspy.jenks_breaks(values, n_classes=k)])


def test_jenks_is_exact_on_many_repeated_values():
    # divide and conquer over the cuts must find the optimum the full scan finds: the same
    # squared deviations as jenkspy's breaks (ties may pick other, equally good, breaks)
    jenkspy = pytest.importorskip("jenkspy")
    rng = random.Random(11)
    for _ in range(8):
        values = [round(rng.lognormvariate(3, 1.2), 1) for _ in range(rng.randint(200, 600))]
        k = rng.randint(2, 6)
        ours, theirs = natural_breaks(values, k), [float(b) for b in jenkspy.jenks_breaks(values, n_classes=k)]
        assert goodness_of_variance_fit(values, ours) == pytest.approx(goodness_of_variance_fit(values, theirs),
                                                                        abs=1e-12)


def test_jenks_with_fewer_distinct_values_than_classes_gives_each_its_own():
    assert natural_breaks([5.0, 5.0, 9.0], 4) == [5.0, 5.0, 9.0]
    assert [classify(v, [5.0, 5.0, 9.0]) for v in (5.0, 9.0)] == [0, 1]
    with pytest.raises(ValueError):
        natural_breaks([], 2)


# -- Count-Min Sketch -----------------------------------------------------------------------
def test_the_sketch_never_counts_less_and_keeps_its_error_bound():
    cms = CountMinSketch.for_error(eps=0.01, delta=0.01)
    assert cms.eps <= 0.01 and cms.delta <= 0.01
    rng = random.Random(3)
    truth = {}
    for _ in range(50_000):                      # a few heavy keys among many light ones
        key = ("heavy", rng.randrange(5)) if rng.random() < 0.3 else ("light", rng.randrange(3000))
        n = rng.randint(60, 1500)
        truth[key] = truth.get(key, 0) + n
        cms.add(key, n)
    over = [cms.estimate(k) - v for k, v in truth.items()]
    assert min(over) >= 0
    beyond = sum(o > cms.eps * cms.total for o in over)
    assert beyond <= 2 * cms.delta * len(truth) + 1       # the bound holds but for ~delta of keys


def test_a_small_sketch_overcounts_and_clear_forgets():
    cms = CountMinSketch(width=4, depth=1)
    for k in range(40):
        cms.add(k, 10)
    assert cms.estimate(0) > 10                   # collisions: never fewer, here more
    cms.clear()
    assert cms.estimate(0) == 0 and cms.total == 0


# -- DRR --------------------------------------------------------------------------------------
def unwoken(config):
    """A router whose queues wake no puller: the test pulls the scheduler itself."""
    r = router(config)
    for q in ("q0", "q1"):
        r.elements[q]._listeners.clear()
    return r


def drr_router(weights=None, sizes=(1000, 1000)):
    r = unwoken("q0 :: Queue(1000); q1 :: Queue(1000); sched :: DRR(quantum 1500);"
                "Idle -> q0 -> [0]sched; Idle -> q1 -> [1]sched; sched -> Unqueue -> Discard;")
    for q, size in zip(("q0", "q1"), sizes):
        for _ in range(400):
            r.elements[q].push(0, Packet(ipv6_frame(size - 54)))
    if weights:
        r.elements["sched"].write_handler("weights", weights)
    return r


def pulled_bytes(r, n):
    sched = r.elements["sched"]
    for _ in range(n):
        assert sched.pull(0) is not None
    return sched.sent_bytes


def test_drr_shares_bytes_by_weight():
    r = drr_router("1 3")
    sent = pulled_bytes(r, 200)
    assert sent[1] / sent[0] == pytest.approx(3, rel=0.1)


def test_drr_is_fair_in_bytes_not_packets():
    r = drr_router(sizes=(1500, 300))
    sent = pulled_bytes(r, 300)
    assert sent[0] / sent[1] == pytest.approx(1, rel=0.1)


def test_drr_gives_an_idle_queue_nothing_to_save_up_and_empties_to_none():
    r = unwoken("q0 :: Queue(100); q1 :: Queue(100); sched :: DRR;"
                "Idle -> q0 -> [0]sched; Idle -> q1 -> [1]sched; sched -> Unqueue -> Discard;")
    sched = r.elements["sched"]
    for _ in range(5):
        r.elements["q0"].push(0, Packet(ipv6_frame(900)))
    assert [sched.pull(0) is not None for _ in range(6)] == [True] * 5 + [False]
    assert sched._deficit == [0, 0]
    with pytest.raises(ConfigError, match="weights"):
        sched.write_handler("weights", "1 0")


# -- FlowSplit -------------------------------------------------------------------------------
SPLIT = ("split :: FlowSplit(queues 2, udp true, long_bytes 10kB); Idle -> split;"
         "split[0] -> c0 :: Counter -> Discard; split[1] -> c1 :: Counter -> Discard;"
         "split[2] -> cu :: Counter -> Discard;")


def test_a_flow_is_tracked_once_past_long_bytes_and_follows_its_table_entry():
    r = router(SPLIT)
    split = r.elements["split"]
    frame = ipv6_frame(946, sport=1000)               # 1000-byte frames
    for k in range(9):
        split.push(0, Packet(bytearray(frame), k))
    assert not split.tracked                          # 9 kB
    split.push(0, Packet(bytearray(frame), 9))
    key = flow_key(frame)
    assert split.tracked[key].bytes == 10_000
    split.table[key] = 1
    split.push(0, Packet(bytearray(frame), 10))
    assert (r.elements["c0"].packets, r.elements["c1"].packets) == (10, 1)


AGED = ("split :: FlowSplit(queues 2, long_bytes 1MB, long_age 1s, max_flows 2); Idle -> split;"
        "split[0] -> Discard; split[1] -> Discard;")


def test_a_slow_flow_is_tracked_once_it_has_sent_for_long_age_and_a_gap_restarts_its_clock():
    split = router(AGED).elements["split"]
    slow, paused = ipv6_frame(46, sport=1000), ipv6_frame(46, sport=2000)   # 100-byte frames
    t0 = 5000 * MS                                    # (a packet's time 0 would read the clock)
    for t_ms in range(0, 1000, 100):                  # 0 .. 0.9 s: not yet a second
        split.push(0, Packet(bytearray(slow), t0 + t_ms * MS))
        split.push(0, Packet(bytearray(paused), t0 + (t_ms if t_ms < 500 else t_ms + 1000) * MS))
    assert not split.tracked
    split.push(0, Packet(bytearray(slow), t0 + 1000 * MS))
    assert list(split.tracked) == [flow_key(slow)] and split.tracked[flow_key(slow)].bytes == 1100
    split.push(0, Packet(bytearray(paused), t0 + 2000 * MS))   # sending again since 1.5 s, after a 1.1 s gap
    assert flow_key(paused) not in split.tracked
    split.push(0, Packet(bytearray(paused), t0 + 2500 * MS))
    assert flow_key(paused) in split.tracked


def test_long_age_candidates_are_bounded_and_evictions_counted():
    split = router(AGED).elements["split"]
    for sport in (1, 2, 3):
        split.push(0, Packet(bytearray(ipv6_frame(46, sport=sport)), 5000 * MS))
    assert split.candidates_evicted == 1 and len(split._candidates) == 2
    split.push(0, Packet(bytearray(ipv6_frame(46, sport=1)), 6000 * MS))   # evicted: its clock restarts
    assert not split.tracked


def test_flowsplit_needs_as_many_outputs_as_its_queues():
    with pytest.raises(ConfigSyntaxError, match="needs 3 outputs"):
        router("split :: FlowSplit(queues 2, udp true); Idle -> split; split[0] -> Discard; split[1] -> Discard;")


# -- RTTSeparation ---------------------------------------------------------------------------
SEPARATED = """
rtt :: FlowRTT;
split :: FlowSplit(queues 4, udp true, long_bytes 10kB);
sched :: DRR;
Idle -> split;
split[0] -> q0 :: Queue(100) -> [0]sched; split[1] -> q1 :: Queue(100) -> [1]sched;
split[2] -> q2 :: Queue(100) -> [2]sched; split[3] -> q3 :: Queue(100) -> [3]sched;
split[4] -> qu :: Queue(20) -> [4]sched;
sched -> shape :: LinkShaper(12Mbps) -> Discard;
ctl :: RTTSeparation(split split, rtt rtt, sched sched, shaper shape, queues q0 q1 q2 q3 qu, hold 2, udp_rate 5Mbps);
"""


def separated(rtts_ms, udp_ports=()):
    """A node whose flows (sport 1000 + i, TCP) have the RTTs given; UDP flows on udp_ports."""
    r = router(SEPARATED)
    rtts = {}
    for i, rtt_ms in enumerate(rtts_ms):
        frame = ipv6_frame(946, sport=1000 + i)
        rtts[flow_key(frame)] = rtt_ms * 1000.0
        for _ in range(12):
            r.elements["split"].push(0, Packet(bytearray(frame), 1))
    for port in udp_ports:
        frame = ipv6_frame(946, nh=17, sport=port)
        for _ in range(12):
            r.elements["split"].push(0, Packet(bytearray(frame), 1))
    r.elements["rtt"].rtt_us = rtts.get
    return r, rtts


def queue_of(r, rtts):
    table = r.elements["split"].table
    return [table.get(k) for k in rtts]


def test_four_rtts_go_to_four_queues_each_weighted_as_its_flows_with_a_stanford_buffer():
    r, rtts = separated([2, 20, 40, 60, 61])
    ctl = r.elements["ctl"]
    ctl.run_round(2)
    assert queue_of(r, rtts) == [0, 1, 2, 3, 3]
    assert r.elements["sched"].weights == [1, 1, 1, 2, 1]
    # q3: 2 of the 5 weights of the queues with flows (the empty UDP queue takes no turn) of
    # 12 Mbit/s = 4.8 Mbit/s, over 61 ms: 24.4 packets, over sqrt(2)
    assert r.elements["q3"].capacity == round(4.8e6 * 0.061 / 8 / 1500 / math.sqrt(2))
    assert r.elements["q0"].capacity == 8          # the floor: 2 Mbit/s x 2 ms is less than a packet
    assert [g["flows"] for g in ctl.read_handler("groups")] == [1, 1, 1, 2, 0]


def test_two_flows_in_four_queues_each_get_the_buffer_of_half_the_port():
    r, rtts = separated([10, 190])
    r.elements["ctl"].run_round(2)
    assert queue_of(r, rtts) == [0, 1]
    assert r.elements["q1"].capacity == round(6e6 * 0.190 / 8 / 1500)     # not a quarter's 47
    assert r.elements["q2"].capacity == 100           # empty: as configured


def test_a_flow_moves_only_after_hold_rounds_agree():
    r, rtts = separated([2, 20, 40, 60, 60])
    ctl = r.elements["ctl"]
    ctl.run_round(2)
    moving = list(rtts)[1]
    rtts[moving] = 60_000.0                           # its RTT now the longest flows'
    ctl.run_round(3)
    assert queue_of(r, rtts)[1] == 1 and ctl.moves == 0
    ctl.run_round(4)
    assert queue_of(r, rtts)[1] == queue_of(r, rtts)[3] == 3 and ctl.moves == 1     # to theirs


def test_a_class_renumbered_by_a_new_flow_keeps_its_queue():
    """Classes are ranks: a 5 ms flow arriving makes the 10 ms flow's class 1 and the 100 ms
    one's 2. They stay where they are; the newcomer takes a free queue."""
    r, rtts = separated([10, 100])
    ctl = r.elements["ctl"]
    ctl.run_round(2)
    assert queue_of(r, rtts) == [0, 1]
    frame = ipv6_frame(946, sport=2000)
    for _ in range(12):
        r.elements["split"].push(0, Packet(bytearray(frame), 1))
    rtts[flow_key(frame)] = 5_000.0
    for now in range(3, 8):
        ctl.run_round(now)
    assert queue_of(r, rtts) == [0, 1, 2] and ctl.moves == 0


def test_a_flow_just_above_the_shortest_rtt_stays_with_it_for_rounds_on_end():
    # the breaks are on RTTs rounded to 0.1 ms: 12.04 ms rounds into the 12.0 ms class, and a
    # comparison with the raw value would push it into the 30 ms flow's queue
    r, rtts = separated([12.0, 30.0])
    ctl = r.elements["ctl"]
    short, _ = list(rtts)
    ctl.run_round(2)
    rtts[short] = 12_040.0
    for now in range(3, 8):
        ctl.run_round(now)
    assert queue_of(r, rtts) == [0, 1] and ctl.moves == 0


def test_udp_above_its_rate_is_isolated_and_idle_flows_expire():
    r, rtts = separated([10, 50], udp_ports=[53])
    ctl, split = r.elements["ctl"], r.elements["split"]
    split.tracked[next(k for k in split.tracked if k[32] == 17)].counted_bytes = 0     # 12 kB in 1 s: 96 kbit/s
    ctl.udp_rate = 50e3
    ctl.run_round(2)
    assert ctl.udp_isolated == 1 and 4 in split.table.values()
    ctl.run_round(10 * 1000 * MS)                     # 10 s on, nothing seen: all expire
    assert not split.tracked and not split.table and ctl.expired == 3
    assert r.elements["q0"].capacity == 100           # no flows: the configured buffer back


def test_int_says_which_queue_each_flow_is_in_with_that_queues_count_and_weight():
    from int_node import ioam, ioam_decode
    r = router("""Idle -> split :: FlowSplit(queues 2);
split[0] -> q0 :: Queue(10) -> [0]drr; split[1] -> q1 :: Queue(10) -> [1]drr;
drr :: DRR -> Unqueue -> t :: INTTransit(node_id 1, queue drr) -> Discard;""")
    out = []
    r.elements["t"].output_batch = lambda port, batch: out.extend(batch)
    r.elements["drr"].set_weights([1, 3])
    frames = [ioam.insert_int(ipv6_frame(200, sport=s), 2, 0, 0) for s in (1000, 2000)]
    r.elements["split"].table[flow_key(ioam.strip_int(bytearray(frames[1])).frame)] = 1
    for f in frames:
        r.elements["split"].push(0, Packet(bytearray(f), 1))
    got = [ioam_decode.decode_trace(ioam.strip_int(p.data).trace_raw).nodes[0].state for p in out]
    assert [(s.queue_index, s.queue_count, s.queue_weight) for s in got] == [(0, 2, 1), (1, 2, 3)]


def test_a_round_runs_between_its_hooks_and_groups_read_the_queues_it_is_given():
    r, rtts = separated([2, 60])
    ctl, seen = r.elements["ctl"], []
    ctl.before_round.append(lambda now: seen.append(("before", now, dict(r.elements["split"].table))))
    ctl.after_round.append(lambda now: seen.append(("after", now, dict(r.elements["split"].table))))
    ctl.run_round(5)
    assert [(what, now) for what, now, _ in seen] == [("before", 5), ("after", 5)]
    assert seen[0][2] == {} and sorted(seen[1][2].values()) == [0, 1]     # the round decided in between
    ctl.queue_stats = lambda: [(7, 3)] * 5                # the fast path's kernel queues
    assert [(g["depth_pkts"], g["drops"]) for g in ctl.read_handler("groups")] == [(7, 3)] * 5


def test_counters_from_another_source_add_up_per_output():
    r = router("Idle -> s :: FlowSplit(queues 2) -> Discard; s[1] -> Discard;")
    r.counter_sources.append(lambda: {"s": {"sent": [4, 5], "packets": 9}})
    assert r.counters()["s"]["sent"] == [4, 5] and r.counters()["s"]["packets"] == 9
