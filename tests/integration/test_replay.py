"""A trace replay on the testbed (root): every transfer of a small trace completes through RTT
separation, its FCT is the receiver's, at least its bytes at the bottleneck's rate and within
the replay's span, and each flow's pair gives it the round trip the trace asked for."""
import json
import os

from experiments.runs import replay
from experiments.runs.flow_trace import TraceFlow


def test_a_small_trace_replays_through_separation_and_every_transfer_has_its_fct(tmp_path):
    flows = [TraceFlow(0, 0.0, 400_000, 4.0), TraceFlow(1, 0.5, 300_000, 40.0)]
    summary = replay.run(flows, {"id": "test", "flows": 2}, str(tmp_path), ["cubic"], [4], "test",
                         echo=lambda *a: None)
    (rec,) = summary["records"]
    assert rec["failed"] == [] and [f["flow"] for f in rec["flows"]] == [0, 1], rec
    for f, want in zip(rec["flows"], flows):
        # its bytes at the link's 10 Mbit/s, less a first window iperf3's receiver may get before
        # its clock starts (replay.fct_of)
        floor_s = (want.size_bytes - replay.UNTIMED_FIRST_BYTES) * 8 / 10e6
        assert floor_s <= f["fct_s"] < 30, f
        assert f["pair_rtt_ms"] == want.rtt_ms and f["pair"] == 1 + 2 * flows.index(want)
    assert json.load(open(tmp_path / "summary.json"))["records"][0]["flows"] == rec["flows"]
    assert os.path.exists(tmp_path / "runs" / "cubic-sep4" / "separation.json")
