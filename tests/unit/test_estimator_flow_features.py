"""The competitors read from their own packets at the bottleneck (estimator/flow_features.py):
what each feature measures, the same figures offline (the collection's per-flow counts)
and live (the sink's hop records), and datasets with and without the counts."""
import numpy as np
import pytest

from estimator.dataset import save_run
from estimator.evaluate import load_dataset
from estimator.features import FEATURES, TraceError
from estimator.flow_features import FLOW_FEATURES, CompetitorSeries, flow_features
from estimator.hop_flows import HopFlows
from estimator.int_features import FEATURE_SETS
from experiments.runs.collection_plans import run_plan
from telemetry.schema import HopRecord

T0 = 1000.0
RTT = 0.05
BUSY = 800.0                   # packets/s


def counts(seconds=30.0):
    """Two competitors per 10 ms: a big one whose rate cycles every 8 RTTs (as BBR's
    gain cycle) and dips for 0.2 s every 10 s (ProbeRTT), a small one at a steady 5 %."""
    t = np.arange(int(seconds / 0.01)) * 0.01
    big = 400 * (1 + 0.25 * np.sin(2 * np.pi * t / (8 * RTT)))
    big[(t % 10) < 0.2] = 20
    small = np.full(len(t), 0.05 * BUSY)
    return np.vstack([big, small]) * 0.01          # packets per 10 ms


def by_name(row):
    return dict(zip(FLOW_FEATURES, row))


def test_each_feature_measures_what_its_name_says():
    c = counts()
    F = by_name(flow_features(CompetitorSeries.from_bins(c, T0), [T0 + 30.0], RTT, BUSY)[0])
    assert F["tf_flows_x"] == 1                    # the steady one carries ~9 %: below 10 %
    assert F["tf_rate_x"] == pytest.approx(c.sum() / 30.0 / BUSY, rel=0.01)
    assert F["tf_top_share_x"] == pytest.approx(c[0].sum() / c.sum(), rel=1e-6)
    assert F["tf_top_p10_x"] < 0.45                # the ProbeRTT dips pull the 10th percentile down
    # a cycle of 8 RTTs (the dips' variance takes a share of the energy)
    assert F["tf_top_ac8_x"] > 0.4 and F["tf_top_ac4_x"] < -0.3 and F["tf_top_ac8_x"] - F["tf_top_ac4_x"] > 0.8
    none = flow_features(CompetitorSeries.from_bins(c, T0), [T0 - 1.0], RTT, BUSY)[0]
    assert not none.any()                          # before any competitor packet: zeros
    assert not flow_features(None, [T0 + 5], RTT, BUSY).any()


def live_hop_flows(c, own: str) -> HopFlows:
    """The sink's hop records of counts ``c`` (two competitors per 10 ms), the sender's own
    flow among the top flows."""
    live = HopFlows()
    for k in range(c.shape[1]):
        top = sorted([["00000000000000b1", int(c[0, k])], ["00000000000000b2", int(c[1, k])], [own, 7]],
                     key=lambda e: -e[1])
        live.add(HopRecord(node_id=1, ts_ns=int(round((T0 + (k + 1) * 0.01) * 1e9)), queue_depth_bytes=0,
                           queue_depth_pkts=0, queue_capacity_bytes=0, queue_drops=0, link_losses=0,
                           data_rate_kbps=0, arrival_rate_pps=0, flow_count=3, interval_ms=10.0, top_flows=top))
    return live


def test_live_hop_records_give_the_offline_figures():
    """The sink's hop records (top_flows per ~10 ms, with the sender's own flow among them)
    against the collection's per-flow counts of the same packets."""
    c = np.rint(counts()).astype(int)
    own = "00000000000000aa"
    live = live_hop_flows(c, own)
    at = np.array([T0 + 12.0, T0 + 29.99])
    offline = flow_features(CompetitorSeries.from_bins(c, T0), at, RTT, BUSY)
    online = flow_features(live.competitors(1, own), at, RTT, BUSY)
    np.testing.assert_allclose(online, offline, atol=5e-3)     # a window edge may fall a bin apart
    assert live.competitors(2, own) is None


