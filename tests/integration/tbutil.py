"""Helpers for testbed-based tests."""
from __future__ import annotations

import json
import os
import re
import subprocess

from experiments.testbed import Testbed
from experiments.topo import load_topo

TOPO_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "topologies")


def start_testbed(topo: str, name: str, exporter: str = "jsonl", **params) -> Testbed:
    return Testbed(load_topo(os.path.join(TOPO_DIR, f"{topo}.toml"), params), name).up(exporter=exporter)


def ping_rtts_ms(tb: Testbed, src: str, dst_addr: str, count: int = 20, interval: float = 0.05):
    res = tb.run(src, ["ping", "-6", "-n", "-c", str(count), "-i", str(interval), dst_addr])
    assert res.returncode == 0, res.stdout + res.stderr
    return [float(x) for x in re.findall(r"time=([0-9.]+) ms", res.stdout)]


def iperf3(tb: Testbed, client: str, server: str, seconds: float = 5, extra=(), port: int = 5201) -> dict:
    srv = tb.popen(server, ["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        tb.wait_listening(server, port)
        res = tb.run(client, ["iperf3", "-6", "-c", tb.addr(server), "-p", str(port), "-t", str(seconds), "-J"]
                     + list(extra), timeout=seconds + 30)
        out = json.loads(res.stdout)
        assert "error" not in out, out.get("error")
        return out
    finally:
        srv.kill()
        srv.wait()
