"""Benchmark: telemetry latency from a record leaving the sink to a subscriber's
callback, through the embedded broker (amqtt) and through mosquitto, at about
1,000 flow records/s (plus the hop records the sink sends alongside).

Three processes, as deployed: broker; a sink publisher (the real MqttExporter
fed real IOAM packets of 10 flows, one packet per flow every 10 ms, so each
flow publishes once per packet); the
subscriber (TelemetryView) here. Latency = callback time - record's ts_ns (one
host, one clock). Prints figures; asserts nothing about speed.

    python -m tests.perf.bench_telemetry        or        make bench
"""
from __future__ import annotations

import json
import multiprocessing as mp
import socket
import statistics
import threading
import time
from tests.perf import answer_help

SECONDS = 10
FLOWS = 10
CREDS = "/run/intcc/bench-broker/credentials.json"


def _packets():
    from int_node import ioam
    from int_node.packet import flow_key
    from tests.helpers import ipv6_frame
    out = []
    for i in range(FLOWS):
        f = ioam.insert_int(ipv6_frame(200, nh=17, sport=40000 + i), 2, 0, time.time_ns())
        off = ioam.find_trace(f)
        for node in (1, 2):
            ioam.stamp_default(f, off, 63, node, 1, 2, time.time_ns(), 1000, 3000, 2, -60, 5, FLOWS,
                               65000, 0, 0, 800, 150000)
        s = ioam.strip_int(f)
        out.append((flow_key(s.frame), s.trace_raw, s.e2e_raw))
    return out


def _sink(url: str, seconds: float, ready, result):
    from broker.publisher import MqttExporter
    exp = MqttExporter(f"{url}?credentials={CREDS}&period_ms=9&min_gap_ms=1")
    while not exp.counters()["connected"]:
        time.sleep(0.05)
    ready.set()
    pkts = _packets()
    t0 = time.monotonic()
    next_t, i = t0, 0
    while time.monotonic() - t0 < seconds:
        key, trace, e2e = pkts[i % FLOWS]
        exp.export(key, trace, e2e, time.time_ns())
        i += 1
        next_t += 0.001     # one packet per ms, flows in turn: each flow every 10 ms
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    time.sleep(0.5)
    result.update(exp.counters())
    exp.close()


def measure(kind: str) -> dict:
    from broker.launch import BrokerProcess
    from broker.subscriber import TelemetryView
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lat_us, lock = [], threading.Lock()

    def on_record(rec, topic):
        if rec.type == "flow":
            d = (time.time_ns() - rec.ts_ns) / 1000
            with lock:
                lat_us.append(d)
    with BrokerProcess(kind, port=port, credentials_file=CREDS) as b:
        with TelemetryView(b.url) as view:
            view.on_record(on_record)
            assert view.wait_connected()
            ctx = mp.get_context("spawn")
            ready, result = ctx.Event(), ctx.Manager().dict()
            p = ctx.Process(target=_sink, args=(b.url, SECONDS, ready, result))
            p.start()
            ready.wait(20)
            p.join(SECONDS + 30)
            time.sleep(0.3)
            counters = view.counters()
    lat = sorted(lat_us[len(lat_us) // 10:])     # skip the first 10% (connection warm-up)
    return {"broker": kind, "flow_records_received": len(lat_us),
            "flow_records_per_s": len(lat_us) / SECONDS,
            "latency_us_p50": statistics.median(lat), "latency_us_p99": lat[int(0.99 * (len(lat) - 1))],
            "latency_us_max": lat[-1], "sink": dict(result), "subscriber": counters}


def run_benchmark() -> list:
    return [measure("embedded"), measure("mosquitto")]


def report(rows) -> str:
    lines = [f"{'broker':10} {'flow rec/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'sink drops':>10} {'rejected':>8}"]
    for r in rows:
        drops = r["sink"].get("queue_drops", 0) + r["sink"].get("not_connected_drops", 0)
        lines.append(f"{r['broker']:10} {r['flow_records_per_s']:>10.0f} {r['latency_us_p50'] / 1000:>8.2f} "
                     f"{r['latency_us_p99'] / 1000:>8.2f} {r['latency_us_max'] / 1000:>8.2f} {drops:>10} "
                     f"{r['subscriber']['rejected']:>8}")
    lines.append("targets: p99 <= 5 ms with mosquitto, <= 20 ms embedded")
    return "\n".join(lines)


def test_telemetry_latency_benchmark():
    rows = run_benchmark()
    print("\n" + report(rows))
    assert all(r["flow_records_received"] > 0 for r in rows)


if __name__ == "__main__":
    answer_help(__doc__)
    res = run_benchmark()
    print(report(res))
    print(json.dumps(res, indent=1, default=str))
