"""Reconfigure: the migrated flows' path and downtime over the schedule, on a test clock."""
import pytest

from int_node.element import ConfigError
from tests.helpers import ipv6_frame, push, router

MS = 1_000_000


def _bed(args: str):
    r = router(f"Idle -> rc :: Reconfigure({args}) -> s :: Counter -> Discard; rc[1] -> c :: Counter -> Discard;")
    rc = r.elements["rc"]
    clock = [0]
    rc._now = lambda: clock[0]
    rc._restart()
    return r, rc, clock


def _send(r, src: int, n: int = 1):
    for _ in range(n):
        push(r, "rc", ipv6_frame(100, src=src))


def _counts(r):
    return r.elements["s"].packets, r.elements["c"].packets


def test_migrated_flows_alternate_circuit_then_static_and_others_stay_static():
    r, rc, clock = _bed("period 10ms, src 2001:db8::1/128")
    _send(r, src=1)                       # period 0: the circuit
    _send(r, src=2)                       # not migrated: static
    assert _counts(r) == (1, 1)
    clock[0] = 12 * MS                    # period 1: the static path, shared
    _send(r, src=1)
    assert _counts(r) == (2, 1) and rc.migrations == 1
    clock[0] = 25 * MS                    # period 2: the circuit again
    _send(r, src=1)
    assert _counts(r) == (2, 2) and rc.migrations == 2
    assert rc.read_handler("state")["path"] == "circuit"
    clock[0] = 61 * MS                    # four periods later, no packet between: counted all the same
    _send(r, src=1)
    assert rc.migrations == 6 and _counts(r) == (2, 3)
    assert [e[2] for e in rc.read_handler("events")] == ["static", "circuit", "static", "circuit", "static", "circuit"]


def test_night_drops_the_migrated_flows_only():
    r, rc, clock = _bed("period 10ms, downtime 2ms, src 2001:db8::1/128, mode drop")
    clock[0] = 8 * MS + 1                 # the last 2 ms of the period: night
    _send(r, src=1, n=3)
    _send(r, src=2)
    assert rc.night_drops == 3 and _counts(r) == (1, 0)
    clock[0] = 10 * MS                    # day on the static path
    _send(r, src=1)
    assert _counts(r) == (2, 0)
    ev = rc.read_handler("events")[-1]
    assert ev == [8 * MS, 2 * MS, "static"]


def test_a_packet_meets_the_schedule_when_the_link_upstream_had_it_due_not_when_the_loop_came_round():
    from int_node.packet import Packet
    r, rc, clock = _bed("period 10ms, downtime 2ms, src 2001:db8::1/128, mode drop")

    def due(at_ns: int):
        pkt = Packet(bytearray(ipv6_frame(100, src=1)))
        pkt.due_ns = at_ns
        rc.push(0, pkt)

    clock[0] = 9 * MS                     # the loop is in the night ...
    due(7 * MS)                           # ... with a packet due in the day before it: through
    assert rc.night_drops == 0 and _counts(r) == (0, 1)
    due(int(8.5 * MS))                    # due in the night: dropped
    assert rc.night_drops == 1
    clock[0] = 11 * MS                    # the loop is in the next day, on the static path
    due(int(9.9 * MS))                    # due in the night: dropped still
    due(int(10.5 * MS))
    assert rc.night_drops == 2 and _counts(r) == (1, 1) and rc.migrations == 1
    due(int(9.5 * MS))                    # one due a moment before the last: no migration back
    assert rc.migrations == 1 and rc.night_drops == 3


def test_a_delay_says_when_each_packet_was_due_out():
    from tests.helpers import router as make_router
    r = make_router("Idle -> d :: Delay(1ms) -> c :: Counter -> Discard;")
    d = r.elements["d"]
    seen = []
    c = r.elements["c"]
    c.push = lambda port, pkt: seen.append(pkt.due_ns)
    push(r, "d", ipv6_frame(100))
    due_ns = d._held[0][0]
    d._held[0] = (due_ns - 5 * MS, d._held[0][1])        # as if the loop woke 5 ms late
    d._release()
    assert seen == [due_ns - 5 * MS]


