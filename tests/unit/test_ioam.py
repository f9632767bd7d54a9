import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from int_node import ioam, ioam_decode
from int_node.packet import IP6_NH_OFF, IP6_PAYLOAD_OFF
from tests.helpers import ipv6_frame, push, router

STATE = ioam.IntccState(rssi_dbm=-61, mcs=5, flow_count=3, data_rate_kbps=52000, queue_drops=7,
                        link_losses=9, arrival_rate_pps=800, queue_capacity_bytes=150000)


def stamp(frame, node_id, qdepth=0, ts_ns=1_700_000_000_123_456_789):
    off = ioam.find_trace(frame)
    s = STATE
    return ioam.stamp_default(frame, off, 63, node_id, 4, 5, ts_ns, 1500, qdepth, qdepth // 1500,
                              s.rssi_dbm, s.mcs, s.flow_count, s.data_rate_kbps, s.queue_drops,
                              s.link_losses, s.arrival_rate_pps, s.queue_capacity_bytes)


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_header_sizes_and_alignment(hops):
    hbh = ioam.build_hbh(60, hops)
    assert len(hbh) == 16 + hops * 76 + 4 * (hops % 2) and len(hbh) % 8 == 0     # 76-byte slots: a PadN for odd hops
    assert (hbh[1] + 1) * 8 == len(hbh)
    assert hbh[4] == ioam.OPT_IOAM_HBH and 4 % 4 == 0         # option starts 4n-aligned
    f = ioam.insert_int(ipv6_frame(100, nh=17), hops, 0, 0)
    for node in range(1, hops + 1):
        assert stamp(f, node)
    assert [n.node_id for n in ioam_decode.decode_trace(ioam.strip_int(f).trace_raw).nodes] == list(range(1, hops + 1))
    doh = ioam.build_doh(6, 1, 0)
    assert len(doh) == ioam.DOH_BYTES and doh[4] == ioam.OPT_IOAM_DST and (doh[1] + 1) * 8 == 24


def test_insert_then_strip_restores_the_packet_exactly():
    original = ipv6_frame(300, nh=17)
    with_int = ioam.insert_int(original, 2, seq=41, ts_ns=5_000_000_007)
    assert with_int[IP6_NH_OFF] == 0 and len(with_int) == len(original) + 168 + 24
    s = ioam.strip_int(with_int)
    assert s.frame == original
    e2e = ioam_decode.decode_e2e(s.e2e_raw, 0, len(s.e2e_raw))
    assert (e2e.seq, e2e.ts_sec, e2e.ts_frac) == (41, 5, 7)


def test_nodes_fill_slots_from_the_end_and_decode_in_path_order():
    f = ioam.insert_int(ipv6_frame(), 2, 0, 0)
    assert stamp(f, 1, qdepth=3000) and stamp(f, 2, qdepth=4500)
    tr = ioam_decode.decode_trace(ioam.strip_int(f).trace_raw)
    assert [n.node_id for n in tr.nodes] == [1, 2]
    assert [n.queue_depth_bytes for n in tr.nodes] == [3000, 4500]
    n = tr.nodes[0]
    assert (n.hop_limit, n.ingress_if, n.egress_if, n.transit_delay_ns) == (63, 4, 5, 1500)
    assert (n.ts_sec, n.ts_frac) == (1_700_000_000, 123_456_789)
    assert n.state == STATE and tr.remaining_len == 0 and not tr.overflow


def test_a_full_trace_sets_overflow_instead_of_writing():
    f = ioam.insert_int(ipv6_frame(), 1, 0, 0)
    assert stamp(f, 1)
    before = bytes(f)
    assert not stamp(f, 2)
    tr = ioam_decode.decode_trace(ioam.strip_int(f).trace_raw)
    assert tr.overflow and [n.node_id for n in tr.nodes] == [1]
    assert sum(a != b for a, b in zip(before, f)) == 1   # only the flags byte changed


