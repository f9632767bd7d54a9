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


# iperf3 sets up a UDP stream with one datagram each way and no retransmission: on a lossy
# link a lost one ends the test with this error before any data is sent (esnet/iperf#862).
UDP_SETUP_LOST = "unable to read from stream socket"


def iperf3(tb: Testbed, client: str, server: str, seconds: float = 5, extra=(), port: int = 5201,
           udp_setup_attempts: int = 4) -> dict:
    attempts = udp_setup_attempts if "-u" in extra else 1
    for attempt in range(1, attempts + 1):
        out = _iperf3_once(tb, client, server, seconds, extra, port)
        if UDP_SETUP_LOST not in out.get("error", "") or attempt == attempts:
            break
    assert "error" not in out, out.get("error")
    return out


def _iperf3_once(tb: Testbed, client: str, server: str, seconds: float, extra, port: int) -> dict:
    srv = tb.popen(server, ["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        tb.wait_listening(server, port)
        res = tb.run(client, ["iperf3", "-6", "-c", tb.addr(server), "-p", str(port), "-t", str(seconds), "-J"]
                     + list(extra), timeout=seconds + 30)
        return json.loads(res.stdout)
    finally:
        srv.kill()
        srv.wait()