def test_night_buffers_and_releases_in_order_on_the_new_path():
    r, rc, clock = _bed("period 10ms, downtime 2ms, src 2001:db8::1/128, mode buffer, buffer 2")
    clock[0] = 9 * MS
    _send(r, src=1, n=3)                  # two held, the third beyond the buffer
    assert (rc.night_held, rc.night_drops, rc.counters()["held"]) == (2, 1, 2)
    assert rc._timer.deadline_ns == 10 * MS
    clock[0] = 10 * MS - 50_000
    rc._day_starts()                      # the timer, woken early: still night, nothing released
    assert rc.counters()["held"] == 2 and rc._timer.deadline_ns == 10 * MS
    clock[0] = 10 * MS + 300_000
    rc._day_starts()                      # the timer, 0.3 ms late: the day on the static path began
    assert _counts(r) == (2, 0) and rc.counters()["held"] == 0
    assert (rc.releases, rc.release_late_us_max, rc.release_late_us_total) == (1, 300, 300)


def test_what_a_night_held_goes_on_due_from_the_days_start():
    from int_node.packet import Packet
    r, rc, clock = _bed("period 10ms, downtime 2ms, src 2001:db8::1/128, mode buffer")
    seen = []
    r.elements["s"].push = lambda port, pkt: seen.append(pkt.due_ns)
    clock[0] = 9 * MS
    pkt = Packet(bytearray(ipv6_frame(100, src=1)))
    pkt.due_ns = 9 * MS
    rc.push(0, pkt)
    clock[0] = 10 * MS + 300_000
    rc._day_starts()                      # the timer 0.3 ms late: the next link has it from 10 ms on
    assert seen == [10 * MS]


def test_a_day_whose_first_packet_comes_before_the_timer_releases_the_held_first():
    r, rc, clock = _bed("period 10ms, downtime 2ms, src 2001:db8::1/128, mode buffer")
    clock[0] = 9 * MS
    _send(r, src=1, n=2)
    clock[0] = 10 * MS + 100_000          # a packet of the day, the timer not yet run
    _send(r, src=1)
    assert _counts(r) == (3, 0) and rc.counters()["held"] == 0
    assert (rc.releases, rc.release_late_us_max) == (1, 100)


def test_no_period_keeps_the_migrated_flows_on_the_circuit():
    r, rc, clock = _bed("src 2001:db8::/64")
    for t in (0, 50 * MS, 10_000 * MS):
        clock[0] = t
        _send(r, src=1)
    assert _counts(r) == (0, 3) and rc.migrations == 0


def test_prefix_match_at_a_partial_byte():
    r, rc, clock = _bed("src 2001:db8::/124")     # src ::1 .. ::f are in, ::10 is not
    _send(r, src=0x0F)
    _send(r, src=0x10)
    assert _counts(r) == (1, 1)


def test_a_write_restarts_the_schedule_and_bad_values_are_refused():
    r, rc, clock = _bed("period 10ms, src 2001:db8::1/128")
    clock[0] = 15 * MS
    rc.write_handler("period", "100ms")
    clock[0] = 50 * MS                    # 35 ms into the new schedule: still its first period
    _send(r, src=1)
    assert _counts(r) == (0, 1)
    with pytest.raises(ConfigError, match="shorter than the period"):
        rc.write_handler("downtime", "100ms")
    assert rc.downtime == 0 and rc.period == 100 * MS
    with pytest.raises(ValueError, match="needs a period"):
        router("Idle -> rc :: Reconfigure(downtime 1ms, src 2001:db8::/64) -> Discard; rc[1] -> Discard;")
    with pytest.raises(ValueError, match="missing 'src'"):
        router("Idle -> rc :: Reconfigure(period 1ms) -> Discard; rc[1] -> Discard;")


def test_reconfig_settings_parse_as_the_element_takes_them():
    from experiments.testbed.linkctl import parse_reconfig
    assert parse_reconfig("none") == ("0", "0")
    assert parse_reconfig("50ms") == ("50ms", "0")
    assert parse_reconfig("100ms/10ms") == ("100ms", "10ms")
    from int_node.elements.reconfig import setting_ms
    assert setting_ms("none") == (0.0, 0.0) and setting_ms("1s/100ms") == (1000.0, 100.0)


