"""The dashboard without a browser: its state (a point per second per hop and flow,
worst-N, events, health), /metrics parsed by prometheus_client's own parser, and the web
service on loopback (page, assets, snapshot, server-sent events, the token)."""
import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from experiments.runs.services import free_port
from prometheus_client.parser import text_string_to_metric_families

from dashboard.metrics import metrics_text
from dashboard.state import DashboardState
from telemetry.schema import CcaRecord, EstimateRecord, FlowRecord, HopRecord, HopState, IdentifyRecord, SwitchRecord

FID = "0123456789abcdef"


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def hop(node=1, occ=0.5, drops=0, losses=0, rssi=None):
    return dict(node_id=node, ts_ns=1, queue_depth_bytes=int(occ * 150_000), queue_depth_pkts=0,
                queue_capacity_bytes=150_000, queue_drops=drops, link_losses=losses, data_rate_kbps=0,
                arrival_rate_pps=800, flow_count=1, queue_occupancy=occ, rssi_dbm=rssi)


def flow(packets=100, cong=0, link=0, total=(1000, 0, 0), owd_us=12_000.0):
    return FlowRecord(flow_id=FID, ts_ns=1, reason="periodic", src="2001:db8::1", dst="2001:db8::2", proto=6,
                      sport=40000, dport=5201, seq=1, packets=total[0], lost=total[1] + total[2],
                      lost_congestion=total[1], lost_link=total[2], reordered=0,
                      loss_rate=(total[1] + total[2]) / (total[0] + total[1] + total[2]), interval_ms=10.0,
                      interval_packets=packets, interval_lost=cong + link, interval_lost_congestion=cong,
                      interval_lost_link=link, path=[HopState(**hop(1)), HopState(**hop(2, occ=0.1))],
                      one_way_delay_us=owd_us, sink_node_id=2)


