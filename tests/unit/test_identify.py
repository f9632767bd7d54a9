"""Identification by evidence: the sequential test, and the loss-cut stage on synthetic
series with known answers (a window that keeps beta of itself an RTT after each loss)."""
import math

import numpy as np
import pytest

from estimator.identify.evidence import UNKNOWN, Evidence, SequentialTest
from estimator.identify.loss_cut import KEPT_AFTER_LOSS, evidence, loss_cuts

RTT_BINS = 5


def synthetic(kept: float, rate_per_bin: float = 20.0, events: int = 6, seed: int = 0):
    """Packets and drops per bin of a flow that loses one packet every 12 RTTs and an RTT
    later sends ``kept`` of its rate, regrowing linearly to it by the next loss."""
    rng = np.random.default_rng(seed)
    period = 12 * RTT_BINS
    n = period * (events + 1)
    rate = np.full(n, rate_per_bin)
    lost = np.zeros(n)
    for e in range(1, events + 1):
        k = e * period
        lost[k] = 1
        ramp = np.linspace(kept, 1.0, period - RTT_BINS)
        rate[k + RTT_BINS:k + period] = rate_per_bin * ramp
    return rng.poisson(rate).astype(float), lost


@pytest.mark.parametrize("cca", ["reno", "cubic", "bbr"])
def test_a_window_that_keeps_beta_is_named_by_its_loss_cuts(cca):
    packets, lost = synthetic(KEPT_AFTER_LOSS[cca])
    cuts = loss_cuts(packets, lost, RTT_BINS)
    assert len(cuts) == 6
    assert np.median([c for c, _ in cuts]) == pytest.approx(KEPT_AFTER_LOSS[cca], abs=0.08)
    test = SequentialTest()
    for c, e in cuts:
        test.add(evidence(c, e))
    post = test.posterior()
    if cca == "reno":        # a loss cut cannot tell Reno from Vegas: both halve
        assert post["reno"] + post["vegas"] > 0.95 and test.verdict() is None
    else:
        assert test.verdict() == cca


def test_a_flow_that_answers_as_none_of_the_four_is_unknown():
    packets, lost = synthetic(1.45, rate_per_bin=40.0, events=8)      # speeds up after its losses
    test = SequentialTest()
    for c, e in loss_cuts(packets, lost, RTT_BINS):
        test.add(evidence(c, e))
    assert test.verdict() == UNKNOWN


def test_losses_too_close_together_or_too_early_are_no_events():
    packets = np.full(200, 20.0)
    lost = np.zeros(200)
    lost[[3, 50, 52, 198]] = 1               # before 2 RTTs of history; back-to-back; too late to read
    assert [round(c, 2) for c, _ in loss_cuts(packets, lost, RTT_BINS)] == [1.0]     # only the one at 50
    assert loss_cuts(np.full(200, 0.5), lost, RTT_BINS) == []                       # too few packets


def test_the_sequential_test_waits_until_the_threshold():
    test = SequentialTest(threshold=0.9)
    assert test.verdict() is None and test.best()[1] == pytest.approx(0.2)
    flat = {h: 0.0 for h in test.hypotheses}
    test.add(Evidence("nothing", dict(flat)))
    assert test.verdict() is None
    test.add(Evidence("strong", {**flat, "cubic": 5.0}))
    # one measurement moves the odds by at most MAX_LOG_RATIO: 20:1 against four is not yet 0.9
    assert test.verdict() is None and test.best() == ("cubic", pytest.approx(20 / 24))
    test.add(Evidence("strong", {**flat, "cubic": 5.0}))
    assert test.verdict() == "cubic" and len(test.evidence) == 3
    with pytest.raises(ValueError, match="no likelihood for unknown"):
        test.add(Evidence("partial", {h: 0.0 for h in test.hypotheses if h != UNKNOWN}))
    with pytest.raises(ValueError, match="threshold"):
        SequentialTest(threshold=0.3)


def test_at_the_default_threshold_no_stage_commits_alone_and_two_that_agree_do():
    test = SequentialTest()
    flat = {h: 0.0 for h in test.hypotheses}
    test.set("elasticity", Evidence("elasticity", {**flat, "bbr": 50.0}))
    test.set("elasticity", Evidence("elasticity", {**flat, "bbr": 80.0}))     # replaced, not added
    assert test.verdict() is None and test.best()[0] == "bbr"
    test.set("queue_level", Evidence("queue_level", {**flat, "bbr": 50.0}))
    assert test.verdict() == "bbr"


# -- the stages read through the bottleneck's hop records, on a fluid FIFO port --------

from dataclasses import replace  # noqa: E402

from estimator.identify import elasticity, queue_trend, spare  # noqa: E402
from estimator.identify.bottleneck import NodeRecords  # noqa: E402
from telemetry.flowid import PROTO_TCP  # noqa: E402
from estimator.identify.identifier import Identifier  # noqa: E402
from tests.unit.fluid_bottleneck import OWN, run  # noqa: E402


def _series(kind, **kw):
    node = NodeRecords()
    for rec in run(kind, **kw):
        node.add(rec)
    return node.series(OWN)


def test_an_ack_clocked_competitor_answers_the_pulses_and_a_paced_one_does_not():
    window = elasticity.elasticity(_series("window"), 200, 600)
    paced = elasticity.elasticity(_series("bbr"), 200, 600)
    assert window[0] > 0.5 and paced[0] < 0.35
    assert elasticity.evidence(*window).loglik["reno"] > elasticity.evidence(*window).loglik["unknown"]


def test_a_window_cca_fills_the_queue_and_a_paced_one_holds_it():
    grows = queue_trend.slope_per_rtt(_series("window").queue_pkts[200:600], 0.04, 1)
    holds = queue_trend.slope_per_rtt(_series("bbr").queue_pkts[200:600], 0.04, 1)
    assert grows[0] > 0.25 and abs(holds[0]) < 0.15
    ev = queue_trend.evidence(*holds).loglik
    assert ev["vegas"] > ev["reno"] and ev["bbr"] > ev["cubic"]


def test_a_flow_below_its_share_leaves_the_port_idle():
    s = _series("paced")
    use = spare.port_use(s.own[200:600].sum() + s.comp[:, 200:600].sum(), 4.0, s.port_pps)
    assert use == pytest.approx(0.5 + 0.3, abs=0.05)
    ev = spare.evidence(use).loglik
    assert ev["unknown"] > max(ev[c] for c in ("reno", "cubic", "vegas", "bbr"))
    assert spare.evidence(1.0).loglik["unknown"] < spare.evidence(1.0).loglik["cubic"]


