"""Every frame into a node is forwarded or counted: a 20k frames/s UDP burst, with the
node stopped for half a second so its kernel receive ring overflows, ends with
in = out + counted drops. Before, the ring's own drops (PACKET_STATISTICS) were
read by nobody: frames vanished between nodes. Also: 802.1Q-tagged frames, which
the kernel hands to an IPv6 packet socket untagged, are refused and counted."""
import os
import signal
import struct
import sys
import time

import pytest

from tests.helpers import ipv6_frame
from experiments.testbed.traffic import UDPGEN, udp_flow
from tests.integration.tbutil import start_line_without_sink

#: Counters of frames an element did not pass on (each frame is counted by one of them).
DROP_COUNTERS = ("kernel_drops", "refused", "truncated", "element_errors", "other_dst", "unmatched", "no_route",
                 "expired", "dropped", "link_losses", "drops", "too_big", "runts", "send_drops")


@pytest.fixture(scope="module")
def tb():
    t = start_line_without_sink("itacct")
    yield t
    t.down()


def _iface(tb, host, counter):
    return int(tb.run(host, ["cat", f"/sys/class/net/intcc-n1/statistics/{counter}"]).stdout)


def _drops(counters) -> dict:
    return {f"{el}.{k}": v for el, c in counters.items() for k, v in c.items() if k in DROP_COUNTERS and v}


def test_a_burst_ends_with_in_equal_out_plus_counted_drops(tb):
    pid = tb.status()["nodes"]["n1"]["pid"]
    before = tb.counters("n1")
    in0, out0 = _iface(tb, "h1", "tx_packets"), _iface(tb, "h2", "rx_packets")
    sender = tb.popen("h1", [sys.executable, UDPGEN, "send", tb.addr("h2"), "5400", "32", "2", "200"])
    try:
        time.sleep(0.6)
        os.kill(pid, signal.SIGSTOP)        # the ring fills at 20k frames/s: 4,096 frames in ~0.2 s
        time.sleep(0.5)
    finally:
        os.kill(pid, signal.SIGCONT)
        sender.wait(timeout=30)
    time.sleep(1.0)                          # the node drains and reads the kernel's counts
    after = tb.counters("n1")
    sent, received = _iface(tb, "h1", "tx_packets") - in0, _iface(tb, "h2", "rx_packets") - out0
    d0, d1 = _drops(before), _drops(after)
    drops = {k: v - d0.get(k, 0) for k, v in d1.items() if v - d0.get(k, 0)}
    assert sent > 30000, sent
    assert drops.get("in0.kernel_drops", 0) > 1000, drops      # the ring overflowed, and it shows
    missing = sent - received - sum(drops.values())
    assert abs(missing) <= 10 + 0.001 * sent, (sent, received, drops)
    status = tb.status()["nodes"]["n1"]
    assert status["rx_kernel_drops"] == after["in0"]["kernel_drops"] + after["in1"]["kernel_drops"]


def _raw_send(tb, host, frames):
    code = ("import socket,sys\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('intcc-n1',0))\n"
            "for f in sys.stdin.buffer.read().split(b'\\0SEP\\0'):\n    s.send(f)\n")
    res = tb.run(host, [sys.executable, "-c", code], input=b"\0SEP\0".join(frames), text=False)
    assert res.returncode == 0, res.stderr


def test_vlan_tagged_frames_are_refused_and_counted_not_forwarded_untagged(tb):
    mac_text = tb.run("n1", ["cat", "/sys/class/net/intcc-h1/address"]).stdout.strip()
    node_mac = bytes.fromhex(mac_text.replace(":", ""))
    frame = ipv6_frame(100, nh=17, dst_mac=node_mac)
    tagged = frame[:12] + struct.pack("!HH", 0x8100, 42) + frame[12:]   # VLAN 42
    before = tb.counters("n1")
    _raw_send(tb, "h1", [bytes(tagged)] * 20)
    deadline = time.monotonic() + 3
    while True:         # counters() reads the kernel's statistics on the spot
        after = tb.counters("n1")
        if after["in0"]["refused"] - before["in0"]["refused"] >= 20 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert after["in0"]["refused"] - before["in0"]["refused"] >= 20
    assert after["in0"]["packets"] == before["in0"]["packets"]     # none reached the elements


def test_frames_leave_in_the_order_they_came(tb):
    """At 25k frames/s a node's rounds hold several frames: the first leaves through
    ToDevice's plain socket at once, the rest through its transmit ring at the round's
    end. No frame may overtake an earlier one."""
    before = tb.counters("n1")
    out = udp_flow(tb, "h1", "h2", rate_mbps=40, seconds=2, port=5401, length=200)
    after = tb.counters("n1")
    at_once = sum(c.get("sent_at_once", 0) for c in after.values()) \
        - sum(c.get("sent_at_once", 0) for c in before.values())
    assert out["received"] > 10000, out
    # both ways out were taken (a fast host's node keeps up and rounds hold one frame more
    # often: 92 % left at once on one; the ring's share still counts in thousands)
    assert 0 < at_once and out["received"] - at_once >= 0.01 * out["received"], (at_once, out)
    assert out["out_of_order"] == 0, out
