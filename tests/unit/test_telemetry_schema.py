"""Telemetry v1 records: validation, topics, flow ids."""
import json

import pytest

from telemetry.flowid import flow_id, flow_id_from_key
from telemetry.schema import FlowRecord, HopRecord, SchemaError, decode, encode, flow_topic, hop_topic
from int_node.packet import flow_key as frame_flow_key
from tests.helpers import ipv6_frame

HOP = dict(node_id=3, ts_ns=1, queue_depth_bytes=3000, queue_depth_pkts=2, queue_capacity_bytes=150000,
           queue_drops=0, link_losses=7, data_rate_kbps=65000, arrival_rate_pps=800, flow_count=1,
           queue_occupancy=0.02, rssi_dbm=-60, mcs=5, transit_delay_ns=1000, hop_limit=63)


def flow(**over):
    d = dict(v=1, type="flow", flow_id="0123456789abcdef", ts_ns=5, reason="loss", src="2001:db8:1::1",
             dst="2001:db8:3::2", proto=6, sport=40000, dport=5201, seq=99, packets=90, lost=10,
             lost_congestion=2, lost_link=8, reordered=0, loss_rate=0.1, interval_ms=10.0,
             interval_packets=9, interval_lost=1, interval_lost_congestion=0, interval_lost_link=1,
             path=[HOP], last_loss_cause="link", last_loss_ns=5, one_way_delay_us=10200.0, sink_node_id=3)
    d.update(over)
    return d


def test_flow_record_roundtrip():
    rec = decode(json.dumps(flow()).encode(), flow_topic("0123456789abcdef"))
    assert isinstance(rec, FlowRecord) and rec.lost_link == 8 and rec.path[0].rssi_dbm == -60
    assert decode(encode(rec)) == rec


def test_hop_record_roundtrip():
    rec = HopRecord(**HOP)
    again = decode(encode(rec), hop_topic(3))
    assert again == rec and again.queue_occupancy == 0.02


def test_top_flows_carry_each_flows_protocol_and_older_sinks_entries_still_decode():
    fid = "0123456789abcdef"
    # with the RTT the sink's node measured (or not yet), now, with losses, before them
    for entry in ([fid, 9, 1, 6, 41000], [fid, 9, 1, 6, None], [fid, 9, 1, 17], [fid, 9, 1], [fid, 9]):
        rec = HopRecord(**HOP, interval_ms=10.0, top_flows=[entry])
        assert decode(encode(rec), hop_topic(3)).top_flows == [entry]
    for bad in ([fid, 9, 1, 300], [fid, 9, 1, 6, -1], [fid, 9, 1, 6, 2.5], [fid, 9, 1, 6, 0, 0], [fid, 9, 1, -6]):
        with pytest.raises(SchemaError, match="proto"):
            decode(encode(HopRecord(**HOP, interval_ms=10.0, top_flows=[bad])), hop_topic(3))