@pytest.mark.parametrize("kind, truth, sim", [
    ("window", "reno", {"buffer_pkts": 60}),       # its losses: without, Reno and CUBIC grow alike
    ("bbr", "bbr", {"seconds": 25.0}),             # two ProbeRTTs: before, BBR queues as Vegas does
    ("paced", "unknown", {}), ("vegas", "vegas", {})])
def test_the_identifier_names_the_competitor_from_its_hop_records(kind, truth, sim):
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in run(kind, **{"seconds": 10.0, **sim}):
        idf.add(rec)
    idf.step()
    assert idf.test.best()[0] == truth, idf.test.posterior()
    assert idf.node_id == 2
    # each stage counts once, from its measurements' aggregate: 10 s of one flow's
    # stretches is not 10 s of independent evidence
    assert len(idf.test.stages) <= 6 < len(idf.test.evidence)


PEER = "00000000000000cc"


def _split_own(recs, peer_share=0.5):
    """The fluid port's records with this flow's packets shared with a second probing
    sender (PEER): two intcc senders on the probe beside one competitor."""
    out = []
    for rec in recs:
        top = []
        for fid, packets, lost, proto in rec.top_flows:
            if fid == OWN:
                theirs = int(round(packets * peer_share))
                top += [[OWN, packets - theirs, lost, proto], [PEER, theirs, 0, proto]]
            else:
                top.append([fid, packets, lost, proto])
        out.append(replace(rec, top_flows=top))
    return out


def test_another_probing_sender_is_a_peer_whose_pulses_count_with_ours_and_never_a_competitor():
    recs = _split_own(run("window", seconds=10.0, buffer_pkts=60))
    unaware = Identifier(OWN, base_rtt_s=0.04)
    aware = Identifier(OWN, base_rtt_s=0.04)
    aware.peers = frozenset({PEER})
    for idf in (unaware, aware):
        for rec in recs:
            idf.add(rec)
        idf.step()
    assert PEER in unaware.competitors()                        # the control: read as a competitor
    assert aware.competitors() == {"00000000000000bb"}
    s = aware.nodes[2].series(OWN, aware.peers)
    assert s.comp_ids == ["00000000000000bb"] and s.own.sum() == sum(
        k for rec in recs for fid, k, *_ in rec.top_flows if fid in (OWN, PEER))
    assert aware.test.best()[0] == "reno", aware.test.posterior()


def test_a_test_restarted_a_moment_ago_reads_a_series_shorter_than_an_rtt():
    """After a re-identification the identifier has only the records since: with a long
    RTT, fewer bins than an RTT's, a competitor already losing (found on a fresh seed,
    where it ended the agent's identification)."""
    from estimator.identify.bottleneck import moving_mean
    full = run("window", seconds=20.0, buffer_pkts=30)
    first_loss = next(i for i, r in enumerate(full) if any(e[2] for e in r.top_flows))
    idf = Identifier(OWN, base_rtt_s=0.15)           # 15 bins an RTT, 13 bins of records
    for rec in full[first_loss - 12:first_loss + 1]:
        idf.add(rec)
    idf.step()                                       # reads, does not fail
    s = idf.nodes[2].series(OWN)
    assert s.n < 15 and s.comp_window(0.15).shape == s.comp.shape
    assert len(moving_mean([1.0, 2.0], 15)) == 2


def test_a_stage_counts_once_however_often_it_measures():
    test = SequentialTest()
    flat = {h: 0.0 for h in test.hypotheses}
    for _ in range(10):
        test.set("queue_level", Evidence("queue_level", {**flat, "vegas": 2.0}))
    assert test.best() == ("vegas", pytest.approx(math.exp(2) / (math.exp(2) + 4)))
    test.set("spare", Evidence("spare", {**flat, "unknown": 50.0}))     # clamped to 20:1
    assert test.posterior()["unknown"] == pytest.approx(20 / (20 + math.exp(2) + 3))


def test_the_identifier_waits_for_a_competitor_and_reads_nothing_twice():
    recs = run("window", seconds=6.0, competitor_at_s=3.0)
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in recs[:250]:                 # 2.5 s: alone
        idf.add(rec)
    assert idf.step() == [] and idf.competitor_since_s is None
    for rec in recs[250:]:
        idf.add(rec)
    first = idf.step()
    assert idf.competitor_since_s == pytest.approx(1003.0, abs=0.02)
    assert idf.step() == [] and len(idf.test.evidence) == len(first)


def test_vegas_keeps_a_few_packets_queued_a_window_cca_many_and_a_paced_flow_none():
    from estimator.identify import queue_level
    (vegas, _), (window, _), (paced, _) = (queue_level.level_pkts(_series(k), 200, 600)
                                           for k in ("vegas", "window", "paced"))
    # counted FIFO-exact (the packets of theirs that leave within the queue's delay): the
    # probe's own pulses, which queue this flow's packets, do not count as theirs
    assert 2 <= vegas <= 4 and window > 10 and paced < 0.5
    at = {name: queue_level.evidence(v, bdp_pkts=40, buffer_pkts=200).loglik
          for name, v in (("vegas", vegas), ("window", window), ("paced", paced))}
    assert at["vegas"]["vegas"] == max(at["vegas"].values())
    assert at["window"]["vegas"] < -20                       # far above beta
    assert at["paced"]["bbr"] == pytest.approx(at["paced"]["unknown"], abs=0.2)
    assert at["paced"]["bbr"] > at["paced"]["vegas"]


def test_a_window_cut_shows_in_the_window_where_the_queue_hides_it_from_the_rate():
    """Reno halves its window at a loss; with a queue of a BDP or more the halved window
    still fills its share of the pipe, so its rate hardly falls: the cut is read from its
    window (its packets on the way and queued), which does."""
    from estimator.identify.loss_cut import loss_cut_events
    s = _series("window", seconds=20.0, buffer_pkts=120)
    rtt_bins = np.round((0.04 + s.queue_delay_s()) / 0.01).astype(int)
    by_rate = [c for _, c, _ in loss_cut_events(s.comp[0], s.comp_lost[0], rtt_bins)]
    by_window = [c for _, c, _ in loss_cut_events(s.comp[0], s.comp_lost[0], rtt_bins, s.comp_window(0.04)[0])]
    assert by_window and np.median(by_rate) > 0.8 and np.median(by_window) < 0.6


