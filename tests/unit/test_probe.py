"""The identification phase's controller (ccp_algs/probe.py) on the mock datapath."""
import pytest

from ccp_algs.mock import MockDatapath, datapath_info, report
from ccp_algs.probe import (DRAIN_PERIODS, MAX_SHARE_GAIN, Probe, dip_factor, fair_share_bytes_per_s, payload_fraction, pulse_factor,
                             pulse_room_bytes)
from tests.unit.test_ccp_algs import FakeDirectory, FakeTelemetry, flow_record

MSS = 1448


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def probe(rec, **kw):
    clock = Clock()
    alg = Probe(telemetry=FakeTelemetry(rec), directory=FakeDirectory(), clock=clock, **kw)
    dp = MockDatapath(alg.datapath_programs())
    return alg.new_flow(dp, datapath_info(mss=MSS)), dp, clock


def test_pulses_average_to_the_base_rate():
    period = 1.0
    factors = [pulse_factor(i / 1000, period, 0.3) for i in range(4000)]
    assert sum(factors) / len(factors) == pytest.approx(1.0, abs=1e-3)
    assert max(factors) == pytest.approx(1.3) and min(factors) == pytest.approx(0.9)
    assert pulse_factor(0.1, period, 0.3) > 1 > pulse_factor(0.5, period, 0.3)


def test_fair_share_is_the_slowest_ports_rate_over_its_flows():
    rec = flow_record(flows=3)          # one hop, 10 Mbit/s
    share, hop = fair_share_bytes_per_s(rec, MSS)
    assert share == pytest.approx(10e6 / 8 / 3 * payload_fraction(MSS, 1))
    rec.path[0].data_rate_kbps = 0       # no port rate stamped: no share
    assert fair_share_bytes_per_s(rec, MSS) is None


def test_the_payload_fraction_counts_the_headers_and_every_int_hops_slots():
    # a 1428-byte segment: 72 bytes of IPv6 and TCP, 168 + 24 of INT for two hops
    assert payload_fraction(1428, 2) == pytest.approx(1428 / (1500 + 192))
    assert payload_fraction(1428, 3) == pytest.approx(1428 / (1500 + 272))
    assert payload_fraction(1428, 9) == payload_fraction(1428, 3)      # at most MAX_HOPS slots


def test_slow_start_until_the_port_rate_is_known_then_paced_at_the_fair_share():
    flow, dp, clock = probe(None)
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert dp.cwnd == 20 * MSS and dp.rate is None     # slow start, unpaced
    flow.alg.telemetry.rec = flow_record(flows=2)
    flow.on_report(report(acked=20 * MSS, rtt_us=40_000))
    base = 10e6 / 8 / 2 * payload_fraction(MSS, 1)
    assert dp.rate == int(base * 1.25)                          # the first quarter: up
    # the window caps, it does not limit: twice the up rate's pipe
    assert dp.cwnd == int(2 * base * 1.25 * 0.04)
    clock.t += 0.5 * 8 * 0.04                                             # half a period on: the dip
    flow.on_report(report(acked=20 * MSS, rtt_us=40_000))
    assert dp.rate == int(base * (1 - 0.25 / 3))


def test_a_buffer_kept_full_gets_dips_of_the_same_swing_in_place_of_pulses_up():
    period_s = 8 * 0.04
    base = 10e6 / 8 / 2 * payload_fraction(MSS, 1)
    need = pulse_room_bytes(base, period_s, 0.25)               # 2 x 0.25 x base x a quarter period
    flow, dp, clock = probe(flow_record(flows=2, depth=150_000 - int(need) + 1500))     # a packet short
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert dp.rate == int(base * (1 - 0.25 * 4 / 3))            # the first quarter: a dip, not up
    clock.t += 0.5 * period_s
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert dp.rate == int(base)                                 # the rest: the base
    flow.alg.telemetry.rec = flow_record(flows=2, depth=150_000 - int(need) - 1500)   # room again
    clock.t += 1.55 * period_s                                  # dips for a period after the last full read
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert dp.rate == int(base * 1.25)                          # then the first quarter of a period: up
    assert sum(dip_factor(i / 1000, 1.0, 0.25) for i in range(4000)) / 4000 == pytest.approx(1 - 0.25 / 3, abs=1e-3)


