"""Offline features are the live ones: a shipped raw capture of the dumbbell's sink (two
TCP flows, cubic beside bbr; made by ``python -m lab.tools.sink_capture``) is fed live
(raw bytes -> SinkTelemetry.on_packet -> MQTT payloads -> decode -> the live estimator's
SinkView) and offline (the sink's JSON-lines log, as its exporter writes it -> replayed
through the sink -> a collected run's arrays on disk -> the training's run_int_features):
the features agree value for value at every time a live sender computed them."""
import gzip
import json
import os

import numpy as np
import pytest

from estimator.dataset import compact_raw, load_raw, save_run
from estimator.evaluate import run_int_features
from estimator.int_series import bottleneck_series, hop_series_from_jsonl, record_stream
from estimator.sink_view import SinkView, replayed_view, telemetry_features, view_arrays
from int_node.exporters import JsonLinesExporter
from telemetry.replay import Replay, capture_packets
from telemetry.schema import decode
from telemetry.sink import SinkTelemetry

CAPTURE = os.path.join(os.path.dirname(__file__), "..", "data", "sink-capture-dumbbell.jsonl.gz")
SENDER = "2001:db8:1::1"          # s1 on the dumbbell
# runs store the sender's RTTs as float32: one that float32 holds exactly
BASE_RTT_S = 0.0234375


def _log_of_capture(tmp_path) -> str:
    """The capture as the sink's jsonl exporter logs it (decoded, per packet)."""
    path = str(tmp_path / "sw2.int.jsonl")
    exp = JsonLinesExporter(path)
    for key, trace, e2e, sink_ns in capture_packets(CAPTURE):
        exp.export(key, trace, e2e, sink_ns)
    exp.close()
    return path


def _live(flow_id: str, at_t) -> np.ndarray:
    """The features a live sender computes at each of ``at_t``: every record published
    before the first of the flow's records stamped after that time."""
    sink, view, rows, pending = SinkTelemetry(), SinkView(flow_id), [], list(at_t)
    for key, trace, e2e, sink_ns in capture_packets(CAPTURE):
        for topic, payload in sink.on_packet(key, trace, e2e, sink_ns):
            rec = decode(payload, topic)
            while pending and rec.type != "hop" and rec.flow_id == flow_id and rec.ts_ns * 1e-9 > pending[0] + 0.1:
                rows.append(view.features([pending.pop(0)], BASE_RTT_S, flows=True)[0])
            view.add(rec)
    rows += [view.features([t], BASE_RTT_S, flows=True)[0] for t in pending]
    return np.array(rows)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return _log_of_capture(tmp_path_factory.mktemp("sink"))


def test_the_capture_replays_through_the_sink_as_it_ran_live(log):
    live = [p for pkt in capture_packets(CAPTURE) for p in [pkt]]
    assert len(live) > 2000
    sink = SinkTelemetry()
    online = [(t, p) for key, tr, e2e, ns in live for t, p in sink.on_packet(key, tr, e2e, ns)]
    replayed = Replay(log)
    offline = list(replayed)
    assert replayed.packets == len(live) and replayed.skipped == 0
    assert [(t, decode(p, t)) for t, p in online] == offline


def test_offline_features_are_the_live_features_value_for_value(log, tmp_path):
    view = replayed_view(log, SENDER)
    arrays = view_arrays(view)
    series = arrays["int_record_series"]
    assert len(series) > 100 and "comp_packets" in arrays
    at_t = np.arange(series[0, 0] + 1.5, series[-1, 0] - 0.2, 0.25)
    live = _live(view.flow_id, at_t)

    # offline as training reads it: a collected run's arrays on disk, raw and packed
    raw = {"ack_t": at_t, "rtt_s": np.full(len(at_t), BASE_RTT_S, dtype=np.float32),
           "sample_idx": np.arange(len(at_t)), **arrays}
    run = str(tmp_path / "run00000.npz")
    save_run(run, {"cca1": "cubic", "cca2": "bbr"}, np.zeros((len(at_t), 1)), at_t - at_t[0], {}, raw)
    packed = str(tmp_path / "packed.npz")
    save_run(packed, {"cca1": "cubic", "cca2": "bbr", "compact": True}, np.zeros((len(at_t), 1)),
             at_t - at_t[0], {}, compact_raw(load_raw(run)))
    for path in (run, packed):
        offline = run_int_features(path, flows=True, meta={})
        assert offline.shape == live.shape
        np.testing.assert_array_equal(offline, live)
    assert np.abs(live).sum() > 0 and len(np.unique(live[:, 0])) > 3      # features that move

    # the control: the stream cut from the per-packet series on the hop's clock (how the
    # collections before the replay were cut) is not what a live sender receives
    cut = record_stream(bottleneck_series(hop_series_from_jsonl(log, SENDER)))
    old = telemetry_features(cut, view.competitors(), at_t, BASE_RTT_S, flows=True)
    assert not np.array_equal(old, live)


def test_a_torn_or_foreign_line_is_counted_not_replayed(log, tmp_path):
    path = tmp_path / "torn.jsonl"
    with open(log) as f:
        lines = f.readlines()[:50]
    path.write_text("".join(lines) + "not json\n" + json.dumps({"sink_ns": 5}) + "\n" + lines[50 - 1][:40])
    r = Replay(str(path))
    list(r)
    assert r.packets == 50 and r.skipped == 3


def test_the_capture_is_a_gzipped_raw_capture():
    with gzip.open(CAPTURE, "rt") as f:
        first = json.loads(f.readline())
    assert set(first) == {"sink_ns", "key", "trace", "e2e"}