def _record(alg, setting, repeat, migrated_mbps, static_mbps=10.0, seconds=10.0):
    n = int(seconds / 0.1)
    return {"algorithm": alg, "reconfig": setting, "repeat": repeat, "goodput_mbps": migrated_mbps,
            "competitor_goodput_mbps": static_mbps, "share": migrated_mbps / (migrated_mbps + static_mbps),
            "series": {"t_s": [round(0.1 * (k + 1), 3) for k in range(n)], "migrated_mbps": [migrated_mbps] * n,
                       "static_mbps": [static_mbps] * n}}


def test_fct_of_a_size_is_read_from_the_goodput_series():
    from experiments.reports.reconfig import fct_s
    rec = _record("a", "none", 0, 8.0)          # 8 Mbit/s = 1 MB/s
    assert fct_s(rec["series"], 5.0) == pytest.approx(5.0)
    assert fct_s(rec["series"], 11.0) is None   # the run ended first
    assert fct_s(None, 1.0) is None


def test_the_prolongation_is_against_the_same_repeat_without_reconfiguration():
    from experiments.reports.reconfig import rows
    records = [_record("cubic", "none", 0, 16.0), _record("cubic", "none", 1, 8.0),
               _record("cubic", "10ms", 0, 8.0), _record("cubic", "10ms", 1, 4.0),
               _record("cubic", "100ms/10ms", 0, 16.0), _record("cubic", "100ms/10ms", 1, 8.0)]
    table = rows(records, size_mb=2.0)
    assert [r["reconfig"] for r in table] == ["none", "10ms", "100ms/10ms"]     # none first, then by period
    ten = table[1]
    assert ten["prolongation_pct"][0] == pytest.approx(100.0, abs=1e-6)     # half the rate: twice the time, both
    assert table[2]["prolongation_pct"][0] == pytest.approx(0.0, abs=1e-6) and table[2]["downtime_ms"] == 10
    assert table[0]["prolongation_pct"] is None and ten["migrated_mbps"][0] == pytest.approx(6.0)


def test_a_run_of_a_downtime_setting_is_one_directory():
    from experiments.runs.algorithm import Algorithm
    from experiments.runs.runner import run_name
    alg = Algorithm("cubic pair", "cubic", None, [], "cubic")
    assert run_name(alg, "reconfig", "100ms/10ms", 2) == "cubic-pair_reconfig-100ms+10ms_r2"


def test_an_algorithm_is_paired_with_the_baseline_repeat_by_repeat():
    from experiments.reports.reconfig import ReconfigReportError, format_paired_markdown, paired

    def rec(alg, v, k, g, main):
        return {"algorithm": alg, "reconfig": v, "repeat": k, "goodput_mbps": g, "competitor_goodput_mbps": main}
    records = [rec("kernel cubic", "none", k, 16.0, 16.0) for k in (0, 1)] + \
        [rec("cubic-int", "none", k, 16.0, 16.0) for k in (0, 1)] + \
        [rec("kernel cubic", "100ms/10ms", 0, 2.0, 16.0), rec("kernel cubic", "100ms/10ms", 1, 4.0, 16.0),
         rec("cubic-int", "100ms/10ms", 0, 8.0, 15.0), rec("cubic-int", "100ms/10ms", 1, 8.0, 14.0)]
    none, night = paired(records, "kernel cubic")
    assert none["ratio"][0] == 1.0 and none["prolongation_ratio"] is None
    assert night["ratio"][0] == 3.0                                        # 8/2 and 8/4
    assert night["baseline_prolongation_pct"][0] == 500.0                  # 16/2 - 1 = 700 %, 16/4 - 1 = 300 %
    assert night["candidate_prolongation_pct"][0] == 100.0
    assert night["prolongation_ratio"][0] == pytest.approx((100 / 700 + 100 / 300) / 2)
    assert night["main_harm_mbps"][0] == -1.5 and night["main_abs_harm_mbps"][0] == 1.5
    assert "cubic-int" in format_paired_markdown([none, night])
    with pytest.raises(ReconfigReportError):
        paired(records, "bbr")
