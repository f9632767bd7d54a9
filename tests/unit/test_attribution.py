"""Sink-side loss detection (E2E sequence gaps) and attribution (hop counter deltas)."""
from telemetry.attribution import GapLabel, HopCounters, SeqTracker, label_gap


def feed(tracker, seqs, cause="link"):
    """Observe ``seqs``; every gap is labelled ``cause`` entirely."""
    def label(n):
        return GapLabel(n, 0) if cause == "congestion" else GapLabel(0, n)
    return [tracker.observe(s, label) for s in seqs]


def test_in_order_sequence_has_no_losses():
    t = SeqTracker()
    feed(t, range(100))
    assert t.total_lost == 0 and not t.pending and t.highest == 99


def test_a_gap_is_confirmed_after_reorder_window():
    t = SeqTracker(reorder_pkts=3)
    res = feed(t, [0, 1, 2, 4, 5])           # 3 missing, two packets after it
    assert res[3].gap == 1 and t.total_lost == 0 and 3 in t.pending
    res = feed(t, [6])                        # third packet past the gap: confirmed
    assert res[0].confirmed == (0, 1, 0) and t.lost["link"] == 1 and not t.pending


def test_reordered_packet_within_window_is_not_a_loss():
    t = SeqTracker(reorder_pkts=3)
    res = feed(t, [0, 1, 3, 2, 4, 5, 6, 7])
    assert t.total_lost == 0 and t.reordered == 1 and res[3].reordered


def test_very_late_packet_corrects_a_confirmed_loss():
    t = SeqTracker(reorder_pkts=3)
    feed(t, [0, 1, 3, 4, 5, 6])
    assert t.total_lost == 1
    r = feed(t, [2])[0]
    assert r.late and t.total_lost == 0 and t.late == 1


def test_wraparound_is_not_a_gap():
    t = SeqTracker()
    feed(t, [0xFFFFFFFE, 0xFFFFFFFF, 0, 1, 2, 3])
    assert t.total_lost == 0 and t.highest == 3


def test_gap_across_wraparound_counts_the_missing_ones():
    t = SeqTracker(reorder_pkts=1)
    feed(t, [0xFFFFFFFE, 1, 2])               # 0xFFFFFFFF and 0 missing
    assert t.total_lost == 2


def test_huge_jump_is_a_resync_not_a_loss():
    t = SeqTracker(resync_gap=1000)
    res = feed(t, [10, 11, 500_000, 500_001])
    assert res[2].resync and t.total_lost == 0 and t.resyncs == 1


def test_duplicates_are_counted_not_lost():
    t = SeqTracker()
    res = feed(t, [0, 1, 2, 2, 3])
    assert res[3].duplicate and t.duplicates == 1 and t.total_lost == 0


def test_labels_from_the_gap_callback_are_what_gets_confirmed():
    t = SeqTracker(reorder_pkts=1)
    feed(t, [0, 3, 4], cause="congestion")
    assert t.lost == {"congestion": 2, "link": 0, "reconfig": 0}


def test_pending_list_is_bounded():
    t = SeqTracker(reorder_pkts=10**6, max_pending=100)
    feed(t, [0, 5000])
    assert len(t.pending) == 100 and t.total_lost == 4999 - 100   # oldest confirmed early


def hops(drops1, link1, drops2=0, link2=0, occ=0.0):
    return [HopCounters(1, drops1, link1, occ), HopCounters(2, drops2, link2, 0.0)]


def test_label_link_when_only_link_counter_moved():
    assert label_gap(3, hops(5, 10), hops(5, 13)) == GapLabel(0, 3)


def test_label_congestion_when_a_queue_dropped():
    assert label_gap(2, hops(5, 10), hops(5, 10, drops2=2)) == GapLabel(2, 0)


def test_label_splits_in_proportion_when_both_moved():
    assert label_gap(4, hops(0, 0), hops(3, 1)) == GapLabel(3, 1)


def test_mixed_evidence_gives_the_link_only_the_share_it_proves():
    # a tie is congestion (round(0.5) == 0 used to give this packet to the link)
    assert label_gap(1, hops(0, 0), hops(1, 1)) == GapLabel(1, 0)
    assert label_gap(3, hops(0, 0), hops(1, 1)) == GapLabel(2, 1)
    assert label_gap(2, hops(0, 0), hops(1, 3)) == GapLabel(1, 1)      # 1.5 links: 1


def test_an_unexplained_loss_is_congestion():
    # no counter moved: no evidence of a lossy link, whatever the queue's occupancy
    assert label_gap(1, hops(0, 0, occ=0.95), hops(0, 0, occ=0.95)) == GapLabel(1, 0)
    assert label_gap(1, hops(0, 0, occ=0.2), hops(0, 0, occ=0.2)) == GapLabel(1, 0)


