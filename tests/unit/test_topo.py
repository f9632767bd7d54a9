import os

import pytest

from experiments.testbed.nodeconf import Iface, node_config
from experiments.testbed.topo import TopologyError, build_topo, load_topo, parse_set, substitute
from int_node.router import Router

TOPO_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "testbed", "topologies")


def test_substitution_and_expressions():
    p = {"a": 2, "b": 10.0}
    assert substitute("${a}", p) == 2
    assert substitute({"x": ["${max(a, 3) * b / 2}"]}, p) == {"x": [15.0]}
    with pytest.raises(TopologyError, match="unknown parameter 'c'"):
        substitute("${c}", p)
    with pytest.raises(TopologyError, match="unsupported expression"):
        substitute("${__import__('os')}", p)


def test_set_overrides_are_typed_and_checked():
    assert parse_set(["loss_pct=5", "name=abc", "on=true"]) == {"loss_pct": 5, "name": "abc", "on": True}
    with pytest.raises(TopologyError, match="key=value"):
        parse_set(["oops"])
    with pytest.raises(TopologyError, match="no such parameter"):
        load_topo(os.path.join(TOPO_DIR, "wireless.toml"), {"nope": 1})


def test_shipped_topologies_load_with_paper_parameters():
    w = load_topo(os.path.join(TOPO_DIR, "wireless.toml"), {"loss_pct": 5})
    assert w.hosts == ["sta1", "sta2"] and set(w.nodes) == {"ap1", "ap2"}
    air = w.links[1]
    assert (air.rate_mbps, air.delay_ms, air.loss_pct, air.buffer_pkts) == (10.0, 10.0, 5.0, 100)
    assert air.wireless["distance_m"] == 10.0
    d = load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"buffer_bdp": 2})
    assert d.links[0].rate_mbps == 20.0 and d.links[0].delay_ms == 1.0
    assert d.links[2].buffer_pkts == 40        # 2 BDP of 10 Mbit/s x 24 ms in 1500-byte packets


@pytest.mark.parametrize("raw, words", [
    ({"hosts": [{"name": "h1"}], "links": []}, "has no link"),
    ({"hosts": [{"name": "h1"}, {"name": "h2"}], "links": [{"ends": ["h1", "h2"]}]}, "at least one node"),
    ({"nodes": [{"name": "Bad"}]}, "lowercase"),
    ({"nodes": [{"name": "n", "int": ["spy"]}]}, "unknown INT role"),
    ({"nodes": [{"name": "n", "poll_idle": True}]}, "poll_idle needs cpu"),
    ({"nodes": [{"name": "n", "python": 3}]}, "python must be a string"),
    ({"nodes": [{"name": "n", "tx_ring": "no"}]}, "tx_ring must be true or false"),
    ({"nodes": [{"name": "n", "rx_batch": 0}]}, "rx_batch must be a whole number >= 1"),
    ({"nodes": [{"name": "n", "busy_poll_us": -5}]}, "busy_poll_us must be a whole number of microseconds"),
    ({"nodes": [{"name": "n", "busy_poll_us": "2ms"}]}, "busy_poll_us must be a whole number of microseconds"),
    ({"nodes": [{"name": "n", "rt_priority": 100}]}, "rt_priority must be a SCHED_FIFO priority 1-99"),
    ({"nodes": [{"name": "n", "rt_priority": True}]}, "rt_priority must be a SCHED_FIFO priority 1-99"),
    ({"nodes": [{"name": "n", "rt_priority": 5, "busy_poll_us": 100}]}, "rt_priority with busy_poll_us"),
    ({"nodes": [{"name": "n"}], "hosts": [{"name": "h"}], "links": [{"ends": ["h", "n"], "rate": 1}]},
     "unknown key"),
])
def test_bad_topologies_are_rejected_clearly(raw, words):
    with pytest.raises(TopologyError, match=words):
        build_topo(raw)


