"""The TCP-variant classifier (estimator/reconfig/variant.py): kernel traces on a grid, windows
with traffic, features of a window's shape, and an evaluation whose shuffled control fails.
The traces here are synthetic sawtooths (a fast stand-in; the shipped model is trained on the
testbed's kernel traces)."""
import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from estimator.reconfig import variant


def test_the_grid_holds_each_acks_values_until_the_next_and_counts_the_acks():
    t = [0.000, 0.004, 0.012, 0.013, 0.041]
    cwnd, srtt, _ = variant.resample(t, [10, 11, 12, 13, 20], [100, 110, 120, 130, 200], step_ms=10)
    assert cwnd.tolist() == [11, 13, 13, 13]          # steps ending at 10, 20, 30, 40 ms
    assert srtt.tolist() == [110, 130, 130, 130]
    _, _, acks = variant.resample(t, [1] * 5, [1] * 5, step_ms=10)
    assert acks.tolist() == [2, 2, 0, 0]
    with pytest.raises(variant.VariantDataError, match="at least 2 ACKs"):
        variant.resample([0.0], [1], [1])
    with pytest.raises(variant.VariantDataError, match="must not decrease"):
        variant.resample([0.0, 0.2, 0.1], [1, 1, 1], [1, 1, 1])


def _sawtooth(cca: str, seconds: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """cwnd and srtt (us) per 10 ms step: Reno's line and halving, CUBIC's curve and 0.7 cut,
    BBR's flat window with an RTT that pulses."""
    n = int(seconds * 100)
    cwnd, srtt = np.zeros(n), np.zeros(n)
    w, since, w_max = 10.0, 0, 40.0
    for i in range(n):
        if cca == "reno":
            w += 0.35 * rng.uniform(0.8, 1.2)
            if w > 40 * rng.uniform(0.9, 1.1):
                w /= 2
        elif cca == "cubic":
            since += 1
            k = (w_max * 0.3 / 0.4) ** (1 / 3)
            w = 0.4 * (since / 10 - k) ** 3 + w_max
            if w > w_max * rng.uniform(1.05, 1.2):
                w_max, w, since = w, w * 0.7, 0
        else:
            w = 25 * rng.uniform(0.97, 1.03)
        cwnd[i] = round(w)
        base = 6000 + (2500 if cca == "bbr" and i % 8 == 0 else 0)
        srtt[i] = base + (0 if cca == "bbr" else 450 * w) + rng.normal(0, 150)
    return cwnd, srtt


def _dataset(runs_per_cca: int, seed: int, seconds: float = 5.0) -> variant.Dataset:
    rng = np.random.default_rng(seed)
    flows = []
    for cca in variant.CCAS:
        for k in range(runs_per_cca):
            c, s = _sawtooth(cca, seconds, rng)
            flows.append(variant.FlowTrace(cca, "migrated", f"{50 * (k % 4 + 1)}ms", f"{seed}/{cca}-{k}", c, s,
                                           np.full(len(c), 8)))
    return variant.Dataset(flows, [f"synthetic seed {seed}"])


def test_windows_without_traffic_are_left_out_and_counted():
    f = variant.FlowTrace("reno", "main", "none", "r", np.arange(150), np.full(150, 6000), np.zeros(150, int))
    f.acks[:50] = 1          # the first window: 50 ACKs; the second: none; the third: 4, under MIN_ACKS
    f.acks[100:104] = 1
    w = variant.windows(variant.Dataset([f, f]))
    assert len(w.X) == 2 and w.quiet == 4
    assert w.X.shape == (2, 50, 2) and w.X[0, :, 0].tolist() == list(range(50))
    with pytest.raises(variant.VariantDataError, match="no window with traffic"):
        variant.windows(variant.Dataset([variant.FlowTrace("reno", "main", "none", "r", np.ones(60), np.ones(60),
                                                            np.zeros(60, int))]))


def test_the_features_see_a_cut_and_its_depth():
    flat = np.stack([np.full(50, 20.0), np.full(50, 6000.0)], axis=1)
    halved = flat.copy()
    halved[25:, 0] = 10
    f = variant.window_features(np.stack([flat, halved]))
    assert f.shape == (2, len(variant.FEATURES)) and np.isfinite(f).all()
    col = dict(zip(variant.FEATURES, f.T))
    assert col["cwnd_cuts"].tolist() == [0, 1]
    assert col["cwnd_drawdown"].tolist() == [1.0, 0.5]
    assert col["cwnd_cut_ratio_min"].tolist() == [1.0, 0.5]
    assert col["cut_depth_min"].tolist() == [1.0, 0.5]
    spread = flat.copy()                           # CUBIC's 0.7, spread over an RTT (6 ms: two steps)
    spread[20:, 0], spread[21:, 0] = 17, 14
    reno = np.stack([np.full(50, 20.0), np.full(50, 20_000.0)], axis=1)     # RTT 20 ms: a segment per 2 steps
    reno[:, 0] = 20 + np.arange(50) // 2
    col = dict(zip(variant.FEATURES, variant.window_features(np.stack([spread, reno])).T))
    assert col["cut_depth_median"][0] == pytest.approx(0.7) and col["cut_depth_median"][1] == 1.0
    assert col["ca_growth_per_rtt"][1] == pytest.approx(1.0, abs=0.05)


def test_held_out_runs_are_told_apart_where_the_shapes_differ_and_not_when_labels_are_shuffled():
    ev = variant.evaluate(_dataset(8, seed=1), folds=4, n_estimators=40)
    assert ev["by_run"]["accuracy"] > 0.85 and ev["by_run"]["flow_accuracy"] > 0.9
    assert ev["by_run_shuffled"]["accuracy"] < 0.6          # chance is a third
    assert sum(map(sum, ev["by_run"]["confusion"])) == ev["by_run"]["windows"]
    other = variant.held_out(_dataset(8, seed=1), _dataset(3, seed=2), n_estimators=40)
    assert other["accuracy"] > 0.85 and other["runs"] == 9


def test_the_confusion_matrix_stands_beside_the_papers_table_iii():
    text = variant.format_confusion({"confusion": [[10, 0, 0], [0, 8, 2], [0, 1, 9]]})
    lines = text.splitlines()
    assert lines[0].startswith("| actual | → cubic | → bbr | → reno | accuracy | paper: → cubic | → bbr |")
    assert lines[2].startswith("| cubic | 8 | 0 | 2 | 0.800 | 100 | 0 | 17 | 4 | 0.826 |")
    assert lines[3].startswith("| bbr | 0 | 10 | 0 | 1.000 | 0 | 107 | 0 | 0 | 1.000 |")
    assert lines[5].startswith("| westwood | – | – | – | – |")


def _results_dir(tmp_path, rng):
    """A results directory as 'intcc exp run --kernel-trace' writes it: one CUBIC pair's run."""
    run = tmp_path / "runs" / "cubic-pair_reconfig-100ms_r0"
    run.mkdir(parents=True)
    with open(run / "kernel_trace.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["t_s", "event", "sport", "dport", "cwnd_pkts", "ssthresh_pkts", "srtt_us",
                               "snd_una", "snd_nxt", "ca_state"])
        w.writeheader()
        for dport, sport in ((5202, 40002), (5201, 40001), (5201, 39999), (5203, 40003)):
            n = {39999: 3, 40003: 1}.get(sport, 400)     # 39999: iperf3's control connection; 40003: one ACK
            c, s = _sawtooth("cubic", n / 100, rng)
            for i in range(n):
                w.writerow({"t_s": f"{100 + i / 100:.6f}", "event": "tcp_probe", "sport": sport, "dport": dport,
                            "cwnd_pkts": int(c[i]), "ssthresh_pkts": 20, "srtt_us": int(s[i])})
            w.writerow({"t_s": "105.0", "event": "tcp_retransmit_skb", "sport": sport, "dport": dport})
    with open(tmp_path / "summary.json", "w") as f:
        json.dump({"provenance": {"date": "2026-12-05", "commit": "abc", "command": "test"}, "records": [
            {"run": run.name, "flow1": "cubic", "competitor": "cubic", "competitors": 1, "reconfig": "100ms", "seed": 9},
            {"run": "missing", "flow1": "vegas", "competitor": "cubic", "competitors": 1, "reconfig": "none"}]}, f)
    return tmp_path


