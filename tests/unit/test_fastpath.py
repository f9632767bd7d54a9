"""The fast path without a kernel: its wire layout against int_node.ioam, its structs against
the built object's BTF, and which configurations it compiles (and why not)."""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess

import pytest
from click.testing import CliRunner

from experiments.testbed.nodeconf import Iface, node_config
from experiments.testbed.topo import load_topo
from int_node import ioam
from int_node.fastpath import build, layout, loader, separation
from int_node.fastpath.plan import FAST, plan_for
from int_node.router import Router
from tests.integration.tbutil import TOPO_DIR


def test_the_generated_slot_struct_has_ioams_fields_at_ioams_offsets():
    # a slot packed by the Python node with a distinct value in every field
    values = dict(hop_limit=0x3E, node_id=0x123456, ingress_if=0x0102, egress_if=0x0304, ts_ns=(7 << 32) + 999,
                  transit_delay_ns=0x0A0B0C0D, qdepth_bytes=0x11121314, occupancy=0x15161718, rssi_dbm=-70,
                  mcs=9, flow_count=0x2122, rate_kbps=0x23242526, qdrops=0x27282930, link_losses=0x31323334,
                  arrival_pps=0x35363738, capacity_bytes=0x39404142, rx_drops=0x43444546, flow_qdrops=0x4748,
                  flow_link_losses=0x4950, queue_index=3, queue_count=4, queue_weight=0x5152,
                  reconfig=(0x5354, 0x5556, 0x5758, 0x59, 0x60))
    buf = bytearray(ioam.NODE_SLOT_BYTES)
    ioam.pack_node(buf, 0, *values.values())
    off = layout.field_offsets()
    widths = {n: struct.calcsize("!" + c) for n, c in zip(layout.SLOT_FIELDS, layout.slot_codes())}

    def field(name, signed=False):
        return int.from_bytes(buf[off[name]:off[name] + widths[name]], "big", signed=signed)

    assert field("hoplim_node_id") == (0x3E << 24) | 0x123456
    assert (field("ingress_if"), field("egress_if")) == (0x0102, 0x0304)
    assert (field("ts_sec"), field("ts_frac")) == divmod((7 << 32) + 999, 1_000_000_000)
    assert field("opaque_hdr") == ioam._OPAQUE_HDR_V5
    assert field("rssi_dbm", signed=True) == -70 and field("mcs") == 9
    assert field("flow_queue_drops") == 0x4748 and field("queue_weight") == 0x5152
    assert (field("reconfig_next_ms"), field("reconfig_flags")) == (0x5758, 0x60)
    assert sum(widths.values()) == ioam.NODE_SLOT_BYTES


def test_the_header_names_every_field_and_says_what_to_do_when_ioam_grows(monkeypatch):
    text = layout.header_text()
    for name in layout.SLOT_FIELDS:
        assert f" {name};" in text
    assert f"#define INTCC_NODE_SLOT_BYTES {ioam.NODE_SLOT_BYTES}" in text
    monkeypatch.setattr(ioam, "_NODE_SLOT", struct.Struct(ioam._NODE_SLOT.format + "H"))
    with pytest.raises(RuntimeError, match="name the new field"):
        layout.header_text()


@pytest.mark.skipif(shutil.which("clang") is None or not os.path.exists(build.BTF),
                    reason="needs clang and the kernel's BTF (make setup installs clang)")
def test_the_loaders_structs_match_the_programs_as_built(tmp_path, monkeypatch):
    monkeypatch.setenv("INTCC_FASTPATH_BUILD", str(tmp_path))
    obj = build.build()
    btf = json.loads(subprocess.run(["bpftool", "btf", "dump", "file", obj, "-j"], capture_output=True,
                                    text=True, check=True).stdout)
    sizes = {t["name"]: t["size"] for t in btf["types"] if t.get("kind") == "STRUCT" and "name" in t}
    assert sizes["intcc_fp_config"] == loader._CONFIG.size
    assert sizes["intcc_fp_port"] == loader._PORT.size
    assert sizes["intcc_fp_route_key"] == loader._ROUTE_KEY.size
    assert sizes["intcc_fp_meter_key"] == loader._FLOW_KEY_BYTES
    assert sizes["intcc_fp_sep"] == separation._SEP.size
    assert sizes["intcc_fp_tracked"] == separation._TRACKED.size
    assert sizes["intcc_fp_rtt_dir"] == separation._RTT_DIR.size
    assert sizes["intcc_fp_sketch_row"] == separation.SKETCH_ROW_BYTES
    assert build.build() == obj          # unchanged sources: no rebuild


