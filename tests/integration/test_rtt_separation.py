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
from tests.integration.tbutil import ping_rtts_ms

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


def test_on_the_fast_path_two_rtts_end_in_two_kernel_queues_stamped_and_timed_as_their_senders_do():
    """sepfast: s1 (2 ms) and s2 (40 ms) through n1, whose bottleneck port separates on its fast
    path (the split and the RTTs in its programs, HTB's classes, the control loop on the maps).
    The fast path times a packet from when it leaves its own queue there: its RTT is the
    path's (ping's, with no queue), never above the sender's own minimum."""
    import json
    from collections import defaultdict
    params = {"separation": 4, "s1_delay_ms": 1.0, "s2_delay_ms": 20.0, "bottleneck_mbps": 10.0}
    with Testbed(load_topo(os.path.join(TOPOLOGIES, "sepfast.toml"), params), "fsep").up(exporter="jsonl") as tb:
        assert "fast path on 2 ports" in open(tb.node_info("n1")["log"]).read()
        ping_ms = {host: min(ping_rtts_ms(tb, host, tb.addr("r"), count=10)) for host in PORTS}
        flows = [BackgroundFlow(tb, host, "r", "cubic", 8.0, 1.0, port=port) for host, port in PORTS.items()]
        _after_rounds(tb, "n1", "sepctl1", rounds=4, deadline_s=7.0)      # both flows long and placed
        ss_ms = {host: sender_min_rtt_us(tb, host, port) / 1e3 for host, port in PORTS.items()}
        assignments = tb.node_request("n1", {"cmd": "read", "element": "sepctl1", "handler": "assignments"})
        groups = tb.node_request("n1", {"cmd": "read", "element": "sepctl1", "handler": "groups"})
        counters = tb.counters("n1")
        outs = [f.join() for f in flows]
        sink = os.path.join(tb.dir, "n2.int.jsonl")
        records = [json.loads(line) for line in open(sink) if line.strip()]
    assert assignments.get("ok") and groups.get("ok"), (assignments, groups)
    by_port = {a["flow"][4]: a for a in assignments["value"].values() if a["flow"][4] in PORTS.values()}
    assert set(by_port) == set(PORTS.values()), assignments
    assert by_port[5201]["queue"] != by_port[5202]["queue"], by_port
    assert sorted(g["flows"] for g in groups["value"]) == [0, 0, 1, 1], groups
    assert counters["sep1"]["packets"] > 0 and counters["rtt"]["ts_samples"] > 0, counters
    for host, port in PORTS.items():
        node_ms = by_port[port]["rtt_us"] / 1e3
        assert abs(node_ms - ping_ms[host]) <= max(0.05 * ping_ms[host], 1.0), (host, node_ms, ping_ms[host])
        assert node_ms <= ss_ms[host] + 1.0, (host, node_ms, ss_ms[host])
    # n1's hop in each packet names the flow's own kernel queue, one of four
    queues = defaultdict(set)
    for rec in records:
        for hop in rec["trace"]["hops"]:
            if hop["node_id"] == 2 and rec["flow"]["dport"] in PORTS.values():
                queues[rec["flow"]["dport"]].add((hop["state"]["queue_index"], hop["state"]["queue_count"]))
    later = {port: {q for q, n in seen if n == 4} for port, seen in queues.items()}
    assert by_port[5201]["queue"] in later[5201] and by_port[5202]["queue"] in later[5202], queues
    goodput = [o["end"]["sum_received"]["bits_per_second"] for o in outs]
    assert sum(goodput) ** 2 / (2 * sum(g * g for g in goodput)) >= 0.9, goodput    # Jain of the two


def _after_rounds(tb, node: str, element: str, rounds: int, deadline_s: float) -> None:
    """Wait until the control loop has run ``rounds`` rounds with both flows placed in its
    table (their minima read over them), or the deadline passed (the assertions then say what
    was missing)."""
    until, first = time.monotonic() + deadline_s, None
    while time.monotonic() < until:
        value = tb.node_request(node, {"cmd": "read", "element": element, "handler": "assignments"}).get("value") or {}
        done = tb.counters(node)[element]["rounds"]
        if {a["flow"][4] for a in value.values()} >= set(PORTS.values()):
            first = done if first is None else first
            if done - first >= rounds:
                return
        time.sleep(0.2)          # a poll: the loop runs once a second
