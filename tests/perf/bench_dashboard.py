"""Benchmark: the dashboard.

1. Record published -> drawn in the browser: a flow record a quarter second apart with a
   running count, headless chromium on the page; per record, from the publisher's clock
   at publication to the page's clock when the update that carries it has been applied
   (charts' setData done), p50/p99. Target p99 <= 1 s.
2. The server's CPU (its process, CPU s per s) at 1,000 flow records/s (10 flows at the
   sink's 10 ms) + 200 hop records/s (2 nodes), with the page open.
3. An operator's busy node: 1,000 flows, one record per flow per second for a minute of
   history, then a fresh page: from navigation to its first chart drawn (target 2 s), the
   snapshot's size, the page's DOM nodes and charts, and how long applying an update takes.

Prints figures; asserts nothing about speed.   python -m tests.perf.bench_dashboard
As a script it also prints the figures as JSON with their provenance (a record for data/bench/).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from experiments.runs.services import free_port
from tests.perf import answer_help

SECONDS = 20
CREDS = "/run/intcc/test-broker/credentials.json"


def sink_client(url: str):
    from broker import client as mqttc
    from broker.auth import SINK_USER, parse_url, resolve_login
    u = resolve_login(parse_url(f"{url}?credentials={CREDS}"), SINK_USER)
    c = mqttc.make_client(u, "intcc-bench-sink")
    mqttc.start(c, u)
    return c


def flow_record(fid: str, packets: int):
    from telemetry.schema import FlowRecord, HopState
    hop = dict(ts_ns=time.time_ns(), queue_depth_bytes=15_000, queue_depth_pkts=10, queue_capacity_bytes=150_000,
               queue_drops=0, link_losses=packets // 50, data_rate_kbps=0, arrival_rate_pps=800, flow_count=2,
               queue_occupancy=0.1)
    return FlowRecord(flow_id=fid, ts_ns=time.time_ns(), reason="periodic", src="2001:db8::1", dst="2001:db8::2",
                      proto=6, sport=40000, dport=5201, seq=packets, packets=packets, lost=0, lost_congestion=0,
                      lost_link=0, reordered=0, loss_rate=0.0, interval_ms=10.0, interval_packets=8,
                      interval_lost=0, interval_lost_congestion=0, interval_lost_link=0,
                      path=[HopState(node_id=1, **hop), HopState(node_id=2, **hop)], one_way_delay_us=11_000.0,
                      sink_node_id=2)


def hop_record(node: int):
    from telemetry.schema import HopRecord
    return HopRecord(node_id=node, ts_ns=time.time_ns(), queue_depth_bytes=15_000, queue_depth_pkts=10,
                     queue_capacity_bytes=150_000, queue_drops=0, link_losses=0, data_rate_kbps=0,
                     arrival_rate_pps=800, flow_count=100, queue_occupancy=0.1, interval_ms=10.0,
                     top_flows=[[f"{k:016x}", 8] for k in range(1, 9)])


def load(client, stop: threading.Event, flows: int = 10, period_s: float = 0.01):
    """``flows`` flow records and 2 hop records per period, as a busy sink publishes."""
    from telemetry.schema import encode, flow_topic, hop_topic
    ids = [f"{k:016x}" for k in range(1, flows + 1)]
    n, next_t = 0, time.monotonic()
    while not stop.is_set():
        n += 1
        for fid in ids:
            client.publish(flow_topic(fid), encode(flow_record(fid, n * 8)), qos=0)
        for node in (1, 2):
            client.publish(hop_topic(node), encode(hop_record(node)), qos=0)
        next_t += period_s
        time.sleep(max(0.0, next_t - time.monotonic()))


def proc_cpu_s(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    opts = Options()
    opts.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))] if v else float("nan")


MANY_FLOWS, MANY_HISTORY_S = 1000, 60


def many_flows(client, web: int, drv) -> dict:
    """Part 3: 1,000 flows with a minute of history, then a fresh page."""
    import json
    import urllib.request
    from telemetry.schema import encode, flow_topic, hop_topic
    ids = [f"{k:016x}" for k in range(0x1000, 0x1000 + MANY_FLOWS)]
    t_end = time.monotonic() + MANY_HISTORY_S
    n = 0
    while time.monotonic() < t_end:
        n += 1
        t0 = time.monotonic()
        for fid in ids:
            client.publish(flow_topic(fid), encode(flow_record(fid, n * 8)), qos=0)
        for node in (1, 2):
            client.publish(hop_topic(node), encode(hop_record(node)), qos=0)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    time.sleep(1.5)
    snapshot_bytes = len(urllib.request.urlopen(f"http://127.0.0.1:{web}/api/snapshot").read())
    drv.get(f"http://127.0.0.1:{web}/")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and drv.execute_script("return !(window.intccDash && intccDash.firstChartMs)"):
        time.sleep(0.1)
    first_chart_s = drv.execute_script("return intccDash.firstChartMs") / 1000    # from the navigation's start
    drv.execute_script("window.applyMs = []; let t = performance.now(); intccDash.hooks.push(() => "
                       "{ const now = performance.now(); applyMs.push(now - t); t = now; });")
    # keep the flows alive for a few updates and time them (the hook runs after each is drawn)
    for n2 in range(n + 1, n + 6):
        for fid in ids:
            client.publish(flow_topic(fid), encode(flow_record(fid, n2 * 8)), qos=0)
        time.sleep(1.0)
    page = drv.execute_script("return {nodes: document.getElementsByTagName('*').length, "
                              "charts: document.querySelectorAll('.chart').length, "
                              "flows: Object.keys(intccDash.latest.flows).length}")
    res = {"flows": MANY_FLOWS, "history_s": MANY_HISTORY_S, "snapshot_bytes": snapshot_bytes,
           "first_chart_s": round(first_chart_s, 3), "dom_nodes": page["nodes"], "charts": page["charts"],
           "flows_on_page": page["flows"]}
    print(f"{MANY_FLOWS} flows with {MANY_HISTORY_S} s of history: snapshot {snapshot_bytes / 1e6:.1f} MB; a fresh "
          f"page drew its first chart {first_chart_s:.2f} s after navigation (target 2 s), {page['charts']} charts, "
          f"{page['nodes']} DOM nodes, {page['flows']} flows listed")
    print(json.dumps(res))
    return res


def main() -> dict:
    from broker.launch import BrokerProcess
    from telemetry.schema import encode, flow_topic
    port, web = free_port(), free_port()
    with BrokerProcess("mosquitto", port=port, credentials_file=CREDS) as broker:
        dash = subprocess.Popen([sys.executable, "-m", "intcc", "dashboard", "--broker", broker.url, "--listen",
                                 f"127.0.0.1:{web}"], stderr=subprocess.DEVNULL)
        drv = None
        try:
            client = sink_client(broker.url)
            time.sleep(2)
            drv = browser()
            drv.get(f"http://127.0.0.1:{web}/")
            # the page's clock each time an update was applied, with the count it carried
            drv.execute_script("window.applied = []; intccDash.hooks = intccDash.hooks || [];"
                               "intccDash.hooks.push(() => { const f = intccDash.latest.flows['00000000000000aa'];"
                               " if (f) applied.push([Date.now() / 1000, f.packets]); });")
            sent = {}
            for k in range(1, 4 * SECONDS + 1):
                sent[k] = time.time()
                client.publish(flow_topic("00000000000000aa"), encode(flow_record("00000000000000aa", k)), qos=0)
                time.sleep(0.25)
            time.sleep(2)
            applied = drv.execute_script("return applied")
            lat = []
            for k, t_pub in sent.items():
                seen = next((t for t, p in applied if p >= k), None)
                if seen is not None:
                    lat.append(seen - t_pub)
            print(f"record published -> drawn (the page applied the update carrying it): {len(lat)}/{len(sent)} "
                  f"records, p50 {pct(lat, 0.5):.3f} s, p99 {pct(lat, 0.99):.3f} s, max {max(lat):.3f} s")
            res = {"published_to_drawn_s": {"records": len(lat), "sent": len(sent), "p50": round(pct(lat, 0.5), 3),
                                            "p99": round(pct(lat, 0.99), 3), "max": round(max(lat), 3)}}
            stop = threading.Event()
            t = threading.Thread(target=load, args=(client, stop), daemon=True)
            t.start()
            time.sleep(3)
            before, t0 = proc_cpu_s(dash.pid), time.monotonic()
            time.sleep(SECONDS)
            used = proc_cpu_s(dash.pid) - before
            wall = time.monotonic() - t0
            stop.set()
            t.join(5)
            rates = drv.execute_script("return document.getElementById('rates').textContent")
            print(f"server CPU at 1,000 flow + 200 hop records/s, page open: {used / wall:.3f} CPU s/s "
                  f"(the page says: {rates})")
            res["server_cpu_s_per_s"] = round(used / wall, 3)
            res["many_flows"] = many_flows(client, web, drv)
            return res
        finally:
            if drv is not None:
                drv.quit()
            dash.terminate()
            dash.wait(10)


def test_bench_dashboard():
    main()


if __name__ == "__main__":
    answer_help(__doc__)
    import json
    from records import stamp
    print(json.dumps({**main(), "provenance": stamp()}, indent=1))
