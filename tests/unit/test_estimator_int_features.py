"""INT features of the second estimator model: per-packet series from the sink's log,
window statistics checked against a plain loop, and datasets with and without them."""
import json
import os

from types import SimpleNamespace

import numpy as np
import pytest

from estimator.dataset import load_raw, save_run
from experiments.runs.collection_plans import run_plan
from estimator.evaluate import load_dataset, run_int_features
from estimator.features import FEATURES, TraceError
from estimator.int_features import (COMP_DYNAMICS_FEATURES, FEATURE_SETS, INT_FEATURES, INT_SERIES_COLUMNS, LONG_WINDOW_S, MTU_BYTES, RUN_FEATURES,
                                    feature_set_of, int_features)
from estimator.int_series import causal_pick_share, hop_series_from_jsonl, int_series_from_jsonl


def series(n=2000, seed=0, duration_s=20.0):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(100.0, 100.0 + duration_s, n))
    cap = 150_000.0
    depth = rng.uniform(0, cap, n)
    arrival = rng.uniform(50, 900, n)
    drops = np.cumsum(rng.integers(0, 3, n)) + (2 ** 32 - 500)      # wraps past 2^32
    return np.column_stack((t, depth, np.full(n, cap), arrival, np.full(n, 2), np.mod(drops, 2 ** 32)))


def plain(s, at, base_rtt):
    """One time at a time, straight from the definitions in int_features.py."""
    t, occ = s[:, 0], np.clip(s[:, 1] / s[:, 2], 0, 1)
    unwrapped = np.concatenate(([0.0], np.cumsum(np.mod(np.diff(s[:, 5]), 2 ** 32))))
    hi = np.searchsorted(t, at, side="right") - 1
    row = [occ[hi]]
    for w in (max(8 * base_rtt, 0.2), LONG_WINDOW_S):
        sel = np.arange(len(t))[(t > at - w) & (t <= at)]
        lo = sel[0]
        arrivals = s[sel, 3].mean() * max(t[hi] - t[lo], 1e-3)
        row += [occ[sel].mean(), occ[sel].std(), occ[sel].min(), occ[sel].max(),
                min(len(sel) / max(arrivals, 1), 2.0), (unwrapped[hi] - unwrapped[lo]) / max(arrivals, 1)]
    qd = s[:, 1] / (np.maximum(s[:, 3], 1) * MTU_BYTES)
    row += [qd[hi] / base_rtt, qd[sel].mean() / base_rtt]
    return np.array(row)


def test_window_statistics_match_a_plain_loop():
    s = series()
    at = np.linspace(100.5, 119.9, 40)
    F = int_features(s, at, 0.05)
    assert F.shape == (40, len(INT_FEATURES))
    windowed = len(INT_FEATURES) - len(RUN_FEATURES)
    for i, a in enumerate(at):
        np.testing.assert_allclose(F[i, :windowed], plain(s, a, 0.05), rtol=1e-6, atol=1e-9)


def test_run_scale_features_see_the_sawtooth_period_and_an_empty_queue():
    """Drops every 2 s on a 40 ms path, queue empty half the time: read back."""
    t = np.arange(0, 30, 0.001) + 100.0
    drops = np.floor((t - 100.0) / 2.0)                     # +1 at every 2 s
    depth = np.where(((t - 100.0) % 2.0) < 1.0, 0.0, 60_000.0)
    s = np.column_stack((t, depth, np.full_like(t, 150_000), np.full_like(t, 1000), np.full_like(t, 2), drops))
    F = dict(zip(INT_FEATURES, int_features(s, np.array([129.9]), 0.04)[0]))
    assert F["drop_gap_s"] == pytest.approx(2.0, abs=0.01)
    assert F["drop_gap_rtts"] == pytest.approx(50.0, rel=0.01)
    assert F["drop_events_x"] == pytest.approx(14 / 30, abs=0.05)
    assert F["qd_empty_x"] == pytest.approx(0.5, abs=0.02)
    assert F["qd_max_x"] == pytest.approx(60_000 / (1000 * MTU_BYTES) / 0.04)
    assert F["own_rate_cv"] < 0.05                        # one packet per ms throughout
    assert F["share_x"] == pytest.approx(1.0, abs=0.01)


