"""Telemetry over MQTT with real brokers, real sinks and real flows.

Loss attribution is checked against the elements' own ground-truth counters:
the wireless channel's link losses and the bottleneck queue's drops.
"""
import json
import re
import subprocess
import time

import paho.mqtt.client as mqtt
import pytest

from broker.auth import AGENT_USER, SINK_USER, load_credentials
from broker.launch import BrokerProcess
from experiments.runs.services import free_port
from telemetry.schema import decode, flow_topic, hop_topic
from broker.subscriber import TelemetryView
from experiments.testbed.teardown import teardown
from experiments.testbed.traffic import udp_flow
from tests.integration.tbutil import start_testbed

CREDS = "/run/intcc/test-broker/credentials.json"


def main_flow(view):
    """The flow with the most packets (other traffic, such as ICMP or a control connection, is tiny)."""
    flows = view.flows()
    assert flows, f"no flow records arrived ({view.counters()})"
    return max(flows.values(), key=lambda f: f.record.packets).record


@pytest.fixture(scope="module")
def mosquitto():
    with BrokerProcess("mosquitto", port=free_port(), credentials_file=CREDS) as b:
        yield b


@pytest.fixture(scope="module")
def wireless(mosquitto):
    teardown("tmq")
    tb = start_testbed("wireless", "tmq", exporter=f"{mosquitto.url}?credentials={CREDS}", loss_pct=5)
    yield tb
    tb.down()


def test_link_losses_are_attributed_to_the_link(wireless, mosquitto):
    with TelemetryView(mosquitto.url) as view:
        assert view.wait_connected()
        before = wireless.counters("ap1")
        udp_flow(wireless, "sta1", "sta2", 4, 6)
        time.sleep(0.3)
        after = wireless.counters("ap1")
        rec = main_flow(view)
    link_truth = after["wl1"]["link_losses"] - before["wl1"]["link_losses"]
    drops_truth = after["q1"]["drops"] - before["q1"]["drops"]
    assert drops_truth == 0 and link_truth > 50, (drops_truth, link_truth)
    # The sink saw (nearly) every loss the channel made, and called them link losses.
    assert rec.lost >= 0.9 * link_truth and rec.lost <= link_truth + 5, (rec.lost, link_truth)
    assert rec.lost_link >= 0.95 * rec.lost, rec
    assert rec.path[0].rssi_dbm is not None and rec.path[0].link_losses > 0


def test_congestion_losses_are_attributed_to_congestion(mosquitto):
    teardown("tmqd")
    tb = start_testbed("dumbbell", "tmqd", exporter=f"{mosquitto.url}?credentials={CREDS}",
                       bottleneck_mbps=5)
    try:
        with TelemetryView(mosquitto.url) as view:
            assert view.wait_connected()
            udp_flow(tb, "s1", "r1", 8, 5)        # 8 Mbit/s into a 5 Mbit/s bottleneck
            time.sleep(0.3)
            rec = main_flow(view)
        c = tb.counters("sw1")
        drops_truth = c["q2"]["drops"]
    finally:
        tb.down()
    assert drops_truth > 500
    assert rec.lost >= 0.9 * drops_truth and rec.lost_link == rec.lost - rec.lost_congestion
    assert rec.lost_congestion >= 0.95 * rec.lost, rec


def test_four_flows_through_a_lossy_congested_hop_each_get_their_own_losses(wireless, mosquitto):
    """The node counts drops and link losses per flow and stamps each packet's
    own; the sink puts each flow's losses on them. Four UDP flows of 3.5 Mbit/s into the
    10 Mbit/s wireless hop at 5 % link loss: congestion and link losses at once, every
    flow both. Each flow's attribution is checked against the elements' per-flow counts."""
    import threading
    ports = (5301, 5302, 5303, 5304)
    before = wireless.counters("ap1")
    with TelemetryView(mosquitto.url) as view:
        assert view.wait_connected()
        threads = [threading.Thread(target=udp_flow, args=(wireless, "sta1", "sta2", 3.5, 5), kwargs={"port": p})
                   for p in ports]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        time.sleep(0.3)
        recs = {f.record.dport: f.record for f in view.flows().values() if f.record.dport in ports}
    after = wireless.counters("ap1")
    assert set(recs) == set(ports), f"records for ports {sorted(recs)} only"
    shared_link = after["wl1"]["link_losses"] - before["wl1"]["link_losses"]
    shared_drops = after["q1"]["drops"] - before["q1"]["drops"]
    assert shared_link > 100 and shared_drops > 100, (shared_link, shared_drops)   # both kinds, shared
    for port, rec in recs.items():
        fid = rec.flow_id
        drops = after["q1"]["flow_drops"].get(fid, 0) - before["q1"]["flow_drops"].get(fid, 0)
        link = after["wl1"]["flow_losses"].get(fid, 0) - before["wl1"]["flow_losses"].get(fid, 0)
        assert drops + link > 20, (port, drops, link)       # (a flow that started late may see few drops)
        agreed = min(rec.lost_congestion, drops) + min(rec.lost_link, link)
        print(f"port {port}: sink {rec.lost_congestion} congestion / {rec.lost_link} link, the elements "
              f"{drops} / {link}: {agreed / (drops + link):.1%} as the elements say")
        assert agreed >= 0.95 * (drops + link), (port, rec.lost_congestion, drops, rec.lost_link, link)
        assert rec.lost <= drops + link + 5, (port, rec.lost, drops, link)