def test_a_results_directory_gives_both_flows_of_each_traced_run_and_survives_a_round_trip(tmp_path):
    d = variant.from_results(str(_results_dir(tmp_path / "res", np.random.default_rng(3))))
    assert [(f.cca, f.role, f.setting, f.run) for f in d.flows] == [
        ("cubic", "migrated", "100ms", "9/cubic-pair_reconfig-100ms_r0"),
        ("cubic", "main", "100ms", "9/cubic-pair_reconfig-100ms_r0")]
    assert len(d.flows[0].cwnd_pkts) == 399 and "2026-12-05, abc, test" in d.sources[0]
    variant.save_dataset(d, str(tmp_path / "d.npz"))
    back = variant.load_dataset(str(tmp_path / "d.npz"))
    assert [f.run for f in back.flows] == [f.run for f in d.flows]
    assert all(np.array_equal(a.cwnd_pkts, b.cwnd_pkts) and np.array_equal(a.acks, b.acks)
               for a, b in zip(back.flows, d.flows))
    (tmp_path / "bad.npz").write_text("not numpy")
    with pytest.raises(variant.VariantDataError, match="not a variant dataset"):
        variant.load_dataset(str(tmp_path / "bad.npz"))


def test_the_cli_builds_a_dataset_fits_and_names_each_flows_cca(tmp_path):
    from intcc.cli import main
    res = _results_dir(tmp_path / "res", np.random.default_rng(4))
    data = tmp_path / "syn.npz"
    variant.save_dataset(_dataset(6, seed=5), str(data))
    runner = CliRunner()
    model = tmp_path / "m.joblib"
    r = runner.invoke(main, ["estimator", "reconfig-variant", "fit", str(data), "--model", str(model), "--trees", "30"])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "m.joblib.json").read_text())["window_s"] == 0.5
    r = runner.invoke(main, ["estimator", "reconfig-variant", "predict", str(res / "runs" / "cubic-pair_reconfig-100ms_r0"
                                                                              / "kernel_trace.csv"), "--model", str(model)])
    assert r.exit_code == 0, r.output
    assert "port 5201: cubic" in r.output and "port 5202: cubic" in r.output
    assert "port 5203: no window with traffic" in r.output
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "summary.json").write_text(json.dumps({"records": [{"run": "x", "flow1": "cubic", "competitor": "cubic"}]}))
    r = runner.invoke(main, ["estimator", "reconfig-variant", "dataset", str(empty), "--out", str(tmp_path / "e.npz")])
    assert r.exit_code != 0 and "--kernel-trace" in r.output