def test_competitor_rate_is_the_arrivals_flow_1_did_not_send():
    """Flow 1 sends 500 of the queue's 1000 packets/s; the competitor's half pulses
    with a period of 8 RTTs (40 ms RTT), as BBR's gain cycle: read back."""
    rtt = 0.04
    t = np.arange(0, 30, 0.002) + 100.0                      # flow 1: one packet per 2 ms
    pulse = np.where(((t - 100.0) % (8 * rtt)) < 4 * rtt, 1.5, 0.5)
    arrival = 500 + 500 * pulse
    s = np.column_stack((t, np.full_like(t, 30_000), np.full_like(t, 150_000), arrival, np.full_like(t, 2),
                         np.zeros_like(t)))
    F = dict(zip(INT_FEATURES, int_features(s, np.array([129.99]), rtt)[0]))
    assert 500 / 1250 <= F["comp_mean_x"] <= 500 / 1000        # / the busy link's rate (0.2 s bins: < 1250)
    assert F["comp_ac8_x"] > 0.8 and F["comp_ac4_x"] < -0.8               # in phase at 8 RTTs, not at 4
    steady = s.copy()
    steady[:, 3] = 1000.0
    G = dict(zip(INT_FEATURES, int_features(steady, np.array([129.99]), rtt)[0]))
    assert G["comp_mean_x"] == pytest.approx(0.5, rel=0.05) and G["comp_cv_x"] < 0.05
    assert G["comp_p10_x"] == pytest.approx(0.5, rel=0.05)


def test_an_empty_queue_and_a_full_one_differ_and_early_times_are_zero():
    s = series()
    empty, full = s.copy(), s.copy()
    empty[:, 1], full[:, 1] = 0, full[:, 2]
    at = np.array([99.0, 110.0])            # before the first packet, then mid-run
    fe, ff = int_features(empty, at, 0.05), int_features(full, at, 0.05)
    assert not fe[0].any() and not ff[0].any()
    names = list(INT_FEATURES)
    assert fe[1, names.index("occ_mean_l")] == 0 and ff[1, names.index("occ_mean_l")] == 1
    assert ff[1, names.index("qdelay_now")] > 0 == fe[1, names.index("qdelay_now")]


def test_unsorted_rows_and_bad_shapes():
    s = series(n=300)
    at = np.array([105.0, 110.0])
    shuffled = s[np.random.default_rng(1).permutation(len(s))]
    np.testing.assert_allclose(int_features(shuffled, at, 0.02), int_features(s, at, 0.02))
    with pytest.raises(TraceError, match="INT series"):
        int_features(s[:, :4], at, 0.02)
    with pytest.raises(TraceError, match="INT series"):
        int_features(s[:1], at, 0.02)


def record(src, dport, hops):
    return {"sink_ns": 1, "flow": {"src": src, "dst": "fd00::9", "proto": 6, "sport": 4000, "dport": dport},
            "trace": {"namespace_id": 1, "overflow": False, "trace_type": 0, "hops": hops}}


def hop(ts, depth, cap, drops=0):
    return {"ts_sec": int(ts), "ts_frac": int((ts % 1) * 1e9), "queue_depth_bytes": depth,
            "state": {"queue_capacity_bytes": cap, "arrival_rate_pps": 800, "flow_count": 2,
                      "queue_drops": drops}}


def test_series_from_the_sink_log_keeps_one_flow_at_the_fullest_queue(tmp_path):
    log = tmp_path / "sw2.int.jsonl"
    with open(log, "w") as f:
        for i in range(10):
            ts = 1000 + i * 0.01
            # hop 0 is the bottleneck (half full), hop 1 an idle access link
            f.write(json.dumps(record("fd00::1", 5201, [hop(ts, 50_000, 100_000, i), hop(ts, 0, 100_000)])) + "\n")
            f.write(json.dumps(record("fd00::2", 5202, [hop(ts, 99_000, 100_000), hop(ts, 0, 100_000)])) + "\n")
        f.write('{"sink_ns": 5, "flow": {"src": "fd00::1"')           # torn last line
    s = int_series_from_jsonl(str(log), "fd00::1", dport=5201)
    assert s.shape == (10, len(INT_SERIES_COLUMNS))
    assert (s[:, 1] == 50_000).all() and list(s[:, 5]) == list(range(10))
    assert s[3, 0] == pytest.approx(1000.03, abs=1e-6)
    with pytest.raises(TraceError, match="no telemetry of flow from fd00::7"):
        int_series_from_jsonl(str(log), "fd00::7")
    with pytest.raises(TraceError, match="No such file"):
        int_series_from_jsonl(str(tmp_path / "missing.jsonl"), "fd00::1")