def fed(seconds=3):
    clock = Clock()
    st = DashboardState(history_s=60, clock=clock)
    drops = 2 ** 32 - 5                      # the counter wraps during the run
    for k in range(seconds * 10):           # 10 records a second of each
        clock.t = 1000.0 + k * 0.1
        drops = (drops + 1) % 2 ** 32
        st.add(HopRecord(**hop(1, occ=0.5, drops=drops, losses=k // 10)))
        st.add(HopRecord(**hop(2, occ=0.1, rssi=-60)))
        st.add(flow(packets=80, cong=1 if k % 5 == 0 else 0, link=1))
    clock.t = 1000.0 + seconds + 0.05
    return st, clock


def test_a_point_a_second_with_rates_from_counters_that_wrap():
    st, clock = fed(3)
    snap = st.snapshot()
    pts = snap["hops"]["1"]["points"]
    assert [p["t"] for p in pts] == [1000, 1001, 1002]
    assert [p["drops"] for p in pts] == [9, 10, 10]       # first reading has no delta; then 1 per record
    assert [p["link_losses"] for p in pts] == [0, 1, 1]
    assert pts[0]["occupancy"] == 0.5 and snap["hops"]["2"]["latest"]["rssi_dbm"] == -60
    fp = snap["flows"][FID]["points"]
    assert [p["packets"] for p in fp] == [800, 800, 800]
    assert [p["lost_congestion"] for p in fp] == [2, 2, 2] and fp[0]["lost_link"] == 10 and fp[0]["owd_ms"] == 12.0
    assert snap["paths"] == {FID: [1, 2]} and snap["health"]["sink_age_s"] == {"2": 0.15}
    assert snap["health"]["records_per_s"]["hop"] == pytest.approx(20, rel=0.1)


def test_worst_lists_loss_with_its_link_share_and_hops_by_queue():
    st, _ = fed(3)
    w = st.snapshot()["worst"]
    f = w["flows_by_loss"][0]
    assert f["flow_id"] == FID and f["loss"] == pytest.approx(36 / (2400 + 36), abs=1e-4)
    assert f["link_share"] == pytest.approx(30 / 36, abs=1e-3)
    assert [h["node_id"] for h in w["hops_by_queue"]] == [1, 2]


def test_history_is_bounded_and_updates_carry_the_second_being_filled():
    st, clock = fed(3)
    seq = st.snapshot()["seq"]
    clock.t = 1200.2
    st.add(HopRecord(**hop(1, occ=0.9)))
    upd = st.since(seq)                                   # the second being filled, provisional
    assert upd["seq"] == seq and upd["hops"]["1"]["points"][-1] == {**upd["hops"]["1"]["points"][-1], "t": 1200,
                                                                     "occupancy": 0.9}
    clock.t = 1201.5
    upd = st.since(seq)
    assert upd["seq"] > seq and [p["t"] for p in upd["hops"]["1"]["points"]][-1] == 1200
    assert all(p["t"] >= 1200 - 60 for p in st.snapshot()["hops"]["1"]["points"])     # 60 s of history


def test_identification_steps_are_events_when_the_best_changes_or_commits():
    st, _ = fed(1)
    steps = [("reno", None, 0.4, [["elasticity", 0.9]]), ("reno", None, 0.6, [["queue_trend", 1.0]]),
             ("cubic", None, 0.7, [["loss_cut", 0.69], ["queue_trend", None]]), ("cubic", "cubic", 0.96, [])]
    for best, verdict, post, evidence in steps:
        st.add(IdentifyRecord(flow_id=FID, ts_ns=1, node_id=2, verdict=verdict, best=best, posterior=post,
                              evidence=evidence))
    events = [e for e in st.snapshot()["events"] if e["kind"] == "identify"]
    assert [(e["estimate"], e["committed"]) for e in events] == [("reno", False), ("cubic", False), ("cubic", True)]
    assert events[1]["evidence"] == [["loss_cut", 0.69], ["queue_trend", None]]
    assert st.snapshot()["verdicts"][FID]["estimate"] == "cubic" and st.snapshot()["verdicts"][FID]["committed"]


def test_verdict_changes_and_switches_are_events():
    st, clock = fed(1)
    for est in ("cubic", "cubic", "bbr"):
        st.add(EstimateRecord(flow_id=FID, ts_ns=1, local_cca="cubic", estimate=est, confidence=0.9,
                              votes={est: 9}, window=10, estimates=10))
    st.add(SwitchRecord(flow_id=FID, ts_ns=1, from_cca="cubic", to_cca="bbr", verdict="bbr", confidence=0.9,
                        votes={"bbr": 9}, policy="mirror"))
    kinds = [(e["kind"], e.get("estimate") or e.get("to")) for e in st.snapshot()["events"]]
    assert kinds == [("verdict", "cubic"), ("verdict", "bbr"), ("switch", "bbr")]
    # each flow's latest verdict, for the Paths view, in the snapshot and in every update
    for view in (st.snapshot(), st.since(0)):
        assert view["verdicts"][FID]["estimate"] == "bbr" and view["verdicts"][FID]["confidence"] == 0.9


def test_metrics_parse_and_match_the_latest_records():
    st, _ = fed(3)
    fams = {f.name: f for f in text_string_to_metric_families(metrics_text(st).decode())}
    occ = {s.labels["node"]: s.value for s in fams["intcc_hop_queue_occupancy"].samples}
    assert occ == {"1": 0.5, "2": 0.1}
    lost = {(s.labels["flow"], s.labels["cause"]): s.value for s in fams["intcc_flow_lost_packets"].samples
            if s.name.endswith("_total")}
    assert lost == {(FID, "congestion"): 0, (FID, "link"): 0, (FID, "reconfig"): 0}
    owd = fams["intcc_flow_one_way_delay_seconds"].samples[0]
    assert owd.value == pytest.approx(0.012) and owd.labels["flow"] == FID


def cca(fid, verdict, node=2, score=0.8):
    rest = (1 - score) / 2
    scores = {c: (score if c == verdict else rest) for c in ("reno", "cubic", "bbr")}
    return CcaRecord(flow_id=fid, ts_ns=1, node_id=node, src="2001:db8::1", dst="2001:db8::2", sport=40000,
                     dport=5201, interval_ms=1000.0, scores=scores, verdict=verdict)


def test_a_nodes_verdicts_on_flows_are_per_flow_counted_per_hop_and_in_the_metrics():
    st, clock = fed(3)
    st.add(cca(FID, "cubic"))
    st.add(cca("00000000000000aa", "bbr", score=0.6))
    st.add(cca("00000000000000bb", "cubic", node=1))
    snap = st.snapshot()
    assert snap["ccas"][FID]["cca"] == "cubic" and snap["ccas"][FID]["confidence"] == pytest.approx(0.8)
    assert snap["hop_ccas"] == {"2": {"cubic": 1, "bbr": 1}, "1": {"cubic": 1}}
    st.add(cca(FID, "reno"))                       # a newer verdict replaces the flow's
    assert st.since(st.seq)["hop_ccas"]["2"] == {"reno": 1, "bbr": 1}
    fams = {f.name: f for f in text_string_to_metric_families(metrics_text(st).decode())}
    named = {(s.labels["flow"], s.labels["cca"]): s.value for s in fams["intcc_flow_cca_score"].samples}
    assert named[(FID, "reno")] == pytest.approx(0.8) and named[("00000000000000aa", "bbr")] == pytest.approx(0.6)
    by_hop = {(s.labels["node"], s.labels["cca"]): s.value for s in fams["intcc_hop_flows_by_cca"].samples}
    assert by_hop == {("2", "reno"): 1, ("2", "bbr"): 1, ("1", "cubic"): 1}
    clock.t += 11                                  # stale verdicts count no more
    assert st.snapshot()["hop_ccas"] == {}


# -- the web service ---------------------------------------------------------------

@pytest.fixture
def serve():
    import uvicorn
    from dashboard.server import make_app
    servers = []

    def start(state, token=None):
        port = free_port()
        srv = uvicorn.Server(uvicorn.Config(make_app(state, token=token, push_period_s=0.2), host="127.0.0.1",
                                            port=port, log_level="warning"))
        threading.Thread(target=srv.run, daemon=True).start()
        deadline = time.monotonic() + 10
        while not srv.started and time.monotonic() < deadline:
            time.sleep(0.02)
        servers.append(srv)
        return f"http://127.0.0.1:{port}"
    yield start
    for srv in servers:
        srv.should_exit = True


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("content-type"), r.read()


def test_the_page_its_assets_snapshot_events_and_metrics_are_served(serve):
    st, clock = fed(3)
    base = serve(st)
    status, ctype, body = get(base + "/")
    assert status == 200 and b"uPlot.iife.min.js" in body and "text/html" in ctype
    for asset in ("/static/vendor/uPlot.iife.min.js", "/static/app.js", "/static/style.css",
                  "/static/vendor/uPlot.LICENSE"):
        assert get(base + asset)[0] == 200, asset
    snap = json.loads(get(base + "/api/snapshot")[2])
    assert snap["paths"] == {FID: [1, 2]} and len(snap["hops"]["1"]["points"]) == 3
    assert "intcc_hop_queue_occupancy" in get(base + "/metrics")[2].decode()
    with urllib.request.urlopen(base + "/api/events?seq=0", timeout=5) as r:
        assert r.headers.get("content-type").startswith("text/event-stream")
        assert r.readline() == b"event: update\n"
        upd = json.loads(r.readline().decode()[len("data: "):])
        assert upd["seq"] == snap["seq"] and upd["worst"]["hops_by_queue"][0]["node_id"] == 1


def test_a_token_guards_every_route(serve):
    st, _ = fed(1)
    base = serve(st, token="s3cret")
    for path in ("/", "/api/snapshot", "/metrics", "/static/app.js"):
        with pytest.raises(urllib.error.HTTPError) as e:
            get(base + path)
        assert e.value.code == 401, path
    assert get(base + "/api/snapshot?token=s3cret")[0] == 200
    req = urllib.request.Request(base + "/metrics", headers={"Authorization": "Bearer s3cret"})
    assert urllib.request.urlopen(req, timeout=5).status == 200
    with pytest.raises(urllib.error.HTTPError):
        get(base + "/?token=wrong")


def test_the_cli_refuses_a_public_address_without_a_token():
    from click.testing import CliRunner
    from intcc.cli import main
    r = CliRunner().invoke(main, ["dashboard", "--listen", "0.0.0.0:8080"])
    assert r.exit_code == 2 and "not loopback: give --token" in r.output
    r = CliRunner().invoke(main, ["dashboard", "--listen", "8080"])
    assert r.exit_code == 2 and "give HOST:PORT" in r.output


def test_a_senders_decisions_fold_into_its_window_and_loss_responses():
    from dashboard.state import loss_response
    from telemetry.schema import DecisionRecord
    clock = Clock()
    st = DashboardState(history_s=60, clock=clock)
    reasons = [("report", "ca: cubic curve"), ("loss", "loss: link (sink), L1 keeps cwnd"),
               ("loss", "loss: link (sink), L2 beta 0.95"), ("loss", "loss: congestion (sink), cubic beta 0.7"),
               ("timeout", "timeout: 1 MSS")]
    for i, (event, why) in enumerate(reasons):
        clock.t = 1000.0 + i * 0.1
        st.add(DecisionRecord(flow_id=FID, ts_ns=1, algorithm="cubic-int", event=event, cwnd_bytes=14480 + i,
                              reason=why))
    clock.t = 1001.2
    pts = st.snapshot()["decisions"][FID]["points"]
    assert pts == [{"t": 1000, "cwnd_kb": 14.5, "algorithm": "cubic-int", "keep": 1, "gentle": 1, "cut": 1,
                    "timeout": 1}]
    assert st.snapshot()["decisions"][FID]["latest"]["reason"] == "timeout: 1 MSS"
    assert loss_response(DecisionRecord(flow_id=FID, ts_ns=1, algorithm="cubic", event="report", cwnd_bytes=1,
                                        reason="x")) is None
    assert loss_response(DecisionRecord(flow_id=FID, ts_ns=1, algorithm="cubic", event="loss", cwnd_bytes=1,
                                        reason="in recovery: the window was already cut")) is None


def test_an_agents_trace_rows_reach_the_feed_rate_limited_and_a_bad_listener_changes_nothing():
    from ccp_agent.decisions import MAX_REPORTS_PER_S, DecisionFeed
    from ccp_algs.trace import Trace
    sent = []
    feed = DecisionFeed("mqtt://127.0.0.1:1", "/nonexistent", "cubic")

    class Conn:
        def send(self, row):
            sent.append(row)
    feed._conn = Conn()
    tr = Trace(None)
    tr.listeners += [feed, lambda fields: 1 / 0]
    t_end = time.monotonic() + 0.35
    n = 0
    while time.monotonic() < t_end:
        tr.row(sid=1, event="report", cwnd_bytes=1000, reason="ca")
        n += 1
    tr.row(sid=1, event="loss", cwnd_bytes=700, reason="loss: congestion")
    reports = [r for r in sent if r["event"] == "report"]
    assert n > 100 and 3 <= len(reports) <= 0.35 * MAX_REPORTS_PER_S + 2
    assert sent[-1]["event"] == "loss" and feed.dropped == n - len(reports)
    assert tr.listener_errors == n + 1


def test_a_flow_or_hop_quiet_for_longer_than_the_history_is_forgotten():
    st, clock = fed(2)
    st.add(EstimateRecord(flow_id=FID, ts_ns=1, local_cca="cubic", estimate="bbr", confidence=0.9,
                          votes={"bbr": 9}, window=10, estimates=10))
    clock.t = 1030.0                                     # within the 60 s history: still shown
    assert FID in st.snapshot()["flows"] and "1" in st.snapshot()["hops"]
    clock.t = 1100.0
    snap = st.snapshot()
    assert snap["flows"] == {} and snap["hops"] == {} and snap["paths"] == {}
    assert st._verdicts == {}


def test_rtt_separations_queues_are_listed_per_hop_with_their_flows():
    clock = Clock()
    st = DashboardState(history_s=60, clock=clock)

    def separated(fid, index, depth, ts_ns):
        return FlowRecord(**{**flow().__dict__, "flow_id": fid, "path": [
            HopState(**{**hop(1), "ts_ns": ts_ns, "queue_depth_bytes": depth, "queue_index": index, "queue_count": 4,
                        "queue_weight": 2 if index == 1 else 1}),
            HopState(**{**hop(2), "queue_index": 0, "queue_count": 1, "queue_weight": 1})]})
    st.add(separated("00000000000000a1", 1, 3000, 5))
    st.add(separated("00000000000000b2", 1, 4500, 9))          # the newer packet through queue 1
    st.add(separated("00000000000000c3", 3, 1500, 7))
    st.add(flow())                                              # a flow of an older wire schema: no queues
    queues = st.snapshot()["queues"]
    assert set(queues) == {"1"}                                 # node 2 has one FIFO
    assert queues["1"]["1"] == {"flows": ["00000000000000a1", "00000000000000b2"], "of": 4, "weight": 2,
                                "depth_bytes": 4500, "capacity_bytes": 150_000, "occupancy": 0.5}
    assert queues["1"]["3"]["flows"] == ["00000000000000c3"]
    assert st.snapshot()["flows"]["00000000000000c3"]["latest"]["queues"] == [3, None]
    clock.t += 11                                               # the flows went quiet
    assert st.snapshot()["queues"] == {}