@pytest.mark.parametrize("payload, words", [
    (b"\xff\xfe garbage", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (json.dumps(flow(v=2)).encode(), "unsupported version"),
    (json.dumps(flow(type="nope")).encode(), "unknown record type"),
    (json.dumps({k: v for k, v in flow().items() if k != "lost"}).encode(), "'lost' is missing"),
    (json.dumps(flow(lost=-1)).encode(), "'lost' must be in"),
    (json.dumps(flow(loss_rate="high")).encode(), "'loss_rate' must be a number"),
    (json.dumps(flow(flow_id="XYZ")).encode(), "'flow_id' must be 16"),
    (json.dumps(flow(path=[{"node_id": 1}])).encode(), "path[0]: field 'ts_ns' is missing"),
    (json.dumps(flow(path="none")).encode(), "'path' must be a list"),
    (json.dumps(flow(lost_congestion=9)).encode(), "exceeds lost"),
    (json.dumps(flow(reason="whim")).encode(), "'reason' must be one of"),
    (b"{" + b" " * 70000 + b"}", "exceeds"),
])
def test_malformed_records_are_rejected_with_a_reason(payload, words):
    with pytest.raises(SchemaError, match=None) as exc:
        decode(payload)
    assert words in str(exc.value)


def test_record_on_the_wrong_topic_is_rejected():
    with pytest.raises(SchemaError, match="arrived on"):
        decode(json.dumps(flow()).encode(), flow_topic("ffffffffffffffff"))


def test_flow_id_is_the_same_from_a_frame_and_from_a_socket_tuple():
    frame = ipv6_frame(nh=6, sport=40000, dport=5201)
    by_frame = flow_id_from_key(frame_flow_key(frame))
    assert by_frame == flow_id("2001:db8::1", "2001:db8::2", 6, 40000, 5201)


def test_flow_id_normalises_addresses_and_separates_directions():
    a = flow_id("2001:db8:1::1", "2001:db8:3::2", 6, 1, 2)
    assert a == flow_id("2001:0db8:0001:0:0:0:0:0001", "2001:db8:3::2", 6, 1, 2)
    assert a != flow_id("2001:db8:3::2", "2001:db8:1::1", 6, 2, 1)
    assert len(a) == 16 and int(a, 16) >= 0


@pytest.mark.parametrize("args", [("nope", "::1", 6, 1, 2), ("::1", "::2", 6, 70000, 1), ("::1", "::2", 300, 1, 1)])
def test_flow_id_rejects_bad_tuples(args):
    with pytest.raises(ValueError):
        flow_id(*args)


def test_estimate_records_round_trip_and_are_checked():
    from telemetry.schema import EstimateRecord, encode, decode, estimate_topic, SchemaError
    rec = EstimateRecord(flow_id="0123456789abcdef", ts_ns=1, local_cca="cubic", estimate="bbr",
                         confidence=0.6, votes={"bbr": 30, "cubic": 20}, window=50, estimates=120)
    back = decode(encode(rec), estimate_topic(rec.flow_id))
    assert back == rec
    bad = rec.to_dict() | {"votes": {"westwood": 3}}
    import json
    import pytest
    with pytest.raises(SchemaError, match="votes"):
        decode(json.dumps(bad).encode())
    with pytest.raises(SchemaError, match="arrived on"):
        decode(encode(rec), "intcc/v1/flow/0123456789abcdef")


def test_a_switch_record_round_trips_on_the_estimate_topic_and_names_bad_fields():
    from telemetry.schema import SwitchRecord, estimate_topic
    rec = SwitchRecord(flow_id="00112233aabbccdd", ts_ns=1, from_cca="cubic", to_cca="bbr", verdict="bbr",
                       confidence=0.8, votes={"bbr": 40, "cubic": 10}, policy="mirror")
    back = decode(encode(rec), topic=estimate_topic(rec.flow_id))
    assert back == rec
    bad = dict(rec.to_dict(), to_cca="BBR!")
    with pytest.raises(SchemaError, match="field 'to_cca' must be an algorithm name"):
        decode(json.dumps(bad).encode())
    # back to the probe after the competitors changed: a switch answering no verdict
    anew = SwitchRecord(flow_id=rec.flow_id, ts_ns=2, from_cca="bbr", to_cca="probe", verdict=None, confidence=0.0,
                        votes={}, policy="mirror")
    assert decode(encode(anew), topic=estimate_topic(rec.flow_id)) == anew
    with pytest.raises(SchemaError, match="verdict"):
        decode(json.dumps(dict(rec.to_dict(), verdict="vegas2")).encode())


def test_a_decision_record_round_trips_on_its_own_topic_and_only_agents_publish_it():
    from broker.auth import AGENT_USER, SINK_USER, may_publish
    from telemetry.schema import DecisionRecord, SchemaError, decision_topic, decode, encode
    rec = DecisionRecord(flow_id="0123456789abcdef", ts_ns=5, algorithm="cubic-int", event="loss",
                         cwnd_bytes=14480, reason="loss: link (sink), L1 keeps cwnd", rtt_us=20_000)
    topic = decision_topic(rec.flow_id)
    assert decode(encode(rec), topic) == rec and topic == "intcc/v1/decision/0123456789abcdef"
    import pytest
    with pytest.raises(SchemaError, match="arrived on"):
        decode(encode(rec), "intcc/v1/estimate/0123456789abcdef")
    bad = encode(rec).replace(b'"loss"', b'"shrug"')
    with pytest.raises(SchemaError, match="event"):
        decode(bad, topic)
    assert may_publish(AGENT_USER, topic) and not may_publish(SINK_USER, topic) and not may_publish(None, topic)


def test_a_cca_record_round_trips_on_its_own_topic_and_only_the_sinks_side_publishes_it():
    from broker.auth import AGENT_USER, SINK_USER, may_publish
    from telemetry.schema import CcaRecord, cca_topic, decode, encode
    rec = CcaRecord(flow_id="0123456789abcdef", ts_ns=5, node_id=2, src="2001:db8:1::1", dst="2001:db8:3::2",
                    sport=40000, dport=5201, interval_ms=1000.0, scores={"reno": 0.1, "cubic": 0.7, "bbr": 0.2},
                    verdict="cubic")
    topic = cca_topic(rec.flow_id)
    assert decode(encode(rec), topic) == rec and topic == "intcc/v1/cca/0123456789abcdef"
    assert may_publish(SINK_USER, topic) and not may_publish(AGENT_USER, topic) and not may_publish(None, topic)
