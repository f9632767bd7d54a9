"""Dataset files, the split by experiment and the held-out tables, on synthetic runs."""
import json

import numpy as np
import pytest

from estimator.dataset import CCAS, Run, load_run, save_run
from estimator.evaluate import evaluate, format_tables, learning_curve, load_dataset, split, train
from estimator.features import FEATURES, TraceError
from experiments.runs.collection_plans import run_plan


def fake_dataset(tmp_path, runs=64, rows=30, seed=7):
    (tmp_path / "runs").mkdir(parents=True)
    for i in range(runs):
        plan = run_plan(i, seed=seed)
        rng = np.random.default_rng(i)
        centre = CCAS.index(plan["cca2"]) + np.arange(len(FEATURES)) * 0.1
        X = rng.normal(centre, 0.5, (rows, len(FEATURES)))
        save_run(str(tmp_path / "runs" / f"{plan['run']}.npz"), plan, X, np.arange(rows) * 0.5, {"acks": rows})
    return str(tmp_path)


def test_plans_are_reproducible_and_cover_all_pairs():
    plans = [run_plan(i, 3) for i in range(32)]
    assert plans == [run_plan(i, 3) for i in range(32)]
    assert len({(p["cca1"], p["cca2"]) for p in plans}) == 16
    for p in plans:
        assert 1 <= p["params"]["bottleneck_mbps"] <= 10 and 1 <= p["params"]["buffer_bdp"] <= 100


def test_the_hard_distribution_draws_what_the_paper_runs_never_had():
    """Buffers on a log scale, the competitor's RTT 0.5-4x flow 1's (made by extra delay on
    the longer path's access links), a later start, 1-3 flows, loss in half the runs."""
    plans = [run_plan(i, 28, "hard") for i in range(400)]
    assert plans[:20] == [run_plan(i, 28, "hard") for i in range(20)]
    assert plans[0] != run_plan(0, 28) and len({(p["cca1"], p["cca2"]) for p in plans}) == 16
    buffers = np.array([p["params"]["buffer_bdp"] for p in plans])
    assert buffers.min() >= 1 and buffers.max() <= 100 and 0.4 < np.mean(buffers < 10) < 0.6     # log scale
    for p in plans:
        prm = p["params"]
        rtt1 = 2 * (prm["bottleneck_delay_ms"] + 2 * (1 + prm["main_extra_delay_ms"]))
        rtt2 = 2 * (prm["bottleneck_delay_ms"] + 2 * (1 + prm["comp_extra_delay_ms"]))
        assert rtt2 / rtt1 == pytest.approx(p["rtt_factor"], rel=0.01)
        assert 0.5 <= p["rtt_factor"] <= 4 and 0 <= p["comp_start_s"] <= 10 and p["comp_flows"] in (1, 2, 3)
        assert 0 <= prm["loss_pct"] <= 1
    assert 0.4 < np.mean([p["params"]["loss_pct"] > 0 for p in plans]) < 0.6
    assert 0.25 < np.mean([p["rtt_factor"] < 1 for p in plans]) < 0.42     # log scale: ln 2 / ln 8 = 1/3
    assert {p["comp_flows"] for p in plans} == {1, 2, 3}


def test_udp_cross_traffic_is_drawn_beside_a_distributions_runs_without_changing_them():
    """--udp-cross adds a constant UDP rate of 5-30 % of the bottleneck's in about half the
    runs; every other parameter stays the seed's, so a collection with and one without
    it are the same networks."""
    plans = [run_plan(i, 2806, "hard", udp_cross=True) for i in range(400)]
    for i, p in enumerate(plans):
        assert {k: v for k, v in p.items() if k != "udp_mbps"} == run_plan(i, 2806, "hard")
        assert p["udp_mbps"] == 0 or 0.05 <= p["udp_mbps"] / p["params"]["bottleneck_mbps"] <= 0.30 + 1e-3
    assert 0.4 < np.mean([p["udp_mbps"] > 0 for p in plans]) < 0.6
    assert plans[5] == run_plan(5, 2806, "hard", udp_cross=True) and "udp_mbps" in run_plan(5, 30, "table2", True)