def test_mosquitto_sub_receives_valid_json_records_during_a_flow(wireless, mosquitto):
    sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(mosquitto.port), "-t", "intcc/v1/#",
                            "-v", "-C", "40", "-W", "20"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    ping = wireless.popen("sta1", ["ping", "-6", "-i", "0.01", "-c", "400", wireless.addr("sta2")],
                          stdout=subprocess.DEVNULL)
    out, _ = sub.communicate(timeout=30)
    ping.kill()
    ping.wait()
    lines = out.strip().splitlines()
    assert len(lines) == 40
    kinds = set()
    for line in lines:
        topic, payload = line.split(" ", 1)
        rec = decode(payload.encode(), topic)
        assert json.loads(payload)["v"] == 1
        kinds.add(rec.type)
    assert kinds == {"flow", "hop"}


def test_broker_killed_and_restarted_mid_flow(wireless):
    """Packets keep flowing while the broker is down; sink and subscriber come back by themselves."""
    port = free_port()
    teardown("tmqr")
    b = BrokerProcess("mosquitto", port=port, credentials_file=CREDS).start()
    tb = start_testbed("wireless", "tmqr", exporter=f"{b.url}?credentials={CREDS}")
    try:
        view = TelemetryView(b.url).start()
        assert view.wait_connected()
        ping = tb.popen("sta1", ["ping", "-6", "-i", "0.01", "-w", "12", tb.addr("sta2")],
                        stdout=subprocess.PIPE, text=True)
        time.sleep(2)
        assert view.flows(), "no telemetry before the broker was killed"
        b.kill()
        b.stop()                     # already dead: only removes its state directory
        down_at = time.monotonic_ns()
        stripped0 = tb.counters("ap2")["sink1"]["stripped"]
        time.sleep(2)
        sink = tb.counters("ap2")["sink1"]
        assert sink["stripped"] > stripped0 + 100, "packets stopped while the broker was down"
        assert sink["connected"] == 0
        b = BrokerProcess("mosquitto", port=port, credentials_file=CREDS).start()
        deadline = time.time() + 15
        while time.time() < deadline:
            fresh = [f for f in view.flows().values() if f.received_ns > down_at + 2e9]
            if fresh and tb.counters("ap2")["sink1"]["broker_connects"] >= 2:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"no telemetry after the broker came back: {view.counters()}, "
                        f"{tb.counters('ap2')['sink1']}")
        out, _ = ping.communicate(timeout=20)
        sent, received = map(int, re.search(r"(\d+) packets transmitted, (\d+) received", out).groups())
        assert received >= 0.95 * sent, out[-300:]          # the data plane never noticed
        assert view.connects >= 2
        view.stop()
    finally:
        tb.down()
        b.stop()


