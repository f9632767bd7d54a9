"""The wireless topology (the INT-eBPF paper Fig. 3) with INT, measured."""
import os
import signal
import socket
import statistics
import struct
import subprocess
import time

import pytest
from pyroute2 import netns

from experiments.testbed.teardown import teardown
from int_node import ioam
from tests.helpers import ipv6_frame
from experiments.testbed.traffic import udp_flow
from tests.integration.tbutil import iperf3, ping_rtts_ms, start_testbed

RATE_MBPS, DELAY_MS = 10.0, 10.0
INT_BYTES = ioam.Inserter(2).size     # 2 hops: 160 bytes


@pytest.fixture(scope="module")
def tb():
    t = start_testbed("wireless", "itwl", rate_mbps=RATE_MBPS, delay_ms=DELAY_MS, buffer_pkts=100)
    yield t
    t.down()


def _delay_elements(tb):
    """(node, element) of every Delay on the wireless hop: one per AP, one per direction."""
    return [(n, e) for n in ("ap1", "ap2") for e in tb.counters(n)
            if e.startswith("delay") and "held" in tb.counters(n)[e]]


def test_idle_rtt_is_twice_the_link_delay(tb):
    """The emulated link adds 2 x its one-way delay to the RTT, within the issue's 1 ms.
    Measured as the difference against the same testbed with the delay set to 0 at run
    time, rounds interleaved: what the Python nodes themselves add (wake-up from an idle
    vCPU, 4 traversals; 0.9-2.7 ms depending on the machine, tests/perf/bench_forwarding.py)
    is in both and cancels, mostly: with the delay every node wakes from a 10 ms idle,
    colder than back-to-back, which added 0.1-0.4 ms here and 1.3 ms at the median on a
    loaded CI machine. So the lower deciles are compared (the scheduler's tail is the
    machine's, not the link's) and the Delay elements' own lateness is printed."""
    delays = _delay_elements(tb)
    assert len(delays) == 2, delays
    with_delay, without = [], []
    try:
        for _ in range(4):
            for n, e in delays:
                tb.write(n, e, "delay", f"{DELAY_MS}ms")
            with_delay += ping_rtts_ms(tb, "sta1", tb.addr("sta2"), count=10)
            for n, e in delays:
                tb.write(n, e, "delay", "0")
            without += ping_rtts_ms(tb, "sta1", tb.addr("sta2"), count=10)
    finally:
        for n, e in delays:
            tb.write(n, e, "delay", f"{DELAY_MS}ms")
    def p10(xs):
        return statistics.quantiles(xs, n=10)[0]
    added_ms = p10(with_delay) - p10(without)
    print(f"RTT median {statistics.median(with_delay):.2f} ms with, {statistics.median(without):.2f} "
          f"ms without the delay; 10th percentile {p10(with_delay):.2f} / {p10(without):.2f} ms")
    for n, e in delays:
        c = tb.counters(n)[e]
        print(f"{n}/{e}: released {c['late_us_total'] / max(c['packets'], 1):.0f} us late on average, "
              f"at most {c['late_us_max']} us")
    assert abs(added_ms - 2 * DELAY_MS) <= 1.0, (with_delay, without)
    # A real 10 Mbit/s link also serialises the echo request (118 B + the INT headers) and the
    # reply (118 B): 0.31 ms on top of 2 x 10 ms. The nodes' own cost is a regression
    # guard here, loose because CI machines differ.
    expected_ms = 2 * DELAY_MS + (118 + INT_BYTES + 118) * 8 / (RATE_MBPS * 1e3)
    assert statistics.median(with_delay) - expected_ms <= 5.0, with_delay


def test_tcp_goodput_matches_the_link_rate_less_header_overhead(tb):
    out = iperf3(tb, "sta1", "sta2", seconds=6, extra=["-O", "1"])
    goodput_mbps = out["end"]["sum_received"]["bits_per_second"] / 1e6
    # 1428 payload bytes per 1514-byte frame + the INT headers on the air.
    expected = RATE_MBPS * 1428 / (1514 + INT_BYTES)
    assert abs(goodput_mbps - expected) <= 0.1 * expected, (goodput_mbps, expected)


