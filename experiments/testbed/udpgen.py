"""A paced UDP sender and a counting receiver, run inside a testbed namespace: UDP cross
traffic (traffic.udp_flow) and the tests' UDP flows.

Not `iperf3 -u`: iperf3 sets a UDP stream up with one datagram each way and no
retransmission, so one lost to a full queue or the link's loss fails the flow or hangs its
client for good (esnet/iperf#862). Here nothing is exchanged before the data: the sender
just sends.

    python3 udpgen.py recv PORT IDLE_S        prints "ready", then {"received": n, "bytes": b,
                                              "out_of_order": datagrams behind a later one}
    python3 udpgen.py send ADDR PORT MBPS SECONDS LENGTH   prints {"sent": n, "bytes": b, "seconds": s}

Each datagram starts with its sequence number (8 bytes, network order).

Standalone on purpose (stdlib only): it runs under `ip netns exec` by path, with no project path.
"""
import json
import signal
import socket
import struct
import sys
import time

SEQ = struct.Struct("!Q")


def receive(port: int, idle_s: float) -> dict:
    # SIGINT is how the caller stops a receiver that got nothing; a parent started in the
    # background by a shell (`&`) passes SIGINT down ignored, and Python then keeps it so
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("::", port))
    print("ready", flush=True)
    received = nbytes = out_of_order = 0
    highest = -1
    sock.settimeout(None)               # wait as long as it takes for the first datagram
    while True:
        try:
            data = sock.recv(65535)
        except (socket.timeout, KeyboardInterrupt):     # SIGINT: nothing came, or no end came
            break
        received += 1
        nbytes += len(data)
        if len(data) >= SEQ.size:
            seq = SEQ.unpack_from(data)[0]
            out_of_order += seq < highest
            highest = max(highest, seq)
        sock.settimeout(idle_s)         # then stop after idle_s of silence
    return {"received": received, "bytes": nbytes, "out_of_order": out_of_order}


def send(addr: str, port: int, rate_mbps: float, seconds: float, length: int) -> dict:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    payload = bytearray(max(length, SEQ.size))
    interval_s = length * 8 / (rate_mbps * 1e6)
    start = time.monotonic()
    sent = 0
    while True:
        due = start + sent * interval_s
        # the window bounds it too: a sender that fell behind (a busy host) stops on time
        # instead of sending the rest late, where it would not meet the flows it was to meet
        if due - start >= seconds or time.monotonic() - start >= seconds:
            break
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        SEQ.pack_into(payload, 0, sent)
        try:
            sock.sendto(payload, (addr, port))
        except OSError:
            pass                        # a full local queue drops, like a NIC would; not counted as sent
        else:
            sent += 1
    return {"sent": sent, "bytes": sent * length, "seconds": round(time.monotonic() - start, 3)}


def main(argv) -> int:
    if len(argv) >= 3 and argv[0] == "recv":
        print(json.dumps(receive(int(argv[1]), float(argv[2]))), flush=True)
        return 0
    if len(argv) == 6 and argv[0] == "send":
        print(json.dumps(send(argv[1], int(argv[2]), float(argv[3]), float(argv[4]), int(argv[5]))), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
