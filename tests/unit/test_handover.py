"""A flow changes algorithm with its state carried over (ccp_algs/handover.py): the window
continues, a recovery in progress is not cut twice, the datapath's counters are not
counted twice, the program is not reinstalled, and the kernel's cut is the new one's."""
import pytest

from ccp_algs.programs import UNPACED_RATE

from ccp_algs.bbr import PROBE_BW, Bbr
from ccp_algs.cubic import Cubic
from ccp_algs.handover import HandoverError, Host
from ccp_algs.mock import MockDatapath, datapath_info, report
from ccp_algs.reno import Reno
from ccp_algs.vegas import Vegas

MSS = 1448


def hosted(initial="cubic"):
    host = Host({"cubic": Cubic(), "bbr": Bbr(seed=1), "reno": Reno(), "vegas": Vegas()}, initial=initial)
    dp = MockDatapath(host.datapath_programs())
    return host.new_flow(dp, datapath_info(mss=MSS)), dp


def grow(flow, reports=12, rtt_us=40_000, rate=1_250_000, grown_from=0):
    """Reports of a flow in congestion avoidance, the datapath growing nothing."""
    for _ in range(reports):
        r = report(acked=10 * MSS, delivered=10, inflight=30, rtt_us=rtt_us, grown=grown_from, reductions=0)
        r.bw_max = rate
        flow.on_report(r)


def test_the_window_continues_across_a_switch_both_ways():
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 40.0 * MSS
    grow(flow)
    flow.loss_seen = True            # (one that never lost: the next test)
    before = dp.cwnd
    state = flow.switch("bbr", why="test")
    assert dp.cwnd == before == int(state.cwnd_bytes)
    assert flow.current == "bbr" and flow.flow.mode == PROBE_BW       # it had a bandwidth estimate
    assert flow.flow.bw == pytest.approx(1_250_000)
    assert dp.rate == pytest.approx(flow.flow.pacing_gain * 1_250_000 * 0.99, rel=0.01)
    assert dp.programs == ["default"]                                  # installed once, at the start
    back = dp.cwnd
    flow.switch("cubic")
    assert dp.cwnd == back
    assert flow.flow.ssthresh == back                                   # BBR had none: no slow start from here
    assert dp.rate == UNPACED_RATE                                      # cubic does not pace: BBR's rate lifted
    assert dp.fields["ss_until"] == 0


def test_a_flow_that_never_lost_goes_on_slow_starting_under_its_next_algorithm():
    """Reno beside kernel Reno in a deep buffer: CUBIC's HyStart ended slow start at 1 s;
    with the ssthresh it set, Reno grew a segment per 4-s RTT while the competitor
    slow-started to thousands of packets (fairness_switching seed 2612, D -0.75)."""
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 40.0 * MSS       # HyStart's exit, no loss
    grow(flow)
    flow.switch("reno")
    assert flow.flow.ssthresh == float("inf") and dp.fields["ss_until"] > dp.cwnd
    flow.on_report(report(acked=MSS, loss=1, inflight=39, reductions=1, grown=0))
    flow.switch("cubic")
    assert flow.flow.ssthresh < float("inf")               # after a loss: congestion avoidance
    flow, dp = hosted()
    grow(flow)
    flow.switch("vegas")                                    # Vegas's slow start is its own
    assert flow.flow.ssthresh < float("inf")


def test_the_kernels_cut_follows_the_algorithm_in_control():
    flow, dp = hosted()
    assert dp.fields["loss_beta"] == 717
    flow.switch("bbr")
    assert dp.fields["loss_beta"] == 1024
    flow.switch("reno")
    assert dp.fields["loss_beta"] == 512


def test_a_recovery_in_progress_is_not_cut_twice_after_a_switch():
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 40.0 * MSS
    grow(flow, reports=2)
    flow.on_report(report(acked=MSS, loss=1, inflight=39, reductions=1, grown=0))
    cut = dp.cwnd
    assert cut == pytest.approx(28 * MSS, abs=MSS)                     # cubic's 0.7
    flow.switch("reno")
    assert flow.flow.recovery_bytes_left > 0
    flow.on_report(report(acked=MSS, loss=1, inflight=27, reductions=1, grown=0))   # same recovery
    assert dp.cwnd == cut                                               # reno does not halve it again