def test_int_is_on_the_wireless_hop_and_gone_at_the_receiver(tb, tmp_path):
    mon, rx = tmp_path / "ap2-mon.pcap", tmp_path / "sta2.pcap"
    caps = [tb.popen("ap2", ["tcpdump", "--immediate-mode", "-U", "-ni", "intcc-mon", "-w", str(mon)],
                     stderr=subprocess.DEVNULL),
            tb.popen("sta2", ["tcpdump", "--immediate-mode", "-U", "-ni", "intcc-ap2", "-w", str(rx)],
                     stderr=subprocess.DEVNULL)]
    time.sleep(1.0)
    ping_rtts_ms(tb, "sta1", tb.addr("sta2"), count=5, interval=0.1)
    time.sleep(0.5)
    for c in caps:
        c.send_signal(signal.SIGINT)
        c.wait(5)
    fields = subprocess.run(["tshark", "-r", str(mon), "-Y", "icmpv6.type == 128", "-T", "fields",
                             "-e", "ipv6.opt.ioam.trace.node.id", "-e", "ipv6.opt.ioam.trace.node.qdepth"],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    rows = [r.split("\t") for r in fields if r.strip()]
    assert len(rows) >= 5
    for ids, qdepth in rows:
        assert sorted(int(x, 0) for x in ids.split(",")) == [1, 2]
        assert len(qdepth.split(",")) == 2
    nxt = subprocess.run(["tshark", "-r", str(rx), "-Y", "icmpv6.type == 128", "-T", "fields",
                          "-e", "ipv6.nxt", "-e", "ipv6.opt.ioam.trace.node.id"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert nxt and all(x == "58" for x in nxt)   # ICMPv6 right after the IPv6 header


# Where else a packet of a flow can be lost on the way, each counted: the nodes' packet
# sockets (ring full), queues, sends; the receiving host's UDP socket buffer.
OTHER_DROP_COUNTERS = ("kernel_drops", "drops", "send_drops")


def other_drops(tb) -> int:
    nodes = sum(c.get(name, 0) for node in ("ap1", "ap2") for c in tb.counters(node).values()
                for name in OTHER_DROP_COUNTERS)
    snmp = tb.run("sta2", ["cat", "/proc/net/snmp6"]).stdout.split()
    receiver = int(snmp[snmp.index("Udp6RcvbufErrors") + 1])
    return nodes + receiver


def test_configured_loss_is_measured_within_one_point(tb):
    tb.write("ap1", "wl1", "loss", "5%")
    try:
        before, other_before = tb.counters("ap1")["wl1"], other_drops(tb)
        out = udp_flow(tb, "sta1", "sta2", rate_mbps=4, seconds=5, port=5202, length=200)
        after, other = tb.counters("ap1")["wl1"], other_drops(tb) - other_before
    finally:
        tb.write("ap1", "wl1", "loss", "0")
    lost = after["link_losses"] - before["link_losses"]
    sent = lost + after["passed"] - before["passed"]
    assert sent >= 5000, sent            # 1 point is 3 sigma at 5000 (12500 sent; a loaded node reads fewer)
    assert abs(lost / sent - 0.05) <= 0.01, (lost, sent)
    # what the receiver saw agrees: the link's losses and, on a loaded machine, the other
    # counted drops (a node late to read its ring: 6.2 % seen once in CI)
    assert abs(out["loss_fraction"] - (lost + other) / out["sent"]) <= 0.01, (out, lost, other)


def _raw_send(tb, host, frames):
    """Send raw Ethernet frames from a host's interface (inside its namespace)."""
    code = ("import socket,sys,pickle;s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);"
            "s.bind((sys.argv[1],0));[s.send(f) for f in pickle.load(sys.stdin.buffer)]")
    import pickle
    import sys
    res = tb.run(host, [sys.executable, "-c", code, tb.host_info(host)["ifaces"][0]],
                 input=pickle.dumps(frames), text=False)
    assert res.returncode == 0, res.stderr


def test_bad_input_never_crashes_a_node_and_is_counted(tb):
    mac = bytes.fromhex(tb.run("sta1", ["ip", "-6", "neigh"]).stdout.split("lladdr ")[1][:17]
                        .replace(":", ""))
    good = ioam.insert_int(ipv6_frame(64, nh=17, dst_mac=mac), 2, 1, 1)
    good[38:54] = socket.inet_pton(socket.AF_INET6, tb.addr("sta2"))
    frames = []
    for cut in (56, 62, 70, 100):                       # truncated IOAM
        f = bytearray(good[:cut])
        struct.pack_into("!H", f, 18, cut - 54)
        frames.append(bytes(f))
    wrong = bytearray(good); wrong[59] = 250; frames.append(bytes(wrong))      # option too long
    wrong = bytearray(good); wrong[65] = 0x7F; frames.append(bytes(wrong))     # RemainingLen too big
    wrong = bytearray(good); wrong[55] = 40; frames.append(bytes(wrong))       # HbH past the packet
    frames.append(mac + bytes(6) + b"\x08\x00" + bytes(46))                      # IPv4
    frames.append(mac + bytes(6) + b"\x86\xdd" + b"\x60" + bytes(10))            # runt IPv6
    before = tb.counters("ap1")
    _raw_send(tb, "sta1", frames)
    time.sleep(0.5)
    after = tb.counters("ap1")
    assert after["in0"]["element_errors"] == 0
    counted = sum(after[e][k] - before[e].get(k, 0) for e in ("cls0", "tr1", "src0")
                  for k in ("malformed", "out1_-", "skipped_has_hbh", "unsupported_trace") if k in after[e])
    assert counted >= 7, after
    # ...and the node still forwards.
    assert ping_rtts_ms(tb, "sta1", tb.addr("sta2"), count=3, interval=0.1)
    st = tb.status()
    assert all(n["alive"] and n["restarts"] == 0 for n in st["nodes"].values())


def test_down_after_kill_9_leaves_nothing_behind():
    t = start_testbed("wireless", "itkill")
    pid = t.status()["nodes"]["ap1"]["pid"]
    os.kill(pid, signal.SIGKILL)
    os.kill(t.status()["supervisor_pid"], signal.SIGKILL)
    teardown("itkill")
    teardown("itkill")        # idempotent
    assert not [n for n in netns.listnetns() if n.startswith("intcc-itkill-")]
    assert not os.path.exists(t.dir)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "intcc" not in links
    procs = subprocess.run(["pgrep", "-f", t.dir], capture_output=True, text=True).stdout
    assert not procs.strip()


def test_kernel_trace_sees_every_retransmission_of_a_lossy_flow(tb):
    """The tracefs recorder (experiments/testbed/kernel_trace.py) on a real kernel flow: its
    retransmissions are the ones iperf3 reports, its windows reach iperf3's largest."""
    from experiments.testbed.kernel_trace import KernelTcpTrace, summarize
    tb.write("ap1", "wl1", "loss", "5%")
    try:
        with KernelTcpTrace(port=5203) as trace:
            out = iperf3(tb, "sta1", "sta2", seconds=4, port=5203)
    finally:
        tb.write("ap1", "wl1", "loss", "0")
    s = summarize(trace.rows)
    sender = out["end"]["streams"][0]["sender"]
    assert trace.lost_events == 0
    # None missed. The trace counts retransmitted skbs, total_retrans counts segments: TCP
    # always builds GSO skbs (segmented in software where offloads are off), and a run of
    # lost segments goes out again as one skb, so a few events stand for 2+ segments (the
    # namespace's TcpRetransSegs was 0-1 above the events here, 3 above once in CI: 142 vs
    # 145). iperf3 reads TCP_INFO when its test ends, while the trace goes on to the close
    # and sees the last window's retransmissions too (142 against 138 seen at 5 % loss).
    assert sender["retransmits"] > 0
    assert s["retransmits"] >= sender["retransmits"] - max(2, sender["retransmits"] // 20), \
        (s["retransmits"], sender["retransmits"])
    assert s["retransmits"] <= sender["retransmits"] + max(6, sender["retransmits"] // 10), \
        (s["retransmits"], sender["retransmits"])
    assert s["recovery_entries"] > 0 and s["acks"] > 100
    mss = out["start"]["tcp_mss_default"]
    assert max(r["cwnd_pkts"] for r in trace.rows if r["event"] == "tcp_probe") * mss >= sender["max_snd_cwnd"]
    assert not os.path.exists(trace.instance)


def test_a_loss_seed_replays_the_same_wireless_losses(tb):
    """Common random numbers on the real testbed: reseeded alike, the same traffic meets
    the same losses in both directions; another seed, other losses."""
    from experiments.testbed.linkctl import seed_losses, set_loss

    def wireless_losses():
        return {(n, el): c["configured_losses"] for n in tb.node_names
                for el, c in tb.counters(n).items() if el.startswith("wl")}
    set_loss(tb, 20)
    try:
        outcomes = []
        for seed in (5, 5, 6):
            seed_losses(tb, seed)
            before = wireless_losses()
            tb.run("sta1", ["ping", "-6", "-n", "-q", "-c", "150", "-i", "0.005", "-W", "1", tb.addr("sta2")])
            after = wireless_losses()
            outcomes.append({k: after[k] - before[k] for k in after})
    finally:
        set_loss(tb, 0)
    assert sum(outcomes[0].values()) > 30                 # ~20 % of 150 requests and their replies
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] != outcomes[2]


def test_four_streams_through_a_100_packet_queue_never_report_depth_above_capacity(tb):
    """The sink's records of a 4-stream flow that fills ap1's queue: depth <= capacity in
    every packet (before, frame bytes with INT headers were counted against 1500 B a
    packet: 166,600 of 150,000 B in ~7 % of packets)."""
    import json
    records = os.path.join(tb.dir, "ap2.int.jsonl")
    start = os.path.getsize(records) if os.path.exists(records) else 0
    iperf3(tb, "sta1", "sta2", seconds=4, extra=["-P", "4"], port=5205)
    time.sleep(0.5)                            # the exporter flushes every 200 ms
    depths = []
    with open(records) as f:
        f.seek(start)
        for line in f:
            for hop in json.loads(line)["trace"]["hops"]:
                if hop["node_id"] == 1 and hop["state"]["queue_capacity_bytes"]:
                    depths.append((hop["queue_depth_bytes"], hop["state"]["queue_capacity_bytes"]))
    assert len(depths) > 1000
    assert all(d <= c for d, c in depths), max(depths)
    assert max(d / c for d, c in depths) >= 0.9       # the queue did fill: the bound was tested
