"""The run's record of RTT separation: read from the node's handlers, summarised per flow."""
import json
import os
import time

from experiments.runs.separation_record import SEPARATION_FILE, SeparationRecorder


class FakeBed:
    """A testbed of one node whose RTTSeparation answers from a script of assignments."""

    def __init__(self, script):
        self.state = {"nodes": {"r1": {}}}
        self.script, self.reads = list(script), 0

    def node_request(self, node, req):
        if req["cmd"] == "elements":
            return {"ok": True, "elements": [{"name": "sepctl0", "class": "RTTSeparation"},
                                             {"name": "q0", "class": "Queue"}]}
        handler = req["handler"]
        if handler == "assignments":
            self.reads += 1
            step = self.script[min(self.reads - 1, len(self.script) - 1)]
            return {"ok": True, "value": {f"h{port}": {"flow": ["10.0.0.1", "10.0.1.1", 6, 40000 + port, port],
                                                        "queue": q, "rtt_us": rtt}
                                          for port, (q, rtt) in step.items()}}
        if handler == "breaks":
            return {"ok": True, "value": [10000.0, 50000.0]}
        if handler == "groups":
            return {"ok": True, "value": [{"queue": "q0", "flows": 1}]}
        if handler == "counters":
            return {"ok": True, "value": {"moves": 1}}
        return {"ok": False, "error": "no such handler"}


def test_each_flow_ends_in_its_queue_and_settles_where_it_last_moved(tmp_path):
    # flow 1 (port 5201) starts with its competitor's queue and moves at the third read;
    # a flow of another run (port 6201) on the same link is not the run's
    script = [{5201: (0, 30000.0), 5202: (0, 10000.0), 6201: (2, 1.0)}] * 2 + \
             [{5201: (1, 90000.0), 5202: (0, 10000.0), 6201: (2, 1.0)}] * 3
    bed = FakeBed(script)
    rec = SeparationRecorder(bed, str(tmp_path), [5201, 5202], period_s=0.01)
    with rec:
        while bed.reads < len(script):
            time.sleep(0.005)
    got = rec.summary()["r1/sepctl0"]
    assert got["flows"]["5201"]["queue"] == 1 and got["flows"]["5202"]["queue"] == 0
    assert got["flows"]["5201"]["rtt_us"] == 90000.0
    assert got["flows"]["5201"]["settled_s"] > got["flows"]["5202"]["settled_s"]
    assert "6201" not in got["flows"] and got["apart"] is True and got["moves"] == 1
    saved = json.load(open(os.path.join(tmp_path, SEPARATION_FILE)))
    assert saved["elements"]["r1/sepctl0"]["groups"] == [{"queue": "q0", "flows": 1}]


def test_flows_in_one_queue_are_not_apart_and_a_silent_node_is_counted(tmp_path):
    bed = FakeBed([{5201: (0, 30000.0), 5202: (0, 10000.0)}])
    rec = SeparationRecorder(bed, str(tmp_path), [5201, 5202], period_s=0.01)
    with rec:
        while bed.reads < 2:
            time.sleep(0.005)
        bed.node_request = lambda node, req: (_ for _ in ()).throw(OSError("node gone"))
    assert rec.summary()["r1/sepctl0"]["apart"] is False
    assert rec.missed_reads >= 1


def test_a_testbed_without_separation_records_nothing(tmp_path):
    class Plain(FakeBed):
        def node_request(self, node, req):
            return {"ok": True, "elements": [{"name": "q0", "class": "Queue"}]}
    rec = SeparationRecorder(Plain([]), str(tmp_path), [5201])
    with rec:
        pass
    assert rec.summary() is None and not os.path.exists(os.path.join(tmp_path, SEPARATION_FILE))


SS_OUT = """State Recv-Q Send-Q Local Address:Port Peer Address:Port
ESTAB 0 0 [2001:db8::1]:40000 [2001:db8::2]:5201
\t cubic wscale:7,7 rto:204 rtt:12.5/1 minrtt:11.9 bytes_acked:120 segs_out:4
ESTAB 0 0 [2001:db8::1]:40002 [2001:db8::2]:5201
\t cubic wscale:7,7 rto:230 rtt:31.2/3 minrtt:12.34 bytes_acked:9000000 segs_out:6000
"""


class SsBed(FakeBed):
    """... whose senders answer ``ss`` with iperf3's control and data connections."""

    def __init__(self, script):
        super().__init__(script)
        self.ss_calls = []

    def run(self, host, argv):
        self.ss_calls.append((host, argv[-1]))
        out = SS_OUT if argv[-1] == "dport = :5201" else ""

        class Done:
            stdout = out
        return Done()


def test_the_senders_own_minimum_rtt_is_read_from_its_data_connection(tmp_path):
    bed = SsBed([{5201: (1, 12500.0), 5202: (0, 10000.0)}])
    rec = SeparationRecorder(bed, str(tmp_path), [5201, 5202], period_s=0.01, senders={5201: "s1", 5202: "s2"})
    with rec:
        while bed.reads < 2:
            time.sleep(0.005)
    flows = rec.summary()["r1/sepctl0"]["flows"]
    assert flows["5201"]["sender_min_rtt_us"] == 12340.0                 # the connection that sent most
    assert "sender_min_rtt_us" not in flows["5202"]                      # its sender showed none
    assert ("s2", "dport = :5202") in bed.ss_calls
    saved = json.load(open(os.path.join(tmp_path, SEPARATION_FILE)))
    assert saved["sender_min_rtt_us"] == {"5201": 12340.0}
