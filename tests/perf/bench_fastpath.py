"""Benchmark: the node's fast path (tc BPF, `intcc node run --fast-path`) beside the kernel
forwarding the same traffic without INT, in the same run on identical testbeds (h1 -- n1 -- h2),
and beside the Python node (CPython) for TCP.

The fast path inserts and stamps INT on every packet (n1 is source and transit). Rates are
taken in interleaved rounds (kernel, fast path, kernel, ...: this host's rate drifts over
minutes), latency in interleaved ping rounds at 100 and 1,000 per second. Prints figures and
a JSON record; asserts nothing about speed (shared machines are noisy).

    python -m tests.perf.bench_fastpath        (make bench runs it)
"""
from __future__ import annotations

import json
import statistics

from experiments.testbed.teardown import teardown
from tests.integration.tbutil import start_line_without_sink
from tests.perf import answer_help
from tests.perf.bench_forwarding import LATENCY_RATES, _kernel_forwarding, measure_latency, measure_rate

RATE_ROUNDS = 3
LATENCY_ROUNDS = 6


def run_benchmark(rate_rounds: int = RATE_ROUNDS, latency_rounds: int = LATENCY_ROUNDS) -> dict:
    for name in ("bfast", "bkernel", "bpython"):
        teardown(name)
    kt = start_line_without_sink("bkernel")
    ft = start_line_without_sink("bfast", fast_path=True)
    out = {"rounds": []}
    try:
        _kernel_forwarding(kt)
        log = open(ft.node_info("n1")["log"]).read()
        if "fast path on" not in log:
            raise RuntimeError(f"n1 did not put its fast path in place:\n{log[-2000:]}")
        for r in range(rate_rounds):
            print(f"rate round {r + 1}/{rate_rounds}: kernel, fast path", flush=True)
            k = measure_rate(kt, "kernel forwarding")
            f = measure_rate(ft, "fast path (INT insert + stamp)")
            f["int_stamped"] = ft.counters("n1")["tr1"]["stamped"]
            out["rounds"].append({"kernel": k, "fast_path": f, "pps_ratio": f["udp_rx_pps"] / k["udp_rx_pps"],
                                  "tcp_ratio": f["tcp_mbps"] / k["tcp_mbps"]})
        print("latency (rounds interleaved with the kernel path)", flush=True)
        out["latency"] = measure_latency({"fast path": ft, "kernel": kt}, rounds=latency_rounds)
        out["fast_path_counters"] = {k: v for k, v in ft.counters("n1").items() if k.startswith("fastpath.")}
    finally:
        ft.down()
    try:        # the Python node (CPython) on the same path, for TCP beside it
        print("the Python node, for comparison", flush=True)
        pt = start_line_without_sink("bpython")
        try:
            out["python_node"] = measure_rate(pt, "Python node (CPython; INT insert + stamp)",
                                              pt.status()["nodes"]["n1"]["pid"])
            out["python_node"]["pps_ratio_to_kernel_beside"] = (
                out["python_node"]["udp_rx_pps"] / measure_rate(kt, "kernel forwarding")["udp_rx_pps"])
        finally:
            pt.down()
    finally:
        kt.down()
    out["summary"] = summarize(out)
    return out


def summarize(r: dict) -> dict:
    rounds = r["rounds"]
    lat_f, lat_k = r["latency"]["fast path"], r["latency"]["kernel"]
    s = {"pps_ratio_median": statistics.median(x["pps_ratio"] for x in rounds),
         "pps_ratio_min": min(x["pps_ratio"] for x in rounds),
         "tcp_ratio_median": statistics.median(x["tcp_ratio"] for x in rounds),
         "fast_path_udp_pps_median": statistics.median(x["fast_path"]["udp_rx_pps"] for x in rounds),
         "kernel_udp_pps_median": statistics.median(x["kernel"]["udp_rx_pps"] for x in rounds),
         "fast_path_tcp_mbps_median": statistics.median(x["fast_path"]["tcp_mbps"] for x in rounds),
         "kernel_tcp_mbps_median": statistics.median(x["kernel"]["tcp_mbps"] for x in rounds)}
    for hz, _ in LATENCY_RATES:
        for q in ("p50", "p99"):
            s[f"added_one_way_us_{q}_{hz}hz"] = (lat_f[f"rtt_us_{q}_{hz}hz"] - lat_k[f"rtt_us_{q}_{hz}hz"]) / 2
    if "python_node" in r:
        s["python_node_tcp_mbps"] = r["python_node"]["tcp_mbps"]
        s["python_node_pps_ratio"] = r["python_node"]["pps_ratio_to_kernel_beside"]
    return s


def report(r: dict) -> str:
    s = r["summary"]
    lines = [f"{'':44}{'fast path':>12}{'kernel':>12}{'ratio':>8}",
             f"{'UDP forwarded, pps (median of rounds)':44}{s['fast_path_udp_pps_median']:>12,.0f}"
             f"{s['kernel_udp_pps_median']:>12,.0f}{s['pps_ratio_median']:>8.2f}",
             f"{'  per round':44}" + " ".join(f"{x['pps_ratio']:.2f}" for x in r["rounds"]),
             f"{'TCP goodput, Mbit/s (median)':44}{s['fast_path_tcp_mbps_median']:>12,.0f}"
             f"{s['kernel_tcp_mbps_median']:>12,.0f}{s['tcp_ratio_median']:>8.2f}"]
    if "python_node_tcp_mbps" in s:
        lines.append(f"{'Python node (CPython): TCP Mbit/s, pps ratio':44}{s['python_node_tcp_mbps']:>12,.0f}"
                     f"{'':>12}{s['python_node_pps_ratio']:>8.2f}")
    for hz, _ in LATENCY_RATES:
        lines.append(f"{f'added one-way, us ({hz} Hz) p50 / p99':44}"
                     f"{s[f'added_one_way_us_p50_{hz}hz']:>12.1f}{s[f'added_one_way_us_p99_{hz}hz']:>12.1f}")
    return "\n".join(lines)


def test_fastpath_benchmark():
    r = run_benchmark(rate_rounds=1, latency_rounds=2)
    print("\n" + report(r))
    assert all(x["fast_path"]["int_stamped"] > 0 for x in r["rounds"])     # it really stamped INT


if __name__ == "__main__":
    answer_help(__doc__)
    res = run_benchmark()
    print(report(res))
    from records import stamp
    print(json.dumps({**res, "provenance": stamp()}, indent=1))
