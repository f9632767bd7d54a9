"""The fairness scenario's table and plots from run records (no testbed)."""
import pytest

from experiments.reports import fairness_plots, fairness_report, fairness_tables


def rec(mode, comp, rep, g1, g2, **extra):
    return {"algorithm": mode, "competitor": comp, "repeat": rep, "run": f"{mode}-{comp}-{rep}",
            "goodput_mbps": g1, "competitor_goodput_mbps": g2, "goodput_difference": (g1 - g2) / (g1 + g2),
            "jain_mean": 0.9, **extra}


RECORDS = [
    rec("oracle", "bbr", 0, 5, 5), rec("oracle", "bbr", 1, 4, 6),
    rec("not used", "bbr", 0, 9, 1), rec("not used", "bbr", 1, 2, 8),
    rec("mirror w50", "bbr", 0, 6, 4, switches=1, first_switch_s=20.0),
    rec("mirror w50", "bbr", 1, 5, 5, switches=0, first_switch_s=None),
    rec("oracle", "cubic", 0, 5, 5),
]


TRACE_HEADER = "t_s,mono_ns,sid,event,cwnd_bytes,reason\n"


def run_dir(tmp_path, series_rows: str, trace_rows: str):
    """A results directory's runs/r with a series.csv and an agent trace.csv."""
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "series.csv").write_text("t_s,goodput_mbps,competitor_goodput_mbps\n" + series_rows)
    (run / "trace.csv").write_text(TRACE_HEADER + trace_rows)
    return run


def test_rows_give_d_abs_d_and_harm_against_the_same_repeats_oracle():
    table = {(r["competitor"], r["mode"]): r for r in fairness_report.rows(RECORDS)}
    nu = table[("bbr", "not used")]
    assert nu["mean_d"] == pytest.approx((0.8 - 0.6) / 2)
    assert nu["mean_abs_d"] == pytest.approx(0.7)                         # |D| is not |mean D|
    assert nu["harm"] == pytest.approx(1 - 9 / 11)                        # competitor 1 + 8 beside, 5 + 6 own
    lo, hi = nu["abs_d_ci"]
    assert 0.6 <= lo <= 0.7 <= hi <= 0.8
    mirror = table[("bbr", "mirror w50")]
    assert mirror["harm"] == pytest.approx(1 - 9 / 11) and mirror["mean_switches"] == 0.5
    assert mirror["median_first_switch_s"] == 20.0 and mirror["switched_runs"] == 1
    assert table[("bbr", "oracle")]["harm"] == 0
    assert table[("cubic", "oracle")]["runs"] == 1
    text = fairness_tables.format_rows(list(table.values()))
    assert "mirror w50" in text and "harm" in text


def test_modes_are_compared_with_not_used_and_the_oracle_on_the_same_networks():
    rows = {(r["competitor"], r["mode"]): r for r in fairness_report.comparisons(RECORDS)}
    mirror = rows[("bbr", "mirror w50")]
    # |D|: not used 0.8, 0.6; mirror 0.2, 0; oracle 0, 0.2
    assert mirror["cut_vs_not_used"] == pytest.approx(1 - 0.1 / 0.7) and mirror["cut_networks"] == 2
    assert mirror["cut_ci"][0] <= mirror["cut_vs_not_used"] <= mirror["cut_ci"][1]
    assert mirror["gap_to_oracle"] == pytest.approx(0.0) and mirror["gap_networks"] == 2
    assert "gap_to_oracle" not in rows[("bbr", "oracle")]
    assert ("cubic", "oracle") not in rows                       # no not-used run to compare with
    assert ("all", "mirror w50") not in rows                     # needs every competitor
    two = RECORDS + [rec("not used", "cubic", 0, 8, 2), rec("mirror w50", "cubic", 0, 5, 5)]
    rows = {(r["competitor"], r["mode"]): r for r in fairness_report.comparisons(two)}
    assert rows[("all", "mirror w50")]["cut_vs_not_used"] == pytest.approx(((1 - 0.1 / 0.7) + 1) / 2)
    assert "77.9 %" in fairness_tables.format_comparisons(list(rows.values()))


