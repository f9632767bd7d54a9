"""ccp bbr's decisions (ccp_algs/bbr.py) on the mock datapath, over a fluid model of one
bottleneck: Startup finds the bandwidth and ends, Drain empties the queue, ProbeBW keeps
cwnd at 2 BDP and paces at the bandwidth, ProbeRTT comes after 10 s, losses do not cut
the model."""
import pytest

from ccp_algs.bbr import CWND_MIN_PKTS, DRAIN, PROBE_BW, PROBE_RTT, STARTUP, Bbr
from ccp_algs.mock import MockDatapath, datapath_info, report

MSS = 1448


class Clock:
    def __init__(self):
        self.ns = 10**9

    def __call__(self):
        return self.ns


class Path:
    """One bottleneck of ``mbps`` with a base RTT, per round: the flow sends what its window
    and pacing allow, the queue takes the excess, the datapath grows the window per ACK up
    to ss_until (as grow_per_ack)."""

    def __init__(self, mbps=10.0, rtt_ms=40.0):
        self.bw = mbps * 1e6 / 8
        self.base_rtt_s = rtt_ms / 1e3
        self.queue = 0.0
        self.grown = 0

    def round(self, flow, dp, clock, loss_pkts=0):
        rtt_s = self.base_rtt_s + self.queue / self.bw
        cwnd = dp.cwnd
        ss_until = dp.fields.get("ss_until", 0)
        paced = (dp.rate or float("inf")) * rtt_s
        sent = min(cwnd, paced)
        delivered = min(sent, self.bw * rtt_s)
        self.queue = max(0.0, sent - self.bw * self.base_rtt_s)     # in flight beyond the BDP queues
        grow = 0
        if ss_until > cwnd:
            grow = int(min(ss_until - cwnd, delivered) // MSS)
            self.grown += grow
        clock.ns += int(rtt_s * 1e9)
        r = report(acked=int(delivered), delivered=int(delivered // MSS), inflight=int(sent // MSS),
                   rtt_us=int(rtt_s * 1e6), loss=loss_pkts, grown=self.grown, reductions=None)
        r.bw_max = int(delivered / rtt_s)
        flow.on_report(r)
        return r


def start(seed=1):
    clock = Clock()
    alg = Bbr(seed=seed, clock=clock)
    dp = MockDatapath(alg.datapath_programs())
    return alg.new_flow(dp, datapath_info(mss=MSS)), dp, clock


def run(flow, dp, clock, path, rounds):
    for _ in range(rounds):
        path.round(flow, dp, clock)


def test_startup_finds_the_bandwidth_then_drains_into_probe_bw():
    flow, dp, clock = start()
    path = Path(mbps=10, rtt_ms=40)
    modes = []
    for _ in range(40):
        path.round(flow, dp, clock)
        modes.append(flow.mode)
    assert modes[0] == STARTUP and STARTUP in modes and PROBE_BW in modes
    first_probe = modes.index(PROBE_BW)
    assert first_probe < 20, modes                         # ~log2(BDP / 10) + 3 rounds, then drain
    assert all(m == PROBE_BW for m in modes[first_probe:])
    assert flow.full_bw_reached
    assert flow.bw == pytest.approx(path.bw, rel=0.05)
    assert flow.min_rtt_us == pytest.approx(40_000, rel=0.05)


def test_startup_paces_at_least_the_initial_window_per_rtt_and_only_faster():
    """tcp_bbr's bbr_set_pacing_rate: the first report's sample (a few packets' delivery
    rate) must not pace Startup below 2.89 x the initial window per RTT."""
    flow, dp, clock = start()
    r = report(acked=2 * MSS, delivered=2, inflight=8, rtt_us=186_000, grown=0)
    r.bw_max = 7_500                                  # 0.06 Mbit/s
    flow.on_report(r)
    initial = 2.885 * 10 * MSS / 0.186
    assert flow.mode == STARTUP and dp.rate == pytest.approx(initial * 0.99, rel=0.02)
    r.bw_max = 500_000                                # the path shows itself: faster
    flow.on_report(r)
    assert dp.rate == pytest.approx(2.885 * 500_000 * 0.99, rel=0.01)
    r.bw_max = 100_000                                # a lower max in the window: no slower
    flow.on_report(r)
    assert dp.rate == pytest.approx(2.885 * 500_000 * 0.99, rel=0.01)
    flow.full_bw_reached = True                       # once the pipe is full it follows bw
    flow.pacing_gain = 1.0
    flow.bw_samples.clear()
    flow.on_report(r)
    assert dp.rate == pytest.approx(100_000 * 0.99, rel=0.01)


def test_probe_bw_keeps_two_bdp_and_paces_at_the_bandwidth():
    flow, dp, clock = start()
    path = Path(mbps=10, rtt_ms=40)
    run(flow, dp, clock, path, 40)
    bdp_pkts = path.bw * 0.040 / MSS
    gains, cwnds = [], []
    for _ in range(32):
        path.round(flow, dp, clock)
        gains.append(dp.rate / flow.bw)
        cwnds.append(dp.cwnd / MSS)
    assert max(cwnds) <= 2 * bdp_pkts + 6 + 2 + 2
    assert min(cwnds) >= 2 * bdp_pkts - 2
    assert max(gains) == pytest.approx(1.25 * 0.99, rel=0.01)      # probing up
    assert min(gains) == pytest.approx(0.75 * 0.99, rel=0.01)      # draining what it queued
    assert sum(gains) / len(gains) == pytest.approx(0.99, abs=0.05)


def test_probe_rtt_after_ten_seconds_without_a_lower_rtt():
    flow, dp, clock = start()
    path = Path(mbps=10, rtt_ms=40)
    path.base_rtt_s = 0.040
    run(flow, dp, clock, path, 30)
    path.base_rtt_s = 0.045                 # the RTT never gets back to the min
    seen = []
    for _ in range(300):
        path.round(flow, dp, clock)
        seen.append((flow.mode, dp.cwnd // MSS))
        if flow.mode == PROBE_RTT:
            break
    assert flow.mode == PROBE_RTT
    assert dp.cwnd == CWND_MIN_PKTS * MSS
    for _ in range(20):                     # 200 ms and a round later: back, window restored
        path.round(flow, dp, clock)
    assert flow.mode == PROBE_BW
    assert flow.min_rtt_us == pytest.approx(45_000, rel=0.05)
    assert dp.cwnd > 2 * CWND_MIN_PKTS * MSS


def test_a_loss_keeps_the_model_conserves_packets_for_a_round_and_restores_after():
    flow, dp, clock = start()
    path = Path(mbps=10, rtt_ms=40)
    run(flow, dp, clock, path, 40)
    bw, cwnd_before = flow.bw, dp.cwnd
    r = path.round(flow, dp, clock, loss_pkts=3)
    assert flow.bw == pytest.approx(bw, rel=0.05)                  # the model is not cut
    assert flow.conservation_until_round is not None
    assert dp.cwnd <= max(cwnd_before, (r.inflight + r.delivered) * MSS)
    assert dp.fields["ss_until"] == 0                              # no growth while conserving
    run(flow, dp, clock, path, 4)
    assert flow.conservation_until_round is None
    assert dp.cwnd >= cwnd_before - 3 * MSS


def test_a_timeout_restarts_from_one_segment_and_grows_back_to_the_target():
    flow, dp, clock = start()
    path = Path(mbps=10, rtt_ms=40)
    run(flow, dp, clock, path, 40)
    target = flow.target_pkts()
    flow.on_report(report(acked=0, timeout=True, inflight=0, loss=10, rto_acked=0, grown=path.grown, rtt_us=40_000))
    assert dp.cwnd == CWND_MIN_PKTS * MSS                          # at least 4, as tcp_bbr
    assert dp.fields["ss_until"] == 0 or dp.fields["ss_until"] >= CWND_MIN_PKTS * MSS
    run(flow, dp, clock, path, 15)
    assert dp.cwnd / MSS >= 0.8 * target


def test_the_kernel_does_not_cut_a_bbr_flow_before_the_agent_answers():
    flow, dp, clock = start()
    assert dp.fields["loss_beta"] == 1024


def test_bbr_is_registered_with_its_summary():
    from ccp_algs.registry import algorithm_class
    assert algorithm_class("bbr") is Bbr and "BBR" in Bbr.summary


def test_packets_delivered_in_a_long_recovery_grow_the_window_back_as_tcp_bbr():
    """The datapath does not grow the window in a recovery; tcp_bbr does (cwnd + acked, up
    to the target, once packet conservation's round is over): the agent adds it."""
    flow, dp, clock = start()
    path = Path(mbps=10, rtt_ms=40)
    run(flow, dp, clock, path, 40)
    flow.on_report(report(acked=MSS, delivered=1, loss=20, inflight=40, rtt_us=40_000, grown=path.grown,
                          reductions=None))
    flow.recovery_bytes_left = 1e9                       # a recovery that goes on
    low = dp.cwnd
    for _ in range(6):
        clock.ns += 40_000_000
        flow.on_report(report(acked=10 * MSS, delivered=10, inflight=30, rtt_us=40_000, grown=path.grown,
                              reductions=None))
    assert flow.conservation_until_round is None
    assert low < dp.cwnd <= flow.target_pkts() * MSS


def test_a_fast_path_never_hands_portus_a_value_past_31_bits():
    """On an unconstrained veth BBR's pacing rate and target passed 2^31: portus panicked
    converting them. Every register value is clamped."""
    flow, dp, clock = start()
    path = Path(mbps=40_000, rtt_ms=1)                     # 40 Gbit/s
    run(flow, dp, clock, path, 30)
    assert dp.rate <= 2 ** 31 - 1 and dp.cwnd <= 2 ** 31 - 1
    assert all(v <= 2 ** 31 - 1 for v in dp.fields.values())


def test_ack_aggregation_widens_the_target_for_5_to_10_rounds_at_most_100_ms_at_bw():
    """tcp_bbr's bbr_ack_aggregation_cwnd: the datapath measures the aggregation against
    the bw register; the target adds the max of the last two 5-round windows."""
    flow, dp, clock = start()
    path = Path(mbps=10, rtt_ms=40)
    run(flow, dp, clock, path, 40)
    base = flow.target_pkts()
    assert dp.fields["bw"] == pytest.approx(path.bw, rel=0.05)     # what the kernel measures against
    assert dp.fields["own_recovery"] == 1                           # tcp_bbr's recoveries, not PRR
    r = path.round(flow, dp, clock)
    r.extra_acked = 8
    flow.on_report(r)
    assert flow.aggregation_pkts() == 8
    assert flow.target_pkts() - base in (8, 9, 10)                  # rounded up to even, +2 when probing
    too_much = path.round(flow, dp, clock)
    too_much.extra_acked = 10_000
    flow.on_report(too_much)
    assert flow.aggregation_pkts() == pytest.approx(path.bw * 0.1 / MSS, rel=0.05)   # 100 ms at bw
    run(flow, dp, clock, path, 30)              # no aggregation for 10+ rounds (longer with the queue it built): forgotten
    assert flow.aggregation_pkts() == 0 and flow.target_pkts() - base in (-2, 0, 2)


def test_without_the_aggregation_signal_the_target_is_two_bdp():
    from ccp_algs.contract import CCP_KERNEL
    clock = Clock()
    alg = Bbr(seed=1, clock=clock, capabilities=CCP_KERNEL)
    dp = MockDatapath(alg.datapath_programs())
    flow = alg.new_flow(dp, datapath_info(mss=MSS))
    path = Path(mbps=10, rtt_ms=40)
    run(flow, dp, clock, path, 40)
    r = path.round(flow, dp, clock)
    r.extra_acked = 8          # on ccp-kernel this field is libccp's rate_outgoing
    flow.on_report(r)
    assert flow.aggregation_pkts() == 0 and "bw" not in dp.fields and "own_recovery" not in dp.fields


def test_drain_ends_at_the_bdp_plus_the_quantization_budget_as_tcp_bbr():
    """bbr_check_drain compares in flight with bbr_inflight (BDP + 3 x 2 segments, even):
    beside a deep queue of another flow's packets a BBR flow of a few packets of BDP can
    never bring its in flight down to the bare BDP, and stayed in Drain for seconds."""
    flow, dp, clock = start()
    bw = 1.44e6 / 8                              # 3.4 packets of BDP at 27 ms
    flow.bw_samples.append((flow.round, bw))
    flow.min_rtt_us, flow.full_bw_reached = 27_000.0, True
    flow.mode, flow.pacing_gain, flow.cwnd_gain = DRAIN, 1 / 2.885, 2.885
    assert flow.inflight_pkts(1.0) == 10          # ceil(3.4) + 6, even
    clock.ns += 10**6
    r = report(acked=MSS, delivered=1, inflight=11, rtt_us=120_000, minrtt=120_000)
    r.bw_max = int(bw)
    flow.on_report(r)
    assert flow.mode == DRAIN
    clock.ns += 10**6
    r = report(acked=MSS, delivered=1, inflight=10, rtt_us=120_000, minrtt=120_000)
    r.bw_max = int(bw)
    flow.on_report(r)
    assert flow.mode == PROBE_BW


def test_a_policer_like_loss_rate_makes_bbr_use_the_long_term_rate_for_48_rounds():
    """tcp_bbr's bbr_lt_bw_sampling: at >= 20 % loss in two intervals of 4-16 rounds with
    rates within 1/8, the flow takes their mean as its bandwidth at pacing gain 1; 48
    rounds later it probes again. At 20 % random link loss kernel bbr lives there."""
    flow, dp, clock = start()
    path = Path(mbps=10, rtt_ms=40)
    run(flow, dp, clock, path, 40)                       # in ProbeBW on the link's rate
    assert not flow.lt_use_bw
    rounds, delivered = 0, 70
    while not flow.lt_use_bw and rounds < 60:
        delivered = path.round(flow, dp, clock, loss_pkts=max(1, delivered // 4)).delivered   # 25 % lost
        rounds += 1
    assert flow.lt_use_bw, "two lossy intervals at similar rates: policed"
    assert 8 <= rounds <= 34, rounds
    # the policed rate: what the intervals delivered per second, below the max filter
    assert 0.2 * path.bw < flow.bw <= flow.max_bw
    assert dp.rate == pytest.approx(flow.bw * 0.99, rel=0.01)        # pacing gain 1
    for _ in range(60):
        path.round(flow, dp, clock)
    assert not flow.lt_use_bw and flow.bw == flow.max_bw              # 48 rounds, then probing again


def test_random_loss_below_a_fifth_never_looks_like_a_policer():
    flow, dp, clock = start()
    path = Path(mbps=10, rtt_ms=40)
    run(flow, dp, clock, path, 40)
    for i in range(200):
        r = path.round(flow, dp, clock, loss_pkts=0 if i % 2 else 1)   # ~1 % of a 70-packet round
        assert not flow.lt_use_bw
