"""The dashboard with an operator's busy node: 1,000 flows through one sink (a record per
flow per second, published to mosquitto as a sink does), ``intcc dashboard`` as its own
process, headless chromium on the page. The page stays usable: it charts the worst flows
and the chosen ones only, lists the rest and finds one by search; a chosen flow's path
shows its sender's algorithm and the latest verdict; a one-point chart spans a minute, not
years; queue occupancy is a percentage on every hop's axis; a wired hop has no RSSI chart.
How fast the first chart appears is measured by tests/perf/bench_dashboard.py, not here."""
import shutil
import subprocess
import sys
import threading
import time

from broker.launch import BrokerProcess
from experiments.runs.services import free_port
from tests.integration.test_dashboard_browser import CREDS, SHOT, browser, listening, wait  # noqa: F401 (fixture)

FLOWS = 1000
LOSSY = [f"{k:016x}" for k in range(1, 4)]            # the three with losses: the worst
WATCHED = f"{500:016x}"                                # a quiet flow, found by search, with an agent
ONCE = "00000000000fffff"                              # published once: a one-point chart


def client(url, user):
    from broker import client as mqttc
    from broker.auth import parse_url, resolve_login
    u = resolve_login(parse_url(f"{url}?credentials={CREDS}"), user)
    c = mqttc.make_client(u, f"intcc-test-{user}")
    mqttc.start(c, u)
    return c


