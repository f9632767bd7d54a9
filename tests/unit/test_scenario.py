"""Scenario files and the runner's arithmetic (no testbed)."""
import pytest

from experiments.testbed import agent_trace, linkctl

from experiments.runs import metrics

from experiments.reports import tables
from experiments.runs.scenario import ScenarioError, load


@pytest.mark.parametrize("name", ["lossy_link", "cwnd_progression", "congestion_fairness"])
def test_shipped_scenarios_load_quick_and_full(name):
    full, quick = load(name), load(name, quick=True)
    assert sum(1 for _ in quick.runs()) < sum(1 for _ in full.runs())
    assert quick.seconds <= full.seconds


def test_congestion_fairness_sweeps_link_loss_with_one_and_three_competitors():
    sc = load("congestion_fairness")
    assert sc.sweep == {"loss_pct": [0, 2, 5]} and sc.repeats >= 8
    by_label = {a.label: a for a in sc.algorithms}
    assert by_label["cubic-int L1 vs 3"].competitors == 3 and by_label["kernel cubic vs 1"].competitors == 1
    assert by_label["cubic-int L1 alone"].competitor is None


def test_lossy_link_covers_the_paper_grid():
    sc = load("lossy_link")
    assert sc.sweep == {"loss_pct": [0, 1, 2, 5, 10, 20]}
    labels = [a.label for a in sc.algorithms]
    assert labels == ["kernel cubic", "kernel bbr", "kernel reno", "ccp cubic", "cubic-int L1", "cubic-int L2"]
    assert sum(1 for _ in sc.runs()) == 6 * 6 * sc.repeats


