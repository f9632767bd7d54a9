"""The studies' drivers on synthetic runs (the studies themselves run on collected data)."""
import json

import pytest

from lab.estimator import seed_curve
from tests.unit.test_estimator_eval import fake_dataset


def test_seed_curve_scores_each_point_and_the_given_model_on_the_unseen_seed(tmp_path, monkeypatch):
    monkeypatch.setattr(seed_curve, "FEATURE_SET", "table1")     # the fake runs carry Table I rows only
    train_dirs = [fake_dataset(tmp_path / f"s{seed}", runs=32, seed=seed) for seed in (7, 8)]
    test_dir = fake_dataset(tmp_path / "s9", runs=32, seed=9)
    model_path = str(tmp_path / "m.joblib")
    seed_curve.train([r for d in train_dirs[:1] for r in seed_curve.load_dataset([d], "table1")],
                     {"n_estimators": [10], "max_depth": [5]}, feature_set="table1", shared=True).save(model_path)
    out = tmp_path / "curve.json"
    seed_curve.main([*train_dirs, "--test", test_dir, "--model", model_path, "--out", str(out)])
    res = json.loads(out.read_text())
    points = res["points"]
    assert [p["train_runs"] for p in points] == [32, 64] and [len(p["collections"]) for p in points] == [1, 2]
    assert all(p["test_runs"] == 32 and p["mean_accuracy"] > 0.9 for p in points)    # the fake CCAs separate
    assert "paired" not in points[0] and -1 <= points[1]["paired"]["mean"] <= 1
    assert res["models"][model_path]["test_runs"] == 32 and "paired" in res["models"][model_path]


def test_a_straight_rise_after_a_loss_has_area_one_half_a_concave_one_more_and_a_flat_rate_none():
    import numpy as np
    from lab.estimator.rise_shape import rise_areas
    bin_s, n = 0.02, 1200
    lost = np.zeros(n)
    lost[[300, 302, 700]] = 1                     # a loss burst of two bins is one event
    ramp = np.linspace(0, 1, 399)
    line, concave, flat = np.full(n, 10.0), np.full(n, 10.0), np.full(n, 10.0)
    line[301:700] = 5 + 5 * ramp
    concave[301:700] = 10 - 5 * (1 - ramp) ** 3
    areas, events = rise_areas(line, lost, bin_s, 0.1)
    assert events == 2 and len(areas) == 1 and abs(areas[0] - 0.5) < 0.03
    assert rise_areas(concave, lost, bin_s, 0.1)[0][0] > 0.7
    assert rise_areas(flat, lost, bin_s, 0.1) == ([], 2)


def test_the_udp_effect_pairs_each_network_with_itself_and_keeps_the_runs_without_udp_as_a_control(tmp_path):
    from lab.estimator import udp_effect

    def run(i, udp, right):
        return {"seed": 9, "index": i, "cca2": ("reno", "cubic")[i % 2], "udp": udp, "rows_right": right,
                "verdict_w50": right > 0.5}
    with_udp = [run(i, "with UDP" if i < 10 else "no UDP", 0.4 if i < 10 else 0.8) for i in range(20)]
    without = [run(i, "no UDP", 0.8) for i in range(20)]
    paths = []
    for name, runs in (("w", with_udp), ("wo", without)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps({"runs": runs}))
    out = tmp_path / "effect.json"
    udp_effect.main(["--with-udp", str(paths[0]), "--without-udp", str(paths[1]), "--out", str(out)])
    res = json.loads(out.read_text())
    assert res["with UDP"]["runs"] == 10 and abs(res["with UDP"]["rows_right_paired"]["mean"] + 0.4) < 1e-9
    assert res["with UDP"]["verdict_paired"]["mean"] == -1.0
    assert res["A/A control"]["rows_right_paired"]["mean"] == 0 and res["A/A control, competitor reno"]["runs"] == 5



def identification_docs(root: str) -> str:
    """docs/estimator.md and the development record that keeps the earlier seeds' scores."""
    import os
    return "".join(open(os.path.join(root, f)).read() for f in
                   ("docs/estimator.md", "docs/results/2026-12-06-identification-development.md"))


