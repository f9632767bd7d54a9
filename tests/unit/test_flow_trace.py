"""Long-flow traces: the generator's draws, the CSV's round trip and its errors, the pairs'
RTTs; the replay's delays and the FCT report's pairing."""
import math

import pytest

from experiments.reports import fct
from experiments.runs import flow_trace
from experiments.runs.flow_trace import TraceError, TraceFlow
from experiments.runs.replay import BOTTLENECK_DELAY_MS, pair_delays_ms


def test_a_trace_is_its_seeds_within_its_bounds_and_offers_about_its_load():
    a = flow_trace.generate(400, seed=3, link_mbps=10, load=0.5, size_range_bytes=(1_000_000, 10_000_000))
    assert a == flow_trace.generate(400, seed=3, link_mbps=10, load=0.5, size_range_bytes=(1_000_000, 10_000_000))
    assert a != flow_trace.generate(400, seed=4, link_mbps=10, load=0.5, size_range_bytes=(1_000_000, 10_000_000))
    assert all(1_000_000 <= f.size_bytes <= 10_000_000 and 1 <= f.rtt_ms <= 224 for f in a)
    offered = sum(f.size_bytes for f in a) * 8 / a[-1].start_s / 10e6
    assert 0.4 < offered < 0.6
    assert 25 < sorted(f.rtt_ms for f in a)[200] < 60                  # the median's 40 ms


@pytest.mark.parametrize("load", [0, 1, 1.5])
def test_a_load_the_link_cannot_carry_is_refused(load):
    with pytest.raises(ValueError, match="load"):
        flow_trace.generate(10, seed=1, load=load)


def test_a_trace_written_reads_back_the_same(tmp_path):
    got = flow_trace.generate(20, seed=1)
    path = str(tmp_path / "t.csv")
    flow_trace.write_csv(got, path, flow_trace.header(seed=1))
    assert flow_trace.read_csv(path) == got
    assert open(path).readline().startswith("# intcc flow trace: seed 1")


@pytest.mark.parametrize("body, message", [
    ("flow,start_s,size\n", "header"),
    ("flow,start_s,size_bytes,rtt_ms\n", "no flows"),
    ("flow,start_s,size_bytes,rtt_ms\n0,0,100,10\n1,1,100\n", r"t.csv:3: 3 fields"),
    ("flow,start_s,size_bytes,rtt_ms\n0,0,100,ten\n", r"t.csv:2: not numbers"),
    ("flow,start_s,size_bytes,rtt_ms\n0,0,100,10\n0,1,100,10\n", "flow 0 appears twice"),
    ("flow,start_s,size_bytes,rtt_ms\n0,0,0,10\n", "size_bytes and rtt_ms > 0"),
    ("flow,start_s,size_bytes,rtt_ms\n0,-1,100,10\n", "start_s must be >= 0"),
])
def test_a_bad_trace_names_its_line_and_fault(tmp_path, body, message):
    path = tmp_path / "t.csv"
    path.write_text(body)
    with pytest.raises(TraceError, match=message):
        flow_trace.read_csv(str(path))


def test_a_missing_trace_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="No such file"):
        flow_trace.read_csv(str(tmp_path / "none.csv"))


def test_each_pair_carries_an_rtt_quartile_at_its_geometric_mean():
    flows = [TraceFlow(i, float(i), 1000, rtt) for i, rtt in enumerate([1, 4, 10, 40, 100, 100, 200, 50])]
    rtts, pair = flow_trace.path_rtts(flows, 4)
    assert rtts == [2.0, 20.0, 70.71, 141.42]
    assert pair == [0, 0, 1, 1, 2, 3, 3, 2]
    few = flow_trace.path_rtts(flows[:2], 4)[0]                       # pairs without a flow copy a neighbour
    assert few[0] == 1.0 and few[1] == 1.0 and all(r is not None for r in few)


def test_the_access_delays_give_each_pair_its_round_trip():
    delays = pair_delays_ms([2.0, 20.0, 60.0, 0.5])
    for k, rtt in enumerate([2.0, 20.0, 60.0]):
        assert math.isclose(2 * (BOTTLENECK_DELAY_MS + 2 * delays[f"delay_ms_{k + 1}"]), rtt)
    assert delays["delay_ms_4"] == 0.0                                 # below the bottleneck's own: as low as it goes


def _summary(fcts_by_k: dict, trace_id="t1") -> dict:
    return {"kind": "fct_replay", "trace": {"id": trace_id}, "records": [
        {"cca": "cubic", "separation": k, "failed": [{"flow": 99, "error": "x"}] if k else [],
         "flows": [{"flow": i, "fct_s": v, "pair": 1 + i % 2, "pair_rtt_ms": 10.0 * (1 + i % 2)}
                   for i, v in enumerate(values)]}
        for k, values in fcts_by_k.items()]}


def test_the_fct_report_pairs_transfers_by_flow_and_gives_the_change_with_its_interval():
    s = _summary({0: [10.0, 20.0, 30.0, 40.0], 4: [8.0, 16.0, 24.0, 32.0]})
    (row,) = fct.rows([s])
    assert row["flows"] == 4 and row["faster"] == 4
    assert math.isclose(row["change_pct"], -20.0)
    lo, hi = row["change_ci_pct"]
    assert math.isclose(lo, -20.0) and math.isclose(hi, -20.0)       # every pair -20 %: no spread
    assert [p["pair"] for p in row["by_pair"]] == [1, 2]
    assert fct.failed([s]) == {("cubic", 0): 0, ("cubic", 4): 1}
    assert "-20.0 %" in fct.format_rows([row]) and "| cubic | 4 | 4 |" in fct.format_markdown([row])


def test_the_fct_report_needs_both_ways_and_refuses_other_summaries():
    with pytest.raises(fct.FctReportError, match="separation 0"):
        fct.rows([_summary({4: [1.0, 2.0]})])
    with pytest.raises(fct.FctReportError, match="fct_replay"):
        fct.rows([{"format": 2, "records": []}])


def test_the_fct_cdf_is_drawn(tmp_path):
    path = tmp_path / "cdf.png"
    fct.plot([_summary({0: [10.0, 20.0, 30.0], 4: [8.0, 16.0, 31.0]})], str(path))
    assert path.stat().st_size > 10_000


def test_two_traces_pool_by_flow_within_each_and_name_each_pairs_rtts_as_a_range():
    a = _summary({0: [10.0, 20.0], 4: [9.0, 18.0]}, trace_id="t1")
    b = _summary({0: [30.0, 40.0], 4: [33.0, 44.0]}, trace_id="t2")
    for rec in b["records"]:
        for f in rec["flows"]:
            f["pair_rtt_ms"] *= 1.5                  # its own quartiles
    (row,) = fct.rows([a, b])
    assert row["flows"] == 4 and row["faster"] == 2   # flow 0 of t1 is not flow 0 of t2
    assert [p["rtt_ms"] for p in row["by_pair"]] == [[10.0, 15.0], [20.0, 30.0]]
    assert "10.0–15.0 ms" in fct.format_pair_markdown([row])
