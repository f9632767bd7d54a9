"""fairness_switching --quick end to end (root, namespaces, the CCP datapath): randomised
dumbbells, the adaptive agent beside kernel and CCP (vegas) competitors, the records and
plots the ML-fairness paper's figures are made from."""
import json
import os

from click.testing import CliRunner

from experiments.cli import exp_group
from experiments.testbed.teardown import list_testbeds


def test_the_quick_fairness_scenario_gives_d_harm_and_plots(tmp_path):
    out = tmp_path / "fs"
    # one mode of each kind (the adaptive agent's: mirror int w1 and w10 differ from w50 by an
    # option only, its late arrival the scenario's; "oracle" and "not used" run kernel flows,
    # as every kernel competitor here does, and pick flow 1's CCA as "oracle ccp" and the
    # scenario's unit tests do)
    modes = ("oracle ccp", "mirror int w50 late")
    # 12 s runs (the quick setting's 20 s trimmed for the suite's time): the late competitor still runs 2 s
    res = CliRunner().invoke(exp_group, ["run", "fairness_switching", "--quick", "--seed", "11", "--seconds", "12",
                                         "--out", str(out)]
                             + [a for m in modes for a in ("--algorithm", m)])
    assert res.exit_code == 0, res.output
    records = json.loads((out / "summary.json").read_text())["records"]
    assert {(r["algorithm"], r["competitor"]) for r in records} == {(m, c) for m in modes for c in ("bbr", "vegas")}
    for r in records:
        assert -1 <= r["goodput_difference"] <= 1 and r["abs_goodput_difference"] == abs(r["goodput_difference"])
        assert r["goodput_mbps"] > 0 and r["competitor_goodput_mbps"] > 0, r["run"]      # both flows ran
        assert 0 < r["jain_mean"] <= 1
        # the emulation's own fidelity: link time the shapers lost to late wake-ups, delays' lateness
        assert r["emulation_behind_ms"] >= 0 and r["delay_late_us_mean"] >= 0 and "emulation_off" in r
        assert 1 <= r["params"]["bottleneck_mbps"] <= 10 and 1 <= r["params"]["buffer_bdp"] <= 100
    networks = {c: {json.dumps(r["params"]) for r in records if r["competitor"] == c} for c in ("bbr", "vegas")}
    assert all(len(n) == 1 for n in networks.values())                 # one repeat: one network per competitor,
    assert networks["bbr"] != networks["vegas"]                        # each its own (draw_per_sweep_value)
    by = {(r["algorithm"], r["competitor"]): r for r in records}
    assert by[("oracle ccp", "bbr")]["flow1"] == "bbr" and by[("oracle ccp", "vegas")]["flow1"] == "vegas"
    for c in ("bbr", "vegas"):
        late = by[("mirror int w50 late", c)]
        assert late["flow1"] == "adaptive" and "switches" in late and "goodput_mbps_with_competitors" in late
    assert "harm" in res.output and "mean |D|" in res.output
    for png in ("d_box.png", "abs_d.png"):
        assert (out / png).stat().st_size > 5000
    assert (out / "runs" / "mirror-int-w50-late_competitor-vegas_r0" / "timeline.png").exists()
    assert not [p for p in os.listdir(out / "runs") if p.endswith(".agent-trace.csv")]   # every row claimed
    assert "exp" not in list_testbeds()