def test_a_collection_resumes_only_with_its_cross_traffic_setting(tmp_path):
    import json
    from experiments.runs.estimator_collect import CollectionError, collect
    fake_dataset(tmp_path, runs=2)
    (tmp_path / "collection.json").write_text(json.dumps({"seed": 7}))      # before --udp-cross: without
    with pytest.raises(CollectionError, match="collected without --udp-cross, not with --udp-cross"):
        collect(str(tmp_path), runs=2, seed=7, udp_cross=True)
    with pytest.raises(CollectionError, match="collected with --seed 7, not with --seed 8"):
        collect(str(tmp_path), runs=2, seed=8)


def test_the_table2_distribution_is_the_fairness_experiments_networks():
    """Table II's rate and delay, the buffer on a log scale; one competitor starting with
    flow 1 on the same path: no late start, no extra RTT, no loss."""
    plans = [run_plan(i, 30, "table2") for i in range(400)]
    assert plans[3] == run_plan(3, 30, "table2") and plans[3] != run_plan(3, 31, "table2")
    assert len({(p["cca1"], p["cca2"]) for p in plans}) == 16
    buffers = np.array([p["params"]["buffer_bdp"] for p in plans])
    assert buffers.min() >= 1 and buffers.max() <= 100 and 0.4 < np.mean(buffers < 10) < 0.6     # log scale
    for p in plans:
        assert set(p["params"]) == {"bottleneck_mbps", "bottleneck_delay_ms", "buffer_bdp"}
        assert 1 <= p["params"]["bottleneck_mbps"] <= 10 and 1 <= p["params"]["bottleneck_delay_ms"] <= 100
        assert "comp_start_s" not in p and "comp_flows" not in p
    with pytest.raises(ValueError, match="unknown distribution"):
        run_plan(0, 30, "uniform")


def test_the_live_distribution_is_table2s_networks_with_flow_1_on_ccp_and_late_competitors():
    """The networks are table2's (same seed, same draws); flow 1 runs its CCA through the CCP
    datapath on a port of its CCA; the competitor starts with it in about half the runs and
    0-10 s later in the others."""
    from experiments.runs.plan_flows import CCP_LOCAL_PORTS, flow1_port
    plans = [run_plan(i, 31, "table2-live") for i in range(400)]
    assert [p["params"] for p in plans] == [run_plan(i, 31, "table2")["params"] for i in range(400)]
    assert all(p["local_via"] == "ccp" for p in plans) and len({(p["cca1"], p["cca2"]) for p in plans}) == 16
    late = np.array([p["comp_start_s"] for p in plans])
    assert 0.4 < np.mean(late == 0) < 0.6 and late.max() <= 10 and late[late > 0].min() < 1
    assert {flow1_port(p) for p in plans} == set(CCP_LOCAL_PORTS.values())
    assert flow1_port(run_plan(0, 31, "table2")) == 5201


def test_collections_of_different_seeds_combine_and_one_seed_twice_is_refused(tmp_path):
    a, b = fake_dataset(tmp_path / "a", runs=16), fake_dataset(tmp_path / "b", runs=16, seed=8)
    runs = load_dataset([a, b])
    assert len(runs) == 32 and len({tuple(r.key) for r in runs}) == 32
    with pytest.raises(TraceError, match="seed 7, index 0.*twice"):
        load_dataset([a, fake_dataset(tmp_path / "c", runs=4)])
    # each run is its own experiment to the model (its counts, the grid search's folds)
    model = train(runs, {"n_estimators": [5], "max_depth": [3]}, shared=True)
    assert sum(m["experiments"] for m in model.training_.values()) == 32


def test_a_run_names_its_parts(tmp_path):
    fake_dataset(tmp_path, runs=6)
    run = load_run(str(tmp_path / "runs" / "run00005.npz"))
    plan = run_plan(5, seed=7)
    assert isinstance(run, Run) and run.X.shape == (30, len(FEATURES)) and len(run.t) == 30
    assert (run.local_cca, run.competitor_cca) == (plan["cca1"], plan["cca2"]) == run.pair
    assert run.key == [7, 5] and run.index == 5
    X, t, meta = run                                      # still unpacks as before
    assert meta["run"] == "run00005"


