"""RTT separation on the testbed (root): two kernel CUBIC flows of different RTT through the
dumbbell's bottleneck with 4 queues end in different queues, each weighted as its one flow,
and the node's passive RTT of each is the sender's own minimum RTT (``ss``)."""
import os
import time

from experiments.runs.scenario import TOPOLOGIES
from experiments.runs.separation_record import sender_min_rtt_us
from experiments.testbed.bed import Testbed
from experiments.testbed.topo import load_topo
from experiments.testbed.traffic import BackgroundFlow

PORTS = {"s1": 5201, "s2": 5202}


def test_two_rtts_end_in_two_queues_and_the_node_measures_each_as_its_sender_does():
    params = {"separation": 4, "bottleneck_delay_ms": 10.0, "main_extra_delay_ms": 20.0,
              "bottleneck_mbps": 10.0, "buffer_bdp": 1.0}
    with Testbed(load_topo(os.path.join(TOPOLOGIES, "dumbbell.toml"), params), "lsep").up(exporter="none") as tb:
        flows = [BackgroundFlow(tb, host, host.replace("s", "r"), "cubic", 8.0, 1.0, port=port)
                 for host, port in PORTS.items()]
        time.sleep(6.0)              # past long_bytes and a few control rounds, both still sending
        ss_ms = {host: sender_min_rtt_us(tb, host, port) / 1e3 for host, port in PORTS.items()}
        (sepctl,) = [e["name"] for e in tb.node_request("sw1", {"cmd": "elements"})["elements"]
                     if e["class"] == "RTTSeparation"]
        assignments = tb.node_request("sw1", {"cmd": "read", "element": sepctl, "handler": "assignments"})
        groups = tb.node_request("sw1", {"cmd": "read", "element": sepctl, "handler": "groups"})
        for f in flows:
            f.join()
    assert assignments.get("ok") and groups.get("ok"), (assignments, groups)
    by_port = {a["flow"][4]: a for a in assignments["value"].values() if a["flow"][4] in PORTS.values()}
    assert set(by_port) == set(PORTS.values()), assignments
    assert by_port[5201]["queue"] != by_port[5202]["queue"], by_port
    # each queue with a flow is weighted as its one flow
    assert sorted(g["flows"] for g in groups["value"][:4]) == [0, 0, 1, 1], groups
    assert all(g["weight"] == 1 for g in groups["value"]), groups
    for host, port in PORTS.items():
        node_ms = by_port[port]["rtt_us"] / 1e3
        # the node's timestamp-matched minimum against the sender's: within 5 % or 1 ms
        assert abs(node_ms - ss_ms[host]) <= max(0.05 * ss_ms[host], 1.0), (host, node_ms, ss_ms[host])
