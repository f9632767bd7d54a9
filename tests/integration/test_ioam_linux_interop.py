"""intcc's IOAM interoperates with Linux's own (net/ipv6/ioam6.c): a Linux router
configured for the intcc namespace, with a schema attached, fills its slot of the
pre-allocated trace intcc inserts, and intcc's decoder reads it back."""
import socket
import subprocess
import time

import pytest

from int_node import ioam, ioam_decode
from tests.helpers import ipv6_frame

NS = {"a": "intcc-io-a", "r": "intcc-io-r", "b": "intcc-io-b"}
LINUX_NODE_ID, IN_IF_ID, OUT_IF_ID = 77, 11, 12
SCHEMA_DATA = b"intcc-linux-interop-28bytes!"          # 28 bytes, as intcc's own snapshot
SCHEMA_ID = ioam.SCHEMA_INTCC_V2


def sh(*cmd):
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True).stdout


def in_ns(ns, *cmd):
    return sh("ip", "netns", "exec", NS[ns], *cmd)


@pytest.fixture(scope="module")
def path():
    assert len(SCHEMA_DATA) == 28
    for ns in NS.values():
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        sh("ip", "netns", "add", ns)
    try:
        sh("ip", "link", "add", "intcc-io-a0", "netns", NS["a"], "type", "veth", "peer", "name", "intcc-io-r0",
           "netns", NS["r"])
        sh("ip", "link", "add", "intcc-io-r1", "netns", NS["r"], "type", "veth", "peer", "name", "intcc-io-b0",
           "netns", NS["b"])
        for ns, dev, addr in (("a", "intcc-io-a0", "2001:db8:a::1/64"), ("r", "intcc-io-r0", "2001:db8:a::2/64"),
                              ("r", "intcc-io-r1", "2001:db8:b::2/64"), ("b", "intcc-io-b0", "2001:db8:b::1/64")):
            sh("ip", "-n", NS[ns], "addr", "add", addr, "dev", dev, "nodad")
            sh("ip", "-n", NS[ns], "link", "set", dev, "up")
        in_ns("r", "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
        in_ns("r", "sysctl", "-qw", f"net.ipv6.ioam6_id={LINUX_NODE_ID}")
        in_ns("r", "sysctl", "-qw", "net.ipv6.conf.intcc-io-r0.ioam6_enabled=1")
        in_ns("r", "sysctl", "-qw", f"net.ipv6.conf.intcc-io-r0.ioam6_id={IN_IF_ID}")
        in_ns("r", "sysctl", "-qw", f"net.ipv6.conf.intcc-io-r1.ioam6_id={OUT_IF_ID}")
        in_ns("r", "ip", "ioam", "namespace", "add", str(ioam.DEFAULT_NAMESPACE))
        in_ns("r", "ip", "ioam", "schema", "add", str(SCHEMA_ID), SCHEMA_DATA.decode())
        in_ns("r", "ip", "ioam", "namespace", "set", str(ioam.DEFAULT_NAMESPACE), "schema", str(SCHEMA_ID))
        in_ns("r", "ping", "-6", "-c", "1", "-W", "2", "2001:db8:b::1")     # R learns B's MAC
        yield
    finally:
        for ns in NS.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _mac(ns, dev):
    return bytes.fromhex(in_ns(ns, "cat", f"/sys/class/net/{dev}/address").strip().replace(":", ""))


def test_a_linux_transit_fills_its_slot_of_an_intcc_trace(path):
    frame = ipv6_frame(64, nh=17, dst_mac=_mac("r", "intcc-io-r0"))
    frame[6:12] = _mac("a", "intcc-io-a0")
    frame[22:38] = socket.inet_pton(socket.AF_INET6, "2001:db8:a::1")
    frame[38:54] = socket.inet_pton(socket.AF_INET6, "2001:db8:b::1")
    sent = ioam.insert_int(frame, 2, seq=5, ts_ns=time.time_ns())
    code = ("import socket,sys\n"
            "r=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x86dd));r.bind(('intcc-io-b0',0x86dd))\n"
            "r.settimeout(5);print('ready',flush=True)\n"
            "while True:\n d=r.recv(4096)\n"
            # a Hop-by-Hop header holding an IOAM option (0x31 after the PadN): not an MLD
            # report, whose Hop-by-Hop header carries a Router Alert (caught once instead)
            " if len(d)>60 and d[20]==0 and d[58]==0x31: sys.stdout.write(d.hex());break\n")
    rx = subprocess.Popen(["ip", "netns", "exec", NS["b"], "python3", "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        tx = ("import socket,sys\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);s.bind(('intcc-io-a0',0))\n"
              f"s.send(bytes.fromhex('{bytes(sent).hex()}'))\n")
        in_ns("a", "python3", "-c", tx)
        got = bytes.fromhex(rx.communicate(timeout=10)[0])
    finally:
        if rx.poll() is None:
            rx.kill()
    trace = ioam_decode.decode_trace(ioam.strip_int(bytearray(got)).trace_raw)
    assert trace.namespace_id == ioam.DEFAULT_NAMESPACE and not trace.overflow
    (linux,) = trace.nodes
    assert linux.node_id == LINUX_NODE_ID and (linux.ingress_if, linux.egress_if) == (IN_IF_ID, OUT_IF_ID)
    assert linux.opaque_schema == SCHEMA_ID and linux.opaque_raw == SCHEMA_DATA
    assert linux.hop_limit in (63, 64) and linux.ts_sec and abs(linux.ts_sec - time.time()) < 60
    # Linux's slot: 28 bytes of standard fields + 4-byte opaque header + its 28-byte schema data
    assert trace.remaining_len * 4 == 2 * ioam.NODE_SLOT_BYTES - (28 + 4 + len(SCHEMA_DATA))