def test_modes_of_one_seed_run_apart_pair_up_and_another_seeds_do_not():
    net = {"seed": 7, "params": {"bottleneck_mbps": 5.0}}
    first = [rec("not used", "bbr", 0, 9, 1, source="a/summary.json", **net),
             rec("oracle", "bbr", 0, 5, 5, source="a/summary.json", **net)]
    later = [rec("mirror w50", "bbr", 0, 6, 4, source="b/summary.json", **net),       # same network
             rec("mirror w50", "bbr", 0, 1, 9, source="c/summary.json", seed=8, params={"bottleneck_mbps": 2.0})]
    rows = {(r["competitor"], r["mode"]): r for r in fairness_report.comparisons(first + later)}
    mirror = rows[("bbr", "mirror w50")]
    assert mirror["cut_networks"] == 1 and mirror["cut_vs_not_used"] == pytest.approx(1 - 0.2 / 0.8)
    assert mirror["gap_to_oracle"] == pytest.approx(0.2)
    table = {(r["competitor"], r["mode"]): r for r in fairness_report.rows(first + later)}
    assert table[("bbr", "mirror w50")]["harm_pairs"] == 1


def test_a_late_mode_is_compared_with_the_late_baselines_only():
    late = {"competitor_delay_s": 10}
    records = RECORDS + [rec("not used late", "bbr", 0, 7, 3, **late), rec("oracle late", "bbr", 0, 6, 4, **late),
                         rec("mirror w50 late", "bbr", 0, 5, 5, **late), rec("mirror w50 late", "bbr", 1, 9, 1, **late)]
    rows = {(r["competitor"], r["mode"]): r for r in fairness_report.comparisons(records)}
    late_mirror = rows[("bbr", "mirror w50 late")]
    # repeat 0 only has late baselines: |D| 0 against not used late 0.4, oracle late 0.2
    assert late_mirror["cut_networks"] == 1 and late_mirror["cut_vs_not_used"] == pytest.approx(1.0)
    assert late_mirror["gap_to_oracle"] == pytest.approx(-0.2)
    assert rows[("bbr", "mirror w50")]["cut_networks"] == 2          # the together start's, unchanged
    assert ("bbr", "not used late") not in rows and "gap_to_oracle" not in rows.get(("bbr", "oracle late"), {})
    table = {(r["competitor"], r["mode"]): r for r in fairness_report.rows(records)}
    assert table[("bbr", "mirror w50 late")]["harm_pairs"] == 1      # beside the late oracle of repeat 0


def test_the_markdown_table_has_every_mode_and_the_detailed_modes_paired_figures():
    records = RECORDS + [rec("not used", "cubic", 0, 8, 2), rec("mirror w50", "cubic", 0, 5, 5)]
    text = fairness_tables.format_markdown(fairness_report.rows(records), fairness_report.comparisons(records))
    lines = text.splitlines()
    assert lines[0] == "| mean \\|D\\| (95 % CI), 1–2 networks each | bbr | cubic |"
    assert lines[1] == "|---|---|---|"
    assert lines[2].startswith("| oracle | 0.100 (0.000–0.200) | 0.000 (0.000–0.000) |")
    assert lines[3].startswith("| not used | 0.700 (")
    cut = next(x for x in lines if x.startswith("| mirror w50: cut vs not used"))
    assert f"{100 * (1 - 0.1 / 0.7):.1f} %" in cut and "100.0 %" in cut
    gap = next(x for x in lines if x.startswith("| mirror w50 − oracle"))
    assert gap.split(" | ")[1:] == ["+0.000 (−0.200 to +0.200)", "+0.000 (+0.000 to +0.000) |"]
    harm = next(x for x in lines if x.startswith("| mirror w50: harm"))
    # pooled, and the mean |harm| per network (1/5 and 1/6 on bbr's); no trace: no time on its CCA
    assert harm == ("| mirror w50: harm, pooled (mean \\|harm\\| per network) / time on its CCA "
                    "| 18.2 % (18.3 %) | 0.0 % (0.0 %) |")
    assert "oracle: cut" not in text and "paper method" not in text   # baselines and pairs not detailed
    assert lines[-1].startswith("Cut vs not used averaged over the competitors (95 % CI): mirror w50 ")
    with pytest.raises(ValueError, match="'best-response'.*modes: oracle"):
        fairness_tables.format_markdown(fairness_report.rows(records), [], ["best-response"])


def test_plots_are_written(tmp_path):
    paths = fairness_plots.plot(RECORDS, str(tmp_path), "t", timelines=False)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["d_box.png", "abs_d.png"]
    assert all((tmp_path / p.rsplit("/", 1)[1]).stat().st_size > 5000 for p in paths)