def _config(topo_name: str, node: str, **params) -> str:
    """The testbed's configuration of ``node`` (no devices opened)."""
    topo = load_topo(os.path.join(TOPO_DIR, f"{topo_name}.toml"), params)
    ifaces = [Iface(link, f"intcc-{link.other(node)}", f"02:00:00:00:00:{i:02x}", link.other(node),
                    "02:00:00:00:01:00", "2001:db8::1", "2001:db8::/64", 1788)
              for i, link in enumerate(topo.links_of(node))]
    return node_config(topo, node, ifaces, "none")


def _router(topo_name: str, node: str, **params) -> Router:
    return Router(_config(topo_name, node, **params))


@pytest.mark.parametrize("node,roles", [("n1", {"source", "transit"}), ("n2", {"transit", "sink"})])
def test_the_testbeds_emulation_free_nodes_compile_whole(node, roles):
    plan = plan_for(_router("line2", node, mid_mbps=50))
    assert plan.compiled, plan.reasons
    assert [p.devname for p in plan.ports] == ["intcc-h1", "intcc-n2"] if node == "n1" else ["intcc-n1", "intcc-h2"]
    assert bool(any(p.source for p in plan.ports)) == ("source" in roles)
    assert bool(any(p.sink for p in plan.ports)) == ("sink" in roles)
    assert plan.node_id == (1 if node == "n1" else 2)
    mid = next(p for p in plan.ports if p.devname in ("intcc-n2", "intcc-n1"))
    assert mid.shaper is not None and mid.shaper.rate == 50e6
    assert all(where == FAST or "Python node and kernel" in where for where in plan.placement.values())


def test_link_emulation_keeps_a_node_in_python_and_the_plan_says_which_element():
    plan = plan_for(_router("dumbbell", "sw1"))
    assert not plan.compiled
    text = " ".join(plan.reasons)
    assert "Delay" in text or "RandomLoss" in text or "Tee" in text, text


@pytest.mark.parametrize("config,words", [
    ("""in0 :: FromDevice(a); out0 :: ToDevice(a); in1 :: FromDevice(b); out1 :: ToDevice(b);
        rt :: IPv6Lookup(2001:db8:1::/64 0, 2001:db8:2::/64 1);
        in0 -> EtherFilter(02:00:00:00:00:01) -> c0 :: Classifier(ipv6, -) -> rt; c0[1] -> Discard;
        in1 -> EtherFilter(02:00:00:00:00:02) -> c1 :: Classifier(ipv6, -) -> rt; c1[1] -> Discard;
        rt[0] -> DecHopLimit -> FlowMeter -> Queue(100, 150000) -> Unqueue
              -> EtherRewrite(02:00:00:00:00:01, 02:00:00:00:01:01) -> out0;
        rt[1] -> DecHopLimit -> FlowMeter -> Queue(100) -> Unqueue
              -> EtherRewrite(02:00:00:00:00:02, 02:00:00:00:01:02) -> out1;""", "byte bound"),
    ("""in0 :: FromDevice(a); out0 :: ToDevice(a);
        rt :: IPv6Lookup(::/0 0);
        in0 -> EtherFilter(02:00:00:00:00:01) -> c0 :: Classifier(ipv6, -) -> rt; c0[1] -> Discard;
        rt[0] -> DecHopLimit -> FlowMeter -> Queue(100) -> Unqueue -> Delay(5ms)
              -> EtherRewrite(02:00:00:00:00:01, 02:00:00:00:01:01) -> out0;""", "Delay"),
])
def test_configurations_without_a_kernel_form_are_refused_with_the_reason(config, words):
    plan = plan_for(Router(config))
    assert not plan.compiled and words in " ".join(plan.reasons), plan.reasons


def test_node_check_says_where_each_element_runs(tmp_path):
    from int_node.cli import node_group
    path = tmp_path / "n2.click"
    path.write_text(_config("line2", "n2"))
    res = CliRunner().invoke(node_group, ["check", str(path), "--fast-path"])
    assert res.exit_code == 0, res.output
    assert "fast path: compiles (2 ports: intcc-n1, intcc-h2)" in res.output
    assert "INTSink" in res.output and FAST in res.output
    dumbbell = tmp_path / "sw1.click"
    dumbbell.write_text(_config("dumbbell", "sw1"))
    res = CliRunner().invoke(node_group, ["check", str(dumbbell), "--fast-path"])
    assert res.exit_code == 0 and "does not compile, the node would forward in Python" in res.output
    assert "delay0 (Delay)" in res.output


