"""The node's fast path (tc BPF, int_node/fastpath) against the Python node: the same recorded
traffic through the same two-node testbed gives the same IOAM data at the sink, byte for
byte except the fields that are clocks (timestamps, transit delay, the measured arrival rate),
and the same packets at the receiver; tshark and a Linux ioam6 receiver read the fast path's
packets; malformed INT through it is accounted for and leaves no kernel warning."""
from __future__ import annotations

import json
import random
import signal
import struct
import subprocess
import sys
import time

import pytest

from experiments.testbed.teardown import teardown
from int_node import ioam
from int_node.fastpath import layout
from tests.integration import fastpath_traffic
from tests.integration.tbutil import start_line_without_sink, start_testbed

FRAMES_PPS = 400

_SEND = """
import socket, sys, time
frames = [bytes.fromhex(l) for l in open(sys.argv[1]).read().split()]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[2], 0))
gap = 1.0 / float(sys.argv[3])
for f in frames[:-1]:
    s.send(f)
    time.sleep(gap)
time.sleep(0.4)        # the sink's exporter writes out what it holds on the next packet
s.send(frames[-1])
"""

_RECV = """
import socket, sys, time
r = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86dd))
r.bind((sys.argv[1], 0x86dd))
r.settimeout(0.5)
want, got, until = int(sys.argv[2]), [], time.time() + float(sys.argv[3])
# the upper layers of packets stripped of INT; "0": packets that still carry it (hop-by-hop)
next_headers = [int(x) for x in (sys.argv[5] if len(sys.argv) > 5 else "6,17,58").split(",")]
print("ready", flush=True)
while len(got) < want and time.time() < until:
    try:
        d = r.recv(65536)
    except socket.timeout:
        continue
    if len(d) > 54 and d[20] in next_headers and d[22:38] == bytes.fromhex(sys.argv[4]):
        got.append(d.hex())
print("\\n".join(got))
"""


def _mac(tb, node, dev):
    return bytes.fromhex(tb.run(node, ["cat", f"/sys/class/net/{dev}/address"]).stdout.strip().replace(":", ""))


def packet_sequence(tb, seed: int = 7, count: int = 150):
    """A fixed sequence of frames from h1 to h2: UDP and TCP flows and ICMPv6 echoes, sizes
    from 64 B to a full 1500 B packet, interleaved."""
    rng = random.Random(seed)
    src = bytes.fromhex(tb.run("h1", ["python3", "-c", f"import socket;print(socket.inet_pton(socket.AF_INET6,"
                                                      f"'{tb.addr('h1')}').hex())"]).stdout.strip())
    dst = bytes.fromhex(tb.run("h1", ["python3", "-c", f"import socket;print(socket.inet_pton(socket.AF_INET6,"
                                                      f"'{tb.addr('h2')}').hex())"]).stdout.strip())
    eth = _mac(tb, "n1", "intcc-h1") + _mac(tb, "h1", "intcc-n1") + b"\x86\xdd"
    flows = [(17, 40000 + i, 5000 + i) for i in range(3)] + [(6, 41000 + i, 5201) for i in range(2)] + [(58, 0, 0)]
    frames = []
    for _ in range(count):
        nh, sport, dport = rng.choice(flows)
        size = rng.choice((64, 200, 512, 1000, 1400, 1500 - 40 - 192))
        if nh == 58:
            l4 = struct.pack("!BBHHH", 128, 0, 0, 1, len(frames)) + bytes(max(0, size - 8))
        else:
            l4 = struct.pack("!HH", sport, dport) + bytes(rng.getrandbits(8) for _ in range(size - 4))
        ip6 = struct.pack("!IHBB", 6 << 28, len(l4), nh, 64) + src + dst
        frames.append(eth + ip6 + l4)
    return frames, src


def recorded_sequence(tb):
    """The recorded traffic (tests/data/fastpath_h1.pcap: pings, a TCP transfer, a UDP flow from
    h1 to h2) with this testbed's MACs."""
    frames, src = packet_sequence(tb, count=1)
    eth, dst = frames[0][:14], frames[0][38:54]
    recorded = fastpath_traffic.replayable(fastpath_traffic.read_pcap(), src, dst, eth)
    assert len(recorded) >= 100, len(recorded)
    return recorded, src