@pytest.mark.parametrize("name", ["wireless", "dumbbell", "reconfig"])
def test_generated_node_configs_pass_the_graph_checks(name):
    topo = load_topo(os.path.join(TOPO_DIR, f"{name}.toml"), {"loss_pct": 1})
    for node in topo.nodes:
        ifaces = []
        for i, link in enumerate(topo.links_of(node)):
            ifaces.append(Iface(link, f"intcc-{link.other(node)}", f"02:00:00:00:00:{i:02x}",
                                link.other(node), "02:00:00:00:01:00", "2001:db8::1", "2001:db8::/64", 1788))
        text = node_config(topo, node, ifaces, "none")
        r = Router(text)   # parse + graph checks, no devices opened
        classes = {type(e).__name__ for e in r.elements.values()}
        assert "INTTransit" in classes
        assert ("INTSource" in classes) == ("source" in topo.nodes[node]["int"])
        assert ("INTSink" in classes) == ("sink" in topo.nodes[node]["int"])


def _configs(topo):
    out = {}
    for node in topo.nodes:
        ifaces = [Iface(link, f"intcc-{link.other(node)}", f"02:00:00:00:00:{i:02x}", link.other(node),
                        "02:00:00:00:01:00", "2001:db8::1", "2001:db8::/64", 1788)
                  for i, link in enumerate(topo.links_of(node))]
        out[node] = Router(node_config(topo, node, ifaces, "none"))
    return out


def test_a_reconfigured_link_has_a_circuit_beside_it_at_its_first_end_only():
    topo = load_topo(os.path.join(TOPO_DIR, "reconfig.toml"),
                     {"reconfig_period_ms": 50, "reconfig_downtime_ms": 5, "circuit_delay_ms": 3})
    configs = _configs(topo)
    sw1 = configs["sw1"].elements
    rc = [e for e in sw1.values() if type(e).__name__ == "Reconfigure"]
    assert len(rc) == 1 and rc[0].period == 50_000_000 and rc[0].downtime == 5_000_000
    assert str(rc[0].src) == "2001:db8:1::/64"                    # s1's access link, the migrated flows
    circuit, static = rc[0].output(1)[0], rc[0].output(0)[0]
    assert type(circuit).__name__ == type(static).__name__ == "Queue" and circuit is not static
    delays = sorted(e.delay for e in sw1.values() if type(e).__name__ == "Delay" and e.name.startswith("delay"))
    assert 3_000_000 in delays and 1_000_000 in delays            # the circuit's own delay beside the path's
    transits = [e for e in sw1.values() if type(e).__name__ == "INTTransit"]
    assert {e.queue for e in transits} >= {circuit.name, static.name}
    assert not [e for e in configs["sw2"].elements.values() if type(e).__name__ == "Reconfigure"]


@pytest.mark.parametrize("reconfig, words", [
    ({"src": "s9", "period_ms": 10}, "must name the host"),
    ({"src": "h", "period_ms": 10, "downtime_ms": 10}, "shorter than period"),
    ({"src": "h", "mode": "hold"}, "drop or buffer"),
    ({"src": "h", "every": 3}, "unknown reconfig key"),
])
def test_bad_reconfig_tables_are_rejected(reconfig, words):
    raw = {"nodes": [{"name": "n"}, {"name": "m"}], "hosts": [{"name": "h"}],
           "links": [{"ends": ["h", "n"]}, {"ends": ["n", "m"], "reconfig": reconfig}]}
    with pytest.raises(TopologyError, match=words):
        build_topo(raw)


def test_a_node_may_send_a_frame_per_system_call_instead_of_through_the_ring():
    topo = load_topo(os.path.join(TOPO_DIR, "line.toml"))
    ring = [e for e in _configs(topo)["n1"].elements.values() if type(e).__name__ == "ToDevice"]
    topo.nodes["n1"]["tx_ring"] = False
    plain = [e for e in _configs(topo)["n1"].elements.values() if type(e).__name__ == "ToDevice"]
    assert len(ring) == len(plain) == 2
    assert all(e.tx_ring for e in ring) and not any(e.tx_ring for e in plain)


def test_a_node_may_push_each_frame_alone_instead_of_in_batches():
    topo = load_topo(os.path.join(TOPO_DIR, "line.toml"))
    default = [e for e in _configs(topo)["n1"].elements.values() if type(e).__name__ == "FromDevice"]
    topo.nodes["n1"]["rx_batch"] = 1
    alone = [e for e in _configs(topo)["n1"].elements.values() if type(e).__name__ == "FromDevice"]
    assert len(default) == len(alone) == 2
    assert all(e.batch == 32 for e in default) and all(e.batch == 1 for e in alone)


