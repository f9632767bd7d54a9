"""One run of the hard distribution collected as `intcc estimator collect --distribution
hard --udp-cross` collects it, through the scenario runner: two competing flows that start
3 s after flow 1 and UDP cross traffic from flow 1's start, each seen at the bottleneck,
kept as a dataset run beside the runner's own record; a second invocation finds it on disk."""
import dataclasses
import json

import numpy as np

from estimator.dataset import load_run, run_paths
from experiments.runs import scenario as scenarios
from experiments.runs.collection_plans import Collection, run_plan
from experiments.runs.runner import run_scenario

BIN_S = 0.01


@dataclasses.dataclass(frozen=True)
class OnePlan(Collection):
    """The hard distribution's run 3 of seed 29, its flows and network set for the test."""

    def plan(self, seed, repeat):
        plan = run_plan(3, 29, "hard", udp_cross=True)
        plan.update(cca1="cubic", cca2="reno", comp_start_s=3.0, comp_flows=2, udp_mbps=1.0)
        plan["params"].update(bottleneck_mbps=5.0, bottleneck_delay_ms=10.0, buffer_bdp=3.0, loss_pct=0.0)
        return plan


def test_a_hard_run_has_late_competing_flows_and_cross_traffic_seen_at_the_bottleneck(tmp_path):
    sc = scenarios.load("estimator_collect")
    sc.collection = OnePlan("hard", udp_cross=True, samples=20)
    sc.repeats, sc.seconds, sc.seed, sc.node_rt_priority = 1, 8.0, 29, 10
    records = run_scenario(sc, str(tmp_path), echo=print)
    assert [r["run"] for r in records] == ["run00003"] and records[0]["plan"]["comp_flows"] == 2
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["records"][0]["plan"] == records[0]["plan"]
    paths = run_paths(str(tmp_path))
    assert [p.rsplit("/", 1)[1] for p in paths] == ["run00003.npz"]
    run = load_run(paths[0])
    extra = run.meta
    with np.load(paths[0]) as z:
        raw = {k[4:]: z[k] for k in z.files if k.startswith("raw_")}
    X = run.X
    assert extra["node_rt_priority"] == 10 and extra["emulation_behind_ms"] >= extra["emulation_behind_ms_link_max"] >= 0
    assert "emulation_off" in extra and extra["seconds"] == 8.0
    assert len(extra["goodput_mbps"]) == 3 and min(extra["goodput_mbps"]) > 0.1
    assert 0.8 < extra["udp_received_mbps"] <= 1.05, extra["udp_received_mbps"]
    counts = raw["comp_packets_10ms"]
    assert counts.shape[0] == 3, "each competing flow is counted on its own, the UDP one (port above theirs) last"
    udp_pps = counts[2, 100:700].sum() / 6.0           # 1-7 s: 1 Mbit/s of 1,400-byte payloads
    assert 75 < udp_pps < 95, udp_pps
    for flow in counts[:2]:
        first_s = np.flatnonzero(flow)[0] * BIN_S
        assert 2.5 <= first_s <= 4.5, f"a competitor began at {first_s:.2f} s, not ~3 s after flow 1"
    assert X.shape[0] > 0 and np.isfinite(X).all()
    # the hop a live sender takes for the bottleneck (fullest so far) is the whole run's
    assert extra["bottleneck_causal_share"] >= 0.99, extra["bottleneck_causal_share"]
    # two reno flows into a 3-BDP buffer lose packets at the queue: each its own
    lost = raw["comp_lost_10ms"]
    assert lost.shape == counts.shape and (lost.sum(axis=1)[:2] > 0).all(), lost.sum(axis=1)
    # what a live sender receives, from the sink's own replay of its log: flow 1's records
    # about every 10 ms, and its two TCP competitors from the hop records (UDP left out)
    rec = raw["int_record_series"]
    assert rec.shape[1] == 7 and 0.005 < np.median(np.diff(rec[:, 0])) < 0.02, np.median(np.diff(rec[:, 0]))
    assert 0.9 < rec[:, 6].sum() / (extra["goodput_mbps"][0] * 1e6 / 8 / 1448 * 8.0) < 1.2     # every packet counted once
    per_flow = np.sort(raw["comp_packets"].sum(axis=1))[::-1]      # + iperf3's control connections
    assert raw["comp_packets"].shape[1] == len(raw["comp_t_end"]) and (per_flow[2:] < 100).all(), per_flow
    assert per_flow[:2].sum() > 0.8 * counts[:2].sum(), (per_flow, counts[:2].sum(axis=1))
    # the capture is not left behind; a run on disk is not run again
    assert not list(tmp_path.glob("runs/*/*.pcap"))
    assert run_scenario(sc, str(tmp_path), echo=print) == []