def run_sequence(tb, frames, src: bytes, tmp_path, tag: str):
    """Send the frames from h1; (frames h2 received, the sink's capture records)."""
    path = tmp_path / f"{tag}.frames"
    path.write_text("\n".join(f.hex() for f in frames))
    rx = tb.popen("h2", [sys.executable, "-c", _RECV, "intcc-n2", str(len(frames)), "20", src.hex()],
                  stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    sent = tb.run("h1", [sys.executable, "-c", _SEND, str(path), "intcc-n1", str(FRAMES_PPS)], timeout=60)
    assert sent.returncode == 0, sent.stderr
    out, _ = rx.communicate(timeout=30)
    received = [bytes.fromhex(x) for x in out.split()]
    deadline, records = time.monotonic() + 5, []
    while len(records) < len(frames) and time.monotonic() < deadline:     # the exporter's write lands
        with open(f"{tb.dir}/n2.int.capture") as f:
            records = [json.loads(line) for line in f if line.strip()]
        time.sleep(0.05)
    return received, records


_OFF = layout.field_offsets()
_CLOCK_FIELDS = (("ts_sec", 4), ("ts_frac", 4), ("transit_delay_ns", 4), ("arrival_rate_pps", 4))


def ifnames(tb) -> dict:
    """(node id, ifindex) -> interface name: a testbed's interface indexes are its own."""
    out = {}
    for node in ("n1", "n2"):
        for line in tb.run(node, ["ip", "-o", "link"]).stdout.splitlines():
            index, name = line.split(":")[:2]
            out[(tb.node_info(node)["node_id"], int(index))] = name.strip().split("@")[0]
    return out


def masked(record, names) -> tuple:
    """(key, trace, e2e, interfaces) with the clock fields zeroed and the interface ids as names:
    every other byte must match."""
    trace = bytearray.fromhex(record["trace"])
    interfaces = []
    for slot in range(ioam.TRACE_HDR.size + (trace[3] & 0x7F) * 4, len(trace), ioam.NODE_SLOT_BYTES):
        for name, width in _CLOCK_FIELDS:
            trace[slot + _OFF[name]:slot + _OFF[name] + width] = bytes(width)
        node_id = struct.unpack_from("!I", trace, slot)[0] & 0xFFFFFF
        for field in ("ingress_if", "egress_if"):
            index = struct.unpack_from("!H", trace, slot + _OFF[field])[0]
            interfaces.append(names.get((node_id, index), index))
            trace[slot + _OFF[field]:slot + _OFF[field] + 2] = bytes(2)
    e2e = bytearray.fromhex(record["e2e"])
    e2e[-8:] = bytes(8)         # the E2E timestamp (seconds, nanoseconds)
    return record["key"], bytes(trace), bytes(e2e), tuple(interfaces)


@pytest.fixture(scope="module")
def both_paths(tmp_path_factory):
    """The sequence through the Python nodes, then through the fast path, on the same testbed."""
    tmp = tmp_path_factory.mktemp("fastpath")
    out = {}
    for fast in (False, True):
        teardown("fpeq")
        tb = start_testbed("line2", "fpeq", exporter="capture", fast_path=fast)
        try:
            frames, src = recorded_sequence(tb)
            out[fast] = run_sequence(tb, frames, src, tmp, "fast" if fast else "python") + (
                tb.counters("n1"), tb.counters("n2"), ifnames(tb))
            logs = [open(tb.node_info(n)["log"]).read() for n in ("n1", "n2")]
        finally:
            tb.down()
        if fast:
            assert all("fast path on" in log for log in logs), logs
    return out, frames


def test_the_fast_path_forwards_every_frame_and_the_receiver_gets_the_same_packets(both_paths):
    out, frames = both_paths
    (py_rx, _, _, _, _), (fp_rx, _, fp_n1, fp_n2, _) = out[False], out[True]
    assert len(py_rx) == len(fp_rx) == len(frames)
    # stripped at the sink: the sent packets, two hops less (the MACs are each testbed's own)
    assert [f[12:] for f in py_rx] == [f[12:] for f in fp_rx]
    assert all(f[54:] == s[54:] and f[21] == s[21] - 2 for f, s in zip(fp_rx, frames))
    for dev, c in (("intcc-h1", fp_n1), ("intcc-n1", fp_n2)):
        # every frame of the sequence by the fast path (what it left to Python: neighbour discovery)
        assert c[f"fastpath.{dev}"]["rx_packets"] == len(frames)
    assert fp_n1["src0"]["inserted"] == len(frames)
    assert fp_n2["fastpath.intcc-h2"]["sink_stripped"] == len(frames)


def test_the_sink_exports_the_same_ioam_data_except_the_clocks(both_paths):
    out, frames = both_paths
    py, fp = [[masked(r, out[f][4]) for r in out[f][1]] for f in (False, True)]
    assert len(py) == len(fp) == len(frames)
    for i, (a, b) in enumerate(zip(py, fp)):
        assert a == b, f"packet {i}: Python {a[1].hex()} / fast path {b[1].hex()}"
    # and the clocks are clocks: the fast path's timestamps are the wall clock's
    rec = out[True][1][-1]
    trace = bytes.fromhex(rec["trace"])
    slot = ioam.TRACE_HDR.size + (trace[3] & 0x7F) * 4
    ts_sec = struct.unpack_from("!I", trace, slot + _OFF["ts_sec"])[0]
    assert abs(ts_sec - time.time()) < 120
    delay_ns = struct.unpack_from("!I", trace, slot + _OFF["transit_delay_ns"])[0]
    assert 0 < delay_ns < 50_000_000


@pytest.fixture()
def fast_line():
    """h1 -- n1 -- h2, n1 on the fast path with no sink: INT reaches h2."""
    teardown("fpline")
    tb = start_line_without_sink("fpline", fast_path=True)
    try:
        yield tb
    finally:
        tb.down()


def _rx_frames(tb) -> int:
    return int(tb.run("n1", ["cat", "/sys/class/net/intcc-h1/statistics/rx_packets"]).stdout)


def _snmp6(tb, host, name):
    words = tb.run(host, ["cat", "/proc/net/snmp6"]).stdout.split()
    return int(words[words.index(name) + 1])


def test_tshark_and_a_linux_ioam6_receiver_read_the_fast_paths_packets(fast_line, tmp_path):
    tb = fast_line
    # h2 is a Linux IOAM node for the intcc namespace: it parses the trace on receipt
    tb.run("h2", ["sysctl", "-qw", "net.ipv6.conf.intcc-n1.ioam6_enabled=1"])
    tb.run("h2", ["ip", "ioam", "namespace", "add", str(ioam.DEFAULT_NAMESPACE)])
    pcap = tmp_path / "h2.pcap"
    cap = tb.popen("h2", ["tcpdump", "--immediate-mode", "-U", "-ni", "intcc-n1", "-w", str(pcap)],
                   stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    errors_before = _snmp6(tb, "h2", "Ip6InHdrErrors")
    res = tb.run("h1", ["ping", "-6", "-n", "-c", "5", "-i", "0.1", tb.addr("h2")])
    time.sleep(0.5)
    cap.send_signal(signal.SIGINT)
    cap.wait(5)
    assert "5 received" in res.stdout, res.stdout         # Linux accepted the fast path's IOAM
    assert _snmp6(tb, "h2", "Ip6InHdrErrors") == errors_before
    rows = subprocess.run(["tshark", "-r", str(pcap), "-Y", "icmpv6.type == 128", "-T", "fields",
                           "-e", "ipv6.opt.ioam.trace.node.id", "-e", "ipv6.opt.ioam.trace.node.qdepth",
                           "-e", "ipv6.opt.ioam.trace.node.hlim"],
                          capture_output=True, text=True, check=True).stdout.split("\n")
    rows = [r.split("\t") for r in rows if r.strip()]
    assert len(rows) == 5
    for node_id, qdepth, hlim in rows:
        assert (int(node_id, 0), int(qdepth, 0), int(hlim, 0)) == (1, 0, 63)
    assert tb.counters("n1")["tr1"]["stamped"] >= 5


def _malformed(frame: bytes, rng: random.Random) -> bytes:
    """INTSource's layout broken one way or another, or cut short."""
    f = bytearray(ioam.insert_int(bytearray(frame), 2, seq=1, ts_ns=time.time_ns()))
    kind = rng.randrange(7)
    if kind == 0:
        return bytes(f[:rng.randrange(14, 80)])                # truncated headers
    if kind == 1:
        f[59] = rng.choice((0, 3, 255))                        # the option's length
    elif kind == 2:
        f[65] = 0x7F                                           # RemainingLen past the data
    elif kind == 3:
        f[55] = 200                                            # HbH length past the packet
    elif kind == 4:
        f[62:64] = b"\x00\x01"                                 # an IANA namespace
    elif kind == 5:
        f[18:20] = struct.pack("!H", 5000)                     # payload length past the frame
    else:
        f[54 + rng.randrange(0, 200)] ^= 0xFF                  # a byte flipped somewhere
    return bytes(f)


def test_malformed_int_through_the_fast_path_is_accounted_for_and_the_kernel_stays_quiet(fast_line, tmp_path):
    tb = fast_line
    rng = random.Random(11)
    frames, _ = packet_sequence(tb, seed=3, count=80)
    # each with INT of two hops inserted: within the host's MTU (the testbed leaves INT headroom)
    bad = [_malformed(f, rng) for f in frames if len(f) <= 1100 for _ in range(5)]
    dmesg_before = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.count("\n")
    before, iface_before = tb.counters("n1"), _rx_frames(tb)
    path = tmp_path / "bad.frames"
    path.write_text("\n".join(f.hex() for f in bad + bad[-1:]))
    sent = tb.run("h1", [sys.executable, "-c", _SEND, str(path), "intcc-n1", "2000"], timeout=60)
    assert sent.returncode == 0, sent.stderr
    time.sleep(1.0)
    after, iface_after = tb.counters("n1"), _rx_frames(tb)
    fp = {k: after["fastpath.intcc-h1"][k] - before["fastpath.intcc-h1"][k] for k in ("rx_packets", "punted")}
    # every frame the port received (the interface's count: ours and the kernel's neighbour
    # discovery): taken by the fast path or left to the Python node, counted once
    assert fp["rx_packets"] + fp["punted"] == iface_after - iface_before >= len(bad) + 1, fp
    assert fp["punted"] > 0 and fp["rx_packets"] > 0
    # the Python node read every frame left to it (its own count, without the fast path's)
    python_read = after["in0"]["packets"] - before["in0"]["packets"] - fp["rx_packets"]
    assert python_read + after["in0"]["kernel_drops"] - before["in0"]["kernel_drops"] == fp["punted"]
    new = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.split("\n")[dmesg_before:]
    assert not [line for line in new if "WARNING" in line or "BUG" in line or "bpf" in line.lower()], new


def test_a_rate_limited_ports_queue_is_the_kernels_and_its_state_is_in_the_hop(tmp_path):
    """line2 with a 20 Mbit/s middle link on the fast path: a 30 Mbit/s UDP flow fills n1's
    tbf queue; n1's slots at the sink carry its depth, drops (the port's and the flow's own)
    and a transit delay that includes the wait behind the bytes ahead."""
    from experiments.testbed.traffic import udp_flow
    teardown("fpq")
    tb = start_testbed("line2", "fpq", exporter="capture", fast_path=True, mid_mbps=20, buffer_pkts=50)
    try:
        res = udp_flow(tb, "h1", "h2", rate_mbps=30, seconds=2.0, length=1200)
        time.sleep(0.5)
        ping = tb.run("h1", ["ping", "-6", "-c", "2", "-i", "0.3", tb.addr("h2")])   # flushes the capture
        c = tb.counters("n1")
        with open(f"{tb.dir}/n2.int.capture") as f:
            records = [json.loads(line) for line in f if line.strip()]
    finally:
        tb.down()
    assert "2 received" in ping.stdout
    assert 0.2 < res["loss_fraction"] < 0.5, res        # 30 into 20 Mbit/s: a third lost, in the queue
    port = c["fastpath.intcc-n2"]
    assert port["qdisc_drops"] > 0 and c["q1"]["drops"] == port["qdisc_drops"]
    n1 = []
    for rec in records:
        trace = bytes.fromhex(rec["trace"])
        first = ioam.TRACE_HDR.size + (trace[3] & 0x7F) * 4
        slot = trace[first + ioam.NODE_SLOT_BYTES:first + 2 * ioam.NODE_SLOT_BYTES]   # n1's: filled first
        n1.append({name: int.from_bytes(slot[_OFF[name]:_OFF[name] + w], "big")
                   for name, w in (("queue_depth_bytes", 4), ("buffer_occupancy", 4), ("transit_delay_ns", 4),
                                   ("queue_drops", 4), ("flow_queue_drops", 2), ("queue_capacity_bytes", 4),
                                   ("data_rate_kbps", 4), ("hoplim_node_id", 4))})
    assert all(s["hoplim_node_id"] & 0xFFFFFF == 1 for s in n1)
    assert {s["queue_capacity_bytes"] for s in n1} == {50 * 1500} and {s["data_rate_kbps"] for s in n1} == {20000}
    full = [s for s in n1 if s["buffer_occupancy"] >= 40]
    assert full, max(s["buffer_occupancy"] for s in n1)
    for s in full:
        assert s["queue_depth_bytes"] == s["buffer_occupancy"] * 1500
        # ~40+ frames of 1,320 B ahead at 20 Mbit/s: 21 ms and more
        assert s["transit_delay_ns"] > 20_000_000
    assert max(s["queue_drops"] for s in n1) > 0 and max(s["flow_queue_drops"] for s in n1) > 0


def test_run_time_writes_reach_the_kernels_queue_or_are_refused():
    from experiments.testbed.traffic import udp_flow
    teardown("fpw")
    tb = start_testbed("line2", "fpw", exporter="none", fast_path=True, mid_mbps=20, buffer_pkts=50)
    try:
        tb.write("n1", "shape1", "rate", "5Mbps")
        tb.write("n1", "q1", "capacity", "80")
        qdiscs = tb.run("n1", ["tc", "qdisc", "show", "dev", "intcc-n2"]).stdout
        res = udp_flow(tb, "h1", "h2", rate_mbps=10, seconds=2.0, length=1200)
        with pytest.raises(Exception, match="packet-bounded"):
            tb.write("n1", "q1", "capacity_bytes", "100000")
        reply = tb.node_request("n1", {"cmd": "read", "element": "q1", "handler": "capacity_bytes"})
        assert reply["value"] == 0      # the refused write undone
    finally:
        tb.down()
    assert "rate 5Mbit" in qdiscs and "limit 80p" in qdiscs, qdiscs
    assert 3.5 < res["received_mbps"] < 5.2, res


def _first_hop_flow_counts(frames: list) -> list:
    """The flow count n1 stamped into each frame's trace (the first and only hop)."""
    counts = []
    for frame in frames:
        trace = ioam.find_trace(frame)
        slot = trace + ioam.TRACE_HDR.size + (frame[trace + 3] & 0x7F) * 4
        counts.append(struct.unpack_from("!H", frame, slot + _OFF["flow_count"])[0])
    return counts


def test_the_fast_paths_flow_count_keeps_every_new_flow_while_it_purges_and_forgets_the_idle(fast_line, tmp_path):
    """Three hundred UDP flows, each new, sent over about a third of a second: the node's
    purge (every 100 ms, walking the table) runs while the program inserts; the last frame's
    count is every flow of the last second (a purge writing its count over the program's
    lost the flows inserted meanwhile). A frame 1.7 s after them: its own flow only."""
    tb = fast_line
    template, src = packet_sequence(tb, count=1)
    eth, dst = template[0][:14], template[0][38:54]

    def udp(sport: int) -> bytes:
        l4 = struct.pack("!HHHH", sport, 9, 8 + 56, 0) + bytes(56)
        return eth + struct.pack("!IHBB", 6 << 28, len(l4), 17, 64) + src + dst + l4

    burst = [udp(20000 + i) for i in range(300)]
    lone = [udp(30000)]
    rx = tb.popen("h2", [sys.executable, "-c", _RECV, "intcc-n1", str(len(burst) + 1), "20", src.hex(), "0"],
                  stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    for frames, pps in ((burst, 1000), (lone, 1)):
        path = tmp_path / "frames"
        path.write_text("\n".join(f.hex() for f in frames))
        sent = tb.run("h1", [sys.executable, "-c", _SEND, str(path), "intcc-n1", str(pps)], timeout=60)
        assert sent.returncode == 0, sent.stderr
        time.sleep(1.3)
    out, _ = rx.communicate(timeout=30)
    counts = _first_hop_flow_counts([bytes.fromhex(x) for x in out.split()])
    assert len(counts) == len(burst) + 1, len(counts)
    assert counts[:len(burst)] == list(range(1, len(burst) + 1)), counts[:len(burst)]
    assert counts[-1] == 1, counts[-1]
