"""The dashboard in a real headless browser (Debian's chromium + chromium-driver, selenium),
fed by a real sink: the wireless testbed at 5 % link loss with a cubic-int flow, its sink
publishing to mosquitto, ``intcc dashboard`` as its own process. The page loads, the path
view shows both nodes, the charts receive points, a value on the page is one the sink
published, the link-loss share shown is the sink's attribution, and when the broker
restarts the page says so and recovers by itself. A screenshot is kept."""
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from broker.launch import BrokerProcess
from broker.subscriber import TelemetryView
from ccp_agent.datapath import AgentProcess, DatapathProcess
from experiments.testbed.linkctl import set_loss
from experiments.runs.services import free_port
from experiments.testbed.traffic import BackgroundFlow
from telemetry.schema import FlowRecord
from tests.integration.tbutil import require_ccp_free, start_testbed

CREDS = "/run/intcc/test-broker/credentials.json"
SHOT = os.environ.get("INTCC_DASHBOARD_SCREENSHOT")      # also copy the screenshot here


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 1).close()
        return True
    except OSError:
        return False


def wait(cond, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    for tool in ("chromium", "chromedriver"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is missing: 'make setup' installs Debian's chromium and chromium-driver")
    opts = Options()
    opts.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,2600"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    yield driver
    driver.quit()


def test_the_dashboard_shows_a_lossy_wireless_path_live_and_survives_a_broker_restart(browser, tmp_path):
    require_ccp_free()
    port = free_port()
    broker = BrokerProcess("mosquitto", port=port, credentials_file=CREDS).start()
    tb = dash = None
    try:
        tb = start_testbed("wireless", "idash", exporter=f"{broker.url}?credentials={CREDS}", rate_mbps=10.0,
                           delay_ms=10.0, buffer_pkts=100)
        set_loss(tb, 5)
        web = free_port()
        dash = subprocess.Popen([sys.executable, "-m", "intcc", "dashboard", "--broker", broker.url, "--listen",
                                 f"127.0.0.1:{web}"], stderr=open(tmp_path / "dashboard.log", "wb"))
        with DatapathProcess(state_dir=str(tmp_path / "dp")) as dp, TelemetryView(broker.url) as view:
            published = {}                    # flow id -> every cumulative packet count the sink published
            view.on_record(lambda rec, topic: published.setdefault(rec.flow_id, set()).add(rec.packets)
                           if isinstance(rec, FlowRecord) else None)
            # the agent publishes its decisions there as the agent user (its password in CREDS)
            agent = AgentProcess("cubic-int", ["--policy", "l1", "--broker", f"{broker.url}?credentials={CREDS}", "--state-dir",
                                               dp.state_dir], log_path=str(tmp_path / "agent.log")).start()
            try:
                dp.wait_agent(True)
                flow = BackgroundFlow(tb, "sta1", "sta2", "ccp", 75, 1.0, port=5201)
                wait(lambda: listening(web), 15, "the dashboard to listen")
                browser.get(f"http://127.0.0.1:{web}/")
                js = "return window.intccDash && window.intccDash"
                wait(lambda: browser.execute_script(js + ".updates >= 3 && Object.keys(intccDash.latest.flows)"
                                                         ".length > 0"), 30, "updates with a flow")
                wait(lambda: browser.execute_script(
                    "return Object.values(intccDash.charts).filter(c => c.points >= 3).length >= 6"), 20,
                    "charts with points")
                # the path view: both wireless nodes, in order
                # the data flow (iperf3's control connection has the same port, and few packets)
                wait(lambda: browser.execute_script("return Object.values(intccDash.latest.flows).some("
                                                    "f => f.dport === 5201 && f.packets > 500)"), 20, "the data flow")
                fid = browser.execute_script("const fs = Object.values(intccDash.latest.flows).filter("
                                             "f => f.dport === 5201); fs.sort((a, b) => b.packets - a.packets); "
                                             "return fs[0].flow_id")
                nodes = [e.get_attribute("data-node") for e in
                         browser.find_elements("css selector", f'.path[data-flow="{fid}"] .node')]
                assert nodes == ["1", "2"], nodes
                # the sender's side: cubic-int publishes its decisions to its --broker
                wait(lambda: browser.execute_script(f"const c = intccDash.charts['decision-{fid}-cwnd']; "
                                                    "return c && c.points >= 2"), 20, "the sender's window chart")
                why = browser.execute_script(f"return intccDash.latest.decisions['{fid}']")
                assert why["algorithm"] == "cubic-int" and why["cwnd_bytes"] > 0, why
                # a value on the page is one the sink published
                shown = browser.execute_script(f"return intccDash.latest.flows['{fid}'].packets")
                assert shown in published.get(fid, ()), (shown, sorted(published.get(fid, ()))[-5:])
                # the link-loss share shown is the sink's attribution (cumulative, both ends)
                wait(lambda: browser.execute_script(f"return intccDash.latest.flows['{fid}'].lost > 20"), 20,
                     "losses on the page")
                page = browser.execute_script(f"const f = intccDash.latest.flows['{fid}']; "
                                              "return [f.lost_link, f.lost, f.packets]")
                sink = view.flow(fid).record
                assert abs(page[0] / page[1] - sink.lost_link / sink.lost) < 0.05, (page, sink.lost_link, sink.lost)
                assert page[0] / page[1] > 0.5          # at 5 % link loss most losses are the link's
                # bad records (as the sink user, who may publish there) never reach the page: counted
                from broker import client as mqttc
                from broker.auth import SINK_USER, parse_url, resolve_login
                u = resolve_login(parse_url(f"{broker.url}?credentials={CREDS}"), SINK_USER)
                bad = mqttc.make_client(u, "intcc-test-bad")
                mqttc.start(bad, u)
                flows_before = browser.execute_script("return Object.keys(intccDash.latest.flows).length")
                for topic, payload in (("intcc/v1/flow/00000000000000ee", b"not json"),
                                       ("intcc/v1/flow/00000000000000ee", b'{"v": 1, "type": "flow"}'),
                                       ("intcc/v1/hop/7", b'{"v": 9, "type": "hop"}')):
                    bad.publish(topic, payload, qos=1)
                wait(lambda: int(browser.find_element("id", "feed").text.split("rejected ")[1]) >= 3, 15,
                     "the page to count the three bad records")
                assert browser.execute_script("return Object.keys(intccDash.latest.flows).length") == flows_before
                assert not browser.execute_script("return '00000000000000ee' in intccDash.latest.flows || "
                                                  "'7' in intccDash.latest.hops")
                mqttc.stop(bad)
                # active identification's steps reach Events, with the stages' measurements
                from broker.auth import AGENT_USER
                from telemetry.schema import IdentifyRecord, encode, estimate_topic
                a = resolve_login(parse_url(f"{broker.url}?credentials={CREDS}"), AGENT_USER)
                agent_pub = mqttc.make_client(a, "intcc-test-identify")
                mqttc.start(agent_pub, a)
                agent_pub.publish(estimate_topic(fid), encode(IdentifyRecord(
                    flow_id=fid, ts_ns=time.time_ns(), node_id=2, verdict="reno", best="reno", posterior=0.97,
                    evidence=[["loss_cut", 0.42], ["queue_trend", 1.0]])), qos=1)
                wait(lambda: f"flow {fid}: competitor named reno (97 %); loss_cut 0.42, queue_trend 1.00"
                     in browser.find_element("id", "events").text, 15, "the identification in Events")
                mqttc.stop(agent_pub)
                browser.save_screenshot(str(tmp_path / "dashboard.png"))
                if SHOT:
                    shutil.copy(tmp_path / "dashboard.png", SHOT)
                # the broker restarts: the page says so, then recovers by itself
                broker.stop()
                wait(lambda: "disconnected" in browser.find_element("id", "conn").text, 15,
                     "the page to show the broker disconnected")
                before = browser.execute_script(f"return intccDash.charts['flow-{fid}-rate'].last.t")
                broker = BrokerProcess("mosquitto", port=port, credentials_file=CREDS).start()
                wait(lambda: browser.find_element("id", "conn").text == "broker connected", 30,
                     "the page to show the broker connected again")
                wait(lambda: browser.execute_script(f"return intccDash.charts['flow-{fid}-rate'].last.t") > before + 2,
                     30, "new points after the restart")
                assert flow.running      # (not waited for: the testbed's teardown ends it, seconds early)
            finally:
                agent.stop()
                dp.wait_agent(False)
    finally:
        if dash is not None:
            dash.terminate()
            dash.wait(10)
        if tb is not None:
            tb.down()
        broker.stop()
