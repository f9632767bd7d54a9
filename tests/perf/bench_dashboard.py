"""Benchmark: the dashboard.

1. Record published -> drawn in the browser: a flow record a quarter second apart with a
   running count, headless chromium on the page; per record, from the publisher's clock
   at publication to the page's clock when the update that carries it has been applied
   (charts' setData done), p50/p99. Target p99 <= 1 s.
2. The server's CPU (its process, CPU s per s) at 1,000 flow records/s (10 flows at the
   sink's 10 ms) + 200 hop records/s (2 nodes), with the page open.

Prints figures; asserts nothing about speed.   python -m tests.perf.bench_dashboard
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from experiments.runner import free_port
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


def main():
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
        finally:
            if drv is not None:
                drv.quit()
            dash.terminate()
            dash.wait(10)


def test_bench_dashboard():
    main()


if __name__ == "__main__":
    answer_help(__doc__)
    main()