def test_rtt_separation_compiles_with_its_split_queues_and_control_loop_placed():
    plan = plan_for(_router("line2", "n1", mid_mbps=10, mid_separation=4, mid_separation_udp_mbps=2))
    assert plan.compiled, plan.reasons
    to_n2 = next(p for p in plan.ports if p.devname == "intcc-n2")
    assert to_n2.separated and to_n2.split.name == "sep1" and to_n2.drr.name == "drr1"
    assert [q.name for q in to_n2.queues] == ["q1_0", "q1_1", "q1_2", "q1_3", "q1_udp"]
    assert to_n2.queue is to_n2.queues[to_n2.split.default]
    assert to_n2.separation.name == "sepctl1" and to_n2.rtt.name == "rtt"
    assert all(p.rtt_tap is not None for p in plan.ports)        # every ingress times TCP flows
    assert plan.placement["sepctl1"] == plan.placement["rtt"] == "Python node, on the fast path's maps"
    assert all(plan.placement[n] == FAST for n in ("sep1", "drr1", "q1_0", "q1_udp", "rtap0", "rtap1"))


_SEPARATED = """in0 :: FromDevice(a); out0 :: ToDevice(a); in1 :: FromDevice(b); out1 :: ToDevice(b);
    rt :: IPv6Lookup(2001:db8:1::/64 0, 2001:db8:2::/64 1); rtt :: FlowRTT;
    in0 -> EtherFilter(02:00:00:00:00:01) -> c0 :: Classifier(ipv6, -) -> RTTTap(rtt) -> rt; c0[1] -> Discard;
    in1 -> EtherFilter(02:00:00:00:00:02) -> c1 :: Classifier(ipv6, -) -> RTTTap(rtt) -> rt; c1[1] -> Discard;
    rt[0] -> DecHopLimit -> FlowMeter -> Queue(100) -> Unqueue -> EtherRewrite(02:00:00:00:00:01, 02:00:00:00:01:01)
          -> out0;
    sep :: FlowSplit(queues 2 SPLITARGS); drr :: DRR;
    sep[0] -> q0 :: Queue(50) -> [0]drr; sep[1] -> q1 :: Queue(50) -> [1]drr;
    rt[1] -> DecHopLimit -> FlowMeter -> sep;
    drr -> AFTER -> EtherRewrite(02:00:00:00:00:02, 02:00:00:00:01:02) -> out1;
    ctl :: RTTSeparation(split sep, rtt rtt, sched drr, queues q0 q1);"""


def test_a_hand_written_separated_port_compiles():
    plan = plan_for(Router(_SEPARATED.replace("SPLITARGS", "").replace("AFTER", "LinkShaper(10Mbps)")))
    assert plan.compiled, plan.reasons
    assert [p.separated for p in plan.ports] == [False, True]


@pytest.mark.parametrize("split_args,after,words", [
    ("", "Unqueue", "need a LinkShaper's rate"),
    (", sketch_width 1024", "LinkShaper(10Mbps)", "sketch is 2048 x 4"),
])
def test_separation_the_kernel_cannot_take_is_refused_with_the_reason(split_args, after, words):
    plan = plan_for(Router(_SEPARATED.replace("SPLITARGS", split_args).replace("AFTER", after)))
    assert not plan.compiled and words in " ".join(plan.reasons), plan.reasons


def test_flow_keys_convert_between_the_python_node_and_the_programs():
    from int_node.packet import flow_key
    from tests.helpers import ipv6_frame
    key = flow_key(ipv6_frame(100, src=3, sport=40000))
    bpf = separation.bpf_flow_of(key)
    assert len(bpf) == 40 and bpf[33:36] == bytes(3) and separation.flow_key_of(bpf) == key


def test_the_programs_rtt_table_reads_as_flowrtts():
    from int_node.elements.rtt import reverse_key
    from int_node.packet import flow_key
    from tests.helpers import ipv6_frame
    key = flow_key(ipv6_frame(100, src=3, sport=40000))
    rings = [0] * (4 * separation.RTT_PENDING)
    # high_eack, last_tsval, the rings' heads and tails, the pending expected ACKs, TSvals and
    # their times, then ack_min_ns, ts_min_ns, last_ns, ack_samples, ts_samples, retransmits, flags
    timed = separation._RTT_DIR.pack(0, 0, 0, 0, 0, 0, *rings, 3_000_000, 40_500_000, 7, 2, 9, 0, 3)
    never = separation._RTT_DIR.pack(0, 0, 0, 0, 0, 0, *rings, 0, 0, 5, 0, 0, 0, 0)
    table = separation.rtt_directions([(separation.bpf_flow_of(key), timed),
                                       (separation.bpf_flow_of(reverse_key(key)), never)], max_flows=10)
    d = table[key]
    assert (d.ack.samples, d.ack.min_us, d.ts.samples, d.ts.min_us) == (2, 3000.0, 9, 40500.0)
    assert table[reverse_key(key)].ts.min_us is None
    assert list(separation.rtt_directions([(separation.bpf_flow_of(key), timed),
                                           (separation.bpf_flow_of(reverse_key(key)), never)], max_flows=1)) == [key]