def test_a_loss_is_not_cut():
    flow, dp, clock = probe(flow_record(flows=2))
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    rate = dp.rate
    flow.on_report(report(acked=0, loss=3, rtt_us=40_000))
    assert dp.rate == rate
    assert flow.alg.loss_beta_1024 == 1024


def test_hands_over_the_fair_share_pipe():
    flow, dp, clock = probe(flow_record(flows=2))
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    state = flow.export_state()
    assert state.cwnd_bytes == pytest.approx(10e6 / 8 / 2 * payload_fraction(MSS, 1) * 0.04)
    assert state.bw_bytes_per_s == pytest.approx(10e6 / 8 / 2 * payload_fraction(MSS, 1))


def test_hands_over_the_window_of_its_share_in_the_queue_the_competitors_keep_standing():
    flow, dp, clock = probe(flow_record(flows=3))
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    flow.on_report(report(acked=10 * MSS, rtt_us=1_200_000, minrtt=40_000))     # a deep buffer kept full
    share = 10e6 / 8 / 3 * payload_fraction(MSS, 1)
    assert flow.export_state().cwnd_bytes == pytest.approx(share * 1.2)          # not share x 40 ms: 12 packets


def test_trimmed_towards_the_competitors_departures_between_the_fair_share_and_twice_it():
    flow, dp, clock = probe(flow_record(flows=2))
    base = 10e6 / 8 / 2 * payload_fraction(MSS, 1)
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert dp.rate == int(base * 1.25)
    assert not flow.trim(1.05)                       # within the deadband: nothing
    assert flow.trim(1.44) and flow.share_gain == pytest.approx(1.2)      # half the way, in logs
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert dp.rate == int(base * 1.2 * 1.25)         # the pulses go on around the trimmed base
    assert flow.export_state().bw_bytes_per_s == pytest.approx(base * 1.2)
    flow.trim(0.25)
    assert flow.share_gain == 1.0                    # never below the fair share
    for _ in range(10):
        flow.trim(9.0)
    assert flow.share_gain == MAX_SHARE_GAIN
    flow.alg.telemetry.rec = flow_record(flows=1)    # alone: the fair share is the port's, not trimmed
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert flow.paced_base_bytes_per_s() == pytest.approx(flow.base_bytes_per_s)


def test_a_window_cca_goes_on_from_the_probes_share_in_congestion_avoidance_not_slow_start():
    from ccp_algs.handover import Host
    from ccp_algs.reno import Reno
    host = Host({"probe": Probe(telemetry=FakeTelemetry(flow_record(flows=2)), directory=FakeDirectory()),
                 "reno": Reno()}, initial="probe")
    dp = MockDatapath(host.datapath_programs())
    flow = host.new_flow(dp, datapath_info(mss=MSS))
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))          # at the fair share, no loss yet
    state = flow.switch("reno")
    assert flow.flow.ssthresh == flow.flow.cwnd == pytest.approx(state.cwnd_bytes)
    host = Host({"probe": Probe(telemetry=FakeTelemetry(None), directory=FakeDirectory()), "reno": Reno()},
                initial="probe")
    flow = host.new_flow(MockDatapath(host.datapath_programs()), datapath_info(mss=MSS))
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))          # no share known: it slow-started
    flow.switch("reno")
    assert flow.flow.ssthresh == float("inf")


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="amplitude"):
        Probe(amplitude=1.5)
    with pytest.raises(ValueError, match="period_rtts"):
        Probe(period_rtts=1)


def test_without_a_port_rate_a_loss_halves_the_window():
    flow, dp, clock = probe(None)
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    flow.on_report(report(acked=0, loss=2, rtt_us=40_000))
    assert dp.cwnd == 10 * MSS and dp.rate is None


