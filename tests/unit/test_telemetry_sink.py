"""SinkTelemetry: real IOAM packets in, flow and hop records out (no broker)."""
from telemetry.schema import decode
from telemetry.sink import SinkTelemetry
from int_node import ioam
from int_node.packet import flow_key
from tests.helpers import ipv6_frame

MS = 1_000_000


def packet(seq, drops=0, link=0, depth=0, capacity=150_000, own=None):
    """A packet of the one flow through two nodes; node 1's totals ``drops``, ``link``, and
    this flow's own counts there ``own`` (drops, link losses; default: the totals, one flow)."""
    own = (drops, link) if own is None else own
    f = ioam.insert_int(ipv6_frame(200, nh=17), 2, seq, 1_700_000_000 * 10**9)
    off = ioam.find_trace(f)
    for node, (d, l), (fd, fl) in ((1, (drops, link), own), (2, (0, 0), (0, 0))):
        ioam.stamp_default(f, off, 63, node, 1, 2, 1_700_000_000 * 10**9, 1000, depth, depth // 1500,
                           -60 if node == 1 else -128, 5 if node == 1 else 0xFF, 1, 65000, d, l, 800, capacity,
                           0, fd, fl, *((2, 4, 3) if node == 1 else (0, 1, 1)))   # node 1: queue 2 of 4, weight 3
    s = ioam.strip_int(f)
    return flow_key(s.frame), s.trace_raw, s.e2e_raw


def through_two_nodes(seq, sport, nh):
    """A packet of the flow from ``sport`` (IP protocol ``nh``) stamped by two quiet nodes."""
    f = ioam.insert_int(ipv6_frame(200, nh=nh, sport=sport), 2, seq, 1_700_000_000 * 10**9)
    off = ioam.find_trace(f)
    for node in (1, 2):
        ioam.stamp_default(f, off, 63, node, 1, 2, 1_700_000_000 * 10**9, 1000, 0, 0, -128, 0xFF, 1, 65000, 0,
                           0, 800, 150_000)
    s = ioam.strip_int(f)
    return flow_key(s.frame), s.trace_raw, s.e2e_raw