def test_growth_the_old_algorithm_took_is_not_taken_again():
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 40.0 * MSS
    grow(flow, reports=2, grown_from=5)            # the datapath grew 5 segments, cubic took them
    before = dp.cwnd
    flow.switch("reno")
    r = report(acked=0, delivered=0, inflight=30, grown=5, reductions=0)
    flow.on_report(r)
    assert dp.cwnd == before                       # nothing new grown, nothing acked


def test_a_switch_is_traced(tmp_path):
    trace = tmp_path / "t.csv"
    host = Host({"cubic": Cubic(), "bbr": Bbr(seed=1)}, initial="cubic", trace=str(trace))
    dp = MockDatapath(host.datapath_programs())
    flow = host.new_flow(dp, datapath_info(mss=MSS))
    flow.switch("bbr", why="verdict bbr (0.9)")
    rows = trace.read_text().splitlines()
    assert any(",switch," in row and "cubic -> bbr: verdict bbr (0.9)" in row for row in rows)
    assert flow.switches[0]["from"] == "cubic" and flow.switches[0]["to"] == "bbr"


KERNEL_REGISTERS = ("ss_until", "ca_target", "ca_cnt_max", "reno_scale", "bw", "own_recovery")


def test_the_last_algorithms_kernel_growth_and_recoveries_end_with_it():
    """Registers the new algorithm does not set go back to their defaults: CUBIC's per-ACK
    growth went on in the kernel under Reno, and BBR's recoveries under CUBIC."""
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 40.0 * MSS
    grow(flow)
    assert dp.fields["ca_target"] > 0 and dp.fields["reno_scale"] > 0
    flow.switch("reno")
    grow(flow, reports=2)
    assert dp.fields["ca_target"] == dp.fields["reno_scale"] == 0
    flow.switch("bbr")
    grow(flow, reports=2)
    assert dp.fields["own_recovery"] == 1 and dp.fields["bw"] > 0
    flow.switch("vegas")
    grow(flow, reports=2)
    assert {k: dp.fields[k] for k in KERNEL_REGISTERS} == dict.fromkeys(KERNEL_REGISTERS, 0)
    assert dp.fields["rto_min"] == 200_000          # the socket's minimum RTO back at the kernel's


def test_vegas_takes_a_flow_over_with_its_own_queue_emptied():
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 200.0 * MSS
    grow(flow, reports=3, rtt_us=40_000)
    grow(flow, reports=1, rtt_us=200_000)          # the window fills a deep buffer: 160 ms of queue
    flow.switch("vegas")
    assert dp.cwnd == pytest.approx((flow.flow.cwnd / MSS) * MSS) and dp.cwnd / MSS == pytest.approx(
        200 * 40 / 200 + 1, abs=1)                 # 40 packets in the pipe + gamma, not 200
    assert flow.flow.ssthresh < flow.flow.cwnd     # congestion avoidance, no slow start


def test_a_flow_moves_to_vegas_and_back():
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 40.0 * MSS
    grow(flow, rtt_us=40_000)
    before = dp.cwnd
    flow.switch("vegas")
    assert dp.cwnd == before and flow.flow.base_rtt_us == 40_000      # the host's min RTT carried
    for _ in range(3):                   # 8 ms of queue at ~40 packets: diff 6.5 > beta, -1 MSS per round
        flow.on_report(report(acked=40 * MSS, delivered=40, inflight=40, rtt_us=48_000, grown=0, reductions=0))
    assert dp.cwnd == before - 3 * MSS
    flow.switch("cubic")
    assert dp.cwnd == before - 3 * MSS and dp.programs == ["default"]


def test_algorithms_on_another_program_cannot_share_a_flow():
    class OwnProgram(Reno):
        name = "own"

        def datapath_programs(self):
            return {"default": super().datapath_programs()["default"].replace("1000", "2000")}

    with pytest.raises(HandoverError, match="own: another datapath program than cubic's"):
        Host({"cubic": Cubic(), "own": OwnProgram()}, initial="cubic")


def test_an_unknown_target_is_named():
    flow, _ = hosted()
    with pytest.raises(HandoverError, match="no algorithm 'bbr-v3'"):
        flow.switch("bbr-v3")
    with pytest.raises(HandoverError, match="initial algorithm 'bbr2'"):
        Host({"cubic": Cubic()}, initial="bbr2")