def test_a_flow_counted_for_a_second_does_not_halve_the_share():
    flow, dp, clock = probe(flow_record(flows=2))
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    base = 10e6 / 8 / 2 * payload_fraction(MSS, 1)
    flow.alg.telemetry.rec = flow_record(flows=4)       # a handshake's connections, counted a second
    for _ in range(5):
        clock.t += 0.2
        flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
        assert flow.base_bytes_per_s == pytest.approx(base)
    clock.t += 1.0                                         # still 4 after SHARE_HOLD_S: four flows
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert flow.base_bytes_per_s == pytest.approx(base / 2)


def test_alone_it_drains_a_standing_queue_and_beside_a_competitor_keeps_its_share():
    """The base is within a few per cent of the port's rate: a queue left full by a
    competitor that left would stay full. Alone, the least depth of the last period is
    drained over DRAIN_PERIODS periods; beside a competitor the share is kept."""
    flow, dp, clock = probe(flow_record(flows=1, depth=60_000))
    period_s = 8 * 0.04
    for _ in range(6):                           # more than a period of reports, 0.08 s apart
        flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
        clock.t += 0.08
    base = 10e6 / 8 * payload_fraction(MSS, 1)
    assert flow.drain_bytes_per_s == pytest.approx(60_000 / (DRAIN_PERIODS * period_s))
    factor = pulse_factor(clock.t - 0.08 - flow.pulses_since_s, period_s, 0.25)
    assert dp.rate == int((base - flow.drain_bytes_per_s) * factor)
    flow.alg.telemetry.rec = flow_record(flows=1, depth=0)     # drained: the port's rate again
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert flow.drain_bytes_per_s == 0

    flow, dp, clock = probe(flow_record(flows=2, depth=60_000))
    for _ in range(6):
        flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
        clock.t += 0.08
    assert flow.drain_bytes_per_s == 0


def test_a_drain_never_takes_the_rate_below_half_the_share():
    flow, dp, clock = probe(flow_record(flows=1, depth=10_000_000, capacity=20_000_000))
    for _ in range(6):
        flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
        clock.t += 0.08
    factor = pulse_factor(clock.t - 0.08 - flow.pulses_since_s, 8 * 0.04, 0.25)
    assert dp.rate == int(10e6 / 8 * payload_fraction(MSS, 1) / 2 * factor)


class FakeCadence:
    def __init__(self):
        self.asked = []

    def every(self, sid, interval_s):
        self.asked.append((sid, interval_s))


def test_asks_for_reports_at_an_eighth_of_its_period_and_stops_when_handed_over():
    cadence = FakeCadence()
    flow, dp, clock = probe(flow_record(flows=2), cadence=cadence)
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert cadence.asked == [(flow.sid, 8 * 0.04 / 8)]          # the period is 8 min RTTs
    clock.t += 0.1
    flow.on_report(report(acked=10 * MSS, rtt_us=2_000_000))    # a deep queue: the RTT, not the min, grows
    assert len(cadence.asked) == 1                               # the same interval, the lease still fresh
    clock.t += 0.5
    flow.on_report(report(acked=10 * MSS, rtt_us=2_000_000))
    assert cadence.asked[-1] == (flow.sid, 0.04) and len(cadence.asked) == 2     # renewed
    flow.export_state()
    assert cadence.asked[-1] == (flow.sid, 0.0)


def test_a_short_rtt_asks_at_most_forty_reports_a_second():
    cadence = FakeCadence()
    flow, dp, clock = probe(flow_record(flows=2), cadence=cadence, period_rtts=2)
    flow.on_report(report(acked=10 * MSS, rtt_us=1_000))         # the period's floor: MIN_PERIOD_S, 0.2 s
    assert cadence.asked == [(flow.sid, 0.025)]


def test_without_a_cadence_nothing_is_asked_and_the_pulses_go_on():
    flow, dp, clock = probe(flow_record(flows=2))
    flow.on_report(report(acked=10 * MSS, rtt_us=40_000))
    assert dp.rate is not None
    flow.export_state()
