"""The rtt_separation scenario's paired table and plot from run records (no testbed)."""
import pytest

from experiments.reports import separation

BASE = {"bottleneck_mbps": 10.0, "bottleneck_delay_ms": 3.0, "buffer_bdp": 1.0}


def rec(alg, repeat, extra_ms, sep, jain, share, apart=None, **more):
    state = None
    if sep:
        state = {"sw1/sepctl2": {"flows": {}, "breaks_us": [], "moves": 0, "apart": apart}}
    return {"algorithm": alg, "seed": 7, "repeat": repeat, "separation": sep,
            "params": {**BASE, "main_extra_delay_ms": extra_ms, "separation": sep},
            "jain_total": jain, "jain_mean": jain, "share": share, "separation_state": state, **more}


RECORDS = [
    # cubic: one network at 3x (extra 3.5 ms: (3 + 2 x 4.5) / 5 = 2.4x), one at 16x
    rec("cubic pair", 0, 3.5, 0, 0.90, 0.40), rec("cubic pair", 0, 3.5, 4, 0.98, 0.47, apart=True),
    rec("cubic pair", 1, 37.0, 0, 0.80, 0.25), rec("cubic pair", 1, 37.0, 4, 0.96, 0.42, apart=True),
    rec("bbr pair", 0, 37.0, 0, 0.70, 0.85, emulation_off=True),
    rec("bbr pair", 0, 37.0, 4, 0.99, 0.48, apart=False),
    rec("bbr pair", 1, 3.5, 0, 0.97, 0.55),           # its separated twin missing: not a pair
    rec("bbr pair", 2, 5.0, 4, 0.97, 0.50, error="iperf3 failed"),
]


def test_the_rtt_ratio_is_flow_1s_round_trip_over_the_competitors():
    assert separation.rtt_ratio({**BASE, "main_extra_delay_ms": 3.5}) == pytest.approx(12 / 5)
    assert separation.rtt_ratio({**BASE, "main_extra_delay_ms": 47.5}) == pytest.approx(20.0)
    four = {"bottleneck_delay_ms": 0.5, "delay_ms_1": 0.25, "delay_ms_2": 4.75, "delay_ms_3": 9.75, "delay_ms_4": 14.75}
    assert separation.rtt_ratio(four) == pytest.approx(60 / 2)       # dumbbell4: longest over shortest


def test_only_networks_run_both_ways_pair_and_the_rows_are_paired_differences():
    got = separation.pairs(RECORDS)
    assert [(a, f["repeat"], s["repeat"]) for a, f, s in got] == [("bbr pair", 0, 0), ("cubic pair", 0, 0),
                                                                   ("cubic pair", 1, 1)]
    table = separation.rows(RECORDS, resamples=2000)
    by = {(r["algorithm"], tuple(r.get("ratio_bin", ()))): r for r in table}
    cubic = by[("cubic pair", ())]
    assert cubic["n"] == 2 and cubic["fifo_mean"] == pytest.approx(0.85) and cubic["separated_mean"] == pytest.approx(0.97)
    assert cubic["difference"] == pytest.approx(0.12) and cubic["relative"] == pytest.approx(0.97 / 0.85 - 1)
    lo, hi = cubic["difference_ci"]
    assert 0.08 - 1e-9 <= lo <= 0.12 <= hi <= 0.16 + 1e-9      # resampling two networks: their two differences
    assert (cubic["fifo_at_target"], cubic["separated_at_target"]) == (0, 2)
    assert (cubic["apart"], cubic["apart_of"]) == (2, 2)
    assert by[("cubic pair", (10.0, 21.0))]["n"] == 1 and by[("cubic pair", (1.0, 5.0))]["n"] == 1
    bbr = by[("bbr pair", ())]
    assert (bbr["apart"], bbr["emulation_off"]) == (0, 1)
    assert by[("all", ())]["n"] == 3
    text = separation.format_rows(table)
    assert "RTT ratio 10-21x" in text and "emulation_off: 1" in text
    assert separation.format_markdown(table).count("\n") == len(table) + 1


def test_results_without_both_ways_name_the_scenario_to_run():
    with pytest.raises(separation.SeparationReportError, match=r"separation = 0.*rtt_separation"):
        separation.rows([r for r in RECORDS if r["separation"] == 0])
    with pytest.raises(separation.SeparationReportError, match="metric must be one of"):
        separation.rows(RECORDS, metric="goodput")


def test_the_plot_is_written(tmp_path):
    path = tmp_path / "jain.png"
    separation.plot(RECORDS, str(path))
    assert path.stat().st_size > 10_000


def flood(sep, udp, tcp1, tcp2, repeat=0, received=3.0):
    r = rec("cubic pair + UDP 2x" if udp else "cubic pair", repeat, 10.0, sep, 0.9, 0.5, apart=True)
    r.update(flow1="cubic", competitor="cubic", goodput_mbps=tcp1, competitor_goodput_mbps=tcp2,
             competitors_goodput_mbps=[tcp2])
    if udp:
        r.update(udp_cross_mbps=20.0, udp_cross={"received_mbps": received, "loss_fraction": 0.8})
    return r


def test_beside_a_flood_the_tcp_flows_keep_their_goodput_over_two_thirds_of_it_alone():
    records = [flood(0, False, 4.5, 4.5), flood(0, True, 1.0, 2.0, received=6.0),
               flood(4, False, 4.2, 4.2), flood(4, True, 2.8, 2.8, received=2.9),
               flood(4, True, 3.0, 3.0, repeat=1)]       # no run alone on its network: not a pair
    table = {r["separated"]: r for r in separation.udp_rows(records, resamples=500)}
    assert table[False]["kept_mean"] == pytest.approx(3.0 / (9.0 * 2 / 3))
    assert table[True]["kept_mean"] == pytest.approx(5.6 / (8.4 * 2 / 3)) and table[True]["n"] == 1
    assert (table[True]["at_target"], table[False]["at_target"]) == (1, 0)
    assert table[False]["udp_received_mbps"] == 6.0
    assert "one FIFO" in separation.format_udp_rows(list(table.values()))
    assert not separation.udp_rows(RECORDS)                                  # no flood: no rows