def run(tel, pkts, start_ns=1_700_000_000 * 10**9 + 5 * MS, step_ns=MS // 10):
    out = []
    for i, p in enumerate(pkts):
        out += [(t, decode(b, t)) for t, b in tel.on_packet(*p, start_ns + i * step_ns)]
    return out


def flows(pubs):
    return [r for _, r in pubs if r.type == "flow"]


def test_link_loss_is_published_at_once_and_labelled_link():
    tel = SinkTelemetry(period_ms=1000, min_gap_ms=0, reorder_pkts=1)
    pubs = run(tel, [packet(0), packet(1, link=0), packet(3, link=1), packet(4, link=1)])
    loss = [r for r in flows(pubs) if r.reason == "loss"]
    assert len(loss) == 1 and loss[0].lost == 1 and loss[0].lost_link == 1 and loss[0].interval_lost_link == 1
    assert loss[0].last_loss_cause == "link" and loss[0].path[0].rssi_dbm == -60 and loss[0].path[1].rssi_dbm is None


def test_the_flows_own_counts_decide_over_the_nodes_totals():
    # node 1 counted 5 link losses and 1 drop in the gap, all flows together; this flow's
    # own: one drop. Its lost packet was that drop, not the link's.
    tel = SinkTelemetry(period_ms=1000, min_gap_ms=0, reorder_pkts=1)
    pubs = run(tel, [packet(0), packet(1), packet(3, drops=1, link=5, own=(1, 0)),
                     packet(4, drops=1, link=5, own=(1, 0))])
    rec = flows(pubs)[-1]
    assert rec.lost == 1 and rec.lost_congestion == 1 and rec.lost_link == 0
    # and the other way round: the totals say drops, this flow's own say a link loss
    tel = SinkTelemetry(period_ms=1000, min_gap_ms=0, reorder_pkts=1)
    pubs = run(tel, [packet(0), packet(1), packet(3, drops=4, link=1, own=(0, 1)),
                     packet(4, drops=4, link=1, own=(0, 1))])
    rec = flows(pubs)[-1]
    assert rec.lost == 1 and rec.lost_link == 1


def test_queue_drop_is_labelled_congestion():
    tel = SinkTelemetry(period_ms=1000, min_gap_ms=0, reorder_pkts=1)
    pubs = run(tel, [packet(0), packet(1), packet(4, drops=2), packet(5, drops=2)])
    rec = flows(pubs)[-1]
    assert rec.lost == 2 and rec.lost_congestion == 2 and rec.last_loss_cause == "congestion"


def test_periodic_records_follow_the_period_and_carry_the_path():
    tel = SinkTelemetry(period_ms=10)
    pubs = run(tel, [packet(i, depth=3000) for i in range(1000)])    # 100 ms at 10 kHz
    periodic = flows(pubs)
    assert 9 <= len(periodic) <= 11 and all(r.reason == "periodic" for r in periodic)
    assert periodic[-1].path[0].queue_occupancy == 3000 / 150_000 and periodic[-1].packets > 900
    assert [(h.queue_index, h.queue_count, h.queue_weight) for h in periodic[-1].path] == [(2, 4, 3), (0, 1, 1)]
    hops = [r for _, r in pubs if r.type == "hop"]
    assert {h.node_id for h in hops} == {1, 2} and 18 <= len(hops) <= 22


def test_loss_records_are_rate_limited_per_flow():
    tel = SinkTelemetry(period_ms=1000, min_gap_ms=5, reorder_pkts=1)
    seqs, s = [], 0
    for _ in range(100):           # a loss every other packet, 0.1 ms apart -> 10 ms of losses
        seqs.append(s)
        s += 2
    pubs = run(tel, [packet(q, link=i) for i, q in enumerate(seqs)])
    recs = flows(pubs)
    assert len(recs) == 2 and recs[-1].reason == "loss"     # at 0 and 5 ms: one per 5 ms at most
    # Losses held back by the limit go out with the next packet after it.
    later = run(tel, [packet(s, link=100)], start_ns=1_700_000_000 * 10**9 + 20 * MS)
    assert flows(later)[0].reason == "loss" and flows(later)[0].lost == 100   # 199 is missing too


def test_malformed_trace_is_counted_not_raised():
    tel = SinkTelemetry()
    key, trace, e2e = packet(0)
    assert tel.on_packet(key, trace[:7], e2e, 1) == []
    assert tel.counters["decode_errors"] == 1


def test_hop_records_name_the_busiest_flows_through_the_node_since_the_last():
    """Three flows through both nodes at 3:2:1; every hop record carries each flow's
    packets since the node's previous record, busiest first, at most TOP_FLOWS_MAX."""
    from telemetry.schema import TOP_FLOWS_MAX

    order = [1000, 1000, 1000, 2000, 2000, 3000] * 200          # 1200 packets, 0.1 ms apart: 120 ms
    tel = SinkTelemetry(period_ms=10)
    pubs = run(tel, [through_two_nodes(i, sport, 17) for i, sport in enumerate(order)])
    hops = [r for _, r in pubs if r.type == "hop" and r.node_id == 1]
    assert len(hops) >= 10 and hops[0].interval_ms is None and hops[1].interval_ms >= 10
    for h in hops[1:]:
        counts = [k for _, k, _, _ in h.top_flows]
        assert {proto for *_, proto in h.top_flows} == {17}                 # each flow's IP protocol (UDP here)
        assert len(h.top_flows) == 3 and counts == sorted(counts, reverse=True)
        assert sum(counts) == round(h.interval_ms * 10)                  # a packet per 0.1 ms
        assert 2.5 < counts[0] / counts[2] < 3.5
    ids = {fid for h in hops for fid, *_ in h.top_flows}
    assert ids == {r.flow_id for r in flows(pubs)} and TOP_FLOWS_MAX == 8
    # each flow's E2E numbers skip the others' (one counter for the three): its losses, which
    # its hop-record entries carry as its flow records count them (up to the last hop record)
    final = {r.flow_id: r.lost for r in flows(pubs)}
    in_hops = {fid: sum(lost for h in hops for f, _, lost, _ in h.top_flows if f == fid) for fid in ids}
    assert all(0.8 * final[fid] <= in_hops[fid] <= final[fid] for fid in ids), (in_hops, final)   # 10 of 120 ms


def test_where_the_sinks_node_measures_round_trips_each_hop_record_entry_ends_with_its_flows():
    pkts = [through_two_nodes(i, sport, 6) for i, sport in enumerate([1000, 2000] * 300)]
    measured = {pkts[0][0]: 41234.4}                     # the first flow's RTT is known, the other's not yet
    tel = SinkTelemetry(period_ms=10)
    tel.flow_rtt_us = measured.get
    hops = [r for _, r in run(tel, pkts) if r.type == "hop"]
    assert len(hops) > 5 and all(len(h.top_flows) == 2 for h in hops[2:])
    by_sport = {e[0]: e[4] for h in hops for e in h.top_flows}
    assert sorted(by_sport.values(), key=str) == [41234, None]
    # without a node that measures, the entries are as before
    assert all(len(e) == 4 for _, r in run(SinkTelemetry(period_ms=10), pkts) if r.type == "hop" for e in r.top_flows)


def test_the_estimators_offline_record_stream_is_cut_where_the_sink_publishes():
    """Training cuts a flow's per-packet series into records by the sink's own rule: on
    the same packet times (irregular gaps, bursts) the rows it keeps are the packets the
    sink published a periodic flow record on, each with the packets since the last."""
    import numpy as np
    from estimator.int_series import INT_SERIES_COLUMNS, record_stream
    rng = np.random.default_rng(4)
    gaps_ns = rng.choice([20_000, 300_000, 2_000_000, 9_999_999, 10_000_000, 25_000_000], 400)
    times = 1_700_000_000 * 10**9 + np.cumsum(gaps_ns)
    tel = SinkTelemetry()                                      # the sink's defaults: 10 ms, no loss here
    published = []
    for i, t in enumerate(times):
        for _, raw in tel.on_packet(*packet(i), int(t)):
            rec = decode(raw)
            if rec.type == "flow":
                published.append((rec.ts_ns, rec.interval_packets))
    series = np.zeros((len(times), len(INT_SERIES_COLUMNS)))
    t0 = int(times[0])
    series[:, 0] = (times - t0) / 1e9     # from the run's start: seconds as floats keep every ns
    offline = record_stream(series)
    assert [(t0 + int(round(t * 1e9)), int(n)) for t, n in offline[:, [0, -1]]] == published
    assert len(published) > 100