def test_the_timeline_colours_flow_1s_algorithm_from_its_trace(tmp_path):
    run = run_dir(tmp_path, "1,2,3\n2,2.5,2.5\n3,2.4,2.6\n", "0.5,1,7,start,14480,init\n"
                  "2.0,1,7,switch,28960,cubic -> bbr: verdict bbr\n"
                  "2.0,1,7,switch,28960,took the flow over in probe_bw\n"
                  "3.7,1,7,switch,28960,bbr -> cubic: verdict cubic\n")   # as the run ended
    spans = fairness_report.algorithm_spans(str(run / "trace.csv"), "cubic", 3.0)
    assert spans == [(0.0, 1.5, "cubic"), (1.5, 3.0, "bbr")]
    path = fairness_plots.plot_timeline(str(run), {"algorithm": "mirror w50", "competitor": "bbr",
                                                    "goodput_difference": -0.05})
    assert path.endswith("timeline.png")


def test_the_paper_method_weighs_the_networks_pairs_by_the_live_runs_time_shares(tmp_path):
    net = {"seed": 1, "params": {"bottleneck_mbps": 5.0}}
    pairs = [{**rec(f"pair: {i}", "bbr", 0, g1, g2), **net} for i, g1, g2 in
             (("bbr", 5, 5), ("cubic", 2, 8), ("reno", 1, 9), ("vegas", 0.5, 9.5))]
    live = {**rec("mirror w50", "bbr", 0, 4, 6, switches=1, first_switch_s=15.0), **net, "seconds": 60,
            "run": "m"}
    not_used = {**rec("not used", "bbr", 0, 1, 9), **net, "seconds": 60, "flow1": "reno"}
    elsewhere = {**rec("not used", "bbr", 1, 1, 9), **net, "seconds": 60, "flow1": "reno"}   # no pairs there
    run = tmp_path / "runs" / "m"
    run.mkdir(parents=True)
    (run / "trace.csv").write_text("t_s,mono_ns,sid,event,cwnd_bytes,reason\n10,1,7,start,14480,init\n"
                                   "25,1,7,switch,28960,cubic -> bbr: verdict bbr\n")
    records = pairs + [live, not_used, elsewhere]
    offline = fairness_report.offline_d(records, lambda r: str(tmp_path))
    # 15 s of 60 on cubic, 45 on bbr: G1 = .25 * 2 + .75 * 5 = 4.25, G2 = .25 * 8 + .75 * 5 = 5.75
    assert offline[4] == pytest.approx((4.25 - 5.75) / 10)
    assert offline[5] == pytest.approx((1 - 9) / 10) and 6 not in offline
    table = {r["mode"]: r for r in fairness_report.rows(records, offline)}
    assert "pair: bbr" not in table
    assert table["mirror w50"]["paper_mean_abs_d"] == pytest.approx(0.15)
    assert table["not used"]["paper_runs"] == 1 and table["not used"]["runs"] == 2
    assert "paper method" in fairness_tables.format_rows(list(table.values()))
    # a shipped record whose run directory is gone: its time_on weighs the pairs alike
    shipped = {**live, "time_on": {"cubic": 0.25, "bbr": 0.75}}
    assert fairness_report.offline_d(pairs + [shipped], lambda r: str(tmp_path / "gone"))[4] == pytest.approx(-0.15)
    assert 4 not in fairness_report.offline_d(pairs + [live], lambda r: str(tmp_path / "gone"))


def test_the_pair_runs_give_the_table_best_response_reads(tmp_path):
    import json
    from ccp_agent.switching import GoodputTable
    pairs = [rec("pair: bbr", "cubic", k, g1, g2) for k, g1, g2 in ((0, 6, 4), (1, 2, 8))] + \
            [rec("pair: cubic", "cubic", 0, 5, 5), rec("oracle", "cubic", 0, 5, 5)]
    doc = fairness_report.goodput_table(pairs)
    # unfair one way on one network, the other way on the other: the mean |D| says so
    assert doc["goodput_mbps"][0] == {"local": "bbr", "competitor": "cubic", "local_mbps": 4.0,
                                      "competitor_mbps": 6.0, "mean_abs_d": 0.4, "networks": 2}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    table = GoodputTable.load(str(path))
    assert table.abs_d("bbr", "cubic") == pytest.approx(0.4) and table.abs_d("cubic", "cubic") == 0