def test_dips_where_bbr_must_renew_its_minimum_rtt_are_bbrs_probe_rtt_and_none_there_is_evidence_too():
    from estimator.identify import probe_rtt
    bins_per_s = 100
    n = 45 * bins_per_s
    queue = np.full(n, 10.0)             # a standing queue: no new low after the competitor's start
    window = np.full(n, 40.0)            # its window: a 4-packet ProbeRTT would show
    bbr = np.full(n, 5.0)
    for at_s in (10.3, 20.8, 31.3, 41.8):                         # ProbeRTT: 200 ms every ~10.5 s
        bbr[int(at_s * bins_per_s):int((at_s + 0.2) * bins_per_s)] = 0.1
    found = [d for d, _ in probe_rtt.dips(bbr)]
    assert [round(d / bins_per_s, 1) for d in found] == [10.3, 20.8, 31.3, 41.8]
    must = probe_rtt.must_dip_windows(queue, bbr, window, first_bin=0, rtt_bins=5, dip_bins=found)
    assert len(must) == 4 and all(hit for *_, hit in must)
    ev = probe_rtt.evidence(4, 4, len(found), 45.0).loglik
    assert ev["bbr"] - ev["cubic"] > math.log(20)
    # a flow that never dips where BBR would have to: evidence against BBR, none among the others
    steady = np.full(n, 5.0)
    must = probe_rtt.must_dip_windows(queue, steady, window, 0, 5, [])
    assert len(must) == 4 and not any(hit for *_, hit in must)
    ev = probe_rtt.evidence(0, len(must), 0, 45.0, window_s=1.5).loglik
    assert ev["cubic"] - ev["bbr"] > math.log(20) and ev["cubic"] == ev["reno"] == ev["vegas"]
    # a queue that reaches a new low every 4 s lets BBR renew its minimum without a dip: no
    # window; nor where its window is too small for ProbeRTT's 4 packets to show
    falling = queue - np.floor(np.arange(n) / (4 * bins_per_s))
    assert probe_rtt.must_dip_windows(falling, steady, window, 0, 5, []) == []
    assert probe_rtt.must_dip_windows(queue, steady, np.full(n, 8.0), 0, 5, []) == []
    # scattered dips (a deep queue's turbulence) rarely fall in the windows
    scattered = [int(t * bins_per_s) for t in (4.0, 7.5, 13.1, 16.0, 25.4, 29.0, 38.2, 44.0)]
    must = probe_rtt.must_dip_windows(queue, steady, window, 0, 5, scattered)
    follow = sum(hit for *_, hit in must)
    ev = probe_rtt.evidence(follow, len(must), len(scattered), 45.0, window_s=1.5).loglik
    assert follow <= 1 and ev["cubic"] > ev["bbr"]
    # a flow that stops for good is no dip; nor is a slow flow's gap of a few packets
    ends = np.full(3000, 5.0)
    ends[2500:] = 0
    assert probe_rtt.dips(ends) == [] and probe_rtt.dips(np.tile([0.0] * 12 + [1.0] * 12, 200)) == []
    assert probe_rtt.evidence(0, 0, 0, 40.0).loglik["bbr"] == probe_rtt.evidence(0, 0, 0, 40.0).loglik["reno"]


def test_the_competitors_now_are_those_with_a_share_of_the_last_seconds():
    from dataclasses import replace
    recs = run("window", seconds=6.0)
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in recs[:300]:
        idf.add(rec)
    idf.step()
    assert idf.competitors() == {"00000000000000bb"}
    # the competitor replaced by another flow (a new connection: a new id), and a few
    # packets of a third (a handshake): the new one only, once the old one's last packets
    # are more than the window ago
    for rec in recs[300:]:
        top = [[("00000000000000cc" if e[0] == "00000000000000bb" else e[0]), *e[1:]] for e in rec.top_flows]
        idf.add(replace(rec, top_flows=top + ([["00000000000000dd", 1, 0, 6]] if rec is recs[400] else [])))
    assert idf.competitors() == {"00000000000000cc"}
    assert idf.competitors(window_s=4.0) == {"00000000000000bb", "00000000000000cc"}


def test_a_flow_is_identified_anew_only_when_the_change_lasts():
    from ccp_agent.identification import CHANGE_STEPS, _Flow

    class Scripted:
        def __init__(self):
            self.committed, self.now = None, frozenset({"a"})

        def verdict(self):
            return self.committed

        def competitors(self):
            return self.now
    f = _Flow(1, ("::1", 1, "::2", 2), 0.95)
    f.identifier = Scripted()
    assert f.competitors_changed() is None and f.named is None and f.watching == {"a"}   # undecided: watched
    f.identifier.committed = "reno"
    assert f.competitors_changed() is None and f.named == {"a"}
    f.identifier.now = frozenset({"a", "b"})
    assert [f.competitors_changed() for _ in range(CHANGE_STEPS - 1)] == [None] * (CHANGE_STEPS - 1)
    f.identifier.now = frozenset({"a"})                                  # a blip: no change
    assert f.competitors_changed() is None and f.changed_steps == 0
    f.identifier.now = frozenset({"a", "b"})
    assert [f.competitors_changed() for _ in range(CHANGE_STEPS)][-1] == "a new competitor"
    f.changed_steps, f.identifier.now = 0, frozenset()
    assert [f.competitors_changed() for _ in range(CHANGE_STEPS)][-1] == "the competitor left"