def test_split_never_shares_a_run_and_tables_come_out(tmp_path):
    runs = load_dataset(fake_dataset(tmp_path))
    tr, te = split(runs, seed=0)
    assert {r.meta["run"] for r in tr}.isdisjoint({r.meta["run"] for r in te})
    assert len(tr) + len(te) == 64
    model = train(tr, grid={"n_estimators": [20], "max_depth": [6]}, folds=2)
    res = evaluate(model, te)
    assert res["mean_accuracy"] > 0.7
    assert set(res["table4"]) == {"1", "10", "20", "30", "40", "50"}
    assert res["table4"]["10"]["mean"] >= res["table4"]["1"]["mean"] - 0.05
    assert "Table III" in format_tables(res)


def test_bad_data_is_named(tmp_path):
    with pytest.raises(TraceError, match="no collected runs"):
        load_dataset(str(tmp_path))
    plan = run_plan(0, 1)
    plan["cca2"] = "westwood"
    p = tmp_path / "x.npz"
    save_run(str(p), plan, np.zeros((3, len(FEATURES))), np.zeros(3), {})
    with pytest.raises(TraceError, match="unknown CCA label 'westwood'"):
        load_run(str(p))
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(TraceError, match="not a collected run"):
        load_run(str(junk))


def test_first_stable_correct_verdict():
    from estimator.vote import first_stable_correct
    t = np.arange(6) * 0.5 + 3.0
    assert first_stable_correct(t, np.array([0, 1, 0, 1, 1, 1], bool)) == 4.5
    assert first_stable_correct(t, np.ones(6, bool)) == 3.0
    assert first_stable_correct(t, np.array([1, 1, 1, 1, 1, 0], bool)) is None
    assert first_stable_correct(t[:0], np.zeros(0, bool)) is None


def test_learning_curve_trains_on_growing_shares_of_each_pair(tmp_path):
    tr, te = split(load_dataset(fake_dataset(tmp_path, runs=128)), seed=0)
    rows = learning_curve(tr, te, (0.5, 1.0), grid={"n_estimators": [10], "max_depth": [4]})
    assert [r["train_runs"] for r in rows] == [32, 64]       # 2 of 4 per pair, then all 4
    assert all(0 <= r["mean_accuracy"] <= 1 and r["vote50"] is not None for r in rows)


def test_held_out_runs_exclude_what_the_model_trained_on_after_the_dataset_grew(tmp_path):
    """A dataset that grew after training splits differently: evaluating on its new
    held-out half alone would score runs the model learnt (the model lists them)."""
    from estimator.evaluate import held_out
    from estimator.model import CCAEstimator
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    small = load_dataset(fake_dataset(tmp_path / "a", runs=64))
    tr, _ = split(small, seed=0)
    model = train(tr, grid={"n_estimators": [10], "max_depth": [4]}, folds=2)
    path = str(tmp_path / "m.joblib")
    model.save(path)
    model = CCAEstimator.load(path)
    assert len(model.training_runs_) == len(tr)
    grown = load_dataset(fake_dataset(tmp_path / "b", runs=96))   # same plans (seed 7) and 32 more
    naive = split(grown, seed=0)[1]
    trained = {r.meta["run"] for r in tr}
    assert any(r.meta["run"] in trained for r in naive)             # the pitfall is real
    kept, left_out = held_out(grown, model, seed=0)
    assert left_out > 0 and len(kept) == len(naive) - left_out
    assert not any(r.meta["run"] in trained for r in kept)


def test_a_collection_resumes_only_with_the_interpreter_its_nodes_ran_on(tmp_path):
    """The nodes' interpreter shapes the emulated links (timing, jitter): a dataset mixing
    two would train on two networks. Checked before anything starts (no root needed)."""
    import json
    from experiments.runs.estimator_collect import CollectionError, collect
    fake_dataset(tmp_path, runs=2)
    (tmp_path / "collection.json").write_text(json.dumps({"seed": 7, "node_python": "pypy"}))
    with pytest.raises(CollectionError, match="collected with node interpreter 'pypy'.*--node-python pypy"):
        collect(str(tmp_path), runs=2, seed=7, node_python="cpython")
    with pytest.raises(CollectionError, match="not an executable"):
        collect(str(tmp_path), runs=2, seed=7, node_python="/nonexistent/python")