def test_a_dataset_needs_the_competitors_counts_for_the_flow_features(tmp_path):
    (tmp_path / "runs").mkdir()
    s = np.column_stack([T0 + np.arange(3000) * 0.01, np.full(3000, 50_000.0), np.full(3000, 150_000.0),
                         np.full(3000, BUSY), np.full(3000, 2.0), np.zeros(3000)])
    ack_t = np.linspace(T0 + 1, T0 + 29, 400)
    raw = {"ack_t": ack_t, "rtt_s": np.full(400, RTT, np.float32), "acked_bytes": np.full(400, 1428, np.int32),
           "send_t": ack_t - RTT, "retrans": np.zeros(400, bool), "sample_idx": np.arange(40, 400, 36),
           "int_series": s}
    X = np.zeros((len(raw["sample_idx"]), len(FEATURES)))
    save_run(str(tmp_path / "runs" / "run00000.npz"), run_plan(0, 2), X, np.zeros(len(X)), {}, raw)
    with pytest.raises(TraceError, match="competitors' packets were not kept"):
        load_dataset(str(tmp_path), "table1+int+flows")
    save_run(str(tmp_path / "runs" / "run00000.npz"), run_plan(0, 2), X, np.zeros(len(X)), {},
             {**raw, "comp_packets_10ms": np.rint(counts()).astype(np.uint16)})
    (Xf, _, _), = load_dataset(str(tmp_path), "table1+int+flows")
    assert Xf.shape == (len(X), len(FEATURE_SETS["table1+int+flows"]))
    assert Xf[-1, -len(FLOW_FEATURES)] == 1 and Xf[-1, -len(FLOW_FEATURES) + 1] > 0.3


def records(seconds=30.0, drop_every_s=5.0, qdepth=None):
    """Flow 1's record stream every 10 ms: a queue that grows between drop bursts, 2 own
    packets per record, the drop counter rising at each burst."""
    t = T0 + np.arange(int(seconds / 0.01)) * 0.01
    phase = (t - T0) % drop_every_s
    q = qdepth if qdepth is not None else 20_000 + 20_000 * phase
    drops = np.floor((t - T0) / drop_every_s) * 3
    return np.column_stack([t, q, np.full(len(t), 200_000.0), np.full(len(t), BUSY), np.full(len(t), 2.0), drops,
                            np.full(len(t), 2.0)])


def competitor(cut: float, seconds=30.0, drop_every_s=5.0, answer_after_s=RTT):
    """One competitor per 10 ms that grows linearly and, ``answer_after_s`` (an RTT) after
    each drop burst, falls to ``cut`` of its rate (Reno 0.5; BBR-like 1: no reaction): a
    sawtooth that peaks at each burst."""
    t = np.arange(int(seconds / 0.01)) * 0.01
    phase = np.maximum((t % drop_every_s) - answer_after_s, 0)
    before = 40 * (drop_every_s - answer_after_s) / (1 - cut) if cut < 1 else 300.0
    rate = np.where((t % drop_every_s) < answer_after_s, before, cut * before + 40 * phase) if cut < 1 \
        else np.full(len(t), 300.0)
    rate[:int(answer_after_s / 0.01)] = 200
    return (rate * 0.01)[None, :]


def test_the_response_features_tell_a_halving_competitor_from_one_that_does_not_react():
    from estimator.flow_features import FLOW_RESPONSE_FEATURES, flow_response
    at = [T0 + 29.9]
    halving = dict(zip(FLOW_RESPONSE_FEATURES, flow_response(CompetitorSeries.from_bins(competitor(0.5), T0),
                                                             records(), at, RTT, BUSY)[0]))
    steady = dict(zip(FLOW_RESPONSE_FEATURES, flow_response(CompetitorSeries.from_bins(competitor(1.0), T0),
                                                            records(), at, RTT, BUSY)[0]))
    assert halving["fr_backoff3"] == pytest.approx(0.5, abs=0.1) and halving["fr_cut_share"] == 1.0
    assert steady["fr_backoff3"] == pytest.approx(1.0, abs=0.05) and steady["fr_cut_share"] == 0.0
    assert halving["fr_drop_events"] == pytest.approx(1 / 5.0, abs=0.05)
    assert halving["fr_growth"] > 0.1 and halving["fr_rate_qdelay_corr"] > 0.5      # grows into the queue
    assert steady["fr_steadiness"] == 0.0 and steady["fr_rate_qdelay_corr"] == 0.0
    before = flow_response(CompetitorSeries.from_bins(competitor(0.5), T0 + 10.0), records(), [T0 + 11.0], RTT, BUSY)
    assert not before.any()                         # under 2 s of competitor: zeros
    assert not flow_response(None, records(), at, RTT, BUSY).any()


