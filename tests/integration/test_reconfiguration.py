"""Path reconfiguration on the testbed (root): s1's flows take the circuit beside sw1 -> sw2 (its
own delay) when nothing reconfigures; migrated every period, a CUBIC flow's packets take
both paths, its night's packets are dropped, and both paths' transits stamp its packets."""
from experiments.testbed.linkctl import set_reconfig
from experiments.testbed.traffic import BackgroundFlow
from tests.integration.tbutil import ping_rtts_ms, start_testbed

PERIOD_S, DOWNTIME_S, SECONDS = 0.2, 0.02, 4


def test_a_migrated_flow_takes_both_paths_loses_its_nights_and_both_paths_stamp_it():
    with start_testbed("reconfig", "lrc", exporter="none", circuit_delay_ms=6.0, path_delay_ms=1.0) as tb:
        # no reconfiguration: s1 -> r1 over the circuit (one-way 1 + 6 + 1 ms), s2 -> r2 over the path (1 + 1 + 1);
        # the circuit carries sw1 -> sw2 only: the replies return over the path
        circuit_ms = min(ping_rtts_ms(tb, "s1", tb.addr("r1"), count=10))
        path_ms = min(ping_rtts_ms(tb, "s2", tb.addr("r2"), count=10))
        set_reconfig(tb, f"{PERIOD_S * 1e3:g}ms/{DOWNTIME_S * 1e3:g}ms")
        rc = [n for n, c in tb.counters("sw1").items() if n.startswith("rc")]
        before = tb.counters("sw1")
        flows = [BackgroundFlow(tb, "s1", "r1", "cubic", SECONDS, 1.0, port=5201),
                 BackgroundFlow(tb, "s2", "r2", "cubic", SECONDS, 1.0, port=5202)]
        outs = [f.join() for f in flows]
        after = tb.counters("sw1")
        state = tb.node_request("sw1", {"cmd": "read", "element": rc[0], "handler": "state"})
    assert 4 <= circuit_ms - path_ms <= 7, (circuit_ms, path_ms)        # 5 ms more, one way, on the circuit
    c = after[rc[0]]
    migrated_static = c["migrated_packets"] - c["to_circuit"] - c["night_drops"] - c["held"]
    assert c["migrations"] >= SECONDS / PERIOD_S - 2, c
    assert c["to_circuit"] > 100 and migrated_static > 100, c            # both paths carried the flow
    assert 0 < c["night_drops"] < 0.2 * c["migrated_packets"], c         # a tenth of the time is night
    transits = {n: after[n]["stamped"] - before[n]["stamped"] for n in after if n.startswith("tr")}
    # the path's transit toward sw2 and the circuit's beside it (the ports toward s1, s2 carry ACKs without INT)
    toward_sw2 = [n for n in transits if n.endswith("c") or n + "c" in transits]
    assert len(toward_sw2) == 2 and all(transits[n] > 100 for n in toward_sw2), transits
    assert state["ok"] and state["value"]["period_ns"] == int(PERIOD_S * 1e9), state
    assert all(o["end"]["sum_received"]["bytes"] > 0 for o in outs)