@pytest.mark.parametrize("cut", [55, 60, 64, 70, 100, 150])
def test_truncated_headers_raise_ioam_error(cut):
    f = ioam.insert_int(ipv6_frame(), 2, 0, 0)
    with pytest.raises(ioam.IOAMError):
        ioam.strip_int(f[:cut])


def test_inconsistent_lengths_are_rejected():
    f = ioam.insert_int(ipv6_frame(), 2, 0, 0)
    bad = bytearray(f)
    bad[59] += 4                          # option longer than its header
    with pytest.raises(ioam.IOAMError):
        ioam.find_trace(bad)
    bad = bytearray(f)
    bad[65] = 0x7F                        # RemainingLen past the node data
    with pytest.raises(ioam.IOAMError):
        ioam.find_trace(bad)
    bad = bytearray(f)
    struct.pack_into("!H", bad, 18, 10)   # payload length shorter than the headers
    with pytest.raises(ioam.IOAMError):
        ioam.strip_int(bad)


# -- property / fuzz tests: > 10,000 generated inputs in all ------------------------
FUZZ = settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.binary(min_size=0, max_size=400))
def test_parsers_never_fail_other_than_ioam_error_on_random_bytes(data):
    frame = bytearray(ipv6_frame(0)[:IP6_PAYLOAD_OFF]) + data
    frame[IP6_NH_OFF] = 0
    struct.pack_into("!H", frame, 18, len(data))
    for fn in (lambda: ioam.find_trace(frame), lambda: ioam.strip_int(frame),
               lambda: ioam_decode.decode_trace(data), lambda: ioam_decode.decode_e2e(data, 0, len(data))):
        try:
            fn()
        except ioam.IOAMError:
            pass


@FUZZ
@given(st.data())
def test_mutated_int_packets_never_crash_the_int_elements(data):
    f = ioam.insert_int(ipv6_frame(data.draw(st.integers(0, 200))), data.draw(st.integers(1, ioam.MAX_HOPS)), 1, 2)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(f) - 1))
        f[pos] = data.draw(st.integers(0, 255))
    f = f[:data.draw(st.integers(0, len(f)))]
    r = _fuzz_router()
    push(r, "c", f)   # raises if any element raised
    counted = sum(sum(v for v in c.values()) for c in r.counters().values())
    assert counted > 0


@FUZZ
@given(st.binary(min_size=0, max_size=300), st.integers(0, 0xFFFF))
def test_random_frames_with_any_ethertype_are_forwarded_or_counted(payload, ethertype):
    f = bytearray(bytes(12) + struct.pack("!H", ethertype) + payload)
    r = _fuzz_router()
    push(r, "c", f)
    c = r.counters()
    assert c["c"]["out0_ipv6"] + c["c"]["out1_-"] == 1


@settings(max_examples=1200, deadline=None)
@given(st.integers(0, 2000), st.integers(0, 0xFFFFFFFF), st.integers(0, 2**63))
def test_roundtrip_for_any_size_sequence_and_time(size, seq, ts_ns):
    original = ipv6_frame(size)
    s = ioam.strip_int(ioam.insert_int(original, 2, seq, ts_ns))
    assert s.frame == original
    e = ioam_decode.decode_e2e(s.e2e_raw, 0, len(s.e2e_raw))
    assert e.seq == seq and e.ts_frac == ts_ns % 10**9


_ROUTER = None


def _fuzz_router():
    global _ROUTER
    if _ROUTER is None:
        _ROUTER = router("""
            Idle -> c :: Classifier(ipv6, -);
            c[1] -> o :: Discard;
            c[0] -> t :: INTTransit(node_id 3) -> s :: INTSink -> d :: Discard;
        """)
    for e in _ROUTER.elements.values():
        for name in e.counter_names:
            setattr(e, name, 0)
        if hasattr(e, "matched"):
            e.matched = [0] * len(e.matched)
    return _ROUTER


