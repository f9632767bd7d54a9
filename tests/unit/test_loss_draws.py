"""Loss draws keyed by packet identity: the same transmission meets the same fate in every
run given a seed, however the runs differ elsewhere."""
import random

import pytest

from int_node.loss_draws import PacketKeyedDraws
from tests.helpers import ipv6_frame, push, router, tcp_frame

MSS = 1428
SYN, ACK, FIN = 0x02, 0x10, 0x01


def connection(isn: int, sport: int, segments):
    """A flow's frames: SYN, then (relative seq, payload) data segments."""
    frames = [tcp_frame(isn, flags=SYN, sport=sport)]
    frames += [tcp_frame(isn + 1 + rel, ack=777, payload_len=n, sport=sport) for rel, n in segments]
    return frames


def fates(draws, frames, p=0.2):
    return [draws.draw(f) < p for f in frames]


def test_same_transmissions_same_fates_across_runs_that_differ_elsewhere():
    """Run B has other ports, another ISN, extra segments in between and a second flow first
    seen later: every transmission the two runs share is lost in both or in neither."""
    a_segments = [(k * MSS, MSS) for k in range(400)]
    a = fates(PacketKeyedDraws(5), connection(1000, 40001, a_segments))

    b_draws = PacketKeyedDraws(5)
    b_segments = list(a_segments)
    for k in (50, 120, 121, 300):                   # retransmissions only run B made
        b_segments.insert(b_segments.index((k * MSS, MSS)) + 3, (k * MSS, MSS))
    b_frames = connection(3_000_000_000, 50123, b_segments)
    b = []
    for i, f in enumerate(b_frames):
        b.append(b_draws.draw(f) < 0.2)
        if i == 10:
            b_draws.draw(tcp_frame(9, flags=SYN, sport=60000, dport=80))   # another flow starts
    first_sendings = [fate for fate, seg, k in zip(b[1:], b_segments, range(len(b_segments)))
                      if b_segments.index(seg) == k]
    assert [a[0]] + first_sendings == a
    assert 0.12 < sum(a) / len(a) < 0.28


def test_each_retransmission_and_each_duplicate_ack_has_its_own_draw():
    draws = PacketKeyedDraws("x")
    draws.draw(tcp_frame(0, flags=SYN))
    resends = [draws.draw(tcp_frame(1 + 5 * MSS, ack=1, payload_len=MSS)) for _ in range(2000)]
    assert len(set(resends)) == 2000 and 0.15 < sum(u < 0.2 for u in resends) / 2000 < 0.25
    dupacks = [draws.draw(tcp_frame(1, ack=1 + 9 * MSS)) for _ in range(3)]
    assert len(set(dupacks)) == 3
    again = PacketKeyedDraws("x")                    # the same connection, no retransmissions
    again.draw(tcp_frame(0, flags=SYN))
    again.draw(tcp_frame(1 + 5 * MSS, ack=1, payload_len=MSS))
    assert [again.draw(tcp_frame(1, ack=1 + 9 * MSS)) for _ in range(3)] == dupacks


def test_fates_do_not_depend_on_packet_timing_in_the_element():
    def run(spacing_ns):
        r = router("Idle -> l :: RandomLoss(p 20%, seed 9) -> Discard;")
        lost = []
        for k, f in enumerate(connection(77, 40000, [(i * MSS, MSS) for i in range(300)])):
            before = r.elements["l"].dropped
            push(r, "l", f, rx_ns=1 + k * spacing_ns)
            lost.append(r.elements["l"].dropped > before)
        return lost
    assert run(1_000) == run(3_000_000)


def test_other_seeds_and_unseeded_draws_differ():
    frames = connection(1, 40000, [(i * MSS, MSS) for i in range(300)])
    assert fates(PacketKeyedDraws(1), frames) != fates(PacketKeyedDraws(2), frames)
    assert fates(PacketKeyedDraws(None), frames) != fates(PacketKeyedDraws(None), frames)


@pytest.mark.parametrize("frame", [
    ipv6_frame(100, nh=17), ipv6_frame(100, nh=58), ipv6_frame(100, nh=6),      # UDP, ICMPv6, TCP all zero
    ipv6_frame(10, nh=6), bytearray(ipv6_frame(100, nh=6))[:70]])              # short, truncated
def test_other_and_malformed_packets_are_drawn_by_their_index_in_the_flow(frame):
    a, b = PacketKeyedDraws(3), PacketKeyedDraws(3)
    assert [a.draw(frame) for _ in range(50)] == [b.draw(frame) for _ in range(50)]
    assert len({a.draw(frame) for _ in range(50)}) == 50


def test_memory_is_bounded_on_long_flows_and_many_flows():
    draws = PacketKeyedDraws(0)
    rng = random.Random(0)
    for k in range(70_000):
        draws.draw(tcp_frame(k * MSS, ack=1, payload_len=MSS))
    for k in range(5000):
        draws.draw(tcp_frame(0, flags=SYN, sport=rng.randrange(1, 65535), src=k % 250 + 1))
    flows = draws._flows
    assert len(flows) <= 4096 and all(len(f.sent) <= 1 << 16 for f in flows.values())
