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
import os
import shutil
import struct
import subprocess

from experiments.testbed.bed import Testbed
from experiments.testbed.teardown import teardown
from experiments.testbed.topo import load_topo
from int_node import ioam
from tests.integration.tbutil import TOPO_DIR
from tests.perf import answer_help, rate_round_medians
from tests.perf.bench_forwarding import LATENCY_RATES, _kernel_forwarding, measure_latency, measure_rate

RATE_ROUNDS = 3
LATENCY_ROUNDS = 6
HOST_SOURCE = os.path.join(os.path.dirname(__file__), "int_host_source.bpf.c")

#: (label, n1's INT roles, whether h1 inserts the headers itself): each beside the kernel
#: forwarding the same traffic (with the headers h1 inserted, or without any)
PATHS = (("edge node: INT inserted and stamped", ["source", "transit"], False),
         ("transit node: INT stamped", ["transit"], True))


def _host_source(tb, tag: str):
    """h1 inserts a one-hop trace into its own packets (tests/perf/int_host_source.bpf.c)."""
    from int_node.fastpath import bpfsys, build
    from int_node.fastpath.loader import PIN_ROOT, _run
    obj = os.path.join(build.build_dir(), "int_host_source.bpf.o")
    build.build()           # vmlinux.h for this kernel, in the same place
    subprocess.run(["clang", *build.CFLAGS, "-I", build.build_dir(), "-c", HOST_SOURCE, "-o", obj], check=True)
    pin = os.path.join(PIN_ROOT, f"intcc-hs-{tag}")
    shutil.rmtree(pin, ignore_errors=True)
    subprocess.run(["bpftool", "prog", "loadall", obj, pin, "pinmaps", pin + "-maps"], check=True)
    hbh = ioam.build_hbh(0, 1)
    fd = bpfsys.obj_get(os.path.join(pin + "-maps", "intcc_hs_tmpl"))
    bpfsys.update(fd, struct.pack("<I", 0), struct.pack("<II280s", len(hbh), 0, hbh))
    os.close(fd)
    ns = tb.host_info("h1")["netns"]
    _run(["tc", "qdisc", "replace", "dev", "intcc-n1", "clsact"], ns)
    _run(["tc", "filter", "replace", "dev", "intcc-n1", "egress", "pref", "1", "handle", "1", "bpf", "da", "pinned",
          os.path.join(pin, "intcc_hs_insert")], ns)
    return [pin, pin + "-maps"]


def _line(name: str, roles, mode: str):
    """h1 -- n1 -- h2 with n1 forwarding by ``mode``: kernel, fast (path) or python (node)."""
    teardown(name)
    topo = load_topo(os.path.join(TOPO_DIR, "line.toml"))
    topo.nodes["n1"].update(int=roles, fast_path=mode == "fast")
    tb = Testbed(topo, name).up(exporter="none")
    tb.run("h2", ["ip", "link", "set", "intcc-n1", "mtu", "1788"])
    if mode == "kernel":
        _kernel_forwarding(tb)
    elif mode == "fast" and "fast path on" not in open(tb.node_info("n1")["log"]).read():
        raise RuntimeError(f"{name}: n1 did not put its fast path in place:\n"
                           f"{open(tb.node_info('n1')['log']).read()[-2000:]}")
    return tb