def test_tshark_decodes_the_trace(tmp_path):
    import shutil
    import subprocess
    if not shutil.which("tshark"):
        pytest.skip("tshark not installed (make setup installs it)")
    f = ioam.insert_int(ipv6_frame(60), 2, 0, 0)
    stamp(f, 1, 1500)
    stamp(f, 2, 3000)
    pcap = tmp_path / "int.pcap"
    with open(pcap, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        out.write(struct.pack("<IIII", 0, 0, len(f), len(f)) + bytes(f))
    res = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "ipv6.opt.ioam.trace.node.id",
                          "-e", "ipv6.opt.ioam.trace.node.qdepth", "-e", "ipv6.opt.ioam.trace.node.oss.scid"],
                         capture_output=True, text=True, check=True)
    ids, qdepths, schemas = res.stdout.strip().split("\t")
    assert sorted(int(x, 0) for x in ids.split(",")) == [1, 2]
    assert sorted(int(x, 0) for x in qdepths.split(",")) == [1500, 3000]
    assert {int(x, 0) for x in schemas.split(",")} == {ioam.SCHEMA_INTCC_V5}


def test_fast_slot_decoder_agrees_with_the_generic_one():
    f = ioam.insert_int(ipv6_frame(), 3, 0, 0)
    assert stamp(f, 1, qdepth=3000) and stamp(f, 2, qdepth=4500)
    raw = ioam.strip_int(f).trace_raw
    fast = ioam_decode.decode_trace(raw).nodes
    pos, generic = ioam.TRACE_HDR.size + ioam.NODE_SLOT_BYTES, []   # one empty slot first
    while pos < len(raw):
        node, pos = ioam_decode._decode_node(raw, pos, len(raw), ioam.INTCC_TRACE_TYPE)
        generic.append(node)
    assert fast == generic[::-1] and len(fast) == 2