def test_the_nodes_rtt_is_scored_against_the_senders_own_minimum():
    r = rec("cubic pair", 0, 3.5, 4, 0.98, 0.47, apart=True)
    r["separation_state"]["sw1/sepctl2"]["flows"] = {
        "5201": {"queue": 1, "rtt_us": 20_600.0, "sender_min_rtt_us": 20_000.0},     # +3 %
        "5202": {"queue": 0, "rtt_us": 10_800.0, "sender_min_rtt_us": 10_000.0},     # +8 %, 0.8 ms
        "5203": {"queue": 2, "rtt_us": 50_000.0, "sender_min_rtt_us": 40_000.0},     # +25 %, 10 ms
        "5204": {"queue": 3, "rtt_us": 30_000.0}}                                     # no ss: not scored
    a = separation.rtt_accuracy([r])
    assert a["flows"] == 3 and a["within_target"] == 2
    assert a["median_abs_ms"] == pytest.approx(0.8) and a["median_abs_pct"] == pytest.approx(8.0)
    assert separation.rtt_accuracy(RECORDS) is None


def test_a_flooded_run_the_flood_missed_is_left_out_and_counted():
    met = flood(0, True, 1.0, 2.0, received=6.0)
    met["udp_cross"]["overlap_fraction"] = 0.96
    missed = flood(0, True, 8.4, 0.1, repeat=1, received=8.5)     # flow 1 alone after the flood
    missed["udp_cross"]["overlap_fraction"] = 0.1
    records = [flood(0, False, 4.5, 4.5), met, flood(0, False, 4.5, 4.5, repeat=1), missed]
    row = separation.udp_rows(records, resamples=200)[0]
    assert row["n"] == 1 and row["flood_missed"] == 1
    assert row["kept_mean"] == pytest.approx(3.0 / (9.0 * 2 / 3))
    assert "covering less than 90% of flow 1's time: 1" in separation.format_udp_rows([row])


def test_each_flows_queueing_delay_pairs_fifo_and_separated_runs_by_port():
    def q(ms_by_port):
        return {"queueing_ms": {p: {"mean_ms": v, "p95_ms": 2 * v, "packets": 100} for p, v in ms_by_port.items()}}
    recs = [rec("cubic pair", 0, 37.0, 0, 0.8, 0.3, **q({"5201": 40.0, "5202": 40.0})),
            rec("cubic pair", 0, 37.0, 4, 0.97, 0.45, apart=True, **q({"5201": 30.0, "5202": 4.0})),
            rec("cubic pair", 1, 3.5, 0, 0.9, 0.4, **q({"5201": 20.0, "5202": 20.0})),
            rec("cubic pair", 1, 3.5, 4, 0.98, 0.47, apart=True, **q({"5201": 20.0, "5202": 6.0})),
            rec("bbr pair", 0, 37.0, 0, 0.7, 0.85), rec("bbr pair", 0, 37.0, 4, 0.99, 0.48, apart=False)]
    recs[1]["separation_state"]["sw1/sepctl2"]["flows"] = {"5201": {"sender_min_rtt_us": 80_400.0},
                                                           "5202": {"sender_min_rtt_us": 6_200.0}}
    table = separation.queueing_rows(recs, resamples=500)
    assert [(r["algorithm"], r["flow"], r["base_rtt_ms"], r["n"]) for r in table] == \
        [("cubic pair", 2, 6, 2), ("cubic pair", 1, 80, 2)]         # by base RTT; bbr recorded none
    short = table[0]
    assert short["fifo_mean_ms"] == pytest.approx(30.0) and short["separated_mean_ms"] == pytest.approx(5.0)
    assert short["difference_ms"] == pytest.approx(-25.0) and short["separated_p95_ms"] == pytest.approx(10.0)
    assert "6 ms" in separation.format_queueing_rows(table)
    assert separation.format_queueing_markdown(table).count("\n") == len(table) + 1
    assert separation.queueing_rows(RECORDS) == []


def test_goodput_each_way_per_algorithm_for_the_flow_and_its_competitor():
    recs = [rec("cubic pair", 0, 37.0, 0, 0.8, 0.25, goodput_mbps=2.0, competitor_goodput_mbps=6.0),
            rec("cubic pair", 0, 37.0, 4, 0.99, 0.5, apart=True, goodput_mbps=4.0, competitor_goodput_mbps=4.0),
            rec("cubic pair", 1, 3.5, 0, 0.9, 0.3, goodput_mbps=3.0, competitor_goodput_mbps=5.0),
            rec("cubic pair", 1, 3.5, 4, 0.98, 0.45, apart=True, goodput_mbps=4.0, competitor_goodput_mbps=4.4)]
    fifo, sep = separation.goodput_rows(recs, resamples=500)
    assert (fifo["separated"], fifo["n"], fifo["flow1_mbps"], fifo["competitors_mbps"]) == (False, 2, 2.5, 5.5)
    assert sep["flow1_mbps"] == pytest.approx(4.0) and sep["total_mbps"] == pytest.approx(8.2)
    assert sep["flow1_ci"] == (4.0, 4.0) and sep["share"] == pytest.approx(0.475)
    assert separation.format_goodput_markdown([fifo, sep]).count("\n") == 3