def test_a_competitor_replaced_while_undecided_is_identified_anew_not_from_its_predecessors_evidence():
    from ccp_agent.identification import CHANGE_STEPS, _Flow

    class Scripted:
        def __init__(self):
            self.now, self.restarted = frozenset(), []

        def verdict(self):
            return None

        def competitors(self):
            return self.now

        def restart(self, joined):
            self.restarted.append(joined)

        def take_back(self, hypothesis, share):
            pass
    f = _Flow(1, ("::1", 1, "::2", 2), 0.95)
    f.identifier = Scripted()
    assert [f.competitors_changed() for _ in range(2 * CHANGE_STEPS)] == [None] * (2 * CHANGE_STEPS)   # alone
    f.identifier.now = frozenset({"a"})        # the first competitor: what is identified, no change
    assert [f.competitors_changed() for _ in range(2 * CHANGE_STEPS)] == [None] * (2 * CHANGE_STEPS)
    f.identifier.now = frozenset({"b"})        # replaced before a commit
    assert [f.competitors_changed() for _ in range(CHANGE_STEPS)][-1] == "a new competitor"
    f.restart()
    assert f.identifier.restarted == [{"b"}] and f.watching is None
    f.competitors_changed()
    assert f.watching == {"b"}
    f.named, f.committed = frozenset({"b"}), "cubic"     # committed, then the switch taken back
    f.take_back(0.2)
    assert f.named is None and f.watching == {"b"}
    f.identifier.now = frozenset()
    assert [f.competitors_changed() for _ in range(CHANGE_STEPS)][-1] == "the competitor left"


def test_udp_alone_is_unknown_and_udp_beside_tcp_uses_the_port_without_being_named():
    # UDP below its share: not TCP, and the port left partly idle: "unknown", committed
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in run("paced", seconds=6.0, competitor_proto=17):
        idf.add(rec)
    idf.step()
    assert idf.verdict() == "unknown" and set(idf.measured) == {"spare", "not_tcp"}, idf.test.posterior()
    assert idf.competitors() == frozenset()          # no TCP flow to watch for a change
    # UDP taking more than its share leaves no port idle: unknown leads, without a commit
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in run("paced", seconds=6.0, competitor_proto=17, paced_share=0.6):
        idf.add(rec)
    idf.step()
    assert idf.test.best()[0] == "unknown" and idf.verdict() is None
    # beside a TCP competitor, UDP's packets count in the port's use but name nothing
    node = NodeRecords()
    for rec in run("window", seconds=6.0):
        node.add(replace(rec, top_flows=rec.top_flows + [["00000000000000ee", 2, 0, 17]]))
    s = node.series(OWN)
    assert s.comp_ids == ["00000000000000bb"] and s.other.sum() == 2 * 600
    use = spare.port_use(s.own[200:600].sum() + s.others()[200:600].sum(), 4.0, s.port_pps)
    assert use > spare.port_use(s.own[200:600].sum() + s.comp[:, 200:600].sum(), 4.0, s.port_pps)


def test_beside_udp_alone_a_starting_tcp_flow_holds_the_unknown_verdict_and_a_handshake_does_not():
    udp = run("paced", seconds=6.0, competitor_proto=17)

    def with_tcp(packets_each: int, every: int):
        """UDP alone, and a TCP flow's first packets in its last half second (too few to name)."""
        idf = Identifier(OWN, base_rtt_s=0.04)
        for i, rec in enumerate(udp):
            if i >= len(udp) - 50 and i % every == 0:
                rec = replace(rec, top_flows=rec.top_flows + [["00000000000000cc", packets_each, 0, PROTO_TCP]])
            idf.add(rec)
        return idf, idf.step()

    idf, added = with_tcp(2, 5)                  # an initial window's 20 packets: a competitor starting
    assert added == [] and idf.verdict() is None and idf.competitors() == frozenset()
    idf, added = with_tcp(1, 25)                 # two packets: a handshake, UDP alone still
    assert idf.verdict() == "unknown" and "not_tcp" in idf.measured


def test_a_tcp_competitor_after_udp_alone_is_named_from_its_own_start():
    udp = run("paced", seconds=3.0, competitor_proto=17)
    tcp = run("window", seconds=9.0, buffer_pkts=60)
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in udp:
        idf.add(rec)
    idf.step()
    assert "not_tcp" in idf.measured
    for rec in tcp[300:]:            # the TCP competitor from 3 s on, the UDP one gone
        idf.add(rec)
    idf.step()
    assert "not_tcp" not in idf.measured and idf.test.best()[0] in ("reno", "cubic"), idf.test.posterior()
    assert idf.competitor_since_s == pytest.approx(1003.0, abs=0.05)


def test_a_record_spanning_an_idle_gap_or_an_earlier_run_counts_where_its_packets_came():
    """A sink publishes at the first packet a period after its previous record: a record
    whose interval spans an idle gap counts its packets at the gap's start, and one from a
    second sink whose interval reaches back before the series (a run before this one)
    leaves them out instead of indexing from the end."""
    recs = run("window", seconds=2.0)
    node = NodeRecords()
    for rec in recs:
        node.add(rec)
    base = node.series(OWN)
    gap_end = recs[-1].ts_ns + int(3e9)         # 3 s idle, then one packet of the competitor
    node.add(replace(recs[-1], ts_ns=gap_end, interval_ms=3000.0 + 10.0, top_flows=[["00000000000000bb", 4, 0, 6]]))
    # a second sink's first record here: its previous one was 9 s before the series began
    node.add(replace(recs[-1], ts_ns=gap_end + int(1e7), interval_ms=(gap_end * 1e-9 - recs[0].ts_ns * 1e-9 + 9.0) * 1e3,
                     top_flows=[["00000000000000bb", 7, 0, 6]]))
    s = node.series(OWN)
    assert s.n >= base.n + 300
    assert s.comp[0, base.n - 2:base.n + 1].sum() - base.comp[0, base.n - 2:].sum() == 4
    assert s.comp[0, base.n + 1:].sum() == 0           # not in the gap's middle
    assert s.comp.sum() == base.comp.sum() + 4          # the 7 before the series: left out