def flow_record(fid: str, n: int):
    from telemetry.schema import FlowRecord, HopState
    hop = dict(ts_ns=time.time_ns(), queue_depth_bytes=15_000, queue_depth_pkts=10, queue_capacity_bytes=150_000,
               queue_drops=0, link_losses=0, data_rate_kbps=0, arrival_rate_pps=800, flow_count=FLOWS,
               queue_occupancy=0.1)
    lost = 5 if fid in LOSSY else 0
    return FlowRecord(flow_id=fid, ts_ns=time.time_ns(), reason="periodic", src="2001:db8::1", dst="2001:db8::2",
                      proto=6, sport=10_000 + int(fid, 16) % 50_000, dport=5201, seq=n * 100, packets=n * 100,
                      lost=n * lost, lost_congestion=n * lost, lost_link=0, reordered=0, loss_rate=lost / 100,
                      interval_ms=1000.0, interval_packets=100, interval_lost=lost, interval_lost_congestion=lost,
                      interval_lost_link=0,
                      # node 1 separates flows by RTT into 4 queues (a quarter each), node 2 has one FIFO
                      path=[HopState(node_id=1, **hop, queue_index=int(fid, 16) % 4, queue_count=4,
                                     queue_weight=FLOWS // 4),
                            HopState(node_id=2, **hop, queue_index=0, queue_count=1, queue_weight=1)],
                      one_way_delay_us=11_000.0, sink_node_id=2)


def hop_record(node: int, wireless: bool):
    from telemetry.schema import HopRecord
    extra = dict(rssi_dbm=-50, mcs=7, data_rate_kbps=65_000) if wireless else dict(data_rate_kbps=0)
    return HopRecord(node_id=node, ts_ns=time.time_ns(), queue_depth_bytes=15_000 if node == 1 else 0,
                     queue_depth_pkts=10, queue_capacity_bytes=150_000, queue_drops=0, link_losses=0,
                     arrival_rate_pps=800, flow_count=FLOWS, queue_occupancy=0.1 if node == 1 else 0.0,
                     interval_ms=1000.0, **extra)


def publish(url: str, stop: threading.Event):
    from broker.auth import AGENT_USER, SINK_USER
    from telemetry.schema import (DecisionRecord, EstimateRecord, decision_topic, encode, estimate_topic,
                                  flow_topic, hop_topic)
    sink, agent = client(url, SINK_USER), client(url, AGENT_USER)
    ids = [f"{k:016x}" for k in range(1, FLOWS + 1)]
    sink.publish(flow_topic(ONCE), encode(flow_record(ONCE, 1)), qos=1)
    n = 0
    while not stop.is_set():
        n += 1
        for fid in ids:
            sink.publish(flow_topic(fid), encode(flow_record(fid, n)), qos=0)
        sink.publish(hop_topic(1), encode(hop_record(1, True)), qos=0)
        sink.publish(hop_topic(2), encode(hop_record(2, False)), qos=0)
        agent.publish(decision_topic(WATCHED), encode(DecisionRecord(
            flow_id=WATCHED, ts_ns=time.time_ns(), algorithm="bbr", event="report", cwnd_bytes=40_000,
            reason="a report")), qos=0)
        agent.publish(estimate_topic(WATCHED), encode(EstimateRecord(
            flow_id=WATCHED, ts_ns=time.time_ns(), local_cca="bbr", estimate="cubic", confidence=0.8,
            votes={"cubic": 40, "bbr": 10}, window=50, estimates=60)), qos=0)
        stop.wait(1.0)
    for c in (sink, agent):
        c.loop_stop()
        c.disconnect()


def fresh(read):
    """``read()`` of elements the page may have redrawn meanwhile (it rewrites the list and
    the paths every second): tried again on a stale element, as a person would look again."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt():
        try:
            return [read()]
        except StaleElementReferenceException:
            return None
    return wait(attempt, 10, "elements that stay put")[0]


def test_a_thousand_flows_chart_the_worst_and_the_chosen_and_list_the_rest(browser, tmp_path):  # noqa: F811
    port = free_port()
    broker = BrokerProcess("mosquitto", port=port, credentials_file=CREDS).start()
    stop = threading.Event()
    feeder = threading.Thread(target=publish, args=(broker.url, stop), daemon=True)
    dash = None
    try:
        web = free_port()
        dash = subprocess.Popen([sys.executable, "-m", "intcc", "dashboard", "--broker", broker.url, "--listen",
                                 f"127.0.0.1:{web}"], stderr=open(tmp_path / "dashboard.log", "wb"))
        wait(lambda: listening(web), 15, "the dashboard to listen")
        feeder.start()
        time.sleep(4)                                              # a few seconds of every flow
        browser.get(f"http://127.0.0.1:{web}/")
        wait(lambda: browser.execute_script(
            f"return window.intccDash && Object.keys(intccDash.latest.flows).length >= {FLOWS} && "
            "intccDash.updates >= 2"), 30, "every flow on the page")
        # charted: the worst flows only (the three lossy ones among them), the rest listed
        drawn = browser.execute_script("return intccDash.drawn")
        assert set(LOSSY) <= set(drawn) and len(drawn) <= 4, drawn
        charts = browser.execute_script("return document.querySelectorAll('.chart').length")
        nodes = browser.execute_script("return document.getElementsByTagName('*').length")
        assert charts <= 4 * 3 + 4 + 3, charts                  # 4 flows x 3, the wireless hop 4, the wired 3
        assert nodes < 8000, nodes                                # was 93,000 with a chart per flow
        assert browser.find_element("id", "flow-count").text.startswith(f"{FLOWS + 1} flows")
        assert len(browser.find_elements("css selector", "#flow-list tbody tr")) == 50
        # occupancy is a percentage on both hops' axes; the wired hop has no RSSI chart
        for node in (1, 2):
            y = browser.execute_script(f"const s = intccDash.charts['hop-{node}-occupancy'].plot.scales.y; "
                                       "return [s.min, s.max]")
            assert y == [0, 100], (node, y)
        assert browser.execute_script("return 'hop-1-rssi' in intccDash.charts && !('hop-2-rssi' in intccDash.charts)")
        # search finds a quiet flow; choosing it charts it, and its path shows its sender and verdict
        box = browser.find_element("id", "flow-search")
        box.send_keys(WATCHED)
        wait(lambda: fresh(lambda: [r.get_attribute("data-flow") for r in
                                    browser.find_elements("css selector", "#flow-list tbody tr")]) == [WATCHED],
             10, "the search")
        fresh(lambda: browser.find_element("css selector", f'#flow-list tr[data-flow="{WATCHED}"] input.choose').click()
              or True)
        wait(lambda: browser.execute_script(f"return 'flow-{WATCHED}-rate' in intccDash.charts"), 10,
             "the chosen flow's charts")
        path = fresh(lambda: browser.find_element("css selector", f'.path[data-flow="{WATCHED}"]').text)
        assert "sender: bbr" in path and "competitor: cubic (80 %)" in path, path
        assert fresh(lambda: [e.get_attribute("data-node") for e in browser.find_elements(
            "css selector", f'.path[data-flow="{WATCHED}"] .node')]) == ["1", "2"]
        assert f"flows={WATCHED}" in browser.current_url            # a link to this view keeps the choice
        # RTT separation's queues: node 1's four, each with its quarter of the flows, counted
        rows = fresh(lambda: [r.text for r in browser.find_elements("css selector", "#queues tbody tr")])
        assert len(rows) == 4 and all(r.startswith(f"1 {k} of 4 {FLOWS // 4}") for k, r in enumerate(rows)), rows
        assert f"{FLOWS // 4}:" in rows[0] and all("more" in r for r in rows), rows
        # a flow with one point: its chart spans a minute, not years
        browser.execute_script(f"intccDash.choose('{ONCE}', true)")
        span = browser.execute_script(f"const s = intccDash.charts['flow-{ONCE}-rate'].plot.scales.x; "
                                      "return s.max - s.min")
        assert 0 < span <= 120, span
        browser.save_screenshot(str(tmp_path / "dashboard-1000-flows.png"))
        if SHOT:
            shutil.copy(tmp_path / "dashboard-1000-flows.png", SHOT.replace(".png", "-1000-flows.png"))
    finally:
        stop.set()
        if dash is not None:
            dash.terminate()
            dash.wait(10)
        broker.stop()