def test_live_hop_records_give_the_offline_response_figures():
    from estimator.flow_features import flow_response
    c = np.rint(competitor(0.5) * 10).astype(int)             # x10: whole packets per record
    live = HopFlows()
    for k in range(c.shape[1]):
        live.add(HopRecord(node_id=1, ts_ns=int(round((T0 + (k + 1) * 0.01) * 1e9)), queue_depth_bytes=0,
                           queue_depth_pkts=0, queue_capacity_bytes=0, queue_drops=0, link_losses=0,
                           data_rate_kbps=0, arrival_rate_pps=0, flow_count=2, interval_ms=10.0,
                           top_flows=[["00000000000000b1", int(c[0, k])]]))
    at = np.array([T0 + 12.0, T0 + 29.9])
    offline = flow_response(CompetitorSeries.from_bins(c, T0), records(), at, RTT, BUSY * 10)
    online = flow_response(live.competitors(1, "00000000000000aa"), records(), at, RTT, BUSY * 10)
    np.testing.assert_allclose(online, offline, atol=5e-3)


def test_the_dips_are_probe_rtt_and_not_a_loss_based_cut():
    """counts()'s big flow stops for 0.2 s every 10 s (ProbeRTT); a Reno-like flow that
    halves every 5 s never falls below half its rate; dips are zeros before 10 bins."""
    from estimator.flow_features import DIP_FEATURES, flow_dips
    probing = dict(zip(DIP_FEATURES, flow_dips(CompetitorSeries.from_bins(counts(), T0), [T0 + 29.99])[0]))
    halving = dict(zip(DIP_FEATURES, flow_dips(CompetitorSeries.from_bins(competitor(0.5), T0), [T0 + 29.99])[0]))
    assert probing["tf_top_dips_x"] == pytest.approx(2 / 144, abs=0.01)    # 2 of 29 s of 0.2 s bins
    assert probing["tf_top_p2_x"] > 0.5              # 1.4 % of the bins: below the 2nd percentile
    longer = counts()
    longer[0, (np.arange(longer.shape[1]) * 0.01 % 10) < 0.4] = 0.2      # drain, 200 ms, an RTT to refill
    assert flow_dips(CompetitorSeries.from_bins(longer, T0), [T0 + 29.99])[0][0] < 0.25
    assert halving["tf_top_dips_x"] == 0.0 and halving["tf_top_p2_x"] > 0.45
    assert not flow_dips(CompetitorSeries.from_bins(counts(), T0), [T0 + 2.0]).any()    # 1 s settle + 1 s
    assert not flow_dips(None, [T0 + 5]).any()


def test_live_hop_records_give_the_offline_dips():
    from estimator.flow_features import flow_dips
    c = np.rint(counts()).astype(int)
    own = "00000000000000aa"
    live = live_hop_flows(c, own)
    at = np.array([T0 + 12.0, T0 + 29.99])
    np.testing.assert_allclose(flow_dips(live.competitors(1, own), at),
                               flow_dips(CompetitorSeries.from_bins(c, T0), at), atol=0.01)


def _hop_records(per_10ms: dict, seconds: float, node_id: int = 1, t0_s: float = T0) -> HopFlows:
    live = HopFlows()
    for k in range(int(seconds * 100)):
        live.add(HopRecord(node_id=node_id, ts_ns=int(round((t0_s + (k + 1) * 0.01) * 1e9)), queue_depth_bytes=0,
                           queue_depth_pkts=0, queue_capacity_bytes=0, queue_drops=0, link_losses=0,
                           data_rate_kbps=0, arrival_rate_pps=0, flow_count=len(per_10ms), interval_ms=10.0,
                           top_flows=[[fid, k] for fid, k in per_10ms.items() if k]))
    return live