def test_in_a_deep_queue_reno_grows_a_segment_per_rtt_and_cubic_many():
    """Both RTTs are mostly the shared queue's: Reno's range narrows to about one segment
    per RTT whatever the base RTTs; CUBIC's curve (slow after its start, then tens of
    segments per RTT) is told from it over the run's stretches, and a stretch no model holds
    for (a receive window reached: a falling window without a loss) does not decide alone."""
    lo, hi = queue_trend.reno_range(rtt_s=3.0, base_rtt_s=0.1)
    assert 0.85 < lo < 1.0 < hi < 1.2
    assert queue_trend.reno_range(rtt_s=0.1, base_rtt_s=0.1) == queue_trend.RENO_RANGE
    ctx = [(800.0, 3.0, 20.0)] * 10
    cubic = [(6.0, 0.2), (7.0, 0.2), (35.0, 2.0), (60.0, 2.0), (130.0, 5.0), (180.0, 10.0),
             (-10.0, 70.0), (-30.0, 80.0), (-60.0, 70.0), (-20.0, 80.0)]
    rising = [(150.0, 1.0, 4.0), (160.0, 1.0, 5.0), (300.0, 1.5, 7.0), (450.0, 2.0, 9.0), (600.0, 2.5, 11.0),
              (700.0, 3.0, 13.0)] + ctx[:4]
    ev = queue_trend.combined(cubic, rising, base_rtt_s=0.1).loglik
    assert ev["cubic"] > ev["reno"] + 1.0 and ev["cubic"] > ev["bbr"] + 1.0
    reno = [(1.0, 0.1), (0.9, 0.2), (1.1, 0.1), (0.95, 0.1), (1.0, 0.3), (-40.0, 5.0)]
    ev = queue_trend.combined(reno, ctx[:6], base_rtt_s=0.1).loglik
    assert ev["reno"] > ev["cubic"] + math.log(20) and ev["reno"] > ev["vegas"]
    hold = [(0.0, 0.1), (0.1, 0.1), (-0.1, 0.1), (0.05, 0.1), (3.0, 0.2)]    # one outlier stretch
    ev = queue_trend.combined(hold, [(60.0, 0.2, 10.0)] * 5, base_rtt_s=0.1).loglik
    assert ev["bbr"] > max(ev["reno"], ev["cubic"])


def test_cubic_before_its_first_loss_grows_along_its_curve_from_its_start():
    """No old maximum (HyStart's exit): C t^3 from the start, hundreds of segments per RTT
    after 15 s in a queue of seconds, which the regrowth-to-a-maximum model alone excludes."""
    lo, hi = queue_trend.cubic_range(700.0, 2.0)
    assert hi < 300
    assert queue_trend.cubic_range(700.0, 2.0, age_s=15.0)[1] == pytest.approx(3 * 0.4 * 15 ** 2 * 2.0)
    ev = queue_trend.evidence(315.0, 18.0, 700.0, 2.0, base_rtt_s=0.15, age_s=15.0).loglik
    assert ev["cubic"] > ev["reno"] + 5 and ev["cubic"] > queue_trend.evidence(315.0, 18.0, 700.0, 2.0, 0.15).loglik["cubic"]


def test_a_switch_that_leaves_the_flow_under_half_its_share_or_starving_is_taken_back():
    from estimator.identify import switch_share
    assert switch_share.clearly_worse(0.5, 1, False) is None and switch_share.clearly_worse(0.3, 1, False) is None
    assert "fell to 0.20" in switch_share.clearly_worse(0.2, 1, False)
    assert switch_share.clearly_worse(0.2, 3, False) is None          # a quarter is fair beside three: 0.2 is not clearly worse
    assert "no packet" in switch_share.clearly_worse(0.4, 1, True)
    assert switch_share.clearly_worse(None, 0, False) is None         # nothing to share with: nothing to judge
    # the share is this flow's of the TCP packets through the bottleneck, from its hop records
    recs = run("window", seconds=4.0)
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in recs:
        idf.add(rec)
    idf.step()
    share, n, starved = idf.share(2.0)
    assert n == 1 and not starved and 0.3 < share < 0.7, share
    starving = Identifier(OWN, base_rtt_s=0.04)
    for rec in recs[:200] + [replace(r, top_flows=[e for e in r.top_flows if e[0] != OWN]) for r in recs[200:]]:
        starving.add(rec)
    starving.step()
    assert starving.share(2.0)[2] and starving.share(2.0)[0] < 0.3


def test_the_competitors_rate_over_this_flows_is_read_off_their_packets_at_the_bottleneck():
    recs = run("window", seconds=4.0)
    idf = Identifier(OWN, base_rtt_s=0.04)
    assert idf.competitor_rate_ratio(2.0) is None                   # nothing seen yet
    for rec in recs:
        idf.add(rec)
    idf.step()
    share, _, _ = idf.share(2.0)
    assert idf.competitor_rate_ratio(2.0) == pytest.approx((1 - share) / share)     # one competitor
    # the competitor's packets doubled: twice the ratio
    doubled = Identifier(OWN, base_rtt_s=0.04)
    for rec in recs:
        doubled.add(replace(rec, top_flows=[[e[0], e[1] * (1 if e[0] == OWN else 2), *e[2:]] for e in rec.top_flows]))
    doubled.step()
    assert doubled.competitor_rate_ratio(2.0) == pytest.approx(2 * idf.competitor_rate_ratio(2.0), rel=0.02)


def test_the_child_takes_a_switch_back_once_it_settled_and_counts_it_against_the_hypothesis():
    from ccp_agent.identification import _Flow
    from estimator.identify import switch_share

    class Scripted:
        def __init__(self):
            self.test = SequentialTest(0.95)
            for stage in ("queue_level", "elasticity"):
                self.test.add(Evidence(stage, {"bbr": 0.0, "cubic": 0.0, "reno": 0.0, "vegas": 5.0, UNKNOWN: 0.0}))
            self.now_share = (0.1, 1, False)

        def verdict(self):
            return self.test.verdict()

        def competitors(self):
            return frozenset({"a"})

        def share(self, window_s):
            return self.now_share

        def take_back(self, hypothesis, share):
            self.test.add(switch_share.evidence(hypothesis, share))
    f = _Flow(1, ("::1", 1, "::2", 2), 0.95)
    f.identifier, f.base_rtt_s = Scripted(), 0.05
    assert f.switch_worse(100.0) is None                 # not committed: nothing watched
    f.competitors_changed()
    t0 = f.committed_at
    assert f.committed == "vegas"
    settled = t0 + switch_share.settle_s(0.05) + switch_share.window_s(0.05)
    assert f.switch_worse(settled - 0.1) is None         # the switch has not settled
    why, share = f.switch_worse(settled)
    assert "fell to 0.10" in why and share == 0.1
    f.identifier.now_share = (0.1, 1, True)              # starving: said at once, not after the settling
    assert "no packet" in f.switch_worse(t0 + switch_share.STARVED_S)[0]
    before = f.identifier.test.posterior()["vegas"]
    f.take_back(share)
    after = f.identifier.test.posterior()["vegas"]
    assert f.committed is None and f.switch_worse(settled) is None and after < before and after < 0.95
    f.identifier.now_share = (0.45, 1, False)             # a fair share after a switch: kept
    f.identifier.test.add(Evidence("loss_cut", {"bbr": 0.0, "cubic": 0.0, "reno": 0.0, "vegas": 5.0, UNKNOWN: 0.0}))
    f.competitors_changed()
    assert f.switch_worse(f.committed_at + 100) is None


