"""Benchmark: an INT node's forwarding rate and added latency, beside kernel
forwarding measured in the same run on an identical testbed beside it (h1 -- n1 -- h2).

The kernel's rate is measured again beside each variant and each ratio is to that run.

The node path is FromDevice -> INTSource -> INTTransit -> Queue -> ToDevice
(plus the routing elements): every packet gets INT inserted and stamped, and
h2 receives it with the headers (its MTU is raised for them). Node variants:
CPython (and CPython pushing each frame through the elements alone, not in batches),
PyPy, and each of them on a core kept polling when idle (poll_idle: at low load a halted
vCPU's wake-up is most of what a node adds) and with its event loop busy polling for 2 ms
after each packet (busy_poll_us; no wake-up, and the interpreter's code stays in the
caches). Prints figures;
asserts nothing about speed (shared machines are noisy).

    python -m tests.perf.bench_forwarding        or        make bench
"""
from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import time

from experiments.testbed.teardown import TestbedError, teardown
from experiments.testbed.bed import Testbed
from experiments.testbed.topo import load_topo
from tests.perf import answer_help

TOPO = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "topologies", "line.toml")
FRAME_BYTES = 1500
UDP_PAYLOAD = FRAME_BYTES - 14 - 40 - 8
SECONDS = 5


NODE_CPU = 1   # the node gets a core of its own (hosts are not pinned)
LATENCY_RATES = ((100, 100), (1000, 500))   # (ping Hz, pings per round)
LATENCY_ROUNDS = 6