@pytest.mark.parametrize("seed, date, rows_expected", [(4301, "2026-12-03", 12), (4401, "2026-12-03", 11),
                                                       (4502, "2026-12-05", 11), (4503, "2026-12-06", 11),
                                                       (4504, "2026-12-07", 12), (4505, "2026-12-07", 12),
                                                       (4506, "2026-12-07", 12), (4507, "2026-12-07", 12)])
def test_the_active_identification_table_in_the_docs_is_the_one_its_records_give(capsys, seed, date, rows_expected):
    import os
    from lab.estimator import identify_table
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    name = f"identify_hard-seed{seed}-{date}"
    identify_table.main([os.path.join(root, f"lab/records/estimator/{name}.json"),
                         os.path.join(root, f"lab/records/experiments/{name}/summary.json")])
    rows = capsys.readouterr().out.strip().splitlines()
    docs = identification_docs(root)
    assert len(rows) == rows_expected and all(row in docs for row in rows), [r for r in rows if r not in docs]


@pytest.mark.parametrize("seed, date", [(4401, "2026-12-03"), (4507, "2026-12-07")])
def test_the_paired_active_passive_table_in_the_docs_is_the_one_its_records_give(capsys, seed, date):
    import os
    from lab.estimator import identify_table
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    name = f"identify_hard-seed{seed}{{}}-{date}"
    identify_table.main([os.path.join(root, f"lab/records/estimator/{name.format('')}.json"),
                         os.path.join(root, f"lab/records/experiments/{name.format('')}/summary.json"),
                         "--passive", os.path.join(root, f"lab/records/estimator/{name.format('-passive')}.json")])
    rows = capsys.readouterr().out.strip().splitlines()
    docs = identification_docs(root)
    assert len(rows) == 11 and all(row in docs for row in rows), [r for r in rows if r not in docs]


@pytest.mark.parametrize("study,record,rows", [
    ("first_model", "lab/records/estimator/dragonfly-first-model-2026-12-03.json", 4),
    ("sampling", "lab/records/estimator/dragonfly-sampling-2026-12-03.json", 8),
    ("accumulate", "lab/records/estimator/dragonfly-accumulate-seed6702-2026-12-03.json", 4)])
def test_the_dragonfly_tables_in_the_docs_are_the_ones_their_records_give(capsys, study, record, rows):
    import importlib
    import os
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    importlib.import_module(f"lab.dragonfly.{study}").main(["--table", os.path.join(root, record)])
    got = capsys.readouterr().out.strip().splitlines()
    docs = open(os.path.join(root, "docs/dragonfly.md")).read()
    assert len(got) == rows and all(row in docs for row in got), [r for r in got if r not in docs]


def test_the_dragonfly_interval_table_in_the_docs_is_the_one_its_records_give(capsys):
    import os
    from lab.dragonfly import intervals
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    records = [os.path.join(root, f"lab/records/estimator/dragonfly-intervals-{name}-2026-12-03.json")
               for name in ("fixed70ms", "fixed200ms", "drawn")]
    intervals.main(["--table", *records])
    got = capsys.readouterr().out.strip().splitlines()
    docs = open(os.path.join(root, "docs/dragonfly.md")).read()
    assert len(got) == 11 and all(row in docs for row in got), [r for r in got if r not in docs]


@pytest.mark.parametrize("study,record,rows", [("identify_thresholds", "identify_thresholds-dev-2026-12-05.json", 6),
                                               ("two_senders", "two-senders-2026-12-07.json", 5),
                                               ("slow_start_timing", "slow-start-timing-2026-12-07.json", 17),
                                               ("exit_cut_study", "exit-cut-study-2026-12-07.json", 9),
                                               ("probe_cost", "probe-cost-seed2620-2026-12-07.json", 6),
                                               ("competitor_changes", "identify-changes-seed4602-2026-12-07.json",
                                                7)])
def test_a_studys_table_in_the_docs_is_the_one_its_record_gives(capsys, study, record, rows):
    import importlib
    import os
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    importlib.import_module(f"lab.estimator.{study}").main(["--table", os.path.join(root, "lab/records/estimator", record)])
    got = capsys.readouterr().out.strip().splitlines()
    docs = open(os.path.join(root, "docs/estimator.md")).read()
    assert len(got) == rows and all(row in docs for row in got), [r for r in got if r not in docs]