# -- slow start: how it ends, from the competitor's first packet --------------------------

from estimator.identify import slow_start  # noqa: E402
from estimator.identify.bottleneck import BIN_S  # noqa: E402


@pytest.mark.parametrize("how, buffer_pkts, expected", [
    ("loss", 600, "deep"),          # Reno in a deep buffer: doubling far past any other's queue
    ("delay", 600, "held"),         # HyStart: out of slow start at a delay rise, no loss, the window kept
    ("loss", 30, "lost"),           # a small buffer: the loss first, nothing said
])
def test_the_slow_start_stage_reads_how_it_ended(how, buffer_pkts, expected):
    s = _series("window", seconds=6.0, slow_start=how, buffer_pkts=buffer_pkts, competitor_at_s=1.0)
    what, at = slow_start.outcome(s, 0, 0.04)
    assert what == expected
    assert 1.0 < s.t0_s + at * BIN_S - 1_000 < 4.0       # read within 3 s of the competitor's start


def test_slow_start_evidence_points_at_reno_or_away_from_it():
    deep = slow_start.evidence("deep").loglik
    flat = slow_start.evidence("flat").loglik
    assert max(deep, key=deep.get) == "reno" and min(flat, key=flat.get) == "reno"
    assert slow_start.combined(["deep", "lost"]) == "deep"
    assert slow_start.combined(["deep", "flat"]) is None and slow_start.combined(["lost", None]) is None
    assert slow_start.combined(["flat", "held"]) == "held" and slow_start.combined(["held", "drained"]) is None
    held, drained = slow_start.evidence("held").loglik, slow_start.evidence("drained").loglik
    assert max(held, key=held.get) == "cubic" and max(drained, key=drained.get) == "bbr"


@pytest.mark.parametrize("after, expected", [(1.0, "held"), (0.3, "drained"), (0.9, "held")])
def test_after_a_flat_end_the_window_held_or_drained(after, expected):
    """A competitor (no queue: its window is its rate times the RTT) doubling each RTT from
    10 to 80 packets, flat for 3 RTTs, then at ``after`` of that: BBR's Drain falls to a third."""
    from estimator.identify.bottleneck import Series
    rtt_bins, base_rtt_s = 10, 0.1
    per_rtt = [0.0] * 5 + [10, 20, 40, 80, 80, 80, 80] + [80 * after] * 8
    comp = np.repeat(np.array(per_rtt) / rtt_bins, rtt_bins)[None, :]
    n = comp.shape[1]
    s = Series(0.0, np.full(n, 5.0), comp, np.zeros_like(comp), ["c"], np.zeros(n), 12e6, 500.0, 1000.0)
    what, at = slow_start.outcome(s, 0, base_rtt_s)
    assert what == expected, (what, at)


def test_a_competitor_already_running_when_the_records_begin_says_nothing():
    s = _series("window", seconds=4.0, slow_start="loss", buffer_pkts=600, competitor_at_s=0.0)
    assert slow_start.outcome(s, 0, 0.04) == (None, None)


def test_the_identifier_reads_a_slow_start_within_seconds():
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in run("window", seconds=4.0, slow_start="loss", buffer_pkts=600, competitor_at_s=1.0):
        idf.add(rec)
    idf.step()
    assert "slow_start" in idf.test.stages
    post = idf.test.posterior()
    assert max(post, key=post.get) == "reno"


def test_a_competitors_cubic_epoch_is_read_from_its_slow_start_exit_and_not_after_a_loss():
    rtt_s = 0.04
    # no loss: the curve from where HyStart ended its slow start, K 0
    recs = run("window", seconds=7.0, rtt_s=rtt_s, buffer_pkts=5000, slow_start="delay", competitor_at_s=1.0)
    assert not any(e[2] for r in recs for e in r.top_flows)
    idf = Identifier(OWN, base_rtt_s=rtt_s)
    assert idf.competitor_epoch() is None                       # nothing read yet
    for rec in recs:
        idf.add(rec)
    idf.step()
    origin, k_s, age_s = idf.competitor_epoch()
    # the fluid's slow start ends once the queue's delay rose 8 ms, ~1.2 s in: its window then
    assert k_s == 0 and 16 <= origin <= 60 and 5.0 < age_s < 6.0
    # after a loss: none (a fresh curve from the window predicts it better)
    recs = run("window", seconds=10.0, rtt_s=rtt_s, buffer_pkts=60, slow_start="delay", competitor_at_s=1.0)
    assert any(e[2] for r in recs for e in r.top_flows)
    idf = Identifier(OWN, base_rtt_s=rtt_s)
    for rec in recs:
        idf.add(rec)
    idf.step()
    assert idf._slow_start_exit and idf.competitor_epoch() is None      # its exit read, then its loss


def test_a_competitor_on_a_longer_path_is_read_in_its_own_rtt_where_the_sink_tells_it():
    """A Reno competitor whose round trip is 3x this flow's, in a queue of a BDP and more:
    read in this flow's RTT its window misses most of its packets on the way (and the cut
    is read before it learnt of its loss), so its halving reads deeper than half; in the
    RTT the sink's node measured for it (its least round trip, less the least queue since
    its start), at its constant."""
    kw = {"seconds": 30.0, "buffer_pkts": 100, "rtt_s": 0.02, "comp_rtt_s": 0.06}
    def cuts(told):
        idf = Identifier(OWN, base_rtt_s=0.02)
        for rec in run("window", rtt_told=told, **kw):
            idf.add(rec)
        idf.step()
        return [v for v, _ in idf.measured.get("loss_cut", [])], idf.comp_base_rtts(idf.series)

    flow1_cuts, flow1_base = cuts(False)
    own_cuts, own_base = cuts(True)
    assert flow1_base[0] == pytest.approx(0.02) and own_base[0] == pytest.approx(0.06, abs=0.01)
    assert len(own_cuts) >= 3 and abs(np.median(own_cuts) - 0.5) < 0.07, own_cuts
    assert np.median(flow1_cuts) < np.median(own_cuts) - 0.05, (flow1_cuts, own_cuts)