def _iperf(tb, args, port):
    srv = tb.popen("h2", ["iperf3", "-s", "-1", "-p", str(port)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        tb.wait_listening("h2", port)
        res = tb.run("h1", ["iperf3", "-6", "-c", tb.addr("h2"), "-p", str(port), "-t", str(SECONDS), "-J",
                            "--connect-timeout", "3000"] + args, timeout=SECONDS + 30)
        return json.loads(res.stdout)
    finally:
        srv.kill()
        srv.wait()


def _cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rx_packets(tb) -> int:
    iface = tb.state["hosts"]["h2"]["ifaces"][0]          # intcc-n1 on line, intcc-n2 on line2
    res = tb.run("h2", ["cat", f"/sys/class/net/{iface}/statistics/rx_packets"])
    return int(res.stdout)


def measure_rate(tb, label, node_pid=None, offered="0"):
    """UDP pps is read from h2's interface counter over a fixed window while an
    iperf3 flood runs (iperf3's own end-of-test report can hang under 70% loss)."""
    out = {"path": label, "udp_offered": offered}
    srv = tb.popen("h2", ["iperf3", "-s", "-1", "-p", "5301"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    tb.wait_listening("h2", 5301)
    cli = tb.popen("h1", ["iperf3", "-6", "-c", tb.addr("h2"), "-p", "5301", "-u", "-b", offered,
                          "-l", str(UDP_PAYLOAD), "-t", str(SECONDS + 3)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        cpu0 = _cpu_s(node_pid) if node_pid else None
        rx0, t0 = _rx_packets(tb), time.monotonic()
        time.sleep(SECONDS)
        rx1, t1 = _rx_packets(tb), time.monotonic()
        if node_pid:
            out["node_cpu_pct"] = 100 * (_cpu_s(node_pid) - cpu0) / (t1 - t0)
    finally:
        for p in (cli, srv):
            p.kill()
            p.wait()
    out["udp_rx_pps"] = (rx1 - rx0) / (t1 - t0)
    out["udp_rx_mbps_at_1500B"] = out["udp_rx_pps"] * FRAME_BYTES * 8 / 1e6
    time.sleep(0.5)    # let the flood's backlog drain before the TCP test
    tcp = _iperf(tb, ["-O", "1"], 5302)
    out["tcp_mbps"] = tcp["end"]["sum_received"]["bits_per_second"] / 1e6
    return out


def _ping_rtts_us(tb, hz, count):
    res = tb.run("h1", ["ping", "-6", "-n", "-c", str(count), "-i", str(1 / hz), tb.addr("h2")])
    return [1000 * float(x) for x in re.findall(r"time=([0-9.]+) ms", res.stdout)]


def measure_latency(paths: dict, rounds=LATENCY_ROUNDS) -> dict:
    """Ping RTT through each path, in interleaved rounds: the VM's idle-wakeup
    and cache state drift over seconds, so node and kernel are sampled alike.
    Low load at two rates: at 100 Hz a core idles ~10 ms between packets and
    pays for cold caches; at 1 kHz it stays warm."""
    samples = {label: {hz: [] for hz, _ in LATENCY_RATES} for label in paths}
    for r in range(rounds):
        for hz, count in LATENCY_RATES:
            for label, tb in paths.items():
                samples[label][hz] += _ping_rtts_us(tb, hz, count)
        print(f"  latency round {r + 1}/{rounds}", flush=True)
    out = {}
    for label, by_hz in samples.items():
        out[label] = {}
        for hz, rtts in by_hz.items():
            rtts.sort()
            out[label][f"rtt_us_p50_{hz}hz"] = statistics.median(rtts)
            out[label][f"rtt_us_p99_{hz}hz"] = rtts[int(0.99 * (len(rtts) - 1))]
            out[label][f"rtt_samples_{hz}hz"] = len(rtts)
    return out


def _kernel_forwarding(tb):
    """Turn a testbed's node namespace into a kernel router (node stopped)."""
    os.kill(tb.status()["supervisor_pid"], signal.SIGTERM)
    time.sleep(1.0)
    tb.run("n1", ["ip", "-6", "route", "del", "blackhole", "default"])
    tb.run("n1", ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"])


# Node variants, each measured with kernel forwarding interleaved under the same
# conditions: the interpreter (CPython, PyPy), whether the node's core polls when
# idle (PM QoS; int_node/runtime.py) instead of halting, whether its event loop keeps
# polling after each packet (BUSY_POLL_US: longer than the 1 kHz pings' gap, shorter than
# the 100 Hz pings'), and how many frames a FromDevice pushes through the elements at once
# (its default batch, or each frame alone).
BUSY_POLL_US = 2000
VARIANTS = (("CPython", "cpython", False, None, 0), ("CPython, a frame at a time", "cpython", False, 1, 0),
            ("CPython, polling core", "cpython", True, None, 0),
            ("CPython, busy polling", "cpython", False, None, BUSY_POLL_US),
            ("PyPy", "pypy", False, None, 0), ("PyPy, polling core", "pypy", True, None, 0),
            ("PyPy, busy polling", "pypy", False, None, BUSY_POLL_US))


def _variant_testbed(python: str, poll_idle: bool, rx_batch: int | None = None, busy_poll_us: int = 0) -> Testbed:
    topo = load_topo(TOPO)
    topo.nodes["n1"].update(cpu=NODE_CPU, python=python, poll_idle=poll_idle, rx_batch=rx_batch,
                            busy_poll_us=busy_poll_us)
    tb = Testbed(topo, "bench").up(exporter="none")
    # h2 receives INT-carrying packets (no sink on this path): give it the headroom.
    tb.run("h2", ["ip", "link", "set", "intcc-n1", "mtu", "1788"])
    return tb


def run_benchmark(variants=VARIANTS) -> dict:
    """An h1 -- n1 -- h2 testbed per node variant (the node on a core of its own),
    beside an identical one whose n1 forwards with the kernel."""
    for name in ("bench", "benchkernel"):
        teardown(name)
    kt = Testbed(load_topo(TOPO), "benchkernel").up(exporter="none")
    results = {"variants": {}}
    try:
        _kernel_forwarding(kt)
        kernel_runs = []
        for label, python, poll_idle, rx_batch, busy_poll_us in variants:
            # the kernel's rate again beside every variant: this host's rate drifts by
            # 2x over minutes, and a ratio to a figure taken minutes earlier drifts with it
            print(f"forwarding rate: kernel (beside {label})", flush=True)
            kernel_runs.append(measure_rate(kt, "kernel forwarding"))
            kernel_pps = kernel_runs[-1]["udp_rx_pps"]
            try:
                tb = _variant_testbed(python, poll_idle, rx_batch, busy_poll_us)
            except TestbedError as exc:
                print(f"{label}: skipped ({exc})", flush=True)
                continue
            try:
                pid = tb.status()["nodes"]["n1"]["pid"]
                print(f"forwarding rate: node, {label}", flush=True)
                node = measure_rate(tb, f"intcc node ({label}; INT insert+stamp, own core)", pid)
                node["int_stamped"] = tb.counters("n1")["tr1"]["stamped"]
                print(f"latency, {label} (rounds interleaved with the kernel path)", flush=True)
                lat = measure_latency({"node": tb, "kernel": kt})
            finally:
                tb.down()
            node.update(lat["node"])
            node["kernel_same_rounds"] = lat["kernel"]
            k = lat["kernel"]
            node["comparison"] = {
                **{f"added_latency_us_{q}_one_way_{hz}hz": (node[f"rtt_us_{q}_{hz}hz"] - k[f"rtt_us_{q}_{hz}hz"]) / 2
                   for q in ("p50", "p99") for hz, _ in LATENCY_RATES},
                "kernel_udp_rx_pps": kernel_pps,
                "pps_ratio_node_vs_kernel": node["udp_rx_pps"] / kernel_pps,
                "tcp_ratio_node_vs_kernel": node["tcp_mbps"] / kernel_runs[-1]["tcp_mbps"]}
            results["variants"][label] = node
    finally:
        kt.down()
    if kernel_runs:     # the table's kernel column: the median of its runs
        results["kernel"] = sorted(kernel_runs, key=lambda k: k["udp_rx_pps"])[len(kernel_runs) // 2]
        results["kernel_runs_udp_rx_pps"] = [k["udp_rx_pps"] for k in kernel_runs]
    return results


def report(r: dict) -> str:
    variants = r["variants"]
    rows = [("UDP forwarded, pps (1500 B frames)", "udp_rx_pps", "{:,.0f}"),
            ("  = Mbit/s at 1500 B", "udp_rx_mbps_at_1500B", "{:,.0f}"),
            ("TCP goodput, Mbit/s", "tcp_mbps", "{:,.0f}"),
            ("node CPU % (UDP flood)", "node_cpu_pct", "{:.0f}")]
    width = max(20, 2 + max(len(v) for v in variants))     # names like "CPython, a frame at a time" stay apart
    lines = [f"{'':36}" + "".join(f"{v:>{width}}" for v in variants) + f"{'kernel':>{width}}"]
    for title, key, fmt in rows:
        cells = [fmt.format(v[key]) if key in v else "" for v in variants.values()]
        kcell = fmt.format(r["kernel"][key]) if key in r["kernel"] else ""
        lines.append(f"{title:36}" + "".join(f"{c:>{width}}" for c in cells) + f"{kcell:>{width}}")
    lines.append(f"{'kernel pps beside it':36}" + "".join(
        f"{v['comparison']['kernel_udp_rx_pps']:>{width},.0f}" for v in variants.values()))
    lines.append(f"{'pps / kernel beside it':36}" + "".join(
        f"{v['comparison']['pps_ratio_node_vs_kernel']:>{width}.2f}" for v in variants.values()))
    for hz in (100, 1000):
        for q in ("p50", "p99"):
            lines.append(f"{f'ping RTT {q}, us ({hz} Hz) node|kernel':36}" + "".join(
                f"{v[f'rtt_us_{q}_{hz}hz']:>{width - 8}.0f} |{v['kernel_same_rounds'][f'rtt_us_{q}_{hz}hz']:>5.0f} "
                for v in variants.values()))
        for q in ("p50", "p99"):
            lines.append(f"{f'added one-way {q}, us ({hz} Hz)':36}" + "".join(
                f"{v['comparison'][f'added_latency_us_{q}_one_way_{hz}hz']:>{width}.0f}" for v in variants.values()))
    return "\n".join(lines)


def test_forwarding_benchmark():
    r = run_benchmark()
    print("\n" + report(r))
    assert r["variants"], "no node variant could run"
    for v in r["variants"].values():
        assert v["int_stamped"] > 0        # the node path really stamped INT


if __name__ == "__main__":
    answer_help(__doc__)
    res = run_benchmark()
    print(report(res))
    from records import stamp
    print(json.dumps({**res, "provenance": stamp()}, indent=1))