def test_a_link_built_at_zero_loss_still_has_its_loss_element():
    # a sweep writes the loss at run time: built at 0 %, the dumbbell had nothing to write to
    topo = load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"loss_pct": 0})
    bottleneck = [l for l in topo.links if {l.a, l.b} == {"sw1", "sw2"}][0]
    assert bottleneck.may_lose and not [l for l in topo.links if l.may_lose and l is not bottleneck]
    losses = {n: [e for e in r.elements.values() if type(e).__name__ == "RandomLoss"] for n, r in _configs(topo).items()}
    assert all(len(v) == 1 and v[0].p == 0 for v in losses.values())   # one per direction of the bottleneck


def test_the_loss_tolerance_follows_the_binomial_spread():
    from experiments.testbed.linkctl import check_loss, loss_tolerance_pct
    assert loss_tolerance_pct(0, 10_000) == 0.5
    assert 1.0 < loss_tolerance_pct(5, 10_000) < 1.2
    rec = {"link_packets": 10_000, "measured_configured_loss_pct": 0.0}
    assert "off the configured 5 %" in check_loss(rec, 5.0) and rec["loss_off"]
    rec = {"link_packets": 10_000, "measured_configured_loss_pct": 4.8}
    assert check_loss(rec, 5.0) is None and rec["loss_off"] is False and rec["configured_loss_pct"] == 5.0


def test_a_loss_that_cannot_be_applied_is_an_error():
    from experiments.testbed.linkctl import set_loss

    class NoLossyLinks:      # a running testbed whose nodes have no loss element
        name, node_names, topology_name = "x", ["n1"], "line"

        def counters(self, node):
            return {"q1": {"drops": 0}, "shape1": {"packets": 3}}
    with pytest.raises(RuntimeError, match="cannot apply loss_pct=5.*no link that may lose"):
        set_loss(NoLossyLinks(), 5)


def test_a_testbeds_node_ids_can_be_shifted_apart():
    topo = load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"))
    shifted = topo.with_node_ids_shifted(200)
    assert [n["node_id"] for n in topo.nodes.values()] == [1, 2]
    assert [n["node_id"] for n in shifted.nodes.values()] == [201, 202]
    assert shifted.links == topo.links and shifted.nodes["sw1"]["int"] == topo.nodes["sw1"]["int"]


def test_a_run_whose_links_fell_behind_is_flagged():
    from experiments.testbed.linkctl import check_emulation
    rec = {"seconds": 60, "emulation_behind_ms": 599.0}      # under 1 % of the run: faithful
    assert check_emulation(rec) is None and rec["emulation_off"] is False
    rec = {"seconds": 60, "emulation_behind_ms": 601.0}                  # from before the per-link count
    assert "fell behind its rate by 601 ms" in check_emulation(rec) and rec["emulation_off"]
    assert check_emulation({"seconds": 60}) is None                       # a record from before the counter


def test_the_flag_is_one_links_and_the_record_names_it():
    """1 % of the run on one link flags it; the same spread over ten links does not (each ran
    0.1 % below its rate)."""
    from experiments.testbed.linkctl import check_emulation, emulation_lag_fields
    before = ({f"sw1/ls{i}": 1000 for i in range(10)}, 500, 10)
    spread = ({f"sw1/ls{i}": 1000 + 60_100 for i in range(10)}, 1500, 20)
    rec = {"seconds": 60, **emulation_lag_fields(before, spread)}
    assert rec["emulation_behind_ms"] == 601.0 and rec["emulation_behind_ms_link_max"] == 60.1
    assert rec["delay_late_us_mean"] == 100.0
    assert check_emulation(rec) is None and rec["emulation_off"] is False
    one = ({**before[0], "sw2/ls3": 601_000}, 500, 10)        # a shaper the first count had not seen
    rec = {"seconds": 60, **emulation_lag_fields(before, one)}
    assert rec["emulation_behind_worst_link"] == "sw2/ls3" and rec["delay_late_us_mean"] is None
    assert "link (sw2/ls3) fell behind its rate by 601 ms" in check_emulation(rec) and rec["emulation_off"]