def test_the_records_rtt_is_each_competitors_and_an_unmeasured_one_reads_in_this_flows():
    recs = run("window", seconds=3.0, rtt_told=True, comp_rtt_s=0.08)
    node = NodeRecords()
    for rec in recs:
        node.add(rec)
    s = node.series(OWN)
    assert s.comp_rtt_s[0] == pytest.approx(0.08, abs=0.01)
    idf = Identifier(OWN, base_rtt_s=0.04)
    assert idf.comp_base_rtts(replace(s, comp_rtt_s=np.array([np.nan])))[0] == 0.04
    assert idf.comp_base_rtts(s)[0] == pytest.approx(0.08, abs=0.01)
    # a window is its packets on the way in its own RTT and its queued ones, one RTT per competitor
    both = s.comp_window(np.array([0.08]))[0]
    assert np.nanmedian(both) > np.nanmedian(s.comp_window(0.04)[0])
    # the replay's oracle overrides what the records tell
    assert Identifier(OWN, base_rtt_s=0.04, competitor_base_rtt_s=0.2).comp_base_rtts(s)[0] == 0.2


def test_with_the_competitors_rtt_measured_reno_grows_a_segment_per_its_own_round_trip():
    # flow 1's RTT 20 ms, the competitor's 60 ms (queue included): Reno's segment per its RTT
    # is a third of one per flow 1's; not told, anything within 4x either way
    lo, hi = queue_trend.reno_range(0.02, 0.02, comp_rtt_s=0.06)
    assert lo == pytest.approx(1 / 3 / 1.5) and hi == pytest.approx(1 / 3 * 1.5)
    told = queue_trend.evidence(1 / 3, 0.05, 40, 0.02, 0.02, None, 0.06).loglik
    blind = queue_trend.evidence(1 / 3, 0.05, 40, 0.02, 0.02, None).loglik
    assert told["reno"] > blind["reno"] and told["reno"] > told["cubic"]
    # a segment per flow 1's RTT is three per the competitor's: no longer Reno's
    assert queue_trend.evidence(1.0, 0.05, 40, 0.02, 0.02, None, 0.06).loglik["reno"] < \
        queue_trend.evidence(1.0, 0.05, 40, 0.02, 0.02, None).loglik["reno"] - 2


# -- loss_repeat: does the competitor go on losing after its first loss? ----------------------

from estimator.identify import loss_repeat  # noqa: E402


def _lossy_series(lossy_after: list, rtt_bins: int = 10, rate_per_bin: float = 4.0):
    """A competitor at a steady rate (a window of 40 packets at a 100 ms RTT, no queue) whose
    first drop is at bin 100; then a drop in round r after it where lossy_after[r] (round 0:
    the loss's own)."""
    from estimator.identify.bottleneck import Series
    n = 100 + rtt_bins * (len(lossy_after) + 3)
    comp = np.full((1, n), rate_per_bin)
    comp[0, :50] = 0.0
    lost = np.zeros((1, n))
    for r, hit in enumerate(lossy_after):
        if hit:
            lost[0, 100 + r * rtt_bins + 3] = 1
    return Series(0.0, np.full(n, 5.0), comp, lost, ["c"], np.zeros(n), 12e6, 500.0, 1000.0)


@pytest.mark.parametrize("pattern, expected_k", [
    ([1, 1, 1, 0, 0, 0, 0, 0, 0, 0], 0),      # a recovery's losses, then quiet: a loss-based cut
    ([1] * 10, 6),                             # a drop every round, no cut: a bound BBR
    ([1, 0, 0, 0, 1, 0, 0, 1, 0, 0], 2),
])
def test_the_rounds_after_the_recovery_are_counted(pattern, expected_k):
    k, n, window = loss_repeat.lossy_rounds(_lossy_series(pattern), 0, 0.1)
    assert (k, n) == (expected_k, loss_repeat.READ_ROUNDS)
    assert window == pytest.approx(40.0, rel=0.05)


def test_rounds_are_read_as_they_complete_and_none_before_a_loss():
    s = _lossy_series([1] * 10)
    from dataclasses import replace as dc_replace
    cut = 103 + 10 * (loss_repeat.RECOVERY_ROUNDS + 2) + 1     # the first drop at 103: two rounds past the recovery
    part = dc_replace(s, own=s.own[:cut], comp=s.comp[:, :cut], comp_lost=s.comp_lost[:, :cut], queue_pkts=s.queue_pkts[:cut])
    assert loss_repeat.lossy_rounds(part, 0, 0.1)[:2] == (2, 2)
    assert loss_repeat.evidence([loss_repeat.lossy_rounds(part, 0, 0.1)]) is None     # under MIN_ROUNDS
    quiet = dc_replace(s, comp_lost=np.zeros_like(s.comp_lost))
    assert loss_repeat.lossy_rounds(quiet, 0, 0.1) is None


def test_losing_on_says_bbr_and_quiet_after_a_cut_says_loss_based():
    on = loss_repeat.evidence([(6, 6, 40.0)]).loglik
    quiet = loss_repeat.evidence([(0, 6, 40.0)]).loglik
    assert on["bbr"] - max(on[h] for h in ("reno", "cubic", "vegas")) > math.log(20)
    # weakly: a BBR whose window fits loses as rarely
    assert 0 < min(quiet[h] for h in ("reno", "cubic", "vegas")) - quiet["bbr"] < math.log(1.5)
    assert quiet["reno"] == quiet["cubic"] == quiet["vegas"]          # it cannot tell them apart
    # a window of a few packets regrows in a few rounds: losing on is what a loss-based flow
    # does too, no evidence for BBR
    tiny = loss_repeat.evidence([(4, 6, 4.0)]).loglik
    assert tiny["reno"] >= tiny["bbr"]
    assert on["bbr"] > on["unknown"] - math.log(2)    # BBR may lose in any share of its rounds
    assert loss_repeat.evidence([(0, 6, 2.0)]) is None        # a window of 2: an RTO's backoff, not read
    # competitors at one bottleneck lose in the same overflows: their mean, not their sum
    two = loss_repeat.evidence([(6, 6, 40.0), (0, 6, 40.0)])
    assert two.loglik["reno"] == pytest.approx((on["reno"] + quiet["reno"]) / 2) and two.measured == 0.5