def test_a_schema_v1_snapshot_still_decodes_without_rx_drops():
    # a node of an older intcc: 24-byte opaque snapshot under schema 0x1CC001
    v1 = ioam.INTCC_STATE_V1.pack(-61, 5, 3, 52000, 7, 9, 800, 150000)
    slot = ioam.NODE_FIXED.pack((63 << 24) | 1, 4, 5, 1, 2, 1500, 3000, 2) \
        + struct.pack("!I", ((len(v1) // 4) << 24) | ioam.SCHEMA_INTCC_V1) + v1
    raw = ioam.TRACE_HDR.pack(ioam.DEFAULT_NAMESPACE, ioam.NODE_LEN_WORDS << 3, 0, ioam.INTCC_TRACE_TYPE << 8) + slot
    (node,) = ioam_decode.decode_trace(raw).nodes
    assert node.state.queue_drops == 7 and node.state.queue_capacity_bytes == 150000
    assert node.state.rx_drops is None and node.opaque_schema == ioam.SCHEMA_INTCC_V1


def test_rx_drops_the_flows_own_counters_its_queue_and_the_reconfiguration_travel_in_the_v5_snapshot():
    f = ioam.insert_int(ipv6_frame(), 2, 0, 0)
    off = ioam.find_trace(f)
    assert ioam.stamp_default(f, off, 63, 1, 4, 5, 0, 1500, 0, 0, -128, 0xFF, 1, 0, 0, 0, 10, 150000, 4242,
                              65537, 7, 2, 5, 3,          # 16-bit per-flow counters wrap; queue 2 of 5, weight 3
                              (50, 5, 12, 257, ioam.RECONFIG_MIGRATED | ioam.RECONFIG_ON_CIRCUIT))  # epoch wraps
    (node,) = ioam_decode.decode_trace(ioam.strip_int(f).trace_raw).nodes
    assert node.state.rx_drops == 4242 and node.opaque_schema == ioam.SCHEMA_INTCC_V5
    assert (node.state.flow_queue_drops, node.state.flow_link_losses) == (1, 7)
    assert (node.state.queue_index, node.state.queue_count, node.state.queue_weight) == (2, 5, 3)
    st = node.state
    assert (st.reconfig_period_ms, st.reconfig_downtime_ms, st.reconfig_next_ms, st.reconfig_epoch,
            st.reconfig_flags) == (50, 5, 12, 1, 3)
    g = ioam.insert_int(ipv6_frame(), 2, 0, 0)         # a port without a reconfiguration
    assert ioam.stamp_default(g, ioam.find_trace(g), 63, 1, 4, 5, 0, 1500, 0, 0, -128, 0xFF, 1, 0, 0, 0, 10, 0)
    (node,) = ioam_decode.decode_trace(ioam.strip_int(g).trace_raw).nodes
    assert (node.state.reconfig_period_ms, node.state.reconfig_next_ms) == (0, ioam.RECONFIG_NEXT_NONE)


def test_a_schema_v4_snapshot_still_decodes_without_the_reconfiguration():
    v4 = ioam.INTCC_STATE_V4.pack(-61, 5, 3, 52000, 7, 9, 800, 150000, 11, 4, 2, 1, 4, 2)
    slot = ioam.NODE_FIXED.pack((63 << 24) | 1, 4, 5, 1, 2, 1500, 3000, 2) \
        + struct.pack("!I", ((len(v4) // 4) << 24) | ioam.SCHEMA_INTCC_V4) + v4
    raw = ioam.TRACE_HDR.pack(ioam.DEFAULT_NAMESPACE, ioam.NODE_LEN_WORDS << 3, 0, ioam.INTCC_TRACE_TYPE << 8) + slot
    (node,) = ioam_decode.decode_trace(raw).nodes
    assert (node.state.queue_index, node.state.queue_count, node.state.queue_weight) == (1, 4, 2)
    assert node.state.reconfig_period_ms is None and node.state.reconfig_flags is None
    assert node.opaque_schema == ioam.SCHEMA_INTCC_V4


def test_a_schema_v3_snapshot_still_decodes_without_its_queue():
    v3 = ioam.INTCC_STATE_V3.pack(-61, 5, 3, 52000, 7, 9, 800, 150000, 11, 4, 2)
    slot = ioam.NODE_FIXED.pack((63 << 24) | 1, 4, 5, 1, 2, 1500, 3000, 2) \
        + struct.pack("!I", ((len(v3) // 4) << 24) | ioam.SCHEMA_INTCC_V3) + v3
    raw = ioam.TRACE_HDR.pack(ioam.DEFAULT_NAMESPACE, ioam.NODE_LEN_WORDS << 3, 0, ioam.INTCC_TRACE_TYPE << 8) + slot
    (node,) = ioam_decode.decode_trace(raw).nodes
    assert (node.state.flow_queue_drops, node.state.flow_link_losses) == (4, 2)
    assert node.state.queue_index is None and node.state.queue_count is None and node.opaque_schema == ioam.SCHEMA_INTCC_V3


def test_a_schema_v2_snapshot_still_decodes_without_per_flow_counters():
    v2 = ioam.INTCC_STATE_V2.pack(-61, 5, 3, 52000, 7, 9, 800, 150000, 11)
    slot = ioam.NODE_FIXED.pack((63 << 24) | 1, 4, 5, 1, 2, 1500, 3000, 2) \
        + struct.pack("!I", ((len(v2) // 4) << 24) | ioam.SCHEMA_INTCC_V2) + v2
    raw = ioam.TRACE_HDR.pack(ioam.DEFAULT_NAMESPACE, ioam.NODE_LEN_WORDS << 3, 0, ioam.INTCC_TRACE_TYPE << 8) + slot
    (node,) = ioam_decode.decode_trace(raw).nodes
    assert node.state.rx_drops == 11 and node.state.link_losses == 9
    assert node.state.flow_queue_drops is None and node.state.flow_link_losses is None


def test_no_more_hops_than_the_option_length_allows():
    with pytest.raises(ValueError, match="1..3"):
        ioam.build_hbh(60, 4)