def test_a_link_may_carry_dragonflys_capture_at_its_queues():
    plain = _configs(load_topo(os.path.join(TOPO_DIR, "dumbbell.toml")))
    assert not any(type(e).__name__ == "FlowSlots" for r in plain.values() for e in r.elements.values())
    topo = load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"flow_slots": True})
    for node, r in _configs(topo).items():      # the bottleneck's queue on each side, nothing else
        tables = [e for e in r.elements.values() if type(e).__name__ == "FlowSlots"]
        taps = [e for e in r.elements.values() if type(e).__name__ == "SlotTap"]
        assert len(tables) == 1 and sorted(t.side for t in taps) == ["ack", "in", "out"], node
        assert r.elements[tables[0].queue].flow_bytes == {}


def test_a_links_capture_may_sample_packets_and_a_share_outside_0_1_is_refused():
    topo = load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"flow_slots": 0.25})
    for node, r in _configs(topo).items():
        tables = [e for e in r.elements.values() if type(e).__name__ == "FlowSlots"]
        assert len(tables) == 1 and tables[0].sample == 0.25, node
    full = load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"flow_slots": True})
    assert all(t.sample == 1 for r in _configs(full).values() for t in r.elements.values()
               if type(t).__name__ == "FlowSlots")
    for bad in (0, 1.5, "yes"):
        with pytest.raises(TopologyError, match="flow_slots must be true, false or the share"):
            load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"flow_slots": bad})


def test_a_node_may_measure_every_flows_rtt_at_each_ingress():
    plain = _configs(load_topo(os.path.join(TOPO_DIR, "dumbbell.toml")))
    assert not any(type(e).__name__ == "FlowRTT" for r in plain.values() for e in r.elements.values())
    for node, r in _configs(load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"flow_rtt": True})).items():
        tables = [e for e in r.elements.values() if type(e).__name__ == "FlowRTT"]
        taps = [e for e in r.elements.values() if type(e).__name__ == "RTTTap"]
        ifaces = [e for e in r.elements.values() if type(e).__name__ == "FromDevice"]
        assert len(tables) == 1 and len(taps) == len(ifaces), node
        # a sink publishes each flow's RTT with its hop records (a sender reads its competitors')
        assert all(e.rtt == tables[0].name for e in r.elements.values() if type(e).__name__ == "INTSink"), node
    assert sum(type(e).__name__ == "INTSink" for r in plain.values() for e in r.elements.values()) == 2
    assert all(e.rtt == "" for r in plain.values() for e in r.elements.values() if type(e).__name__ == "INTSink")
    with pytest.raises(TopologyError, match="flow_rtt must be true or false"):
        load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"flow_rtt": 3})


def test_rtt_separation_on_the_bottleneck_builds_its_queues_scheduler_and_loop_at_both_ends():
    topo = load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"separation": 4, "separation_udp_mbps": 2})
    for node, r in _configs(topo).items():
        by_class = {}
        for e in r.elements.values():
            by_class.setdefault(type(e).__name__, []).append(e)
        ctl = by_class["RTTSeparation"]
        assert len(ctl) == 1 and len(ctl[0].queues) == 5 and ctl[0].udp_rate == 2e6, node
        assert by_class["FlowSplit"][0].queues == 4 and by_class["FlowSplit"][0].udp
        assert by_class["FlowSplit"][0].long_bytes == 100_000      # 80 ms of the 10 Mbit/s bottleneck
        assert by_class["FlowSplit"][0].long_age == 1_000_000_000
        assert len(by_class["RTTTap"]) == 3          # the RTTs it groups by, measured at every ingress
        bottleneck_transit = [t for t in by_class["INTTransit"] if t.queue.startswith("drr")]
        assert len(bottleneck_transit) == 1          # INT reports each packet's own queue there


def test_separation_is_a_number_of_queues_and_not_beside_the_capture():
    with pytest.raises(TopologyError, match="at most 8"):
        load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"separation": 9})
    with pytest.raises(TopologyError, match="cannot both be on"):
        load_topo(os.path.join(TOPO_DIR, "dumbbell.toml"), {"separation": 2, "flow_slots": True})
