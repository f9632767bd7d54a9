"""FlowRTT on the testbed (root): a kernel CUBIC flow through the dumbbell with the passive
RTT measurement on both nodes; each node's timestamp halves add up to the flow's base round
trip, and the ACK-matched RTT at the bottleneck's node is its part beyond the node."""
import json
import os

from experiments.runs.scenario import TOPOLOGIES
from experiments.testbed.bed import Testbed
from experiments.testbed.topo import load_topo
from experiments.testbed.traffic import BackgroundFlow

BOTTLENECK_MS, ACCESS_MS = 20.0, 1.0


def test_each_node_measures_the_flows_whole_round_trip_from_its_timestamps():
    params = {"flow_rtt": True, "bottleneck_delay_ms": BOTTLENECK_MS, "access_delay_ms": ACCESS_MS,
              "bottleneck_mbps": 10.0, "buffer_bdp": 1.0}
    base_us = 2 * (BOTTLENECK_MS + 2 * ACCESS_MS) * 1e3
    with Testbed(load_topo(os.path.join(TOPOLOGIES, "dumbbell.toml"), params), "lrtt").up(exporter="none") as tb:
        BackgroundFlow(tb, "s1", "r1", "cubic", 4.0, 1.0, port=5201).join()
        got = {node: tb.node_request(node, {"cmd": "read", "element": "rtt", "handler": "rtts"})
               for node in ("sw1", "sw2")}
        from click.testing import CliRunner
        from int_node.cli import node_group
        printed = CliRunner().invoke(node_group, ["read", "--control", tb.node_info("sw1")["control"], "rtt.rtts"])
    assert printed.exit_code == 0 and json.loads(printed.output).keys() == got["sw1"]["value"].keys(), printed.output
    for node, reply in got.items():
        assert reply.get("ok"), reply
        data = [v for v in reply["value"].values() if v["flow"][4] == 5201 and v["ts"]["samples"] > 100]
        assert len(data) == 1, (node, reply["value"])
        (d,) = data
        # the base RTT plus what the emulation and the stacks add (a queue's minimum is ~0)
        assert base_us <= d["full_min_us"] <= base_us + 5_000, (node, d, base_us)
    sw1 = next(v for v in got["sw1"]["value"].values() if v["flow"][4] == 5201 and v["ack"]["samples"])
    # from sw1 the data crosses the bottleneck and r1's access link and the ACK comes back
    beyond_us = 2 * (BOTTLENECK_MS + ACCESS_MS) * 1e3
    assert beyond_us <= sw1["ack"]["min_us"] <= beyond_us + 5_000, sw1
    assert sw1["ack"]["srtt_us"] >= sw1["ack"]["min_us"]
