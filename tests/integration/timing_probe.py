"""A clock for a path: datagrams at a fixed interval, each stamped with its sequence number
and send time, and a receiver that logs when each arrived. Hosts of a testbed share the
machine's CLOCK_MONOTONIC, so a schedule in a node (a reconfiguration's nights) can be read
off the packets' fates and compared with the node's own log of it.

    python3 timing_probe.py recv PORT IDLE_S       prints "ready", then a JSON list of
                                                   [seq, send_ns, recv_ns], in arrival order;
                                                   recv_ns is the kernel's arrival stamp, so a
                                                   receiver descheduled for a while does not
                                                   read as a silence on the path
    python3 timing_probe.py send ADDR PORT INTERVAL_US SECONDS
                                                   prints {"sent": N, "late": [[seq, late_us], ...]}:
                                                   the datagrams sent LATE_US or more after their
                                                   time (the sender held up: what the path did
                                                   around them is not the path's doing)

The sender sleeps to just before each datagram's time and spins the rest: a sleep alone
overshoots by tens of microseconds, a varying amount, and the interval is the
measurement's resolution; spinning alone takes a core from the nodes it measures.

Standalone (stdlib only): it runs under `ip netns exec` by path, with no project path."""
import json
import socket
import struct
import sys
import time

STAMP = struct.Struct("!QQ")        # seq, send time (monotonic ns)
SO_TIMESTAMPNS = 35                 # <asm-generic/socket.h>; not exported by Python's socket
TIMESPEC = struct.Struct("@qq")     # struct timespec on 64-bit Linux
SPIN_NS = 80_000                    # a sleep's overshoot, and then some
LATE_US = 300                       # a send this late is the sender held up, not jitter


def receive(port: int, idle_s: float) -> list:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("::", port))
    print("ready", flush=True)
    log = []
    sock.settimeout(None)
    while True:
        try:
            data, ancillary, _, _ = sock.recvmsg(2048, socket.CMSG_SPACE(TIMESPEC.size))
        except socket.timeout:
            break
        # the kernel stamps arrival in CLOCK_REALTIME; the send stamps are monotonic: the two
        # clocks' offset, read now, carries the stamp over (it drifts by no more than a slew)
        monotonic_ns = time.monotonic_ns()
        offset_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - monotonic_ns
        now = monotonic_ns
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= TIMESPEC.size:
                sec, nsec = TIMESPEC.unpack_from(value)
                now = sec * 1_000_000_000 + nsec - offset_ns
        if len(data) >= STAMP.size:
            seq, sent_ns = STAMP.unpack_from(data)
            log.append([seq, sent_ns, now])
        sock.settimeout(idle_s)
    return log


def send(addr: str, port: int, interval_us: float, seconds: float) -> dict:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    payload = bytearray(64)
    interval_ns = int(interval_us * 1000)
    start = time.monotonic_ns()
    end = start + int(seconds * 1e9)
    seq, late = 0, []
    while True:
        due = start + seq * interval_ns
        if due >= end:
            return {"sent": seq, "late": late}
        now = time.monotonic_ns()
        if due - now > SPIN_NS:
            time.sleep((due - now - SPIN_NS) / 1e9)
            now = time.monotonic_ns()
        while now < due:
            now = time.monotonic_ns()
        if now - due >= LATE_US * 1000:
            late.append([seq, (now - due) // 1000])
        STAMP.pack_into(payload, 0, seq, now)
        try:
            sock.sendto(payload, (addr, port))
        except OSError:
            pass                # a full local queue: the datagram is missing, as one lost on the path
        seq += 1


def main(argv) -> int:
    if len(argv) == 3 and argv[0] == "recv":
        print(json.dumps(receive(int(argv[1]), float(argv[2]))), flush=True)
        return 0
    if len(argv) == 5 and argv[0] == "send":
        print(json.dumps(send(argv[1], int(argv[2]), float(argv[3]), float(argv[4]))), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