def test_two_senders_reads_each_data_connections_switches_and_what_it_named(tmp_path):
    from lab.estimator import two_senders
    rows = [("1.0", "1", "start", "5201"), ("1.0", "2", "start", "5201"),        # iperf3's control connection
            ("1.1", "3", "start", "5203")]
    rows += [("1.5", "2", "report", "")] * 5 + [("1.5", "3", "report", "")] * 5
    rows += [("6.0", "2", "switch", "", "probe -> cubic: identified cubic (92% posterior), mirror"),
             ("7.0", "3", "switch", "", "probe -> cubic: identified unknown (99% posterior), mirror"),
             ("9.0", "3", "switch", "", "cubic -> probe: re-identify: a new competitor"),
             ("12.0", "1", "switch", "", "probe -> reno: identified reno (91% posterior), mirror")]
    path = tmp_path / "trace.csv"
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "sid", "event", "dst_port", "reason"])
        w.writerows((list(r) + [""])[:5] for r in rows)
    got = two_senders.flows_in_trace(str(path))
    assert got[5201] == [(5.0, "probe -> cubic: identified cubic (92% posterior), mirror")]
    assert [t for t, _ in got[5203]] == [6.0, 8.0]
    assert two_senders.named(got[5201]) == "cubic" and two_senders.named(got[5203]) == "unknown"
    assert two_senders.named([]) is None
    assert two_senders.jain([2.0, 2.0, 2.0]) == 1.0 and abs(two_senders.jain([3.0, 0.0, 0.0]) - 1 / 3) < 1e-12



def test_the_window_truth_aligns_two_clocks_and_reads_the_senders_cut_after_its_recovery():
    import numpy as np
    from lab.estimator.window_truth import best_lag, sender_cuts, shifted
    rng = np.random.default_rng(3)
    rate = np.repeat(rng.uniform(2, 10, 60), 20)                  # a rate changing every 200 ms
    at_node = rng.poisson(rate).astype(float)
    acked = shifted(at_node, 37)                                   # what the ACKs cover, 370 ms later
    lag, corr = best_lag(np.nan_to_num(acked), at_node, around=0)
    assert lag == 37 and corr > 0.9
    # a window of 40 packets halved at each episode: during recovery snd_nxt - snd_una counts
    # the holes' SACKed segments too (60 here), which the cut must not read
    t = np.arange(0, 12, 0.01)
    episodes = [(2.0, 2.5), (6.0, 6.5)]
    inflight = np.full(t.size, 40.0)
    states = []
    for start, end in episodes:
        inflight[(t >= start) & (t < end)] = 60.0
        inflight[t >= end] = 20.0 + (t[t >= end] - end)            # halved, then regrowing slowly
        inflight[(t >= start - 0.3) & (t < start)] = 40.0
        states += [(start, "recovery"), (end, "open")]
    cuts = sender_cuts(t, inflight, np.full(t.size, 0.1), states)
    assert len(cuts) == 1 and abs(cuts[0] - 0.5) < 0.02               # the first episode: the slow-start exit


@pytest.mark.parametrize("records,rows", [
    (("early-evidence-loss-repeat-2026-12-07.json", "early-evidence-exit-cut-2026-12-07.json",
      "early-evidence-exit-cut-revised-2026-12-07.json"), 5),
    (("early-evidence-held-out-before-exit-cut-2026-12-07.json", "early-evidence-held-out-exit-cut-2026-12-07.json",
      "early-evidence-held-out-exit-cut-revised-2026-12-07.json"), 5)])
def test_the_early_evidence_rows_in_the_docs_are_the_ones_their_records_give(capsys, records, rows):
    import os
    from lab.estimator import early_evidence
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    early_evidence.main(["--table", *(os.path.join(root, "lab/records/estimator", r) for r in records)])
    got = capsys.readouterr().out.strip().splitlines()
    docs = open(os.path.join(root, "docs/estimator.md")).read()
    assert len(got) == rows and all(row in docs for row in got), [r for r in got if r not in docs]