def test_the_competitors_rate_ratio_is_read_from_their_own_packets_at_the_node():
    own = "00000000000000a1"
    # one competitor at 3x this flow's rate, and a control connection that barely sends
    live = _hop_records({own: 2, "00000000000000b1": 6, "00000000000000c1": 0}, seconds=3)
    assert live.competitor_rate_ratio(1, own) == pytest.approx(3.0)
    # two competitors, 1x and 3x: their mean, 2x; the control connection (1 % of theirs) left out
    live = _hop_records({own: 4, "00000000000000b1": 4, "00000000000000b2": 12, "00000000000000c1": 1}, seconds=3)
    assert live.competitor_rate_ratio(1, own) == pytest.approx(2.0)
    # none where the node has no records of it, no competitor, or too short a record
    assert live.competitor_rate_ratio(2, own) is None
    assert _hop_records({own: 5}, seconds=3).competitor_rate_ratio(1, own) is None
    assert _hop_records({own: 2, "00000000000000b1": 6}, seconds=0.5).competitor_rate_ratio(1, own) is None
    # a starved flow (none of its packets in the window) has no rate to scale
    assert _hop_records({own: 0, "00000000000000b1": 6}, seconds=3).competitor_rate_ratio(1, own) is None


def _hop_records_then(first: dict, first_s: float, then: dict, then_s: float) -> HopFlows:
    live = _hop_records(first, seconds=first_s)
    for node, rows in _hop_records(then, seconds=then_s, t0_s=T0 + first_s)._nodes.items():
        live._nodes[node].extend(rows)
    return live


def test_a_flow_with_no_packet_in_the_last_2_s_is_read_over_two_of_its_rtts():
    """In loss recovery on an RTT of seconds a flow sends nothing for seconds: over the
    last 2 s it has no rate, over two of its RTTs it has one (seed 2617, a 32-BDP buffer)."""
    own, comp = "00000000000000a1", "00000000000000b1"
    paused = _hop_records_then({own: 2, comp: 6}, 5, {own: 0, comp: 6}, 2.5)
    assert paused.competitor_rate_ratio(1, own) is None                   # the last 2 s: none of its packets
    assert paused.competitor_rate_ratio(1, own, rtt_s=0.5) is None        # short RTTs keep the 2 s window
    # two RTTs of 4 s: the last 7.5 s recorded, 500 x 2 of its packets against 750 x 6
    assert paused.competitor_rate_ratio(1, own, rtt_s=4.0) == pytest.approx(4.5)
    # a flow that sent in the last 2 s is read over them, whatever its RTT (6x there, 3x before)
    slower = _hop_records_then({own: 2, comp: 6}, 5, {own: 1, comp: 6}, 2.5)
    assert slower.competitor_rate_ratio(1, own, rtt_s=4.0) == pytest.approx(6.0)


def own_losses(seconds=30.0, drop_every_s=5.0):
    """The competitor's own losses per 10 ms: 2 packets at each drop burst (none at 0)."""
    lost = np.zeros((1, int(seconds / 0.01)))
    lost[0, np.arange(1, int(seconds / drop_every_s)) * int(drop_every_s / 0.01)] = 2
    return lost


def test_the_own_loss_features_read_the_competitors_answer_to_its_own_losses():
    from estimator.own_loss_features import OWN_LOSS_FEATURES, own_loss_response
    at = [T0 + 29.9]

    def features(cut, lost=own_losses()):
        comp = CompetitorSeries.from_bins(competitor(cut), T0, lost=lost)
        return dict(zip(OWN_LOSS_FEATURES, own_loss_response(comp, at, RTT)[0]))
    halving, steady = features(0.5), features(1.0)
    assert halving["ol_cut"] == pytest.approx(0.5, abs=0.1) and halving["ol_cut_share"] == 1.0
    assert steady["ol_cut"] == pytest.approx(1.0, abs=0.05) and steady["ol_cut_share"] == 0.0
    assert halving["ol_events_per_s"] == pytest.approx(5 / 29.9, abs=0.02)
    assert halving["ol_loss_rate"] == pytest.approx(10 / (competitor(0.5).sum() + 10), rel=0.05)
    # without losses there is no event; with unknown losses (the old datasets, a live hop
    # record without them) the features say so, not "no loss"
    assert features(0.5, np.zeros((1, 3000)))["ol_cut"] == -1.0
    unknown = features(0.5, None)
    assert set(unknown.values()) == {-1.0}