def own(node, fd, fl, drops=100, link=100):
    return HopCounters(node, drops, link, 0.0, fd, fl)


def test_a_flows_own_counts_label_its_gap_exactly_and_conservatively():
    assert label_gap(3, [own(1, 0, 0)], [own(1, 1, 2, drops=150, link=101)]) == GapLabel(1, 2)
    assert label_gap(3, [own(1, 0, 0)], [own(1, 0, 1)]) == GapLabel(2, 1)        # 2 unexplained
    assert label_gap(2, [own(1, 0, 0)], [own(1, 1, 2)]) == GapLabel(1, 1)        # never more than proven
    assert label_gap(1, [own(1, 0xFFFF, 3)], [own(1, 0, 3)]) == GapLabel(1, 0)   # 16-bit wrap
    # a count that went backwards (the node's table evicted the flow): the totals decide
    assert label_gap(1, [own(1, 9, 9, drops=0, link=0)], [own(1, 0, 0, drops=0, link=1)]) == GapLabel(0, 1)
    # a hop without per-flow counts (an older node): the totals decide for the whole path
    old = HopCounters(2, 0, 0, 0.0)
    assert label_gap(1, [own(1, 0, 0, 0, 0), old], [own(1, 0, 0, 0, 0), HopCounters(2, 0, 1, 0.0)]) == GapLabel(0, 1)


def test_label_counter_wraparound():
    assert label_gap(1, hops(0xFFFFFFFF, 0), hops(0, 0)) == GapLabel(1, 0)


def test_label_ignores_hops_without_an_earlier_snapshot():
    before = [HopCounters(1, 0, 0, 0.0)]
    after = [HopCounters(1, 0, 1, 0.0), HopCounters(9, 1000, 0, 0.0)]
    assert label_gap(1, before, after) == GapLabel(0, 1)


def rc(node, fd, epoch, circuit, downtime_ms=10, drops=100):
    """A reconfigured port's hop: this flow's drops at the queue it took, the port's migrations."""
    return HopCounters(node, drops, 0, 0.0, fd, 0, 0, circuit, epoch, downtime_ms)


def test_losses_nothing_counted_across_an_announced_night_are_the_reconfigurations():
    # migrated from the circuit (epoch 4) to the path (epoch 5): 6 lost, the path's queue
    # dropped 2 of them since the flow last took it; the other 4 died in the night
    last_on_path, last_on_circuit = rc(1, 7, 3, False), rc(1, 0, 4, True)
    now = rc(1, 9, 5, False)
    assert label_gap(6, [last_on_path, last_on_circuit], [now], previous=[last_on_circuit]) == GapLabel(2, 0, 4)
    # the same losses without a migration between the two packets: congestion
    assert label_gap(6, [last_on_circuit], [rc(1, 0, 4, True)]) == GapLabel(6, 0, 0)
    # a migration without a downtime announces no night: congestion
    assert label_gap(6, [last_on_circuit], [rc(1, 0, 5, False, downtime_ms=0)]) == GapLabel(6, 0, 0)
    # only the totals (an evicted flow, no snapshot of the new queue): nothing counted -> the night's,
    # a queue's drops in between -> congestion, as ever
    total_only = HopCounters(1, 100, 0, 0.0, None, None, 0, False, 5, 10)
    assert label_gap(3, [HopCounters(1, 100, 0, 0.0, None, None, 0, True, 4, 10)], [total_only]) == GapLabel(0, 0, 3)
    path_before, circuit_before = (HopCounters(1, 90, 0, 0.0, None, None, 0, False, 3, 10),
                                   HopCounters(1, 100, 0, 0.0, None, None, 0, True, 4, 10))
    assert label_gap(3, [path_before, circuit_before], [total_only], previous=[circuit_before]) == GapLabel(3, 0, 0)


def test_a_queues_counts_are_compared_with_the_flows_last_packet_through_that_queue():
    # the circuit's queue dropped nothing of the flow; the path's queue counts 50 on its own
    # counter: compared with the circuit's (0) that would be 50 drops, and a reset
    before = [rc(1, 50, 4, False), rc(1, 0, 4, True)]
    assert label_gap(2, before, [rc(1, 52, 4, False)]) == GapLabel(2, 0, 0)     # its 2 new drops
    assert label_gap(2, before, [rc(1, 0, 4, True)]) == GapLabel(2, 0, 0)      # unexplained: congestion


def test_the_tracker_counts_the_nights_losses_apart():
    t = SeqTracker(reorder_pkts=1)
    t.observe(0)
    t.observe(4, lambda n: GapLabel(1, 0, n - 1))
    assert t.lost == {"congestion": 1, "link": 0, "reconfig": 2} and t.total_lost == 3
