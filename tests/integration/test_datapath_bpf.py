"""The kernel side of the CCP datapath on its own: the BPF struct_ops "ccp"
registers, keeps flows moving on its Reno fallback when no agent beats, and
applies a cwnd written into its control map (the Rust daemon's job later)."""
import json
import os
import struct
import subprocess
import time

import pytest

from ccp_algs import contract
from ccp_agent.datapath import ccp_holder
from experiments.testbed.bed import wait_listening

OBJ = os.path.join(os.path.dirname(__file__), "..", "..", "datapath", "build", "intcc_ccp_nolink.bpf.o")
NS_A, NS_B = "intcc-dpt-a", "intcc-dpt-b"


def sh(*cmd, **kw):
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True, **kw)


def map_id(name):
    """The newest map of that name: maps of an earlier registration live on while
    sockets that used it linger."""
    maps = json.loads(sh("bpftool", "-j", "map", "show").stdout)
    return str(max(m["id"] for m in maps if m.get("name") == name))


def map_update(name, key: bytes, value: bytes):
    sh("bpftool", "map", "update", "id", map_id(name), "key", *map(str, key), "value", *map(str, value))


def stats():
    """The kernel's counters, summed over the CPUs (a per-CPU map)."""
    out = json.loads(sh("bpftool", "-j", "map", "dump", "id", map_id("intcc_ccp_stats")).stdout)
    per_cpu = [v["value"] for v in out[0]["formatted"]["values"]]   # -j: raw bytes and BTF-formatted
    return {k: sum(v[k] for v in per_cpu) for k in per_cpu[0]}


def iperf_gbps(seconds=2):
    srv = subprocess.Popen(["ip", "netns", "exec", NS_B, "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
    try:
        wait_listening(NS_B)
        out = sh("ip", "netns", "exec", NS_A, "iperf3", "-c", "10.99.0.2", "-C", "ccp", "-t", str(seconds), "-J",
                 timeout=seconds + 20).stdout
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        srv.wait(timeout=10)


@pytest.fixture(scope="module")
def ccp():
    if "ccp" in open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split():
        pytest.fail(f"a 'ccp' congestion control is already registered, so these tests cannot run: {ccp_holder()}")
    assert os.path.exists(OBJ), "datapath not built: run 'make setup'"
    sh("bpftool", "struct_ops", "register", OBJ)
    for ns in (NS_A, NS_B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        sh("ip", "netns", "add", ns)
    try:
        sh("ip", "link", "add", "intcc-dpt0", "netns", NS_A, "type", "veth", "peer", "name", "intcc-dpt1",
           "netns", NS_B)
        for ns, dev, addr in ((NS_A, "intcc-dpt0", "10.99.0.1/24"), (NS_B, "intcc-dpt1", "10.99.0.2/24")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield
    finally:
        for ns in (NS_A, NS_B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        sh("bpftool", "struct_ops", "unregister", "name", "intcc_ccp")
    assert "ccp" not in open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()


def test_without_an_agent_flows_run_on_the_fallback(ccp):
    assert "ccp" in open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    before = stats()
    gbps = iperf_gbps()
    after = stats()
    assert gbps > 0.5, gbps
    assert after["fallback_acks"] > before["fallback_acks"] and after["controlled_acks"] == before["controlled_acks"]


def test_a_cwnd_in_the_control_map_is_applied(ccp):
    free_run = iperf_gbps()
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    map_update("intcc_ccp_cfg", struct.pack("<I", 0),
               contract.pack("intcc_ccp_cfg", heartbeat_ns=now, agent_timeout_ns=600 * 10**9, epoch=1))
    try:
        for sid in range(1, 64):   # the next flows' socket ids (the daemon learns them from CREATE events)
            map_update("intcc_ccp_ctl", struct.pack("<I", sid),
                       contract.pack("intcc_ccp_ctl", flags=1, cwnd_bytes=2 * 1448, seq=1))   # CTL_HAS_CWND
        before = stats()
        capped = iperf_gbps()
        after = stats()
    finally:
        map_update("intcc_ccp_cfg", struct.pack("<I", 0), contract.pack("intcc_ccp_cfg"))   # heartbeat 0: no agent
    assert after["controlled_acks"] > before["controlled_acks"]
    assert capped < 0.5 * free_run, (capped, free_run)