def test_cross_validation_holds_every_run_out_once_and_spreads_each_pair(tmp_path):
    from estimator.evaluate import cross_validate, fold_of
    runs = load_dataset(fake_dataset(tmp_path, runs=80))        # 5 runs per CCA pair
    fold = fold_of(runs, 4, seed=1)
    for pair in {r.pair for r in runs}:
        counts = np.bincount([f for r, f in zip(runs, fold) if r.pair == pair], minlength=4)
        assert counts.max() - counts.min() <= 1
    assert np.bincount(fold).tolist() == [20, 20, 20, 20]       # the remainders spread over the folds too
    seen = []
    res = cross_validate(runs, 4, {"n_estimators": [10], "max_depth": [4]}, seed=1,
                         progress=lambda k, r: seen.append(r["test_runs"]))
    assert seen == [20, 40, 60, 80] and res["test_runs"] == 80 and res["train_runs_per_fold"] == 60
    assert res["mean_accuracy"] > 0.7 and res["table4"]["50"]["mean"] > 0.7
    with pytest.raises(ValueError, match="2 folds"):
        cross_validate(runs, 1)


def test_the_shuffled_label_control_comes_out_at_chance(tmp_path):
    """The same runs, the labels permuted across runs: a model can no longer tell (the
    fake features separate the true labels easily: > 0.7 above)."""
    from estimator.evaluate import cross_validate, shuffled_labels
    runs = load_dataset(fake_dataset(tmp_path, runs=80))
    control = shuffled_labels(runs, seed=1)
    assert sorted(r.competitor_cca for r in control) == sorted(r.competitor_cca for r in runs)
    assert any(a.competitor_cca != b.competitor_cca for a, b in zip(runs, control))
    res = cross_validate(control, 4, {"n_estimators": [10], "max_depth": [4]}, seed=1)
    assert 0.1 < res["mean_accuracy"] < 0.45, res["mean_accuracy"]


def test_a_model_keeps_its_split_and_eval_holds_out_the_same_runs(tmp_path):
    from estimator.evaluate import held_out
    from estimator.model import CCAEstimator
    runs = load_dataset(fake_dataset(tmp_path, runs=64))
    tr, te = split(runs, 0.25, seed=3)
    assert (len(tr), len(te)) == (48, 16)
    model = train(tr, grid={"n_estimators": [10], "max_depth": [4]})
    assert set(model.cv_accuracy_.values()) == {None}           # one candidate: no inner search
    model.split_ = {"seed": 3, "test_fraction": 0.25}
    model.save(str(tmp_path / "m.joblib"))
    kept, left_out = held_out(runs, CCAEstimator.load(str(tmp_path / "m.joblib")))
    assert left_out == 0 and {r.meta["run"] for r in kept} == {r.meta["run"] for r in te}


