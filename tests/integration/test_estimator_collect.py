"""One run of the hard distribution, collected as `intcc estimator collect --distribution
hard` does: two competing flows that start 3 s after flow 1, each seen at the bottleneck."""
import numpy as np

from experiments.estimator_collect import one_run, run_plan

BIN_S = 0.01


def test_a_hard_run_has_late_competing_flows_seen_at_the_bottleneck(tmp_path):
    plan = run_plan(3, 29, "hard")
    plan.update(cca1="cubic", cca2="reno", comp_start_s=3.0, comp_flows=2)
    plan["params"].update(bottleneck_mbps=5.0, bottleneck_delay_ms=10.0, buffer_bdp=3.0, loss_pct=0.0)
    X, t, extra, raw = one_run(plan, seconds=8.0, samples=20, warmup_frac=0.1, workdir=str(tmp_path),
                               tb_name="estt", node_rt_priority=10)
    assert extra["node_rt_priority"] == 10 and extra["emulation_behind_ms"] >= extra["emulation_behind_ms_link_max"] >= 0
    assert "emulation_off" in extra and extra["seconds"] == 8.0
    assert len(extra["goodput_mbps"]) == 3 and min(extra["goodput_mbps"]) > 0.1
    counts = raw["comp_packets_10ms"]
    assert counts.shape[0] == 2, "each competing flow is counted on its own"
    for flow in counts:
        first_s = np.flatnonzero(flow)[0] * BIN_S
        assert 2.5 <= first_s <= 4.5, f"a competitor began at {first_s:.2f} s, not ~3 s after flow 1"
    assert X.shape[0] > 0 and np.isfinite(X).all()
    # two reno flows into a 3-BDP buffer lose packets at the queue: each its own
    lost = raw["comp_lost_10ms"]
    assert lost.shape == counts.shape and (lost.sum(axis=1) > 0).all(), lost.sum(axis=1)