def test_the_identifier_reads_a_reno_that_lost_in_slow_start_as_loss_based():
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in run("window", seconds=4.0, slow_start="loss", buffer_pkts=30, competitor_at_s=1.0):
        idf.add(rec)
    idf.step()
    ll = idf.test.stages["loss_repeat"]
    assert ll["reno"] > ll["bbr"] and idf._loss_repeat_read and all(
        n == loss_repeat.READ_ROUNDS for _, n, _ in idf._loss_repeat_read.values())


def test_a_restart_for_a_competitor_that_joined_reads_its_start_and_one_that_left_starts_empty():
    recs = run("window", seconds=5.0, slow_start="loss", buffer_pkts=600, competitor_at_s=2.5)
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in recs:
        idf.add(rec)
    idf.step()
    assert "slow_start" in idf.test.stages
    idf.restart(frozenset({"00000000000000bb"}))
    assert idf.test.stages == {} and idf.competitor_since_s is None
    node = idf.nodes[2]
    assert 0.4 < node.first_seen_s("00000000000000bb") - node.rows[0][0] < 2.1     # kept from 2 s before it
    idf.step()
    assert "slow_start" in idf.test.stages                 # its start read again, as it came
    # a fresh identifier from a second after its start sees it already running: no slow start
    late = Identifier(OWN, base_rtt_s=0.04)
    for rec in recs:
        if rec.ts_ns * 1e-9 - 1_000 >= 3.5:
            late.add(rec)
    late.step()
    assert "slow_start" not in late.test.stages
    idf.restart(frozenset())                               # a competitor left: nothing kept
    assert all(not n.rows for n in idf.nodes.values()) and idf.step() == []


# -- exit_cut: how deep the competitor's window falls after its slow start's loss -------------

from estimator.identify import exit_cut  # noqa: E402


def _cut_series(kept: float, rtt_bins: int = 10, rate_per_bin: float = 4.0, rounds_after: int = 8):
    """A competitor at a window of 40 packets (100 ms RTT, no queue) from bin 50, one drop at
    bin 103, and ``kept`` of its window from an RTT after it on."""
    from estimator.identify.bottleneck import Series
    n = 103 + rtt_bins * rounds_after
    comp = np.full((1, n), rate_per_bin)
    comp[0, :50] = 0.0
    comp[0, 103 + rtt_bins:] *= kept
    lost = np.zeros((1, n))
    lost[0, 103] = 1
    return Series(0.0, np.full(n, 5.0), comp, lost, ["c"], np.zeros(n), 12e6, 500.0, 1000.0)


@pytest.mark.parametrize("kept", [0.3, 0.5, 0.7])
def test_the_window_after_the_recovery_is_read_over_its_peak(kept):
    ratio, peak = exit_cut.exit_ratio(_cut_series(kept), 0, 0.1)
    assert ratio == pytest.approx(kept, abs=0.02) and peak == pytest.approx(40.0, rel=0.05)


def test_the_fall_is_read_once_its_rounds_are_and_never_before_a_loss():
    rounds = exit_cut.RECOVERY_ROUNDS + exit_cut.READ_ROUNDS
    assert exit_cut.exit_ratio(_cut_series(0.5, rounds_after=rounds - 1), 0, 0.1) is None
    assert exit_cut.exit_ratio(_cut_series(0.5, rounds_after=rounds + 1), 0, 0.1) is not None
    s = _cut_series(0.5)
    from dataclasses import replace as dc_replace
    assert exit_cut.exit_ratio(dc_replace(s, comp_lost=np.zeros_like(s.comp_lost)), 0, 0.1) is None


def test_a_deep_fall_says_reno_or_vegas_a_shallow_one_cubic_or_bbr_and_between_says_little():
    at = {h: exit_cut.READ_FACTOR * k for h, k in exit_cut.KEPT_AFTER_EXIT.items()}
    deep = exit_cut.evidence([(at["reno"], 40.0)]).loglik
    shallow = exit_cut.evidence([(at["cubic"], 40.0)]).loglik
    between = exit_cut.evidence([((at["reno"] + at["cubic"]) / 2, 40.0)]).loglik
    assert deep["reno"] == deep["vegas"] and math.log(2) < deep["reno"] - deep["cubic"] < math.log(5)
    assert math.log(2) < shallow["cubic"] - shallow["reno"] < math.log(5) and shallow["bbr"] > shallow["reno"]
    assert between["reno"] == pytest.approx(between["cubic"])
    # a window that grew after its loss is none of the four
    grew = exit_cut.evidence([(1.4, 40.0)]).loglik
    assert grew["unknown"] > max(grew[h] for h in ("reno", "cubic", "vegas", "bbr"))
    # several competitors: their median; a peak of a few packets is not read
    assert exit_cut.evidence([(0.3, 40.0), (0.35, 40.0), (0.9, 40.0)]).measured == 0.35
    assert exit_cut.evidence([(0.3, 4.0)]) is None
    # a BBR still in Startup after its loss grows on: BBR or none of the four, never loss-based
    grown = exit_cut.evidence([(2.3, 40.0)]).loglik
    assert grown["bbr"] - max(grown[h] for h in ("reno", "cubic", "vegas")) > math.log(20)
    # a competitor waiting out an RTO sends nothing: read, and not evidence
    assert exit_cut.evidence([(float("nan"), 40.0)]) is None
    assert exit_cut.evidence([(float("nan"), 40.0), (0.3, 40.0)]).measured == 0.3


def test_a_competitor_that_stalls_after_its_loss_is_read_as_stalled():
    ratio, peak = exit_cut.exit_ratio(_cut_series(0.0), 0, 0.1)
    assert math.isnan(ratio) and peak == pytest.approx(40.0, rel=0.05)


def test_the_identifier_reads_the_fall_once_per_competitor_and_forgets_it_on_a_restart():
    idf = Identifier(OWN, base_rtt_s=0.04)
    for rec in run("window", seconds=5.0, slow_start="loss", buffer_pkts=30, competitor_at_s=1.0):
        idf.add(rec)
    idf.step()
    assert len(idf._exit_cut_read) == 1 and "exit_cut" in idf.test.stages
    (ratio, peak), = idf._exit_cut_read.values()
    assert 0 < ratio < 1 and peak >= exit_cut.MIN_PEAK_PKTS
    assert idf.measured["exit_cut"] == [(pytest.approx(ratio), 0.0)]
    assert all(ev.stage != "exit_cut" for ev in idf.step())     # read once, not at every step
    idf.restart()
    assert idf._exit_cut_read == {} and "exit_cut" not in idf.test.stages