def test_cli_cross_validates_and_eval_follows_the_models_split(tmp_path):
    import json
    from click.testing import CliRunner
    from estimator.cli import estimator_group
    data = fake_dataset(tmp_path, runs=48)
    cli = CliRunner()
    res = cli.invoke(estimator_group, ["cv", "--data", data, "--folds", "3", "--features", "table1", "--trees", "10",
                                       "--depth", "4", "--json-out", str(tmp_path / "cv.json")])
    assert res.exit_code == 0, res.output
    assert "Table III" in res.output and json.load(open(tmp_path / "cv.json"))["test_runs"] == 48
    model = str(tmp_path / "m.joblib")
    res = cli.invoke(estimator_group, ["train", "--data", data, "--model", model, "--grid", "compact",
                                       "--test-fraction", "0.25", "--seed", "2"])
    assert res.exit_code == 0 and "trained on 32 runs (16 held out)" in res.output, res.output
    res = cli.invoke(estimator_group, ["eval", "--data", data, "--model", model, "--json-out", str(tmp_path / "e.json"),
                                       "--by", "udp", "--by", "buffer"])
    assert res.exit_code == 0 and json.load(open(tmp_path / "e.json"))["test_runs"] == 16, res.output
    # paper-distribution runs have a buffer but no cross-traffic setting: said, not guessed
    assert "By udp" in res.output and "not recorded" in res.output and "BDP" in res.output, res.output
    assert len(json.load(open(tmp_path / "e.json"))["runs"]) == 16
    # --all: every run it was not trained on (here the same 16: the others trained it)
    res = cli.invoke(estimator_group, ["eval", "--data", data, "--model", model, "--all", "--json-out",
                                       str(tmp_path / "a.json")])
    assert res.exit_code == 0 and json.load(open(tmp_path / "a.json"))["test_runs"] == 16, res.output
    res = cli.invoke(estimator_group, ["cv", "--data", data, "--folds", "3", "--features", "table1", "--trees", "10",
                                       "--depth", "4", "--shuffle-labels"])
    assert res.exit_code == 0 and "labels SHUFFLED" in res.output, res.output


def test_a_run_cut_short_while_saving_is_not_read_as_a_run(tmp_path):
    data = fake_dataset(tmp_path, runs=16)
    (tmp_path / "runs" / "run00016.npz.part").write_bytes(b"PK\x03\x04 cut")       # this collector's
    (tmp_path / "runs" / "run00017.npz.tmp.npz").write_bytes(b"PK\x03\x04 cut")    # older collectors'
    assert len(load_dataset(data)) == 16


def test_each_run_is_scored_and_the_runs_break_down_by_their_networks_conditions(tmp_path):
    from estimator.cli import BY_CONDITIONS
    from estimator.evaluate import CONDITIONS, by_condition, tables
    assert BY_CONDITIONS == tuple(CONDITIONS)      # the CLI's list is kept apart so --help needs no numpy
    base = {"cca1": "bbr", "cca2": "reno", "index": 0, "seed": 5, "rtt_factor": 2.5, "comp_start_s": 0.5,
            "comp_flows": 2, "params": {"buffer_bdp": 4.0, "loss_pct": 0.0}, "goodput_mbps": [3.0, 0.5, 0.5]}
    reno, cubic = np.array(["reno"] * 60), np.array(["cubic"] * 60)
    preds = [({**base, "index": 0, "udp_mbps": 0.0}, np.arange(60) * 0.5, reno),
             ({**base, "index": 1, "udp_mbps": 1.5}, np.arange(60) * 0.5, np.concatenate([reno[:15], cubic[:45]])),
             ({**base, "index": 2, "udp_mbps": 0.7}, np.arange(60) * 0.5, reno)]
    res = tables(preds)
    assert [r["rows_right"] for r in res["runs"]] == [1.0, 0.25, 1.0]
    assert [r["verdict_w50"] for r in res["runs"]] == [True, False, True]
    assert res["runs"][0]["stable_correct_s_w50"] is not None and res["runs"][1]["stable_correct_s_w50"] is None
    r = res["runs"][0]
    assert (r["rtt"], r["buffer"], r["start"], r["flows"], r["loss"], r["share"]) == \
        (">= 2x flow 1's RTT", "3-10 BDP", "0-2 s late", "2 competing", "no random loss", "0.15-0.3 of goodput")
    assert by_condition(res, "udp") == [
        {"value": "no UDP", "runs": 1, "rows_right": 1.0, "verdict_w50": 1.0},
        {"value": "with UDP", "runs": 2, "rows_right": 0.625, "verdict_w50": 0.5}]
    res["runs"] += [{**res["runs"][0], "buffer": b} for b in (">= 30 BDP", "10-30 BDP", "0-3 BDP", None)]
    assert [g["value"] for g in by_condition(res, "buffer")] == ["0-3 BDP", "3-10 BDP", "10-30 BDP", ">= 30 BDP", None]
    assert CONDITIONS["udp"]({"cca1": "bbr"}) is None and CONDITIONS["share"]({"goodput_mbps": [0, 0]}) is None
    json.dumps(res)        # every value a JSON one (no numpy bools)
