"""Dragonfly live (estimator/dragonfly/live.py): a flow named once it has an interval of
slots on both sides, again only when new slots came, its record valid telemetry; bounded
state."""
import json

import numpy as np
import pytest

from estimator.dragonfly.live import LiveClassifier
from telemetry.schema import CcaRecord, SchemaError, cca_topic, decode, encode

FLOW = ["2001:db8:1::1", "2001:db8:3::2", 6, 40000, 5201]


class QueueHeavyModel:
    """Scores 'cubic' when the flow keeps bytes in the queue, 'bbr' when it does not."""
    n_slots = 100
    classes_ = ("reno", "cubic", "bbr")

    def __init__(self):
        self.calls = []

    def decision_function(self, frames):
        self.calls.append(frames.shape)
        cbiq = np.nanmean(frames[:, :, 0], axis=1)
        return np.stack([np.zeros(len(frames)), (cbiq > 0) * 5.0, (cbiq == 0) * 5.0], axis=1)


class Clock:
    def __init__(self):
        self.ns = 1_000_000_000_000

    def __call__(self):
        return self.ns


def capture(first_slot, n, lag_slots, bytes_per_slot=1500, seq0=1000):
    """A flow sending bytes_per_slot each slot, its egress lag_slots behind its ingress."""
    ins = [[first_slot + i, seq0 + i * bytes_per_slot, -1] for i in range(n)]
    outs = [[first_slot + i, seq0 + (i - lag_slots) * bytes_per_slot, -1] for i in range(lag_slots, n)]
    return ins, outs


def test_a_flow_is_named_once_it_has_an_interval_and_again_only_on_new_slots():
    model, clock = QueueHeavyModel(), Clock()
    live = LiveClassifier(model, node_id=7, clock=clock)
    ins, outs = capture(500, 60, lag_slots=5)
    live.feed({"aa00000000000001": {"flow": FLOW, "in": ins, "out": outs}})
    assert live.classify() == []                     # 60 slots: not an interval of 100 yet
    ins, outs = capture(500, 200, lag_slots=5)
    live.feed({"aa00000000000001": {"flow": FLOW, "in": ins[60:], "out": outs[55:]}})
    recs = live.classify()
    assert len(recs) == 1 and model.calls[-1] == (1, 100, 2)
    rec = recs[0]
    assert rec.verdict == "cubic" and rec.scores["cubic"] > 0.9 and sum(rec.scores.values()) == pytest.approx(1, abs=1e-3)
    assert (rec.node_id, rec.sport, rec.dport, rec.interval_ms) == (7, 40000, 5201, 100.0)
    assert decode(encode(rec), cca_topic(rec.flow_id)).to_dict() == rec.to_dict()
    assert live.classify() == []                     # nothing new: no second record
    ins, outs = capture(500, 210, lag_slots=5)
    live.feed({"aa00000000000001": {"flow": FLOW, "in": ins[200:], "out": outs[195:]}})
    assert len(live.classify()) == 1


def test_a_flow_that_keeps_nothing_queued_is_told_apart():
    live = LiveClassifier(QueueHeavyModel(), node_id=7, clock=Clock())
    ins, outs = capture(0, 150, lag_slots=0)
    live.feed({"aa00000000000002": {"flow": FLOW, "in": ins, "out": outs}})
    assert live.classify()[0].verdict == "bbr"


def test_state_is_bounded_and_idle_flows_forgotten_and_bad_entries_counted():
    clock = Clock()
    live = LiveClassifier(QueueHeavyModel(), node_id=7, max_flows=3, idle_s=5.0, clock=clock)
    for i in range(5):
        live.feed({f"aa0000000000000{i}": {"flow": FLOW, "in": [[1, 1, -1]], "out": [[1, 1, -1]]}})
    assert len(live.flows) == 3 and live.counters["evicted"] == 2
    assert "aa00000000000000" not in live.flows        # the least recently fed went first
    live.feed({"aa00000000000009": {"flow": FLOW}})     # no entries: counted, not kept
    assert live.counters["bad_entries"] == 1 and "aa00000000000009" not in live.flows
    clock.ns += 6_000_000_000
    live.feed({})
    assert not live.flows and live.counters["forgotten"] == 3
    # a long-lived flow keeps two intervals of entries, not its whole life
    ins, outs = capture(0, 1000, lag_slots=5)
    live.feed({"aa0000000000000a": {"flow": FLOW, "in": ins, "out": outs}})
    assert len(live.flows["aa0000000000000a"]["in"]) <= 2 * 100 + 1


def test_a_cca_record_with_a_bad_score_is_refused():
    good = CcaRecord(flow_id="aa00000000000001", ts_ns=1, node_id=1, src="a", dst="b", sport=1, dport=2,
                     interval_ms=1000.0, scores={"reno": 0.2, "cubic": 0.8}, verdict="cubic").to_dict()
    decode(encode(CcaRecord(**{k: v for k, v in good.items() if k not in ("v", "type")})))
    for bad in ({"scores": {"reno": 1.5}}, {"scores": {"westwood": 0.5}}, {"verdict": "westwood"}, {"scores": {}}):
        with pytest.raises(SchemaError):
            decode(json.dumps({**good, **bad}).encode())
    with pytest.raises(SchemaError, match="arrived on"):
        decode(json.dumps(good).encode(), "intcc/v1/estimate/aa00000000000001")


class FlightModel(QueueHeavyModel):
    """Reads the bytes in flight too: 'reno' when the flight exceeds the queue's bytes."""
    inputs = ("cbiq", "ingress", "flight")

    def decision_function(self, frames):
        self.calls.append(frames.shape)
        beyond = np.nanmean(frames[:, :, 2] - frames[:, :, 0], axis=1)
        return np.stack([(beyond > 0) * 5.0, np.zeros(len(frames)), np.zeros(len(frames))], axis=1)


def test_a_model_reading_the_flight_waits_for_the_acks_then_gets_them_as_its_third_input():
    model = FlightModel()
    live = LiveClassifier(model, node_id=7, clock=Clock())
    ins, outs = capture(0, 150, lag_slots=5)
    live.feed({"aa00000000000003": {"flow": FLOW, "in": ins, "out": outs}})
    assert live.classify() == [] and model.calls == []       # no ACK seen: not named by a guess
    acks = [[s, seq - 20 * 1500, -1] for s, seq, _ in ins]     # 20 packets beyond the node, 5 of them queued
    live.feed({"aa00000000000003": {"flow": FLOW, "in": [], "out": [], "ack": acks}})
    (rec,) = live.classify()
    assert model.calls == [(1, 100, 3)] and rec.verdict == "reno"