def _publish(port, user, password, topic, payload):
    """Publish once; returns the CONNACK reason as text."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    if user:
        c.username_pw_set(user, password)
    reasons = []
    c.on_connect = lambda cl, ud, fl, rc, pr=None: reasons.append(str(rc))
    c.connect("127.0.0.1", port)
    c.loop_start()
    end = time.time() + 3
    while not reasons and time.time() < end:
        time.sleep(0.02)
    if c.is_connected():
        c.publish(topic, payload).wait_for_publish(2)
    time.sleep(0.2)
    c.disconnect()
    c.loop_stop()
    return reasons[0] if reasons else "no answer"


HOP = {"v": 1, "type": "hop", "node_id": 7, "ts_ns": 1, "queue_depth_bytes": 0, "queue_depth_pkts": 0,
       "queue_capacity_bytes": 0, "queue_drops": 0, "link_losses": 0, "data_rate_kbps": 0,
       "arrival_rate_pps": 0, "flow_count": 0}


@pytest.mark.parametrize("kind", ["embedded", "mosquitto"])
def test_only_the_sink_may_publish_telemetry(kind):
    with BrokerProcess(kind, port=free_port(), credentials_file=CREDS) as b:
        users = load_credentials(CREDS)
        with TelemetryView(b.url) as view:
            assert view.wait_connected()
            payload = json.dumps(HOP).encode()
            assert _publish(b.port, None, None, hop_topic(7), payload) == "Success"   # anonymous
            assert _publish(b.port, SINK_USER, "wrong", hop_topic(7), payload) == "Not authorized"
            assert _publish(b.port, AGENT_USER, users[AGENT_USER], hop_topic(7), payload) == "Success"
            time.sleep(0.5)
            assert view.hop(7) is None and view.received == 0
            assert _publish(b.port, SINK_USER, users[SINK_USER], hop_topic(7), payload) == "Success"
            end = time.time() + 3
            while view.hop(7) is None and time.time() < end:
                time.sleep(0.05)
            assert view.hop(7) is not None


@pytest.mark.parametrize("kind", ["embedded", "mosquitto"])
def test_malformed_records_are_counted_and_never_delivered(kind):
    with BrokerProcess(kind, port=free_port(), credentials_file=CREDS) as b:
        users = load_credentials(CREDS)
        delivered = []
        with TelemetryView(b.url) as view:
            view.on_record(lambda rec, topic: delivered.append(rec))
            assert view.wait_connected()
            bad = [b"\x00\xffnot json", json.dumps(dict(HOP, v=9)).encode(),
                   json.dumps({k: v for k, v in HOP.items() if k != "queue_drops"}).encode(),
                   json.dumps(dict(HOP, node_id=8)).encode()]              # right record, wrong topic
            for payload in bad:
                _publish(b.port, SINK_USER, users[SINK_USER], hop_topic(7), payload)
            end = time.time() + 3
            while view.rejected < len(bad) and time.time() < end:
                time.sleep(0.05)
            assert view.rejected == len(bad) and view.accepted == 0 and not delivered
            assert view.hop(7) is None and view.hop(8) is None
            assert set(view.rejected_reasons) >= {"not JSON", "unsupported version 9 (this reader knows v1)"}


def test_sink_url_with_the_wrong_password_is_refused_and_counted(mosquitto):
    from broker.publisher import MqttExporter
    exp = MqttExporter(f"mqtt://{SINK_USER}:wrong@127.0.0.1:{mosquitto.port}")
    try:
        time.sleep(1.0)
        assert exp.counters()["connected"] == 0 and exp.counters()["broker_connects"] == 0
    finally:
        exp.close()


def test_flow_topic_matches_the_sender_side_flow_id(wireless, mosquitto):
    """The sender computes the same flow id from its socket as the sink does from packets."""
    from telemetry.flowid import flow_id
    with TelemetryView(mosquitto.url) as view:
        assert view.wait_connected()
        udp_flow(wireless, "sta1", "sta2", 1, 1, port=5202)
        time.sleep(0.3)
        rec = main_flow(view)
    assert (rec.src, rec.dst, rec.dport) == (wireless.addr("sta1"), wireless.addr("sta2"), 5202)
    fid = flow_id(wireless.addr("sta1"), wireless.addr("sta2"), 17, rec.sport, 5202)
    assert fid == rec.flow_id and view.flow(fid) is not None
    assert flow_topic(fid) == f"intcc/v1/flow/{fid}"


def _suback(port, topic_filter):
    """Subscribe anonymously; returns the SUBACK reason (granted QoS or failure)."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    got = []
    c.on_subscribe = lambda cl, ud, mid, rcs, pr=None: got.extend(rcs)
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        c.subscribe(topic_filter, qos=0)
        end = time.time() + 3
        while not got and time.time() < end:
            time.sleep(0.02)
    finally:
        c.disconnect()
        c.loop_stop()
    return got[0] if got else None


def test_anonymous_clients_read_intcc_topics_only_on_the_embedded_broker():
    """The ACL is the contract (docs/telemetry.md): anonymous clients read intcc/v1/#,
    nothing else; the embedded broker granted any subscription before."""
    with BrokerProcess("embedded", port=free_port(), credentials_file=CREDS) as b:
        assert not _suback(b.port, "intcc/v1/#").is_failure
        assert not _suback(b.port, "intcc/v1/flow/+").is_failure
        for outside in ("#", "$SYS/#", "+/v1/#", "other/topic"):
            assert _suback(b.port, outside).is_failure, outside