def test_a_switch_at_the_competitors_rate_goes_on_from_its_window():
    """rate_ratio: the competitor's rate over the flow's at the bottleneck. Down at once
    (window, ssthresh, bandwidth); up by slow start to the competitor's window, never as
    one burst; clamped to 1/16..16; CUBIC's curve plateaus at the window it grows to."""
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 80.0 * MSS
    grow(flow)
    flow.loss_seen = True
    flow.switch("reno", rate_ratio=0.25)
    assert dp.cwnd == 20 * MSS and flow.flow.ssthresh == 20 * MSS
    flow.switch("bbr", rate_ratio=0.5)
    assert flow.flow.bw == pytest.approx(1_250_000 * 0.5) and dp.cwnd == 10 * MSS
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 20.0 * MSS
    grow(flow)
    flow.loss_seen = True
    flow.switch("reno", rate_ratio=3.0)
    assert dp.cwnd == 20 * MSS and flow.flow.ssthresh == 60 * MSS and dp.fields["ss_until"] == 60 * MSS
    flow.switch("cubic", rate_ratio=1.5)
    assert dp.cwnd == 20 * MSS and flow.flow.ssthresh == 30 * MSS and flow.flow.w_max == 30 * MSS
    flow.switch("reno", rate_ratio=1e-6)
    assert dp.cwnd == 2 * MSS                              # 1/16 of 20 segments: at least 2
    assert "the competitor's rate: x1e-06" in flow.switches[-1]["why"]


@pytest.mark.parametrize("start, to, beta", [("cubic", "reno", 0.5), ("reno", "cubic", 0.7)])
def test_a_loss_on_the_way_to_the_matched_window_cuts_from_it(start, to, beta):
    """fairness_switching seed 2613, reno r10 and r13: a switch to Reno at 1/11 of a kernel
    Reno's rate slow-started towards it, a loss (the competitor's slow start filling the
    deep buffer) halved the flow's own small window, and +1 MSS per multi-second RTT kept
    it there for the rest of the run (D -0.4 to -0.9). The cut now applies to the matched
    window: slow start goes on to beta times it, and the match ends once reached."""
    flow, dp = hosted(start)
    flow.flow.cwnd = flow.flow.ssthresh = 10.0 * MSS
    grow(flow)
    flow.loss_seen = True
    own = flow.flow.cwnd
    flow.switch(to, rate_ratio=10.0)
    assert flow.flow.matched_cwnd == pytest.approx(10 * own)
    flow.on_report(report(acked=MSS, loss=1, inflight=9, reductions=1, grown=0))
    assert dp.cwnd <= own * beta + MSS                          # its own window cut: no burst
    assert flow.flow.ssthresh == pytest.approx(10 * own * beta, abs=MSS)    # slow start on to beta x matched
    assert dp.fields["ss_until"] == 0                          # (not within the recovery)
    # the flow reaches it: a later loss cuts its own window again, the match is over
    flow.flow.recovery_bytes_left = 0.0
    reached = flow.flow.cwnd = flow.flow.matched_cwnd + 20 * MSS
    flow.on_report(report(acked=MSS, loss=1, inflight=int(reached / MSS), reductions=2, grown=0))
    assert flow.flow.ssthresh == pytest.approx(reached * beta, abs=MSS) and flow.flow.matched_cwnd == 0


def test_a_match_ends_at_a_timeout_and_without_a_match_the_cut_is_the_algorithms():
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 10.0 * MSS
    grow(flow)
    flow.loss_seen = True
    flow.switch("reno", rate_ratio=10.0)
    flow.on_report(report(acked=0, timeout=True, inflight=9, reductions=1, grown=0))
    assert flow.flow.matched_cwnd == 0
    flow, dp = hosted()
    flow.flow.cwnd = flow.flow.ssthresh = 10.0 * MSS
    grow(flow)
    flow.loss_seen = True
    flow.switch("reno", rate_ratio=0.5)                        # down: nothing to reach
    flow.on_report(report(acked=MSS, loss=1, inflight=4, reductions=1, grown=0))
    assert flow.flow.ssthresh == flow.flow.cwnd == 2.5 * MSS