def write(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("text, message", [
    ('topology = "wireless"\nseconds = 5\n', "missing field 'algorithms'"),
    ('topology = "wireless"\nseconds = 5\n[[algorithms]]\nlabel = "x"\n', "exactly one of 'cca'"),
    ('topology = "wireless"\nseconds = 5\n[[algorithms]]\nlabel = "x"\ncca = "cubic"\nccp = "cubic"\n',
     "exactly one of"),
    ('topology = "nowhere"\nseconds = 5\n[[algorithms]]\nlabel = "x"\ncca = "cubic"\n', "not found"),
    ('topology = "wireless"\nseconds = 5\n[sweep]\nrate_mbps = [1]\n[[algorithms]]\nlabel = "x"\ncca = "c"\n',
     r"\[sweep\] takes one of competitor, loss_pct, reconfig"),
    ('topology = "reconfig"\nseconds = 5\n[sweep]\nreconfig = ["50ms/50ms"]\n[[algorithms]]\nlabel = "x"\n'
     'cca = "c"\n', "downtime must be shorter than the period"),
    ('topology = "reconfig"\nseconds = 5\n[sweep]\nreconfig = ["often"]\n[[algorithms]]\nlabel = "x"\n'
     'cca = "c"\n', "sweep.reconfig value 'often'"),
    ('topology = "wireless"\nseconds = 5\n[[algorithms]]\nlabel = "x"\ncca = "c"\ncolour = 1\n', "colour"),
    ('topology = "wireless"\nseconds = [\n', "s.toml"),
    ('topology = "wireless"\nseconds = 5\nseed = -1\n[[algorithms]]\nlabel = "x"\ncca = "c"\n', "'seed'"),
    ('topology = "wireless"\nseconds = 5\n[[algorithms]]\nlabel = "x"\ncca = "c"\ncompetitor = "cubic"\n'
     'competitors = 0\n', "'competitors' must be a whole number in 1..9"),
    ('topology = "wireless"\nseconds = 5\n[[algorithms]]\nlabel = "x"\ncca = "c"\ncompetitors = 2\n',
     "'competitors' needs 'competitor'"),
    ('topology = "wireless"\nseconds = 5\nnode_rt_priority = 100\n[[algorithms]]\nlabel = "x"\ncca = "c"\n',
     "'node_rt_priority' must be a SCHED_FIFO priority 1-99"),
])
def test_bad_scenarios_name_the_problem(tmp_path, text, message):
    with pytest.raises(ScenarioError, match=message):
        load(write(tmp_path, text))


def test_a_repeats_algorithms_share_the_loss_seed_and_repeats_do_not():
    seeds = {(alg.label, v["loss_pct"], rep): linkctl.run_seed(7, "loss_pct", v["loss_pct"], rep)
             for alg, v, rep in load("lossy_link").runs()}
    assert seeds[("kernel cubic", 20, 0)] == seeds[("cubic-int L2", 20, 0)]
    assert len({seeds[("kernel cubic", 20, r)] for r in range(3)} | {seeds[("kernel cubic", 5, 0)]}) == 4
    assert linkctl.run_seed(8, "loss_pct", 20, 0) != seeds[("kernel cubic", 20, 0)]


def test_the_seed_is_read_from_the_scenario(tmp_path):
    text = 'topology = "wireless"\nseconds = 5\n[[algorithms]]\nlabel = "x"\ncca = "c"\n'
    assert load(write(tmp_path, text)).seed is None
    assert load(write(tmp_path, "seed = 11\n" + text)).seed == 11


def test_unknown_scenario_lists_the_known_ones():
    with pytest.raises(ScenarioError, match="lossy_link"):
        load("no_such_scenario")


def test_jain():
    assert metrics.jain([5, 5]) == pytest.approx(1.0)
    assert metrics.jain([10, 0]) == pytest.approx(0.5)
    assert metrics.jain([None, None]) is None


def test_table_has_means_and_ratios():
    recs = [{"algorithm": a, "loss_pct": l, "goodput_mbps": g}
            for a, l, g in [("kernel cubic", 0, 8.0), ("kernel cubic", 20, 0.5), ("cubic-int L1", 0, 8.0),
                            ("cubic-int L1", 20, 3.0), ("cubic-int L1", 20, 5.0)]]
    t = tables.table(recs, "loss_pct", "kernel cubic")
    assert "4.00" in t and "8.00" in t       # mean of the two repeats, ratio 4.0/0.5 = 8
    assert "ratio to kernel cubic" in t


def test_slow_start_exit_from_a_trace(tmp_path):
    p = tmp_path / "trace.csv"
    p.write_text("t_s,mono_ns,sid,event,cwnd_bytes,ssthresh_bytes,rtt_us,acked_bytes,loss_pkts,timeout,"
                 "inflight_pkts,reason\n"
                 "0.5,1,7,start,14480,,,,,,,init\n"
                 "0.6,1,7,report,28960,,20000,14480,0,0,10,slow start\n"
                 "0.7,1,9,start,14480,,,,,,,init\n"
                 "2.0,1,7,loss,100000,100000,30000,0,1,0,90,1 lost\n")
    assert metrics.slow_start_exit_s(str(p)) == pytest.approx(1.5)
    assert metrics.slow_start_exit_s(str(tmp_path / "none.csv")) is None


def test_switches_of_the_data_flow_from_an_adaptive_agents_trace(tmp_path):
    p = tmp_path / "trace.csv"
    p.write_text("t_s,mono_ns,sid,event,cwnd_bytes,ssthresh_bytes,rtt_us,acked_bytes,loss_pkts,timeout,"
                 "inflight_pkts,reason\n"
                 "0.5,1,7,start,14480,,,,,,,init\n"
                 "0.6,1,9,start,14480,,,,,,,init\n"
                 "3.0,1,7,report,28960,,20000,14480,0,0,10,slow start\n"
                 "12.5,1,7,switch,28960,,,,,,,cubic -> bbr: verdict bbr (80% of 50), mirror\n"
                 "12.5,1,7,switch,28960,,,,,,,took the flow over in probe_bw\n"
                 "14.0,1,7,report,28960,,20000,14480,0,0,10,ProbeBW\n"
                 "30.5,1,7,switch,28960,,,,,,,bbr -> reno: verdict reno (61% of 50), mirror\n")
    assert metrics.switches(str(p)) == {"switches": 2, "first_switch_s": 12.0, "final_algorithm": "reno",
                                        "time_on": {"cubic": 0.4, "bbr": 0.6}}       # 12 s and 18 s of 30
    assert metrics.switches(str(p), end_s=40.0)["time_on"] == {"cubic": 0.3, "bbr": 0.45, "reno": 0.25}
    assert metrics.switches(str(tmp_path / "none.csv")) is None


def test_time_to_plateau_is_when_cwnd_first_nears_its_settled_value():
    from experiments.runs.metrics import time_to_plateau_s
    cwnds = [10, 20, 40, 80, 95, 100, 70, 90, 100, 70, 90, 100]      # sawtooth, median of 2nd half 90
    rows = [{"t_s": 0.5 * (i + 1), "cwnd_bytes": c * 1000} for i, c in enumerate(cwnds)]
    assert time_to_plateau_s(rows) == 2.5          # 95 kB >= 0.9 * 90 kB, 80 kB is not
    assert time_to_plateau_s(rows[:3]) is None     # too short to say


def test_batches_give_each_testbed_a_repeat_and_cover_every_run_once():
    sc = load("cubic_fidelity")
    sc.repeats = 5
    batches = list(sc.batches(2))
    # repeats {0,1}, {2,3}, {4}; per group every sweep value, each under every algorithm in turn
    assert [(a.label, v["loss_pct"], reps) for a, v, reps in batches[:4]] == [
        ("kernel cubic", 0, [0, 1]), ("ccp cubic", 0, [0, 1]), ("kernel cubic", 1, [0, 1]), ("ccp cubic", 1, [0, 1])]
    assert [reps for _, _, reps in batches] == [[0, 1]] * 12 + [[2, 3]] * 12 + [[4]] * 12
    flat = sorted((a.label, v["loss_pct"], r) for a, v, reps in batches for r in reps)
    assert flat == sorted((a.label, v["loss_pct"], r) for a, v, r in sc.runs())
    assert len(flat) == len(set(flat)) == 2 * 6 * 5
    sc.first_repeat = 3                                  # the rest of a run stopped early
    assert sorted({r for _, _, reps in sc.batches(2) for r in reps}) == [3, 4]


def test_one_agents_trace_is_split_into_the_runs_by_the_flows_port(tmp_path):
    head = "t_s,mono_ns,sid,event,cwnd_bytes,ssthresh_bytes,reason,src_port,dst_port\n"
    shared = tmp_path / "batch.agent-trace.csv"
    shared.write_text(head + "0.1,1,7,start,14480,,init,40000,5201\n"      # testbed 0: iperf3 control + data
                             "0.1,1,8,start,14480,,init,40002,5201\n"
                             "0.2,1,9,start,14480,,init,40000,5301\n"      # testbed 1
                             "0.2,1,10,start,14480,,init,5301,40000\n"     # its server's socket
                             "0.3,1,8,report,28960,,slow start,,\n"
                             "0.4,1,9,loss,20000,20000,1 lost,,\n")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert agent_trace.split_agent_trace(str(shared), {5201: str(a), 5301: str(b)}) == 0
    assert not shared.exists()
    assert [line.split(",")[2] for line in (a / "trace.csv").read_text().splitlines()[1:]] == ["7", "8", "8"]
    assert [line.split(",")[2] for line in (b / "trace.csv").read_text().splitlines()[1:]] == ["9", "10", "9"]
    assert metrics.slow_start_exit_s(str(b / "trace.csv")) == pytest.approx(0.2)   # its own flow's cut


def test_a_trace_row_of_no_runs_flow_keeps_the_combined_trace(tmp_path):
    shared = tmp_path / "batch.agent-trace.csv"
    shared.write_text("t_s,mono_ns,sid,event,cwnd_bytes,reason,src_port,dst_port\n"
                      "0.1,1,7,start,14480,init,40000,5201\n"
                      "0.2,1,5,report,14480,slow start,,\n")          # a flow whose start row is missing
    (tmp_path / "a").mkdir()
    assert agent_trace.split_agent_trace(str(shared), {5201: str(tmp_path / "a")}) == 1
    assert shared.exists()


@pytest.mark.parametrize("args, message", [
    (["lossy_link", "--algorithm", "kernel cubik"], "not in scenario lossy_link"),
    (["cwnd_progression", "--loss", "5"], "does not sweep loss_pct"),
    (["fairness_switching", "--sweep-value", "westwood"], "not among scenario fairness_switching's competitor values"),
    (["cwnd_progression", "--sweep-value", "5"], "has no sweep"),
])
def test_run_overrides_that_do_not_fit_the_scenario_are_refused_before_any_testbed(args, message):
    from click.testing import CliRunner
    from experiments.cli import exp_group
    res = CliRunner().invoke(exp_group, ["run"] + args)
    assert res.exit_code != 0 and message in res.output


def test_a_sweep_value_alone_meets_the_networks_of_the_whole_sweep(monkeypatch, tmp_path):
    from click.testing import CliRunner
    from experiments.runs import runner
    from experiments.cli import exp_group
    ran = []
    monkeypatch.setattr(runner, "run_scenario", lambda sc, out, **kw: ran.append(sc) or [])
    res = CliRunner().invoke(exp_group, ["run", "fairness_switching", "--seed", "5", "--repeats", "3",
                                         "--sweep-value", "reno", "--algorithm", "oracle", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    (sc,) = ran
    runs = list(sc.runs())
    assert {tuple(sweep.values()) for _, sweep, _ in runs} == {("reno",)} and len(runs) == 3
    whole = load("fairness_switching")
    assert [sc.params_for(5, rep, "reno") for rep in range(3)] == [whole.params_for(5, rep, "reno") for rep in range(3)]


FAIRNESS = '''topology = "dumbbell"
seconds = 5
repeats = 50
flows = { main = ["s1", "r1"], competitor = ["s2", "r2"] }
[draw]
bottleneck_mbps = { log_uniform = [1, 10] }
bottleneck_delay_ms = { uniform = [1, 100] }
[sweep]
competitor = ["bbr", "cubic"]
[[algorithms]]
label = "oracle"
same_as_competitor = true
[[algorithms]]
label = "not used"
cca_random = ["bbr", "cubic", "reno"]
competitor_delay_s = 2
'''


def test_drawn_parameters_are_the_seeds_and_repeats_and_stay_in_range(tmp_path):
    sc = load(write(tmp_path, FAIRNESS))
    draws = [sc.params_for(7, rep) for rep in range(50)]
    assert draws == [sc.params_for(7, rep) for rep in range(50)]          # reproducible
    assert draws != [sc.params_for(8, rep) for rep in range(50)]          # another seed, other networks
    rates = [d["bottleneck_mbps"] for d in draws]
    assert all(1 <= r <= 10 for r in rates) and all(1 <= d["bottleneck_delay_ms"] <= 100 for d in draws)
    # log scale: about half the draws below the geometric middle (3.16), not the arithmetic (5.5)
    assert 15 <= sum(r < 10 ** 0.5 for r in rates) <= 35


def test_a_run_resolves_its_competitor_and_flow_1s_cca(tmp_path):
    sc = load(write(tmp_path, FAIRNESS))
    oracle, not_used = sc.algorithms
    assert oracle.for_run("bbr", 1).cca == "bbr" and oracle.for_run("cubic", 1).competitor == "cubic"
    picks = {not_used.for_run("bbr", seed).cca for seed in range(40)}
    assert picks == {"bbr", "cubic", "reno"}
    assert not_used.for_run("bbr", 3).cca == not_used.for_run("cubic", 3).cca        # the seed decides
    assert not_used.competitor_delay_s == 2
    assert [v["competitor"] for _, v, r in sc.runs() if r == 0] == ["bbr", "bbr", "cubic", "cubic"]


@pytest.mark.parametrize("extra, message", [
    ('[draw]\nbuffer_bdp = { normal = [1, 2] }\n', r"draw.buffer_bdp must be"),
    ('[draw]\nbuffer_bdp = { log_uniform = [0, 2] }\n', r"low > 0"),
    ('[draw]\nbuffer_bdp = { uniform = [3, 2] }\n', r"low <= high"),
])
def test_bad_draws_name_the_problem(tmp_path, extra, message):
    text = 'topology = "dumbbell"\nseconds = 5\n' + extra + '[[algorithms]]\nlabel = "x"\ncca = "cubic"\n'
    with pytest.raises(ScenarioError, match=message):
        load(write(tmp_path, text))


@pytest.mark.parametrize("alg, message", [
    ('same_as_competitor = true\n', "need a competitor"),
    ('cca = "cubic"\ncca_random = ["bbr"]\n', "exactly one of"),
    ('cca_random = "bbr"\n', "must be a list"),
    ('same_as_competitor = "kernel"\ncompetitor = "bbr"\n', "true, false or"),
    ('cca = "cubic"\ncompetitor = "bbr"\ncompetitor_delay_s = -1\n', "'competitor_delay_s' must be"),
    ('cca = "cubic"\ncompetitor = "bbr"\nudp_cross_share = -1\n', "'udp_cross_share' must be"),
    ('cca = "cubic"\ncompetitor = "bbr"\nudp_cross_share = 2\n', "needs the topology parameter bottleneck_mbps"),
])
def test_bad_fairness_algorithms_name_the_problem(tmp_path, alg, message):
    text = 'topology = "dumbbell"\nseconds = 5\n[[algorithms]]\nlabel = "x"\n' + alg
    with pytest.raises(ScenarioError, match=message):
        load(write(tmp_path, text))


def test_the_udp_flood_scenario_floods_at_twice_each_networks_bottleneck():
    sc = load("rtt_separation_udp")
    by_label = {a.label: a for a in sc.algorithms}
    params, alg, _ = sc.run_setting(1, 0, by_label["cubic pair + UDP 2x"], 4, 0)
    assert params["separation"] == 4 and alg.udp_cross_mbps == 2 * params["bottleneck_mbps"] == 20.0
    assert sc.run_setting(1, 0, by_label["cubic pair"], 4, 0)[1].udp_cross_mbps == 0


def test_four_flows_of_four_rtts_each_come_from_a_pair_of_hosts_of_its_own():
    sc = load("rtt_separation_four")
    assert [sc.competitor_pair(k) for k in range(3)] == [["s1", "r1"], ["s2", "r2"], ["s3", "r3"]]
    assert sc.flows["main"] == ["s4", "r4"] and sc.algorithms[0].competitors == 3
    assert load("rtt_separation").competitor_pair(2) == ["s2", "r2"]     # one pair for every competitor


def test_the_fairness_scenario_runs_vegas_on_ccp_beside_the_adaptive_agent():
    sc = load("fairness_switching")
    assert sc.sweep["competitor"] == ["bbr", "cubic", "reno", "vegas"] and sc.repeats >= 25
    networks = {tuple(sorted(sc.params_for(1, r, c).items())) for c in sc.sweep["competitor"] for r in range(25)}
    assert len(networks) == 100                       # each competitor on networks of its own
    assert sc.params_for(1, 3, "bbr") == sc.params_for(1, 3, "bbr") != sc.params_for(1, 3, "cubic")
    by_label = {a.label: a for a in sc.algorithms}
    oracle = by_label["oracle"].for_run("vegas", 1)
    assert (oracle.cca, oracle.ccp) == (None, "vegas") and oracle.agent([5202]) == ("vegas", [])
    assert by_label["oracle"].for_run("bbr", 1).agent([5202]) is None                  # all in the kernel
    on_ccp = by_label["oracle ccp"]
    assert (on_ccp.for_run("bbr", 1).cca, on_ccp.for_run("bbr", 1).agent([5202])) == (None, ("bbr", []))
    assert on_ccp.for_run("vegas", 1).agent([5202]) == ("vegas", [])                 # one algorithm for both
    mirror = by_label["mirror int w50"].for_run("vegas", 1)
    name, opts = mirror.agent([5202])
    assert name == "adaptive" and opts[-2:] == ["--port-algorithm", "5202=vegas"]
    assert opts[opts.index("--model") + 1].endswith("/estimator/models/archive/cca_rf_int_t2.joblib")   # made absolute
    assert by_label["mirror int w50 late"].competitor_delay_s == 10
    name, opts = by_label["mirror default w50"].for_run("bbr", 1).agent([5202])
    assert name == "adaptive" and "--model" not in opts                             # the default model,
    assert by_label["mirror default w50"].needs_telemetry                           # which reads INT
    assert {by_label["not used"].for_run("bbr", s).cca for s in range(40)} == {"bbr", "cubic", "reno", None}


def test_the_ccp_datapath_runs_for_flow_1_on_the_competitors_cca_as_ccp(tmp_path):
    from experiments.runs.runner import needs_ccp_datapath
    text = ('topology = "dumbbell"\nseconds = 5\nflows = {{ main = ["s1", "r1"] }}\n[sweep]\ncompetitor = ["bbr", "cubic"]\n'
            '[[algorithms]]\nlabel = "x"\nsame_as_competitor = {}\n')
    assert not needs_ccp_datapath(load(write(tmp_path, text.format("true"))))        # all in the kernel
    assert needs_ccp_datapath(load(write(tmp_path, text.format('"ccp"'))))        # 'oracle ccp' alone needed it


def test_the_ccp_datapath_runs_for_flow_1_on_a_cca_the_kernel_lacks(tmp_path):
    from experiments.runs.runner import needs_ccp_datapath
    text = ('topology = "dumbbell"\nseconds = 5\nflows = {{ main = ["s1", "r1"] }}\n'
            '[[algorithms]]\nlabel = "x"\ncca = "{}"\ncompetitor = "bbr"\n')
    assert not needs_ccp_datapath(load(write(tmp_path, text.format("cubic"))))
    assert needs_ccp_datapath(load(write(tmp_path, text.format("vegas"))))       # flow 1 runs it as CCP


def test_queueing_delay_from_a_sinks_log_after_the_runs_offset(tmp_path):
    import json

    def line(src, dport, depths):
        return json.dumps({"flow": {"src": src, "dport": dport},
                           "trace": {"hops": [{"queue_depth_bytes": d} for d in depths]}}) + "\n"
    log = tmp_path / "sink.jsonl"
    log.write_text(line("a", 5201, [99_999, 0]))          # an earlier run's
    offset = log.stat().st_size
    with open(log, "a") as f:
        f.write(line("a", 5201, [12_500, 0]) + line("a", 5201, [37_500, 0]) + line("b", 5201, [99_999, 0])
                + line("a", 5202, [99_999, 0]) + '{"flow": {"src": "a", "dpo')         # a torn last line
    # 25 kB deep on average at hop 0, at 10 Mbit/s: 20 ms
    assert metrics.mean_queue_delay_ms(str(log), offset, "a", 5201, 10.0) == pytest.approx(20.0)
    assert metrics.mean_queue_delay_ms(str(log), offset, "c", 5201, 10.0) is None
    assert metrics.mean_queue_delay_ms(str(tmp_path / "none"), 0, "a", 5201, 10.0) is None


def test_a_competitor_the_agent_runs_too_gets_its_own_trace(tmp_path):
    shared = tmp_path / "batch.agent-trace.csv"
    shared.write_text("t_s,mono_ns,sid,event,cwnd_bytes,reason,src_port,dst_port\n"
                      "0.1,1,7,start,14480,init,40000,5201\n"
                      "0.1,1,8,start,14480,init,40001,5202\n"        # the competitor (vegas vs vegas)
                      "0.2,1,8,report,14480,vegas,,\n"
                      "0.3,1,7,report,14480,vegas,,\n")
    (tmp_path / "a").mkdir()
    a = tmp_path / "a"
    assert agent_trace.split_agent_trace(str(shared), {5201: str(a)}, {5202: str(a)}) == 0
    assert [line.split(",")[2] for line in (a / "trace.csv").read_text().splitlines()[1:]] == ["7", "7"]
    assert [line.split(",")[2] for line in (a / "competitor-trace.csv").read_text().splitlines()[1:]] == ["8", "8"]


def test_the_adaptive_agent_needs_telemetry_when_active_or_with_an_int_model():
    from experiments.runs.scenario import Algorithm
    passive = ["--identify", "passive"]
    table1 = Algorithm("a", ccp="adaptive", options=passive + ["--model", "estimator/models/archive/cca_rf.joblib"])
    with_int = Algorithm("b", ccp="adaptive", options=passive + ["--model", "estimator/models/archive/cca_rf_int.joblib"])
    assert not table1.needs_telemetry and with_int.needs_telemetry
    assert Algorithm("c", ccp="cubic-int").needs_telemetry and not Algorithm("d", cca="cubic").needs_telemetry
    assert not Algorithm("e", ccp="adaptive", options=passive + ["--model", "/nonexistent.joblib"]).needs_telemetry
    # the agent's default is active identification: it reads the hop records and starts on the probe
    default = Algorithm("f", ccp="adaptive")
    assert default.needs_telemetry and default.initial == "probe"
    assert table1.initial == "cubic"


def test_a_flow_on_a_host_the_topology_lacks_is_refused_at_load_naming_its_hosts(tmp_path):
    text = 'topology = "dumbbell"\nseconds = 5\n[[algorithms]]\nlabel = "x"\ncca = "cubic"\n'
    with pytest.raises(ScenarioError, match=r"flow 'main' names host 'sta1', 'sta2', which topology 'dumbbell' does "
                                            r"not have \(the default flow.*its hosts: s1, s2, r1, r2"):
        load(write(tmp_path, text))
    flows = 'flows = { main = ["s1", "r1"], competitor = ["s2", "h9"] }\n'
    with pytest.raises(ScenarioError, match=r"flow 'competitor' names host 'h9'"):
        load(write(tmp_path, flows + text))
    assert load(write(tmp_path, 'flows = { main = ["s1", "r1"] }\n' + text)).flows == {"main": ["s1", "r1"]}


def test_every_shipped_scenario_loads_and_has_a_description():
    from experiments.runs.scenario import describe, resolve, scenario_names
    for name in scenario_names():
        load(name)
        assert describe(resolve(name)), f"{name} has no description"


RUN_DRAWN = '''
topology = "dumbbell"
seconds = 10
[draw]
bottleneck_mbps = { uniform = [2, 8] }
competitors = { integer = [1, 3] }
competitor_delay_s = { uniform = [0, 10] }
udp_cross_share = { uniform = [0.05, 0.3] }
competitor_rate_share = { uniform = [0.1, 0.4] }
comp_extra_delay_ms = { uniform = [0, 60] }
[sweep]
competitor = ["bbr", "cubic"]
[flows]
main = ["s1", "r1"]
competitor = ["s2", "r2"]
[[algorithms]]
label = "oracle"
same_as_competitor = true
'''


def test_a_runs_flow_settings_are_drawn_beside_the_topology_and_kept_from_it(tmp_path):
    """competitors, competitor_delay_s and udp_cross_share are drawn per repeat like the
    topology's parameters, set the run's flows, and are not passed to the topology."""
    sc = load(write(tmp_path, RUN_DRAWN))
    draws = [sc.params_for(7, rep) for rep in range(60)]
    assert {d["competitors"] for d in draws} == {1, 2, 3} and all(isinstance(d["competitors"], int) for d in draws)
    topo = sc.topology_params(draws[0])
    assert set(topo) == {"bottleneck_mbps", "comp_extra_delay_ms"}
    alg = sc.algorithms[0].for_run("cubic", 1).with_draws(draws[0])
    assert alg.competitors == draws[0]["competitors"] and alg.competitor_delay_s == draws[0]["competitor_delay_s"]
    assert alg.udp_cross_mbps == pytest.approx(draws[0]["udp_cross_share"] * draws[0]["bottleneck_mbps"], abs=1e-3)
    assert alg.competitor_rate_mbps == pytest.approx(draws[0]["competitor_rate_share"] * draws[0]["bottleneck_mbps"],
                                                     abs=1e-3)
    assert sc.algorithms[0].with_draws({}).udp_cross_mbps == 0.0        # not drawn: none
    assert sc.algorithms[0].with_draws({}).competitor_rate_mbps == 0.0


@pytest.mark.parametrize("draw, message", [
    ('competitors = { uniform = [1, 3] }', r"draw.competitors must be \{ integer"),
    ('competitors = { integer = [1, 12] }', r"within 1..9"),
    ('competitors = { integer = [1.5, 3] }', "whole numbers"),
    ('udp_cross_share = { uniform = [0.1, 1.5] }', r"share of the bottleneck"),
    ('competitor_rate_share = { uniform = [0.1, 1.5] }', r"draw.competitor_rate_share is a share of the bottleneck"),
    ('competitor_delay_s = { uniform = [-1, 2] }', r"must be >= 0"),
])
def test_bad_run_draws_name_the_problem(tmp_path, draw, message):
    name = draw.split(" =")[0]
    lines = [ln for ln in RUN_DRAWN.splitlines() if not ln.startswith(name + " =")]
    text = "\n".join(lines).replace("[draw]", "[draw]\n" + draw, 1)
    with pytest.raises(ScenarioError, match=message):
        load(write(tmp_path, text))


def test_a_drawn_competitor_count_needs_a_competitor_and_udp_a_bottleneck_rate(tmp_path):
    text = 'topology = "dumbbell"\nseconds = 5\n[draw]\ncompetitors = { integer = [1, 2] }\n' \
           '[[algorithms]]\nlabel = "x"\ncca = "cubic"\n'
    with pytest.raises(ScenarioError, match="needs a competitor"):
        load(write(tmp_path, text))
    text = RUN_DRAWN.replace("bottleneck_mbps = { uniform = [2, 8] }\n", "")
    with pytest.raises(ScenarioError, match="needs the topology parameter bottleneck_mbps"):
        load(write(tmp_path, text))


def test_a_collection_scenario_runs_each_repeat_on_its_plans_network_and_flows():
    """The runner runs repeat r of estimator_collect as run_plan(r, seed, ...) says: the
    network, flow 1's CCA (on CCP where the plan says so or the kernel lacks it), the
    competitors, their start, the UDP beside them; the run named as the plan."""
    from experiments.runs.collection_plans import Collection, run_plan
    from experiments.runs.runner import needs_ccp_datapath
    sc = load("estimator_collect")
    assert sc.collection == Collection() and [a.label for a in sc.algorithms] == ["collect"]
    sc.collection = Collection("hard", udp_cross=True)
    plans = [run_plan(r, 2807, "hard", True) for r in range(32)]
    for r, plan in enumerate(plans):
        params, alg, got = sc.run_setting(2807, r, sc.algorithms[0], None, pick_seed=0)
        assert got == plan and params == plan["params"]
        assert (alg.cca or alg.ccp) == plan["cca1"] and (alg.ccp is not None) == (plan["cca1"] == "vegas")
        assert (alg.competitor, alg.competitors, alg.competitor_delay_s, alg.udp_cross_mbps) == (
            plan["cca2"], plan["comp_flows"], plan["comp_start_s"], plan.get("udp_mbps", 0.0))
    live = Collection("table2-live")
    sc.collection = live
    assert all(sc.run_setting(31, r, sc.algorithms[0], None, 0)[1].ccp == live.plan(31, r)["cca1"] for r in range(16))
    # the datapath only where a plan left to run needs it (vegas, or flow 1 on CCP)
    sc.collection, sc.repeats = Collection("paper"), 16
    sc.skip_repeats = frozenset(r for r in range(16) if "vegas" not in (run_plan(r, 5)["cca1"], run_plan(r, 5)["cca2"]))
    assert needs_ccp_datapath(sc, 5)
    sc.skip_repeats = frozenset(r for r in range(16) if "vegas" in (run_plan(r, 5)["cca1"], run_plan(r, 5)["cca2"]))
    assert not needs_ccp_datapath(sc, 5) and len(list(sc.batches(2))) == 5     # 9 runs left, two at a time


@pytest.mark.parametrize("table, message", [
    ('distribution = "uniform"', "none of paper, hard"),
    ("samples = 0", "samples >= 1"),
    ("udp_cross = 1", "collection.udp_cross has the wrong type"),
    ("runs = 5", "unknown field.*runs"),
])
def test_a_collection_table_names_what_is_wrong(tmp_path, table, message):
    text = f'topology = "dumbbell"\nseconds = 5\n[flows]\nmain = ["s1", "r1"]\ncompetitor = ["s2", "r2"]\n[collection]\n{table}\n'
    with pytest.raises(ScenarioError, match=message):
        load(write(tmp_path, text))
    with pytest.raises(ScenarioError, match="drop sweep"):
        load(write(tmp_path, text.replace(table, "") + '[sweep]\ncompetitor = ["bbr"]\n'))


def test_one_agent_serves_a_batch_of_plain_algorithms_each_flow_pinned_to_its_own():
    """Runs of one batch that need different CCP agents share one (the first's algorithm,
    every other CCP flow pinned by port); runs with options (the adaptive agent's) cannot."""
    from experiments.runs.algorithm import Algorithm, batch_agent
    kernel = Algorithm("k", cca="cubic", competitor="bbr")
    vegas_flow1 = Algorithm("v", ccp="vegas", competitor="bbr")
    cubic_vs_vegas = Algorithm("c", ccp="cubic", competitor="vegas", competitors=2)
    assert batch_agent([(kernel, 5201)]) is None
    assert batch_agent([(kernel, 5201), (vegas_flow1, 5211)]) == ("vegas", [])
    assert batch_agent([(vegas_flow1, 5201), (cubic_vs_vegas, 5211)]) == (
        "vegas", ["--port-algorithm", "5211=cubic"])
    assert batch_agent([(cubic_vs_vegas, 5201), (vegas_flow1, 5211)]) == (
        "cubic", ["--port-algorithm", "5202=vegas", "--port-algorithm", "5203=vegas", "--port-algorithm", "5211=vegas"])
    same = Algorithm("a", ccp="adaptive", options=["--identify", "active"], competitor="vegas")
    assert batch_agent([(same, 5201), (same, 5211)])[0] == "adaptive"
    with pytest.raises(ValueError, match="different CCP agents"):
        batch_agent([(same, 5201), (vegas_flow1, 5211)])


def test_each_flows_queueing_delay_is_its_bottleneck_hops_transit_delay_above_its_least(tmp_path):
    import json

    def line(src, dport, delays_ms):
        return json.dumps({"flow": {"src": src, "dport": dport},
                           "trace": {"hops": [{"transit_delay_ns": int(d * 1e6)} for d in delays_ms]}}) + "\n"
    log = tmp_path / "sink.jsonl"
    log.write_text(line("a", 5201, [900, 0]))                 # an earlier run's
    offset = log.stat().st_size
    with open(log, "a") as f:
        # flow a waits at hop 1 (the node's own 0.1 ms and an ingress link's 5 ms under it)
        for d in (5.1, 15.1, 25.1, 45.1):
            f.write(line("a", 5201, [0.1, d]))
        f.write(line("b", 5202, [3.0, 0.2]) + line("b", 5202, [1.0, 0.2]) + line("c", 5203, [50, 50])
                + '{"flow": {"src": "a", "dpo')             # a torn last line
    got = metrics.queueing_delays_ms(str(log), offset, [("a", 5201), ("b", 5202), ("x", 5209)])
    assert got[5201] == {"mean_ms": pytest.approx(17.5), "p95_ms": pytest.approx(40.0), "packets": 4}
    assert got[5202]["mean_ms"] == pytest.approx(1.0) and set(got) == {5201, 5202}
    assert metrics.queueing_delays_ms(str(tmp_path / "none"), 0, [("a", 5201)]) == {}


def test_a_replaced_or_leaving_competitor_runs_in_its_window_and_bad_ones_are_named(tmp_path):
    flows = '[flows]\nmain = ["s1", "r1"]\ncompetitor = ["s2", "r2"]\n'
    text = ('topology = "dumbbell"\nseconds = 40\n' + flows + '[sweep]\ncompetitor = ["cubic", "bbr"]\n'
            '[[algorithms]]\nlabel = "replaced"\ncca = "reno"\n'
            'competitor_replaced_by = { cubic = "bbr", bbr = "reno" }\ncompetitor_replaced_after_s = 20\n'
            '[[algorithms]]\nlabel = "leaves"\ncca = "reno"\ncompetitor_leaves_after_s = 15\ncompetitor_delay_s = 5\n')
    sc = load(write(tmp_path, text))
    replaced, leaves = sc.algorithms
    run = replaced.for_run("bbr", 1)
    assert run.competitors == 2 and [run.competitor_cca(k) for k in (0, 1)] == ["bbr", "reno"]
    assert [run.competitor_window_s(k, 40) for k in (0, 1)] == [(0.0, 20.0), (20.0, 20.0)]
    assert leaves.for_run("cubic", 1).competitor_window_s(0, 40) == (5.0, 15.0)
    assert sc.algorithms[1].for_run("cubic", 1).competitors == 1
    base = 'topology = "dumbbell"\nseconds = 40\n' + flows + '[[algorithms]]\nlabel = "x"\ncca = "reno"\ncompetitor = "cubic"\n'
    for extra, message in (('competitor_replaced_by = { cubic = "bbr" }\n', "go together"),
                           ('competitor_replaced_by = { cubic = "vegas" }\ncompetitor_replaced_after_s = 5\n',
                            "maps a competitor's kernel CCA"),
                           ('competitor_replaced_by = { bbr = "reno" }\ncompetitor_replaced_after_s = 5\n',
                            "no flow to take the place of cubic"),
                           ('competitor_leaves_after_s = -2\n', "must be a number of seconds"),
                           ('competitor_replaced_by = { cubic = "bbr" }\ncompetitor_replaced_after_s = 5\n'
                            'competitor_leaves_after_s = 5\n', "replaced or leaves, not both")):
        with pytest.raises(ScenarioError, match=message):
            load(write(tmp_path, base + extra))


def test_competitors_series_are_merged_over_their_own_windows():
    from experiments.runs.run_record import merge_competitors
    rows = [{"t_s": i + 1.0, "goodput_mbps": 1.0} for i in range(6)]
    first = [{"goodput_mbps": 2.0}] * 3
    second = [{"goodput_mbps": 3.0}] * 2                  # its last interval missing
    late = merge_competitors(rows, [first, second], [(0.0, 3.0), (3.0, 3.0)], 1.0, 6.0)
    assert late == 0
    assert [r["competitor_goodput_mbps"] for r in rows] == [2.0, 2.0, 2.0, 3.0, 3.0, None]
    assert rows[0]["jain"] == pytest.approx(0.9) and rows[5]["jain"] is None
    rows = [{"t_s": i + 1.0, "goodput_mbps": 1.0} for i in range(6)]
    late = merge_competitors(rows, [first], [(2.0, 3.0)], 1.0, 6.0)     # starts late, leaves
    assert late == 2
    assert [r["competitor_goodput_mbps"] for r in rows] == [0.0, 0.0, 2.0, 2.0, 2.0, 0.0]