def test_live_hop_records_give_the_offline_own_loss_figures():
    """Hop records whose top flows carry the losses (sinks that count them) against the
    collection's per-flow losses; records without them leave the losses unknown."""
    from estimator.own_loss_features import own_loss_response
    c, lost = np.rint(competitor(0.5) + 1).astype(int), own_losses().astype(int)
    own = "00000000000000aa"
    live, old = HopFlows(), HopFlows()
    for k in range(c.shape[1]):
        common = dict(node_id=1, ts_ns=int(round((T0 + (k + 1) * 0.01) * 1e9)), queue_depth_bytes=0,
                      queue_depth_pkts=0, queue_capacity_bytes=0, queue_drops=0, link_losses=0, data_rate_kbps=0,
                      arrival_rate_pps=0, flow_count=2, interval_ms=10.0)
        live.add(HopRecord(**common, top_flows=[["00000000000000b1", int(c[0, k]), int(lost[0, k])], [own, 2, 0]]))
        old.add(HopRecord(**common, top_flows=[["00000000000000b1", int(c[0, k])], [own, 2]]))
    at = np.array([T0 + 12.0, T0 + 29.9])
    offline = own_loss_response(CompetitorSeries.from_bins(c, T0, lost=lost), at, RTT)
    np.testing.assert_allclose(own_loss_response(live.competitors(1, own), at, RTT), offline, atol=0.02)
    assert offline[1, 1] == pytest.approx(0.5, abs=0.1)
    assert set(own_loss_response(old.competitors(1, own), at, RTT).ravel()) == {-1.0}


def test_the_queue_cut_waits_for_the_answer_behind_a_deep_queue():
    """Behind 0.45 s of queue (RTT 0.5 s against a base RTT of 0.05 s) a flow answers its
    loss half a second later: ol_cut, over 4 base RTTs, sees no cut at all; ol_qcut, over
    the RTT of the time, reads Reno's 0.5 and CUBIC's 0.7 apart."""
    from estimator.own_loss_features import (OWN_LOSS_FEATURES, QUEUE_CUT_FEATURES, own_loss_queue_response,
                                         own_loss_response)
    at, qdelay_s = [T0 + 29.9], 0.45
    deep = records(qdepth=np.full(3000, qdelay_s * BUSY * 1500.0))

    def features(cut, lost=own_losses(), series=deep):
        comp = CompetitorSeries.from_bins(competitor(cut, answer_after_s=RTT + qdelay_s), T0, lost=lost)
        return {**dict(zip(OWN_LOSS_FEATURES, own_loss_response(comp, at, RTT)[0])),
                **dict(zip(QUEUE_CUT_FEATURES, own_loss_queue_response(comp, series, at, RTT, BUSY)[0]))}
    reno, cubic, bbr = features(0.5), features(0.7), features(1.0)
    assert reno["ol_cut"] > 0.95 and cubic["ol_cut"] > 0.95          # the answer came after its window
    # (a little above the cut: the rate before is the mean of 2 RTTs of a rising sawtooth)
    assert reno["ol_qcut"] == pytest.approx(0.5, abs=0.1) and reno["ol_qcut_share"] == 1.0
    assert cubic["ol_qcut"] == pytest.approx(0.7, abs=0.1) and cubic["ol_qcut_share"] == 1.0
    assert cubic["ol_qcut"] - reno["ol_qcut"] > 0.15
    assert bbr["ol_qcut"] == pytest.approx(1.0, abs=0.05) and bbr["ol_qcut_share"] == 0.0
    # no loss, losses not known: no figure, not "no cut"
    assert features(0.5, np.zeros((1, 3000)))["ol_qcut"] == -1.0
    assert features(0.5, None)["ol_qcut"] == features(0.5, None)["ol_qcut_share"] == -1.0