def test_verdicts_pool_by_time_since_the_switch_and_old_traces_have_no_row_scores(tmp_path):
    from experiments.runs.metrics import verdict_scores
    trace = tmp_path / "trace.csv"
    trace.write_text("t_s,mono_ns,sid,event,cwnd_bytes,reason\n0,1,7,start,14480,init\n"
                     "3.0,1,7,verdict,,cubic (60% of 20)\n"              # an older trace: no row
                     "7.0,1,7,verdict,,bbr (70% of 40)\n"
                     "7.0,1,7,switch,28960,cubic -> bbr: verdict bbr\n"
                     "20.0,1,7,verdict,,cubic (65% of 50)\n")
    v = verdict_scores(str(trace), "bbr")
    assert v["cells"] == [
        {"on": "bbr", "after": "switch", "since_s": "10-20", "rows": 1, "row_right": None, "vote_right": 0},
        {"on": "cubic", "after": "start", "since_s": "2-5", "rows": 1, "row_right": None, "vote_right": 0},
        {"on": "cubic", "after": "start", "since_s": "5-10", "rows": 1, "row_right": None, "vote_right": 1}]
    records = [{"algorithm": "mirror w50", "competitor": "bbr", "verdicts": v},
               {"algorithm": "mirror w50", "competitor": "vegas", "verdicts": {"cells": [
                   {"on": "vegas", "after": "switch", "since_s": "10-20", "rows": 3, "row_right": 2,
                    "vote_right": 3}]}},
               {"algorithm": "not used", "competitor": "bbr"}]
    table = {(r["after"], r["on"], r["since_s"]): r for r in fairness_report.verdict_table(records)}
    after = table[("switch", "its CCA", "10-20")]
    assert (after["rows"], after["vote_accuracy"], after["row_accuracy"]) == (4, 0.75, 2 / 3)
    assert after["vote_accuracy_by_competitor"] == {"bbr": 0.0, "vegas": 1.0}
    assert table[("start", "other", "2-5")]["row_accuracy"] is None
    text = fairness_tables.format_verdict_table(fairness_report.verdict_table(records))
    assert "10-20" in text and "0.75" in text


def test_the_adaptive_agents_first_algorithm_is_its_initial_option():
    from experiments.runs.scenario import Algorithm
    passive = ["--identify", "passive", "--model", "m"]
    assert Algorithm("a", ccp="adaptive", options=passive + ["--initial", "reno"]).initial == "reno"
    assert Algorithm("a", ccp="adaptive", options=passive).initial == "cubic"
    assert Algorithm("a", ccp="adaptive", options=["--identify", "active"]).initial == "probe"


def test_d_splits_exactly_into_the_start_the_right_and_the_wrong_cca():
    from experiments.runs.metrics import goodput_difference_parts
    rows = [{"t_s": float(t), "goodput_mbps": g1, "competitor_goodput_mbps": g2}
            for t, (g1, g2) in enumerate([(8, 2), (8, 2), (5, 5), (5, 5), (1, 9), (6, 4)], start=1)]
    spans = [(0.0, 2.0, "cubic"), (2.0, 4.0, "bbr"), (4.0, 5.0, "reno"), (5.0, 6.0, "bbr")]
    p = goodput_difference_parts(rows, spans, "bbr", 1.0)
    g1, g2 = sum(r["goodput_mbps"] for r in rows), sum(r["competitor_goodput_mbps"] for r in rows)
    assert p["d"] == pytest.approx((g1 - g2) / (g1 + g2))          # the parts add up to Eq. 3's D
    assert p["parts"] == pytest.approx({"start": 12 / 60, "right": 2 / 60, "wrong": -8 / 60})
    assert p["seconds"] == {"start": 2.0, "right": 3.0, "wrong": 1.0}
    # a flow that never switched: all of D is its start, whatever it ran
    assert goodput_difference_parts(rows, [(0.0, 6.0, "cubic")], "cubic", 1.0)["parts"]["start"] == pytest.approx(
        (g1 - g2) / (g1 + g2))
    # a late competitor: the intervals before it came are left out, as the record's D leaves them
    late = goodput_difference_parts(rows, spans, "bbr", 1.0, competitor_from_s=2.0)
    assert late["seconds"]["start"] == 0.0 and late["d"] == pytest.approx((17 - 23) / 40)
    table = fairness_report.parts_table([{"algorithm": "mirror w50", "competitor": "bbr",
                                          "goodput_difference_parts": p}, {"algorithm": "not used",
                                                                           "competitor": "bbr"}])
    assert len(table) == 1 and table[0]["mean_abs_part"]["wrong"] == pytest.approx(8 / 60)
    assert "start" in fairness_tables.format_parts_table(table)


