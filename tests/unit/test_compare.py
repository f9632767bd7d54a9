import json

import pytest
from click.testing import CliRunner

from experiments.cli import exp_group
from experiments.reports.compare import CompareError, compare, format_rows, load_records, ratio_ci


def rec(alg, goodput, loss=20, rep=0):
    return {"algorithm": alg, "loss_pct": loss, "repeat": rep, "goodput_mbps": goodput}


def test_ratio_ci_brackets_the_ratio_and_narrows_with_more_runs():
    rng = __import__("numpy").random.default_rng(1)
    few_a, few_b = rng.normal(2.0, 0.5, 4), rng.normal(1.0, 0.25, 4)
    many_a, many_b = rng.normal(2.0, 0.5, 64), rng.normal(1.0, 0.25, 64)
    r, lo, hi = ratio_ci(few_a, few_b)
    assert lo <= r <= hi
    r2, lo2, hi2 = ratio_ci(many_a, many_b)
    assert lo2 <= r2 <= hi2 and lo2 < 2.0 < hi2
    assert hi2 - lo2 < hi - lo


def test_identical_runs_give_a_point_interval_and_the_seed_repeats():
    assert ratio_ci([3, 3, 3], [1.5, 1.5]) == (2.0, 2.0, 2.0)
    assert ratio_ci([1, 2, 5], [1, 3]) == ratio_ci([1, 2, 5], [1, 3])


def test_compare_pools_directories_and_groups_by_the_sweep_key(tmp_path):
    for i, d in enumerate(("a", "b")):
        (tmp_path / d).mkdir()
        (tmp_path / d / "summary.json").write_text(json.dumps(
            [rec("kernel cubic", 1.0 + i, loss) for loss in (0, 20)] + [rec("L1", 4.0, loss) for loss in (0, 20)]))
    rows = compare(load_records([str(tmp_path / "a"), str(tmp_path / "b")]), "kernel cubic")
    l1_20 = next(r for r in rows if r["algorithm"] == "L1" and r["loss_pct"] == 20)
    assert l1_20["runs"] == 2 and l1_20["ratio"] == pytest.approx(4.0 / 1.5)
    assert l1_20["ci_low"] <= l1_20["ratio"] <= l1_20["ci_high"]
    assert {r["loss_pct"] for r in rows} == {0, 20}


def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(CompareError, match="no such file"):
        load_records([str(tmp_path)])
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(CompareError, match="not JSON"):
        load_records([str(tmp_path)])
    (tmp_path / "summary.json").write_text(json.dumps({"algorithm": "x"}))
    with pytest.raises(CompareError, match="summary format None"):
        load_records([str(tmp_path)])
    (tmp_path / "summary.json").write_text(json.dumps({"format": 2, "records": [{"goodput_mbps": 1}]}))
    with pytest.raises(CompareError, match="list of run records"):
        load_records([str(tmp_path)])


def test_both_summary_formats_are_read(tmp_path):
    from experiments.runs.run_record import write_summary
    write_summary(str(tmp_path), "lossy_link", [rec("kernel cubic", 0.1)])
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["format"] == 2 and doc["scenario"] == "lossy_link"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "summary.json").write_text(json.dumps([rec("kernel cubic", 0.2)]))   # format 1
    assert [r["goodput_mbps"] for r in load_records([str(tmp_path), str(tmp_path / "old")])] == [0.1, 0.2]
    with pytest.raises(CompareError, match="baseline 'bbr' is not among"):
        compare([rec("cubic", 1.0)], "bbr")


def test_cli_prints_the_table_and_writes_json(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps([rec("kernel cubic", 0.1), rec("kernel cubic", 0.2),
                                                      rec("L2", 3.0), rec("L2", 3.3)]))
    out = tmp_path / "rows.json"
    res = CliRunner().invoke(exp_group, ["compare", str(tmp_path), "--json-out", str(out)])
    assert res.exit_code == 0, res.output
    assert "L2" in res.output and "21.00" in res.output
    assert json.loads(out.read_text())[1]["ratio"] == pytest.approx(21.0)
    res = CliRunner().invoke(exp_group, ["compare", str(tmp_path), "--baseline", "nope"])
    assert res.exit_code != 0 and "not among" in res.output


