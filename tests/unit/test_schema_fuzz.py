"""Telemetry records mutated at random: decode raises SchemaError or returns a
record, nothing else, and a subscriber's message handler survives any payload.

The seeds are real records: SinkTelemetry's output for real IOAM packets.
"""
import json
import types

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telemetry.schema import CcaRecord, EstimateRecord, SchemaError, decode, encode, estimate_topic
from broker.subscriber import TelemetryView
from tests.unit.test_telemetry_sink import packet, run
from telemetry.sink import SinkTelemetry


def _real_records():
    tel = SinkTelemetry(period_ms=0.05, min_gap_ms=0, reorder_pkts=1)
    pubs = run(tel, [packet(0), packet(1, drops=0, depth=3000), packet(3, link=1, depth=6000), packet(4, link=1)])
    out = [json.loads(encode(r)) for _, r in pubs]
    out.append(json.loads(encode(CcaRecord(flow_id="0123456789abcdef", ts_ns=1, node_id=2, src="2001:db8:1::1",
                                           dst="2001:db8:3::2", sport=40000, dport=5201, interval_ms=1000.0,
                                           scores={"reno": 0.1, "cubic": 0.9}, verdict="cubic"))))
    out.append(json.loads(encode(EstimateRecord(flow_id="0123456789abcdef", ts_ns=1, local_cca="cubic",
                                                estimate="bbr", confidence=0.8, votes={"bbr": 4, "cubic": 1},
                                                window=5, estimates=9))))
    assert {r["type"] for r in out} == {"flow", "hop", "estimate", "cca"}
    return out


SEEDS = _real_records()
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated(draw):
    rec = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(rec) if p]
        path = draw(st.sampled_from(paths))
        parent = rec
        for k in path[:-1]:
            parent = parent[k]
        action = draw(st.sampled_from(("replace", "delete", "add")))
        if action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(json_values)
        else:
            parent[path[-1]] = draw(json_values)
    return rec


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_mutated_real_record_is_a_record_or_a_schema_error(rec):
    try:
        decode(json.dumps(rec).encode())
    except SchemaError:
        pass


def test_unhashable_record_type_is_a_schema_error():
    # found by mutation: {"type": [1]} raised TypeError from the type lookup
    rec = dict(SEEDS[0], type=[1])
    try:
        decode(json.dumps(rec).encode())
    except SchemaError as exc:
        assert "record type" in str(exc)
    else:
        raise AssertionError("accepted a record whose type is a list")


def test_deeply_nested_payload_is_a_schema_error():
    payload = b"[" * 20000 + b"]" * 20000
    try:
        decode(payload[:60000])
    except SchemaError:
        pass
    else:
        raise AssertionError("accepted a payload that is not a record")


def test_the_subscriber_survives_any_payload_and_keeps_receiving():
    view = TelemetryView("mqtt://127.0.0.1:1")       # never started: messages are fed by hand
    flow_id = "0123456789abcdef"
    bad = [dict(SEEDS[0], type=[1]), dict(SEEDS[0], type={"a": 1}), dict(SEEDS[-1], votes=[["bbr", 1]])]
    for rec in bad:
        view._on_message(None, None, types.SimpleNamespace(payload=json.dumps(rec).encode(),
                                                           topic=estimate_topic(flow_id)))
    good = SEEDS[-1]
    view._on_message(None, None, types.SimpleNamespace(payload=json.dumps(good).encode(),
                                                       topic=estimate_topic(flow_id)))
    assert view.rejected == 3 and view.accepted == 1
    assert view.estimate(flow_id).record.estimate == "bbr"
    health = view.health()
    assert health["rejected"] == 3 and health["loop_alive"] is False   # never started