def test_the_live_choice_of_the_bottleneck_is_scored_against_the_whole_runs(tmp_path):
    """Offline the bottleneck is the hop fullest over the whole run; live, the hop fullest
    so far. Here an access queue leads for the first records: the live choice differs
    until the bottleneck's mean passes it (4 of 10 records)."""
    log = tmp_path / "sw2.int.jsonl"
    with open(log, "w") as f:
        for i in range(10):
            ts = 1000 + i * 0.01
            first, second = (0, 50_000) if i < 3 else (90_000, 0)
            f.write(json.dumps(record("fd00::1", 5201, [hop(ts, first, 100_000), hop(ts, second, 100_000)])) + "\n")
        f.write(json.dumps(record("fd00::1", 5201, [7])) + "\n")            # a malformed hop: skipped
    per_hop = hop_series_from_jsonl(str(log), "fd00::1")
    assert (int_series_from_jsonl(str(log), "fd00::1")[:, 1] == per_hop[0][:, 1]).all()    # hop 0 over the run
    assert causal_pick_share(per_hop) == pytest.approx(0.6)
    steady = {i: s[3:] for i, s in per_hop.items()}
    assert causal_pick_share(steady) == 1.0


def test_datasets_with_int_features_and_runs_without_them(tmp_path):
    (tmp_path / "runs").mkdir()
    plan = run_plan(5, seed=2)
    s = series(n=500)
    ack_t = np.linspace(100.0, 119.0, 400)
    raw = {"ack_t": ack_t, "rtt_s": np.full(400, 0.04, np.float32), "acked_bytes": np.full(400, 1428, np.int32),
           "send_t": ack_t - 0.04, "retrans": np.zeros(400, bool), "sample_idx": np.arange(40, 400, 12),
           "int_series": s}
    X = np.zeros((len(raw["sample_idx"]), len(FEATURES)))
    path = str(tmp_path / "runs" / f"{plan['run']}.npz")
    save_run(path, plan, X, np.zeros(len(X)), {}, raw)
    assert set(load_raw(path)) == set(raw)
    (X3, _, meta), = load_dataset(str(tmp_path), "table1+int+dynamics")
    assert X3.shape == (len(X), len(FEATURES) + len(INT_FEATURES))
    np.testing.assert_allclose(X3[:, len(FEATURES):], run_int_features(path))
    (X2, _, meta), = load_dataset(str(tmp_path), "table1+int")      # the same columns less the dynamics
    keep = [i for i, n in enumerate(FEATURES + INT_FEATURES) if n not in COMP_DYNAMICS_FEATURES]
    np.testing.assert_allclose(X2, X3[:, keep])
    assert feature_set_of(FEATURES + INT_FEATURES) == "table1+int+dynamics" and feature_set_of(FEATURES) == "table1"
    assert feature_set_of(FEATURE_SETS["table1+int"]) == "table1+int"
    save_run(path, plan, X, np.zeros(len(X)), {})                  # no raw arrays
    with pytest.raises(TraceError, match="no INT series stored"):
        load_dataset(str(tmp_path), "table1+int")
    with pytest.raises(TraceError, match="unknown feature set 'int'"):
        load_dataset(str(tmp_path), "int")


class FakeObserver:
    """Stands in for the capture: a fixed trace of one flow."""

    def __init__(self):
        t = np.linspace(100.0, 110.0, 500)
        from estimator.features import SenderTrace
        self._trace = SenderTrace(t, np.full(500, 0.03), np.full(500, 1428.0), t - 0.03, np.zeros(500, bool))

    def trace(self, where="capture"):
        return self._trace

    def flow_tuple(self):
        return ("fd00::1", "fd00::2", 4000, 5201)

    def busiest(self):
        return self.flow_tuple(), SimpleNamespace(payload=500 * 1428)


def flow_record(fid, ts_s, depth):
    from telemetry.schema import FlowRecord, HopState
    hop_state = HopState(node_id=1, ts_ns=int(ts_s * 1e9), queue_depth_bytes=depth, queue_depth_pkts=depth // 1500,
                         queue_capacity_bytes=150_000, queue_drops=0, link_losses=0, data_rate_kbps=0,
                         arrival_rate_pps=800, flow_count=2)
    return FlowRecord(flow_id=fid, ts_ns=int(ts_s * 1e9), reason="periodic", src="fd00::1", dst="fd00::2",
                      proto=6, sport=4000, dport=5201, seq=1, packets=10, lost=0, lost_congestion=0, lost_link=0,
                      reordered=0, loss_rate=0.0, interval_ms=10.0, interval_packets=8, interval_lost=0,
                      interval_lost_congestion=0, interval_lost_link=0, path=[hop_state])


