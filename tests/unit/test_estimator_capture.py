"""Sender-side capture parsing on synthesised pcaps."""
import ipaddress
import struct

import numpy as np
import pytest

from estimator.capture import sender_trace
from estimator.features import TraceError, features

SND, RCV = "2001:db8:1::1", "2001:db8:3::2"
ISN = 0xFFFFF000          # wraps past 2^32 within the flow


def frame(src, dst, sport, dport, seq, ack, payload, flags=0x10):
    tcp = struct.pack("!HHIIHHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, (5 << 12) | flags, 65535, 0, 0)
    ip6 = struct.pack("!IHBB", 6 << 28, len(tcp) + payload, 6, 64) + ipaddress.ip_address(src).packed \
        + ipaddress.ip_address(dst).packed
    return b"\x02" * 6 + b"\x04" * 6 + b"\x86\xdd" + ip6 + tcp + b"\x00" * min(payload, 40)


def pcap(path, packets):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for t, fr in packets:
            sec = int(t)
            f.write(struct.pack("<IIII", sec, int(round((t - sec) * 1e6)), len(fr), len(fr)) + fr)


def flow(n=40, mss=1000, rtt=0.02, retx_segment=10):
    pk = []
    for i in range(n):
        t = 1.0 + i * 0.001
        pk.append((t, frame(SND, RCV, 40000, 5201, ISN + i * mss, 1, mss)))
        if i % 2 == 1:       # delayed ACK every second segment
            pk.append((t + rtt, frame(RCV, SND, 5201, 40000, 1, ISN + (i + 1) * mss, 0)))
    # segment 10 retransmitted later (a spurious retransmission: its ACK carries no RTT sample)
    pk.append((1.0 + n * 0.001, frame(SND, RCV, 40000, 5201, ISN + retx_segment * mss, 1, mss)))
    # a reverse-direction control flow with little data must not be picked
    pk.append((1.5, frame(SND, RCV, 40001, 5201, 7, 1, 37)))
    return sorted(pk, key=lambda x: x[0])


def test_sends_acks_rtt_and_retransmissions(tmp_path):
    p = tmp_path / "s.pcap"
    pcap(p, flow())
    tr = sender_trace(str(p))
    assert len(tr.send_t) == 41 and tr.retrans.sum() == 1
    assert len(tr.ack_t) == 20
    np.testing.assert_allclose(tr.acked_bytes, 2000)
    np.testing.assert_allclose(tr.rtt_s, 0.02, atol=2e-6)
    assert features(tr).shape == (20, 8)


def test_sender_filter_and_errors(tmp_path):
    p = tmp_path / "s.pcap"
    pcap(p, flow())
    with pytest.raises(TraceError, match="no TCP flow carried data from 2001:db8:9::9"):
        sender_trace(str(p), sender="2001:db8:9::9")
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    with pytest.raises(TraceError, match="empty capture"):
        sender_trace(str(empty))
    trunc = tmp_path / "trunc.pcap"
    trunc.write_bytes(p.read_bytes()[:-30])
    with pytest.raises(TraceError, match="truncated"):
        sender_trace(str(trunc))
    other = tmp_path / "x.pcapng"
    other.write_bytes(b"\x0a\x0d\x0d\x0a" + b"\x00" * 40)
    with pytest.raises(TraceError, match="not a pcap file"):
        sender_trace(str(other))
    oneway = tmp_path / "oneway.pcap"
    pcap(oneway, flow()[:5])          # a few segments, one ACK
    with pytest.raises(TraceError, match="usable ACKs"):
        sender_trace(str(oneway))


def test_pcap_tail_returns_only_complete_records(tmp_path):
    from estimator.capture import PcapTail, SenderObserver, parse_tcp
    p = tmp_path / "live.pcap"
    pcap(p, flow())
    raw = p.read_bytes()
    live = tmp_path / "growing.pcap"
    live.write_bytes(raw[:24 + 16 + 10])            # header, then a partial record
    tail = PcapTail(str(live))
    assert tail.read_new() == []
    obs = SenderObserver()
    got = 0
    for cut in (len(raw) // 2, len(raw)):
        live.write_bytes(raw[:cut])
        for t, fr in tail.read_new():
            obs.add(t, parse_tcp(fr))
            got += 1
    assert got == len(flow())
    assert len(obs.trace().ack_t) == 20
    assert obs.flow_tuple() == (SND, RCV, 40000, 5201)


def test_a_trace_read_between_packets_is_the_whole_flows_and_stays_as_it_was_read():
    """The observer converts only the packets since its last trace (a live estimate twice a
    second); every trace equals one read once at its point, earlier ones are not changed by
    later packets, and nobody can write into them."""
    from estimator.capture import SenderObserver, parse_tcp

    def columns(tr):
        return tr.ack_t, tr.rtt_s, tr.acked_bytes, tr.send_t, tr.retrans
    packets = sorted(flow(n=3000), key=lambda x: x[0])
    live, once = SenderObserver(), []
    reads = []
    for k, (t, fr) in enumerate(packets):
        live.add(t, parse_tcp(fr))
        if k in (100, 101, 2049, len(packets) - 1):       # around the first buffer's 1,024 rows too
            tr = live.trace()
            reads.append((tr, tuple(np.array(a, copy=True) for a in columns(tr))))
            fresh = SenderObserver()
            for t2, fr2 in packets[:k + 1]:
                fresh.add(t2, parse_tcp(fr2))
            once.append(fresh.trace())
    for (tr, copied), ref in zip(reads, once):
        for a, c, r in zip(columns(tr), copied, columns(ref)):
            np.testing.assert_array_equal(a, r)
            np.testing.assert_array_equal(a, c)        # unchanged by what came after
    with pytest.raises(ValueError, match="read-only"):
        reads[0][0].ack_t[0] = 0.0