def test_runs_that_met_the_same_losses_are_compared_in_pairs():
    # what a pair shares (here a 10x spread between repeats) cancels in a paired interval
    base = [rec("kernel cubic", g) | {"loss_seed": s} for s, g in enumerate((0.1, 1.0, 0.3, 3.0))]
    ccp = [rec("ccp cubic", g * 1.05) | {"loss_seed": s} for s, g in enumerate((0.1, 1.0, 0.3, 3.0))]
    row = next(r for r in compare(base + ccp, "kernel cubic") if r["algorithm"] == "ccp cubic")
    assert row["paired"] and row["ratio"] == pytest.approx(1.05)
    assert row["ci_high"] - row["ci_low"] < 1e-9
    unpaired = ratio_ci([r["goodput_mbps"] for r in ccp], [r["goodput_mbps"] for r in base])
    assert unpaired[2] - unpaired[1] > 1.0
    other_seeds = [r | {"loss_seed": 10 + r["loss_seed"]} for r in ccp]
    assert not next(r for r in compare(base + other_seeds, "kernel cubic") if r["algorithm"] == "ccp cubic")["paired"]


def test_a_failed_run_leaves_its_partner_out_of_the_pairs():
    base = [rec("kernel cubic", g) | {"loss_seed": s} for s, g in enumerate((0.1, 1.0, 0.3, 3.0))]
    ccp = [rec("ccp cubic", g * 1.05) | {"loss_seed": s} for s, g in enumerate((0.1, 1.0, 0.3, 3.0))]
    row = next(r for r in compare(base + ccp[:3], "kernel cubic") if r["algorithm"] == "ccp cubic")
    assert row["paired"] and row["pairs"] == 3 and row["ratio"] == pytest.approx(1.05)
    assert "(3 pairs)" in format_rows([row], "kernel cubic", "loss_pct", "goodput_mbps")


def test_reruns_replace_the_runs_they_ran_again_and_pooling_alone_keeps_both(tmp_path):
    from experiments.reports.compare import with_reruns
    net = {"seed": 7, "params": {"bottleneck_mbps": 5.0}}
    first = [rec("L2", 1.0) | net | {"run": "L2_r0"}, rec("L2", 2.0) | net | {"run": "L2_r1"}]
    again = [rec("L2", 3.0) | net | {"run": "L2_r0"},                                   # the re-run
             rec("L2", 4.0) | {"seed": 8, "params": {"bottleneck_mbps": 5.0}, "run": "L2_r0"},   # another seed
             rec("L2", 5.0) | {"seed": 7, "params": {"bottleneck_mbps": 6.0}, "run": "L2_r0"}]   # another network
    kept, replaced = with_reruns(first, again)
    assert replaced == 1 and [r["goodput_mbps"] for r in kept] == [2.0, 3.0, 4.0, 5.0]
    for i, part in enumerate((first, again)):
        (tmp_path / str(i)).mkdir()
        (tmp_path / str(i) / "summary.json").write_text(json.dumps(part))
    args = ["compare", str(tmp_path / "0"), "--key", "", "--baseline", "L2"]
    res = CliRunner().invoke(exp_group, args + ["--rerun", str(tmp_path / "1")])
    assert res.exit_code == 0 and "--rerun: 1 runs of RESULTS replaced" in res.output, res.output
    assert "   4 " in res.output                                   # 2 - 1 + 3 runs of L2
    res = CliRunner().invoke(exp_group, args + [str(tmp_path / "1")])   # both as RESULTS: pooled, 5 runs
    assert res.exit_code == 0 and "replaced" not in res.output and "   5 " in res.output, res.output