def test_online_estimates_with_int_features_wait_for_the_flows_telemetry():
    from telemetry.flowid import PROTO_TCP, flow_id
    from estimator.model import CCAEstimator
    from estimator.online import OnlineEstimator
    rng = np.random.default_rng(0)
    names = FEATURES + INT_FEATURES
    X = rng.normal(size=(80, len(names)))
    y = np.array(["bbr", "vegas"] * 40)
    model = CCAEstimator(grid={"n_estimators": [5], "max_depth": [3]}, folds=2, feature_names=names)
    model.fit(X, y, ["cubic"] * 80, np.arange(80) // 10)
    est = OnlineEstimator(model, "cubic", window=3)
    est.observer = FakeObserver()
    assert est.uses_int and est.step() is None                # no telemetry yet
    fid = flow_id("fd00::1", "fd00::2", PROTO_TCP, 4000, 5201)
    assert not est.add_telemetry(flow_record("0" * len(fid), 105.0, 1000))   # another flow's
    for i in range(20):
        assert est.add_telemetry(flow_record(fid, 100.0 + i * 0.5, 3000 * i))
    assert est.step() is None                                  # no competitor on the path yet
    est.add_hop(hop_record(109.6, [(fid, 50), ("b" * len(fid), 150)]))
    step = est.step()
    assert step is not None and step.estimate in ("bbr", "vegas") and step.flow_id == fid
    foreign = CCAEstimator(feature_names=("a", "b"))
    with pytest.raises(TraceError, match="not ones this intcc computes"):
        OnlineEstimator(foreign, "cubic")


def test_the_observed_flow_is_the_data_connection_not_iperf3s_control_connection():
    """Without expect_flow the flow is the capture's busiest; iperf3's control connection
    carries the first payload, and records that came then wait until the data connection
    has sent enough to be named (latched onto the control connection, a live run kept 5
    of ~3,000 records, and the INT model estimated from them)."""
    import ipaddress
    from telemetry.flowid import PROTO_TCP, flow_id
    from estimator.model import CCAEstimator
    from estimator.online import OBSERVED_FLOW_MIN_BYTES, OnlineEstimator
    names = FEATURES + INT_FEATURES
    model = CCAEstimator(grid={"n_estimators": [5], "max_depth": [3]}, folds=2, feature_names=names)
    model.fit(np.zeros((20, len(names))), np.array(["bbr", "vegas"] * 10), ["cubic"] * 20, np.arange(20) // 5)
    est = OnlineEstimator(model, "cubic", sender="fd00::1")
    a, b = ipaddress.ip_address("fd00::1").packed, ipaddress.ip_address("fd00::2").packed
    control = flow_id("fd00::1", "fd00::2", PROTO_TCP, 40000, 5201)
    data = flow_id("fd00::1", "fd00::2", PROTO_TCP, 40002, 5201)
    est.observer.add(100.0, (a, b, 40000, 5201, 1, 0, 0x18, 300))          # the control connection's parameters
    assert not est.add_telemetry(flow_record(control, 100.01, 0))
    assert not est.add_telemetry(flow_record(data, 100.02, 0))            # waits: the busiest has sent 300 B
    assert est.telemetry.flow_id is None
    for k in range(OBSERVED_FLOW_MIN_BYTES // 1448 + 1):
        est.observer.add(100.03 + k * 1e-3, (a, b, 40002, 5201, 1 + k * 1448, 0, 0x10, 1448))
    assert est.add_telemetry(flow_record(data, 100.05, 0))                # named now: the waiting ones sorted
    assert est.telemetry.flow_id == data and est.telemetry.records == 2
    assert not est.add_telemetry(flow_record(control, 100.06, 0))


def test_the_base_rtt_is_the_kernels_min_rtt_when_the_capture_began_late(monkeypatch):
    """The agent's child captures a flow from ~1 s in, when slow start has filled the queue:
    the kernel's min RTT of the socket (ss minrtt) is the path's, and the smaller wins."""
    import subprocess
    from ccp_agent.flows import socket_min_rtt_s
    from estimator.model import CCAEstimator
    from estimator.online import OnlineEstimator
    names = FEATURES + INT_FEATURES
    model = CCAEstimator(grid={"n_estimators": [5], "max_depth": [3]}, folds=2, feature_names=names)
    model.fit(np.zeros((20, len(names))), np.array(["bbr", "vegas"] * 10), ["cubic"] * 20, np.arange(20) // 5)
    est = OnlineEstimator(model, "cubic")
    trace = FakeObserver().trace()                         # every sample 30 ms
    assert est.base_rtt_s(trace) == pytest.approx(0.03)
    est.base_rtt_hint_s = 0.012
    assert est.base_rtt_s(trace) == pytest.approx(0.012)
    est.base_rtt_hint_s = 0.05                            # a hint can only lower it
    assert est.base_rtt_s(trace) == pytest.approx(0.03)
    line = ("ESTAB 0 0 [fd00::1]:41944 [fd00::2]:5201\n\t cubic wscale:7,7 rto:240 rtt:131.1/2.5 "
            "ato:40 mss:1428 minrtt:41.872 snd_wnd:65536\n")
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: calls.append(argv) or SimpleNamespace(stdout=line))
    assert socket_min_rtt_s("intcc-exp-s1", 41944, 5201) == pytest.approx(0.041872)
    assert calls[0][:4] == ["ip", "netns", "exec", "intcc-exp-s1"] and "sport = :41944" in calls[0][-1]
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: SimpleNamespace(stdout=""))
    assert socket_min_rtt_s(None, 41944, 5201) is None      # the socket is gone: no hint


def hop_record(ts_s, top_flows, node_id=1):
    from telemetry.schema import HopRecord
    return HopRecord(node_id=node_id, ts_ns=int(ts_s * 1e9), queue_depth_bytes=0, queue_depth_pkts=0,
                     queue_capacity_bytes=150_000, queue_drops=0, link_losses=0, data_rate_kbps=0,
                     arrival_rate_pps=800, flow_count=2, interval_ms=100.0, top_flows=top_flows)


def test_a_flow_known_before_its_capture_keeps_its_telemetry_from_the_first_record():
    """The agent's child finds a flow, and starts its capture, a second or two after it
    began: the records of that time (replayed to it) count, as they do in training, and
    the competitors' counts start at the flow's first record, as the training series do."""
    from telemetry.flowid import PROTO_TCP, flow_id
    from estimator.model import CCAEstimator
    from estimator.online import OnlineEstimator
    names = FEATURES + INT_FEATURES
    model = CCAEstimator(grid={"n_estimators": [5], "max_depth": [3]}, folds=2, feature_names=names)
    model.fit(np.zeros((20, len(names))), np.array(["bbr", "vegas"] * 10), ["cubic"] * 20, np.arange(20) // 5)
    est = OnlineEstimator(model, "cubic")
    fid = flow_id("fd00::1", "fd00::2", PROTO_TCP, 4000, 5201)
    assert not est.add_telemetry(flow_record(fid, 100.0, 0))          # no packet captured, no tuple
    est.expect_flow("fd00::1", "fd00::2", 4000, 5201)
    assert not est.add_hop(hop_record(100.5, [("c" * 16, 5)]))         # held: which count is not known yet
    assert not est.add_hop(hop_record(101.5, [("c" * 16, 7)]))
    assert est.add_telemetry(flow_record(fid, 101.0, 0))                # the first record: 101 s
    assert not est.add_telemetry(flow_record("0" * 16, 101.1, 0))       # another flow's
    assert est.add_hop(hop_record(101.6, [("c" * 16, 9)]))
    assert not est.add_hop(hop_record(100.9, [("c" * 16, 9)]))          # from before the flow's first record
    comp = est.hop_flows.competitors(1, fid)
    assert est.telemetry.records == 1 and comp.packets.sum() == 7 + 9


def _aimd_competitor(beta, rtt=0.1, w_max=40.0, own_pps=100.0):
    """A competitor whose window grows 1 packet per RTT from beta x w_max to w_max,
    then is cut (one queue drop per cut); empty queue, so its rate is window / RTT."""
    t = np.arange(0, 30, 1 / own_pps) + 100.0
    climb_s = (1 - beta) * w_max * rtt
    w = beta * w_max + ((t - 100.0) % climb_s) / rtt
    cuts = np.floor((t - 100.0) / climb_s)
    s = np.column_stack((t, np.zeros_like(t), np.full_like(t, 150_000), own_pps + w / rtt, np.full_like(t, 2), cuts))
    return dict(zip(INT_FEATURES, int_features(s, np.array([129.99]), rtt)[0]))


def test_competitor_backoff_and_growth_tell_reno_from_cubic():
    """Reno halves its window at a loss, CUBIC keeps 0.7 of it; both grow by about a
    packet per RTT in between (CUBIC's Reno-friendly region)."""
    reno, cubic = _aimd_competitor(0.5), _aimd_competitor(0.7)
    assert 0.45 <= reno["comp_backoff_x"] <= 0.6, reno["comp_backoff_x"]
    assert 0.65 <= cubic["comp_backoff_x"] <= 0.8, cubic["comp_backoff_x"]
    assert reno["comp_growth_x"] == pytest.approx(1.0, rel=0.2)
    t = np.arange(0, 30, 0.01) + 100.0
    s = np.column_stack((t, np.zeros_like(t), np.full_like(t, 150_000), np.full_like(t, 500.0), np.full_like(t, 2),
                         np.zeros_like(t)))
    no_drops = dict(zip(INT_FEATURES, int_features(s, np.array([129.99]), 0.1)[0]))
    assert no_drops["comp_backoff_x"] == -1.0 and abs(no_drops["comp_growth_x"]) < 0.1


def test_the_record_stream_is_what_the_sink_publishes_every_10_ms():
    from estimator.int_series import record_stream
    t = 100.0 + np.arange(0, 0.1, 0.001)               # a packet per ms for 100 ms
    s = np.column_stack([t, np.arange(100) * 10.0, np.full(100, 1e5), np.full(100, 800.0), np.full(100, 2.0),
                         np.arange(100) // 30])
    rec = record_stream(s)
    assert len(rec) == 10 and rec.shape[1] == len(INT_SERIES_COLUMNS) + 1
    np.testing.assert_allclose(np.diff(rec[:, 0]), 0.01, atol=1e-9)
    # every packet counted once; the last 9 wait for the next record
    assert rec[0, -1] == 1 and (rec[1:, -1] == 10).all() and rec[:, -1].sum() == 91
    np.testing.assert_array_equal(rec[:, 1], s[::10, 1])    # the hop values of the packet that triggered it


def test_a_packed_run_gives_the_live_senders_int_features(tmp_path):
    """pack_dataset keeps what the features need (sampled ACK times, base RTTs, the record
    stream); the packed run's INT features equal the full run's from the record stream."""
    from estimator.dataset import pack_dataset
    src, out = tmp_path / "full", tmp_path / "packed"
    (src / "runs").mkdir(parents=True)
    plan = run_plan(5, seed=2)
    ack_t = np.linspace(100.0, 119.0, 400)
    raw = {"ack_t": ack_t, "rtt_s": np.linspace(0.05, 0.04, 400).astype(np.float32),
           "acked_bytes": np.full(400, 1428, np.int32), "send_t": ack_t - 0.04, "retrans": np.zeros(400, bool),
           "sample_idx": np.arange(40, 400, 12), "int_series": series(n=3000),
           "comp_packets_10ms": np.arange(100, dtype=np.uint16).reshape(2, 50)}
    X = np.random.default_rng(0).normal(size=(len(raw["sample_idx"]), len(FEATURES)))
    save_run(str(src / "runs" / f"{plan['run']}.npz"), plan, X, np.zeros(len(X)), {}, raw)
    assert pack_dataset(str(src), str(out)) == 1
    full, packed = (str(d / "runs" / f"{plan['run']}.npz") for d in (src, out))
    np.testing.assert_allclose(run_int_features(packed), run_int_features(full), rtol=1e-4, atol=1e-4)
    assert not np.allclose(run_int_features(full), run_int_features(full, per_packet=True))
    (Xp, _, meta), = load_dataset(str(out), "table1+int")
    np.testing.assert_allclose(Xp[:, :len(FEATURES)], X, rtol=1e-6)
    assert meta["compact"] and os.path.getsize(packed) < os.path.getsize(full)
    with pytest.raises(TraceError, match="record stream only"):
        run_int_features(packed, per_packet=True)


def test_the_competitors_packets_are_counted_per_flow_per_10_ms(tmp_path):
    from estimator.int_series import flow_counts_from_jsonl
    log = tmp_path / "sw2.int.jsonl"
    with open(log, "w") as f:
        for i in range(30):                   # flow 5202: a packet per ms from 1000.000; 5203 from 1000.020
            f.write(json.dumps(record("fd00::2", 5202, [hop(1000 + i * 0.001 + 1e-6, 0, 100_000)])) + "\n")
            if i >= 20:
                f.write(json.dumps(record("fd00::2", 5203, [hop(1000 + i * 0.001 + 1e-6, 0, 100_000)])) + "\n")
            f.write(json.dumps(record("fd00::1", 5201, [hop(1000 + i * 0.001, 0, 100_000)])) + "\n")
        f.write('{"flow": {"src": "fd00::2"')     # torn
    c = flow_counts_from_jsonl(str(log), "fd00::2", t0_s=1000.0)[0]
    assert c.dtype == np.uint16 and c.tolist() == [[10, 10, 10], [0, 0, 10]]
    assert flow_counts_from_jsonl(str(log), "fd00::7", t0_s=1000.0)[0].shape == (0, 0)


def test_a_flows_losses_are_the_gaps_in_its_e2e_sequence(tmp_path):
    from estimator.int_series import flow_counts_from_jsonl
    log = tmp_path / "sw2.int.jsonl"
    # flow 5202: seq 0..29 a packet per ms, 3 missing in the first 10 ms, one in the third,
    # one packet late (no loss, not subtracted), then a source restart (no loss)
    seqs = [0, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 21, 23, 24, 25, 26,
            900_000, 900_001, 900_002, 900_003, 900_004, 900_005]
    with open(log, "w") as f:
        for i, seq in enumerate(seqs):
            f.write(json.dumps({**record("fd00::2", 5202, [hop(1000 + i * 0.001 + 1e-6, 0, 100_000)]),
                                "e2e": {"seq": seq, "ts_sec": 0, "ts_frac": 0}}) + "\n")
        f.write(json.dumps(record("fd00::2", 5203, [hop(1000.0105, 0, 100_000)])) + "\n")   # no E2E: no loss
    packets, lost = flow_counts_from_jsonl(str(log), "fd00::2", t0_s=1000.0)
    assert packets.tolist() == [[10, 10, 10], [0, 1, 0]]
    assert lost.dtype == np.uint16 and lost.tolist() == [[3, 1, 0], [0, 0, 0]]


def test_the_cli_knows_every_feature_set():
    from estimator.cli import FEATURE_SET_NAMES
    assert FEATURE_SET_NAMES == list(FEATURE_SETS)


def test_no_estimate_while_the_flow_is_alone_and_the_warm_up_counts_from_the_competitors_arrival():
    """Alone, a flow's own queue reads as vegas: a competitor that came 10 s late met a
    vote full of such estimates, and the flow switched to vegas just as a loss-based flow
    arrived (seed 2615, 'mirror int w50 late', |D| 0.4-0.6). No estimate is made until
    another data flow has carried COMPETITOR_MIN_PACKETS through a node of the flow's path
    (iperf3's control connection does not count), and its age is from its first packet."""
    from estimator.flow_features import COMPETITOR_MIN_PACKETS
    from estimator.hop_flows import HopFlows
    own, control, data, elsewhere = "a" * 16, "c" * 16, "d" * 16, "e" * 16
    hops = HopFlows()
    for k in range(100):                                       # 10 s alone, a control connection's few packets
        hops.add(hop_record(100.0 + k * 0.1, [(own, 80)] + ([(control, 2)] if k < 5 else [])))
        hops.add(hop_record(100.0 + k * 0.1, [(elsewhere, 80)], node_id=7))   # a node this flow does not cross
    assert hops.competitor_age_s(own) is None
    assert hops.competitor_age_s(None) is None
    for k in range(30):                                        # the data flow arrives at 110 s, a slow starter
        hops.add(hop_record(110.0 + k * 0.1, [(own, 80), (data, 1 + k)]))
    assert sum(1 + k for k in range(30)) >= COMPETITOR_MIN_PACKETS
    assert hops.competitor_age_s(own) == pytest.approx(2.9)
    assert HopFlows().competitor_age_s(own) is None            # no records
    alone = HopFlows()                                         # the flow's own packets make none
    alone.add(hop_record(100.0, [(own, 500)]))
    assert alone.competitor_age_s(own) is None