def run_benchmark(rate_rounds: int = RATE_ROUNDS, latency_rounds: int = LATENCY_ROUNDS) -> dict:
    out = {"paths": {}}
    pins = []
    for i, (label, roles, host_inserts) in enumerate(PATHS):
        kt = ft = None
        try:
            kt = _line(f"bk{i}", roles, "kernel")
            ft = _line(f"bf{i}", roles, "fast")
            if host_inserts:
                pins += _host_source(kt, f"k{i}") + _host_source(ft, f"f{i}")
            res = {"rounds": []}
            for r in range(rate_rounds):
                print(f"{label}: rate round {r + 1}/{rate_rounds} (kernel, fast path)", flush=True)
                k = measure_rate(kt, "kernel forwarding")
                f = measure_rate(ft, f"fast path ({label})")
                f["int_stamped"] = ft.counters("n1")["tr1"]["stamped"]
                res["rounds"].append({"kernel": k, "fast_path": f, "pps_ratio": f["udp_rx_pps"] / k["udp_rx_pps"],
                                      "tcp_ratio": f["tcp_mbps"] / k["tcp_mbps"]})
            print(f"{label}: latency (rounds interleaved with the kernel path)", flush=True)
            res["latency"] = measure_latency({"fast path": ft, "kernel": kt}, rounds=latency_rounds)
            res["fast_path_counters"] = {k: v for k, v in ft.counters("n1").items() if k.startswith("fastpath.")}
            res["summary"] = summarize(res)
            out["paths"][label] = res
        finally:
            for tb in (ft, kt):
                if tb is not None:
                    tb.down()
            for p in pins:
                shutil.rmtree(p, ignore_errors=True)
    print("the Python node (CPython, INT inserted and stamped), for comparison", flush=True)
    kt = _line("bk9", ["source", "transit"], "kernel")
    try:
        pt = _line("bp9", ["source", "transit"], "python")
        try:
            py = measure_rate(pt, "Python node (CPython)", pt.status()["nodes"]["n1"]["pid"])
            py["pps_ratio_to_kernel_beside"] = py["udp_rx_pps"] / measure_rate(kt, "kernel")["udp_rx_pps"]
            out["python_node"] = py
        finally:
            pt.down()
    finally:
        kt.down()
    return out


def summarize(r: dict) -> dict:
    """One path's rounds and latency, as ratios to the kernel beside it."""
    rounds = r["rounds"]
    lat_f, lat_k = r["latency"]["fast path"], r["latency"]["kernel"]
    s = rate_round_medians(rounds, ("fast_path", "kernel"))
    for hz, _ in LATENCY_RATES:
        for q in ("p50", "p99"):
            s[f"added_one_way_us_{q}_{hz}hz"] = (lat_f[f"rtt_us_{q}_{hz}hz"] - lat_k[f"rtt_us_{q}_{hz}hz"]) / 2
    return s


def report(r: dict) -> str:
    lines = []
    for label, res in r["paths"].items():
        s = res["summary"]
        lines += [label,
                  f"  {'':42}{'fast path':>12}{'kernel':>12}{'ratio':>8}",
                  f"  {'UDP forwarded, pps (median of rounds)':42}{s['fast_path_udp_pps_median']:>12,.0f}"
                  f"{s['kernel_udp_pps_median']:>12,.0f}{s['pps_ratio_median']:>8.2f}",
                  f"  {'  ratio per round':42}" + " ".join(f"{x['pps_ratio']:.2f}" for x in res["rounds"]),
                  f"  {'TCP goodput, Mbit/s (median)':42}{s['fast_path_tcp_mbps_median']:>12,.0f}"
                  f"{s['kernel_tcp_mbps_median']:>12,.0f}{s['tcp_ratio_median']:>8.2f}"]
        for hz, _ in LATENCY_RATES:
            lines.append(f"  {f'added one-way, us ({hz} Hz) p50 / p99':42}"
                         f"{s[f'added_one_way_us_p50_{hz}hz']:>12.1f}{s[f'added_one_way_us_p99_{hz}hz']:>12.1f}")
    if "python_node" in r:
        py = r["python_node"]
        lines.append(f"Python node (CPython): TCP {py['tcp_mbps']:,.0f} Mbit/s, UDP pps "
                     f"{py['pps_ratio_to_kernel_beside']:.2f}x the kernel beside it")
    return "\n".join(lines)


def test_fastpath_benchmark():
    r = run_benchmark(rate_rounds=1, latency_rounds=2)
    print("\n" + report(r))
    for res in r["paths"].values():     # it really stamped INT
        assert all(x["fast_path"]["int_stamped"] > 0 for x in res["rounds"])


if __name__ == "__main__":
    answer_help(__doc__)
    res = run_benchmark()
    print(report(res))
    from records import stamp
    print(json.dumps({**res, "provenance": stamp()}, indent=1))