def test_a_flows_spans_start_on_what_its_trace_says_it_left(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("t_s,mono_ns,sid,event,cwnd_bytes,reason\n0,1,7,start,14480,init\n"
                     "7.0,1,7,switch,28960,reno -> bbr: verdict bbr\n")
    assert fairness_report.algorithm_spans(str(trace), "cubic", 10.0) == [(0.0, 7.0, "reno"), (7.0, 10.0, "bbr")]


def test_records_from_before_the_parts_get_them_from_their_run_directory(tmp_path):
    run_dir(tmp_path, "1,8,2\n2,5,5\n3,1,9\n", "0,1,7,start,14480,init\n1.0,1,7,switch,28960,cubic -> bbr: verdict bbr\n"
            "2.0,1,7,switch,28960,bbr -> reno: verdict reno\n")
    old = {"algorithm": "mirror w50", "competitor": "bbr", "run": "r", "seconds": 3, "switches": 2}
    gone = {**old, "run": "deleted"}
    assert fairness_report.fill_parts([old, gone, {"algorithm": "not used", "competitor": "bbr"}],
                                      lambda r: str(tmp_path)) == 1
    assert old["goodput_difference_parts"]["parts"] == pytest.approx({"start": 6 / 30, "right": 0.0, "wrong": -8 / 30})
    assert "goodput_difference_parts" not in gone


def test_the_cli_writes_the_markdown_table_and_names_an_unknown_mode(tmp_path):
    import json
    from click.testing import CliRunner
    from experiments.cli import exp_group
    (tmp_path / "summary.json").write_text(json.dumps(RECORDS))
    out = tmp_path / "table.md"
    res = CliRunner().invoke(exp_group, ["fairness", str(tmp_path), "--markdown", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text().startswith("| mean \\|D\\| (95 % CI)") and "| mirror w50: harm" in out.read_text()
    res = CliRunner().invoke(exp_group, ["fairness", str(tmp_path), "--markdown", str(out),
                                         "--markdown-mode", "mirror w10"])
    assert res.exit_code != 0 and "--markdown-mode: no runs of 'mirror w10'" in res.output


def test_harm_per_network_keeps_what_a_pooled_harm_of_opposite_signs_hides():
    records = [rec("oracle", "bbr", 0, 5, 4), rec("oracle", "bbr", 1, 5, 4),
               rec("mirror w50", "bbr", 0, 5, 6), rec("mirror w50", "bbr", 1, 5, 2)]   # +50 % taken, -50 % given
    row = next(r for r in fairness_report.rows(records) if r["mode"] == "mirror w50")
    assert row["harm"] == pytest.approx(0.0)
    assert row["harm_network_mean"] == pytest.approx(0.0)
    assert row["harm_network_abs_mean"] == pytest.approx(0.5)


def test_every_mode_is_paired_with_a_chosen_mode_on_the_same_networks():
    two = RECORDS + [rec("not used", "cubic", 0, 8, 2), rec("mirror w50", "cubic", 0, 5, 5)]
    rows = {(r["competitor"], r["mode"]): r for r in fairness_report.comparisons(two, versus=("not used",))}
    # bbr |D|: mirror 0.2, 0 against not used 0.8, 0.6; cubic: mirror 0 against not used 0.6
    mirror = rows[("bbr", "mirror w50")]["gap_to"]["not used"]
    assert mirror["gap"] == pytest.approx(0.1 - 0.7) and mirror["networks"] == 2
    assert mirror["ci"][0] <= mirror["gap"] <= mirror["ci"][1]
    assert rows[("all", "mirror w50")]["gap_to"]["not used"]["gap"] == pytest.approx(((0.1 - 0.7) + (0 - 0.6)) / 2)
    assert "not used" not in rows.get(("bbr", "not used"), {}).get("gap_to", {})     # not with itself
    text = fairness_tables.format_markdown(fairness_report.rows(two), list(rows.values()))
    assert "| mirror w50 − not used, paired (95 % CI) | −0.600 (" in text
    assert "mirror w50 − not used −0.600 (" in text
    assert "|D| - not used |D|: -0.600" in fairness_tables.format_comparisons(list(rows.values()))
    with pytest.raises(ValueError, match="no runs of 'best-response'"):
        fairness_report.comparisons(two, versus=("best-response",))
