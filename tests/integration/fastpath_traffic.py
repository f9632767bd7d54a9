"""Recorded traffic for the fast path's equivalence test: what h1 of the `line2` testbed sent
towards h2 while it pinged h2, sent it 100 kB over TCP (iperf3) and a short UDP flow,
captured on h1's link (tests/data/fastpath_h1.pcap, committed). The test replays those frames
with the running testbed's MACs.

    python -m tests.integration.fastpath_traffic      re-records it (root; a testbed 'fprec')
"""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time

PCAP = os.path.join(os.path.dirname(__file__), "..", "data", "fastpath_h1.pcap")
_PCAP_HDR = struct.Struct("<IHHiIII")
_REC_HDR = struct.Struct("<IIII")


def read_pcap(path: str = PCAP):
    """The frames of a classic pcap file (microsecond or nanosecond, little-endian)."""
    with open(path, "rb") as f:
        data = f.read()
    magic = _PCAP_HDR.unpack_from(data)[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        raise ValueError(f"{path}: not a little-endian pcap file (magic 0x{magic:08x})")
    off, frames = _PCAP_HDR.size, []
    while off + _REC_HDR.size <= len(data):
        _, _, incl, orig = _REC_HDR.unpack_from(data, off)
        off += _REC_HDR.size
        if incl != orig:
            raise ValueError(f"{path}: a frame was cut to {incl} of {orig} bytes: record without a snap length")
        frames.append(data[off:off + incl])
        off += incl
    return frames


def replayable(frames, src: bytes, dst: bytes, eth: bytes):
    """The recorded frames from ``src`` to ``dst`` (IPv6 addresses), with the given Ethernet
    header (destination MAC, source MAC, type): the running testbed's."""
    return [eth + f[14:] for f in frames
            if len(f) > 54 and f[12:14] == b"\x86\xdd" and f[22:38] == src and f[38:54] == dst]


def record(path: str = PCAP) -> int:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from experiments.testbed.teardown import teardown
    from experiments.testbed.traffic import udp_flow
    from tests.integration.tbutil import start_testbed
    teardown("fprec")
    tb = start_testbed("line2", "fprec", exporter="none")
    try:
        tmp = os.path.join(tb.dir, "h1.pcap")
        cap = tb.popen("h1", ["tcpdump", "--immediate-mode", "-U", "-s", "0", "-ni", "intcc-n1", "-w", tmp,
                              "ip6", "and", "src", tb.addr("h1"), "and", "dst", tb.addr("h2")],
                       stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        tb.run("h1", ["ping", "-6", "-n", "-c", "10", "-i", "0.05", "-s", "200", tb.addr("h2")])
        srv = tb.popen("h2", ["iperf3", "-s", "-1", "-p", "5201"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        tb.wait_listening("h2", 5201)
        tb.run("h1", ["iperf3", "-6", "-c", tb.addr("h2"), "-p", "5201", "-n", "100K"], timeout=30)
        srv.wait(10)
        udp_flow(tb, "h1", "h2", rate_mbps=1.0, seconds=0.4, length=900)
        time.sleep(0.5)
        cap.send_signal(signal.SIGINT)
        cap.wait(5)
        with open(tmp, "rb") as f, open(path, "wb") as out:
            out.write(f.read())
    finally:
        tb.down()
    print(f"{path}: {len(read_pcap(path))} frames")
    return 0


if __name__ == "__main__":
    sys.exit(record())