def test_live_hop_records_give_the_offline_queue_cut():
    from estimator.own_loss_features import own_loss_queue_response
    c, lost = np.rint(competitor(0.5, answer_after_s=0.3) + 1).astype(int), own_losses().astype(int)
    own = "00000000000000aa"
    live = HopFlows()
    for k in range(c.shape[1]):
        live.add(HopRecord(node_id=1, ts_ns=int(round((T0 + (k + 1) * 0.01) * 1e9)), queue_depth_bytes=0,
                           queue_depth_pkts=0, queue_capacity_bytes=0, queue_drops=0, link_losses=0,
                           data_rate_kbps=0, arrival_rate_pps=0, flow_count=2, interval_ms=10.0,
                           top_flows=[["00000000000000b1", int(c[0, k]), int(lost[0, k])], [own, 2, 0]]))
    at, series = np.array([T0 + 12.0, T0 + 29.9]), records(qdepth=np.full(3000, 0.25 * BUSY * 1500.0))
    offline = own_loss_queue_response(CompetitorSeries.from_bins(c, T0, lost=lost), series, at, RTT, BUSY)
    np.testing.assert_allclose(own_loss_queue_response(live.competitors(1, own), series, at, RTT, BUSY), offline,
                               atol=0.02)
    assert offline[1, 0] < 0.7 and offline[1, 1] == 1.0         # a cut (the +1 packet a bin lifts it)


def test_udp_cross_traffic_is_no_competitor_live_or_offline():
    """A constant-rate UDP flow beside a Reno-like competitor: the live sender leaves out the
    top_flows entry whose protocol is not TCP (and counts it), the offline run its row
    (tcp_competitors), and both read the competitor alone, as without the UDP."""
    from estimator.dataset import tcp_competitors
    from estimator.competitor_features import competitor_features
    c, lost = np.rint(competitor(0.5) + 1).astype(int), own_losses().astype(int)
    udp = np.full((1, c.shape[1]), 3)                                  # 300 packets/s, never lost
    own, live, plain = "00000000000000aa", HopFlows(), HopFlows()
    for k in range(c.shape[1]):
        common = dict(node_id=1, ts_ns=int(round((T0 + (k + 1) * 0.01) * 1e9)), queue_depth_bytes=0,
                      queue_depth_pkts=0, queue_capacity_bytes=0, queue_drops=0, link_losses=0, data_rate_kbps=0,
                      arrival_rate_pps=0, flow_count=3, interval_ms=10.0)
        tcp = [["00000000000000b1", int(c[0, k]), int(lost[0, k]), 6], [own, 2, 0, 6]]
        live.add(HopRecord(**common, top_flows=tcp + [["00000000000000c1", 3, 0, 17]]))
        plain.add(HopRecord(**common, top_flows=tcp))
    assert live.not_tcp_entries == c.shape[1] and plain.not_tcp_entries == 0
    at, series = np.array([T0 + 12.0, T0 + 29.9]), records()
    raw = {"comp_packets_10ms": np.vstack([c, udp]), "comp_lost_10ms": np.vstack([lost, 0 * udp])}
    packets, lost_rows = tcp_competitors(raw, {"udp_mbps": 3.4})
    assert packets.shape == c.shape and lost_rows.shape == c.shape
    assert tcp_competitors(raw, {"udp_mbps": 0.0})[0].shape == (2, c.shape[1])     # no UDP in the run: kept
    offline = competitor_features(CompetitorSeries.from_bins(packets, T0, lost=lost_rows), series, at, RTT, BUSY)
    with_udp = competitor_features(CompetitorSeries.from_bins(raw["comp_packets_10ms"], T0,
                                                              lost=raw["comp_lost_10ms"]), series, at, RTT, BUSY)
    live_rows = competitor_features(live.competitors(1, own), series, at, RTT, BUSY)
    np.testing.assert_allclose(live_rows, competitor_features(plain.competitors(1, own), series, at, RTT, BUSY))
    np.testing.assert_allclose(live_rows, offline, atol=0.02)
    assert not np.allclose(with_udp, offline, atol=0.02)          # read as a competitor, the UDP would change them