def test_the_by_network_table_in_the_docs_is_the_one_its_record_gives(capsys):
    import os
    from lab.estimator import identify_table
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    name = "identify_hard-seed4507-2026-12-07"
    identify_table.main([os.path.join(root, f"lab/records/estimator/{name}.json"),
                         os.path.join(root, f"lab/records/experiments/{name}/summary.json"), "--by-network"])
    rows = capsys.readouterr().out.strip().splitlines()
    docs = open(os.path.join(root, "docs/estimator.md")).read()
    assert len(rows) == 8 and all(row in docs for row in rows), [r for r in rows if r not in docs]


def test_the_probe_cost_compares_the_phase_before_the_commit_with_the_same_seconds_of_the_oracle(tmp_path):
    import csv
    from lab.estimator import probe_cost

    def run(name, goodputs, switch_at=None):
        d = tmp_path / "exp" / "runs" / name
        d.mkdir(parents=True)
        with open(d / "series.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "goodput_mbps", "competitor_goodput_mbps"])
            w.writerows((i + 1.0, g1, g2) for i, (g1, g2) in enumerate(goodputs))
        with open(d / "trace.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "sid", "event", "reason"])
            w.writerow([0.0, 1, "start", "probe: slow start"])
            w.writerows([0.5, 1, "report", ""] for _ in range(5))
            if switch_at is not None:
                w.writerow([switch_at, 1, "switch", "probe -> cubic: identified cubic (95% posterior), mirror"])

    # 4 s on the probe at 1 of 3 Mbit/s, then even; the oracle even throughout
    run("mirror-active_competitor-cubic_r0", [(1.0, 2.0)] * 4 + [(1.5, 1.5)] * 4, switch_at=4.0)
    run("oracle_competitor-cubic_r0", [(1.5, 1.5)] * 8)
    run("mirror-active_competitor-reno_r1", [(1.0, 2.0)] * 8)          # never committed: counted whole
    run("oracle_competitor-reno_r1", [(2.0, 1.0)] * 8)
    run("mirror-active_competitor-bbr_r2", [(1.0, 2.0)] * 8)           # no oracle run: left out
    record = probe_cost.measure([str(tmp_path / "exp")], "mirror active", "oracle")
    nets = {n["competitor"]: n for n in record["networks"]}
    assert set(nets) == {"cubic", "reno"}
    assert nets["cubic"]["phase_s"] == 4.0 and nets["cubic"]["flow1_mbps"] == 1.0
    assert nets["cubic"]["oracle_flow1_mbps"] == 1.5 and nets["cubic"]["competitor_mbps"] == 2.0
    assert nets["reno"]["flow1_mbps"] / nets["reno"]["oracle_flow1_mbps"] == 0.5
    text = probe_cost.table(record)
    assert "| flow 1's goodput over the oracle's (95 % CI) | 0.67 (0.67–0.67) | 0.50 (0.50–0.50) |" in text


def test_competitor_changes_scores_the_first_commit_after_the_change_and_a_leaving_noticed(tmp_path):
    import csv
    from lab.estimator import competitor_changes

    def run(name, rows, goodputs):
        d = tmp_path / "runs" / name
        d.mkdir(parents=True)
        with open(d / "trace.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "sid", "event", "reason"])
            w.writerow([1.0, 1, "start", "probe: slow start"])
            w.writerows([1.5, 1, "report", ""] for _ in range(5))
            w.writerows([1.0 + t, 1, "switch", why] for t, why in rows)
        with open(d / "series.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "goodput_mbps"])
            w.writerows((i + 1.0, g) for i, g in enumerate(goodputs))
        return name

    records = [
        {"algorithm": "replaced", "competitor": "cubic", "competitor_ccas": ["cubic", "reno"],
         "competitor_windows_s": [[0, 20], [20, 25]], "params": {"bottleneck_mbps": 4.0, "buffer_bdp": 5},
         "run": run("replaced_competitor-cubic_r0",
                    [(6.0, "probe -> cubic: identified cubic (95% posterior), mirror"),
                     (21.0, "cubic -> probe: re-identify: a new competitor"),
                     (26.0, "probe -> reno: identified reno (93% posterior), mirror")], [2.0] * 30)},
        {"algorithm": "late", "competitor": "bbr", "competitor_delay_s": 10,
         "params": {"bottleneck_mbps": 4.0, "buffer_bdp": 5},
         "run": run("late_competitor-bbr_r0", [(12.0, "probe -> cubic: identified cubic (91% posterior), mirror")],
                    [2.0, 2.0, 2.0, 0.0, 2.0] + [2.0] * 25)},
        {"algorithm": "leaves", "competitor": "reno", "competitor_windows_s": [[0, 20]],
         "params": {"bottleneck_mbps": 4.0, "buffer_bdp": 5},
         "run": run("leaves_competitor-reno_r0", [(7.0, "probe -> reno: identified reno (95% posterior), mirror"),
                                                   (22.5, "reno -> probe: re-identify: the competitor left")],
                    [2.0] * 22 + [4.0] * 8)},
    ]
    (tmp_path / "summary.json").write_text(json.dumps({"records": records}))
    got = {r["arm"]: r for r in competitor_changes.measure(str(tmp_path))["runs"]}
    assert got["replaced"]["first_after"] == "reno" and got["replaced"]["first_after_s"] == 6.0
    assert got["replaced"]["final"] == "reno" and got["replaced"]["zero_goodput_s"] == 0
    assert got["late"]["first_after"] == "cubic" and got["late"]["truth"] == "bbr"
    assert got["late"]["zero_goodput_s"] == 1
    assert got["leaves"]["noticed_s"] == 2.5 and got["leaves"]["link_use_after"] == 1.0
    text = competitor_changes.table(competitor_changes.measure(str(tmp_path)))
    assert "| replaced 20 s after its start | 1 | 1/1" in text and "late_competitor-bbr_r0: cubic for bbr" in text


@pytest.mark.parametrize("records,labels", [
    (["forest-ablation-probe-2026-12-07.json", "forest-ablation-forest-2026-12-07.json",
      "forest-ablation-shuffled-2026-12-08.json"],
     ["probe (stages alone)", "probe + forest", "probe + forest, labels shuffled (control)"]),
    (["identify_hard-seed4507-passive-2026-12-07.json", "forest-ablation-probe-2026-12-07.json",
      "forest-ablation-forest-2026-12-07.json"],
     ["passive (the default model, its vote)", "probe (stages alone)", "probe + forest"])])
def test_the_forest_ablation_tables_in_the_docs_are_the_ones_their_records_give(records, labels):
    import os
    from lab.estimator.forest_stage import ablation_table
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    got = ablation_table([os.path.join(root, "lab/records/estimator", r) for r in records], labels).splitlines()
    docs = open(os.path.join(root, "docs/estimator.md")).read()
    assert len(got) == 2 + 2 * len(records) - 1 and all(row in docs for row in got), [r for r in got if r not in docs]


def test_flow_one_is_the_agents_flow_with_the_most_packets_not_the_most_records(tmp_path):
    """Two flows of the agent's (iperf3's data and control connections), the control
    connection with more identify records (readers dropped some of the data flow's): flow 1
    is the one that carried the data."""
    import gzip
    import json as _json
    from lab.estimator.identify_replay import flow1_id
    from telemetry.schema import HopRecord, IdentifyRecord
    data, control, other = "00000000000000d1", "00000000000000c1", "00000000000000e1"
    lines = []
    for fid in (control, control, data):
        rec = IdentifyRecord(flow_id=fid, ts_ns=1, node_id=None, verdict=None, best="bbr", posterior=0.2, evidence=[])
        lines.append({"rx_s": 1.0, "topic": f"intcc/v1/estimate/{fid}", **rec.to_dict()})
    for k in range(5):
        rec = HopRecord(node_id=1, ts_ns=int((1 + k * 0.01) * 1e9), queue_depth_bytes=0, queue_depth_pkts=0,
                        queue_capacity_bytes=1500,
                        queue_drops=0, link_losses=0, data_rate_kbps=1000, arrival_rate_pps=100, flow_count=3,
                        queue_occupancy=0.0, interval_ms=10, top_flows=[[data, 9, 0, 6], [other, 12, 0, 6], [control, 1, 0, 6]])
        lines.append({"rx_s": 1.0 + k * 0.01, "topic": "intcc/v1/hop/1", **rec.to_dict()})
    with gzip.open(tmp_path / "telemetry.jsonl.gz", "wt") as f:
        f.write("\n".join(_json.dumps(x) for x in lines) + "\n")
    assert flow1_id(str(tmp_path)) == data
