"""The adaptive agent (ccp_agent/adaptive.py) on the mock datapath with a scripted
estimator: it switches on a stable verdict after the dwell time, tells the estimator and
MQTT, and an estimation failure leaves the flow where it is with one log line. The real
estimator process fails cleanly on a bad model and on a flow it cannot find."""
import logging
import os
import time

import pytest

from ccp_algs.programs import UNPACED_RATE

from ccp_agent.adaptive import Adaptive
from ccp_agent.estimation import EstimatorProcess, Verdict
from ccp_agent.switching import SwitchPolicy
from ccp_algs.bbr import Bbr
from ccp_algs.cubic import Cubic
from ccp_algs.mock import MockDatapath, datapath_info, report
from ccp_algs.reno import Reno
from telemetry.schema import SwitchRecord, decode

MSS = 1448
FID = "00112233aabbccdd"


class ScriptedEstimation:
    def __init__(self):
        self.inbox, self.observed, self.local, self.published = [], [], [], []

    def observe(self, sid, ccp_tuple, local_cca):
        self.observed.append((sid, local_cca))

    def local_changed(self, sid, cca):
        self.local.append((sid, cca))

    def publish(self, topic, payload):
        self.published.append((topic, payload))

    def poll(self):
        out, self.inbox = self.inbox, []
        return out


def adaptive(min_dwell_s=0.0, trace=None, match_rate=False):
    est = ScriptedEstimation()
    policy = SwitchPolicy("mirror", ("bbr", "cubic", "reno"), ("bbr", "cubic", "reno", "vegas"),
                          min_dwell_s=min_dwell_s, min_confidence=0.6)
    alg = Adaptive({"cubic": Cubic(), "bbr": Bbr(seed=1), "reno": Reno()}, "cubic", policy, est,
                   match_rate=match_rate, trace=trace)
    dp = MockDatapath(alg.datapath_programs())
    return alg.new_flow(dp, datapath_info(mss=MSS)), dp, est


def tick(flow):
    r = report(acked=10 * MSS, delivered=10, inflight=20, rtt_us=40_000, grown=0, reductions=0)
    r.bw_max = 1_250_000
    flow.on_report(r)


def verdict(estimate, confidence, n=50, competitor_rate_ratio=None, row=None):
    top = round(n * confidence)
    return Verdict(1, FID, estimate, confidence, {estimate: top, "vegas": n - top}, 10.0,
                   competitor_rate_ratio=competitor_rate_ratio, row_estimate=row or estimate)


def test_a_stable_verdict_switches_the_flow_and_is_announced(tmp_path):
    flow, dp, est = adaptive(trace=str(tmp_path / "t.csv"))
    assert est.observed == [(1, "cubic")]
    tick(flow)
    est.inbox.append(("verdict", 1, verdict("bbr", 0.9)))
    before = dp.cwnd
    tick(flow)
    assert flow.current == "bbr" and dp.cwnd == before
    assert est.local == [(1, "bbr")]
    topic, payload = est.published[0]
    rec = decode(payload, topic=topic)
    assert isinstance(rec, SwitchRecord) and (rec.from_cca, rec.to_cca, rec.verdict) == ("cubic", "bbr", "bbr")
    assert "cubic -> bbr: verdict bbr (90% of 50), mirror" in (tmp_path / "t.csv").read_text()
    assert any(",verdict," in row and ",bbr (90% of 50); row bbr," in row
               for row in (tmp_path / "t.csv").read_text().splitlines())


def test_a_switchs_command_goes_out_before_its_trace_rows_which_keep_order_and_time(tmp_path):
    """The rows of a switch (verdict, the new algorithm's command, the switch) are written
    after the command reached the datapath, in the order and with the times they were made."""
    import csv
    flow, dp, est = adaptive(trace=str(tmp_path / "t.csv"))
    tick(flow)
    path = tmp_path / "t.csv"
    written_at_command = []
    update_fields = dp.update_fields

    def spy(fields):
        written_at_command.append(len(path.read_text().splitlines()))
        return update_fields(fields)
    dp.update_fields = spy
    rows_before = len(path.read_text().splitlines())
    est.inbox.append(("verdict", 1, verdict("bbr", 0.9)))
    tick(flow)
    assert flow.current == "bbr" and written_at_command[0] == rows_before + 1   # only the report's row
    rows = list(csv.DictReader(path.open()))
    events = [r["event"] for r in rows]
    i = events.index("verdict")
    assert events[i:i + 4] == ["verdict", "start", "switch", "switch"]    # as made: the new algorithm's start, command, switch
    times = [int(r["mono_ns"]) for r in rows]
    assert times == sorted(times)


def test_the_verdicts_a_run_traced_are_scored_by_time_since_the_switch(tmp_path):
    """What the agent writes is what experiments.runs.metrics reads: verdicts before the switch
    count against the start, those after against the switch, each row's own estimate too."""
    from experiments.runs.metrics import verdict_scores
    flow, dp, est = adaptive(trace=str(tmp_path / "t.csv"))
    tick(flow)
    est.inbox.append(("verdict", 1, verdict("cubic", 0.55, row="bbr")))     # too weak to move it
    tick(flow)
    est.inbox.append(("verdict", 1, verdict("bbr", 0.9)))
    tick(flow)
    est.inbox.append(("verdict", 1, verdict("bbr", 0.8, row="reno")))
    tick(flow)
    assert flow.current == "bbr"
    cells = {(c["on"], c["after"]): c for c in verdict_scores(str(tmp_path / "t.csv"), "bbr")["cells"]}
    assert cells[("cubic", "start")] == {"on": "cubic", "after": "start", "since_s": "0-2", "rows": 2,
                                         "row_right": 2, "vote_right": 1}
    assert cells[("bbr", "switch")] | {"since_s": None} == {"on": "bbr", "after": "switch", "since_s": None,
                                                            "rows": 1, "row_right": 0, "vote_right": 1}


def test_a_switch_matches_the_competitors_rate_where_asked_and_measured():
    for match_rate, ratio, cwnd_after in ((True, 0.5, 10 * MSS), (False, 0.5, 20 * MSS), (True, None, 20 * MSS)):
        flow, dp, est = adaptive(match_rate=match_rate)
        flow.flow.cwnd = flow.flow.ssthresh = 20.0 * MSS
        flow.loss_seen = True
        tick(flow)
        est.inbox.append(("verdict", 1, verdict("reno", 0.9, competitor_rate_ratio=ratio)))
        tick(flow)
        assert flow.current == "reno" and dp.cwnd == cwnd_after, (match_rate, ratio)


def test_no_switch_on_a_weak_verdict_or_within_the_dwell_time():
    flow, dp, est = adaptive(min_dwell_s=60)
    est.inbox.append(("verdict", 1, verdict("bbr", 0.95)))
    tick(flow)
    assert flow.current == "cubic"                     # dwell
    flow.in_control_since = time.monotonic() - 61
    est.inbox.append(("verdict", 1, verdict("bbr", 0.5)))
    tick(flow)
    assert flow.current == "cubic"                     # weak
    est.inbox.append(("verdict", 1, verdict("bbr", 0.7)))
    tick(flow)
    assert flow.current == "bbr"


def test_an_estimation_failure_leaves_the_flow_with_one_log_line(caplog):
    flow, dp, est = adaptive()
    with caplog.at_level(logging.WARNING, logger="intcc.adaptive"):
        est.inbox.append(("error", 1, "flow 1: no namespace has a socket ... (ended?)"))
        tick(flow)
        est.inbox.append(("error", 1, "flow 1: again"))
        tick(flow)
    assert flow.current == "cubic"
    lines = [r for r in caplog.records if "estimation failed" in r.getMessage()]
    assert len(lines) == 1 and "flow 1 stays on its algorithm" in lines[0].getMessage()


def wait_messages(proc, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = proc.poll()
        if got:
            return got
        time.sleep(0.05)
    return []


def test_the_estimator_process_reports_a_bad_model_instead_of_crashing(tmp_path):
    bad = tmp_path / "m.joblib"
    bad.write_bytes(b"not a model")
    proc = EstimatorProcess(str(bad), state_dir=str(tmp_path)).start()
    try:
        (kind, sid, text), *_ = wait_messages(proc)
    finally:
        proc.stop()
    assert kind == "error" and sid is None and "not an intcc estimator model" in text


def test_the_estimator_process_reports_a_flow_it_cannot_find(tmp_path):
    from ccp_agent.adaptive import __file__ as here
    import os
    model = os.path.join(os.path.dirname(here), "..", "estimator", "models", "archive", "cca_rf.joblib")
    proc = EstimatorProcess(model, interval_s=0.1, state_dir=str(tmp_path)).start()
    try:
        proc.observe(7, (1, 40000, 2, 5201), "cubic")
        (kind, sid, text), *_ = wait_messages(proc)
    finally:
        proc.stop()
    assert (kind, sid) == ("error", 7) and "not in the datapath's flows.json" in text


def test_the_estimator_process_ends_with_the_agent(tmp_path):
    """The child, in its loop with a model loaded, ends within seconds of its agent."""
    import subprocess
    import sys
    code = ("import sys, time; from ccp_agent.estimation import EstimatorProcess; "
            f"p = EstimatorProcess(sys.argv[1], interval_s=0.05, state_dir={str(tmp_path)!r}).start(); "
            "print(p._proc.pid, flush=True); time.sleep(0.5)")
    import estimator
    model = os.path.join(os.path.dirname(estimator.__file__), "models", "archive", "cca_rf.joblib")
    out = subprocess.run([sys.executable, "-c", code, model], capture_output=True, text=True, timeout=60)
    child = int(out.stdout.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(child, 9)
    raise AssertionError(f"estimator child {child} outlived its agent")


def test_a_verdict_is_acted_on_at_any_flows_report():
    """A flow in an RTO sends no report for hundreds of ms: its switch must not wait for it."""
    est = ScriptedEstimation()
    policy = SwitchPolicy("mirror", ("bbr", "cubic"), ("bbr", "cubic"), min_dwell_s=0.0, min_confidence=0.6)
    alg = Adaptive({"cubic": Cubic(), "bbr": Bbr(seed=1)}, "cubic", policy, est)
    quiet = alg.new_flow(MockDatapath(alg.datapath_programs()), datapath_info(sock_id=1, mss=MSS))
    busy = alg.new_flow(MockDatapath(alg.datapath_programs()), datapath_info(sock_id=2, mss=MSS, src_port=40001))
    tick(quiet)
    est.inbox.append(("verdict", 1, verdict("bbr", 0.9)))
    tick(busy)
    assert quiet.current == "bbr" and busy.current == "cubic"
    assert est.local == [(1, "bbr")]
    del quiet                   # portus let the flow go: a late verdict on it is no error
    est.inbox.append(("verdict", 1, verdict("cubic", 0.9)))
    tick(busy)


def test_the_vote_goes_on_across_a_switch():
    """Its estimates were of the same competitor: a fresh vote after a switch let the new
    local CCA's first estimates, in the switch's transient, switch the flow back."""
    import os
    import time
    import estimator
    from ccp_agent.estimation import _Located
    from estimator.model import CCAEstimator
    model = CCAEstimator.load(os.path.join(os.path.dirname(estimator.__file__), "models", "archive", "cca_rf.joblib"))
    watched = _Located(1, ("10.0.0.1", 5201, "10.0.0.2", 40000), "cubic", model, 50, directory=None, warmup_s=5)
    for label in ["bbr"] * 8 + ["cubic"] * 2:
        watched.est.vote.update(label)
    watched.local_changed("bbr")
    assert watched.est.local_cca == "bbr" and watched.est.vote.verdict().votes == {"bbr": 8, "cubic": 2}
    assert watched.vote_from > time.monotonic() + 4                 # the new CCA warms up first


def test_an_int_models_warm_up_counts_from_the_competitors_arrival():
    """A flow alone makes no estimate; once a competitor is on its path, none until the
    competitor has been there warmup_s (as at a start together)."""
    import os
    from types import SimpleNamespace
    import estimator
    from ccp_agent.estimation import _Located
    from estimator.model import CCAEstimator
    model = CCAEstimator.load(os.path.join(os.path.dirname(estimator.__file__), "models", "archive", "cca_rf_int_t2.joblib"))
    watched = _Located(1, ("10.0.0.1", 5201, "10.0.0.2", 40000), "cubic", model, 50, directory=None, warmup_s=5)
    watched.vote_from = 0.0                                          # the flow's own warm-up is over
    watched.tail = None
    ages, made = [None, 4.9, 5.0], []
    watched.est = SimpleNamespace(uses_int=True, feed_pcap=lambda tail: 0, competitor_age_s=lambda: ages[0],
                                  step=lambda: made.append(ages[0]) or "step")
    assert watched.step() is None                                    # alone
    ages[0] = 4.9
    assert watched.step() is None                                    # the competitor is still warming up
    ages[0] = 5.0
    assert watched.step() == "step" and made == [5.0]


def flow_with_window(match_at_start_below, cwnd_pkts=20):
    flow, dp, est = adaptive()
    flow.host.match_at_start_below = match_at_start_below
    flow.flow.cwnd = flow.flow.ssthresh = cwnd_pkts * MSS
    flow.loss_seen = True
    return flow, dp, est


def test_match_at_start_takes_the_first_measured_ratio_once_where_below_the_bound_and_keeps_the_cca():
    flow, dp, est = flow_with_window(0.8)
    tick(flow)
    est.inbox.append(("verdict", 1, verdict("reno", 0.9, n=2)))                              # no ratio yet
    est.inbox.append(("verdict", 1, verdict("reno", 0.9, n=3, competitor_rate_ratio=0.5)))   # too few votes
    tick(flow)
    assert flow.current == "cubic" and dp.cwnd == 10 * MSS and flow.switches == [] and flow.start_ratio_seen
    est.inbox.append(("verdict", 1, verdict("reno", 0.9, n=4, competitor_rate_ratio=0.5)))   # once only
    tick(flow)
    assert dp.cwnd == 10 * MSS


def test_no_match_at_start_at_or_above_the_bound_nor_by_default_nor_after_a_switch():
    for bound, first_ratio in ((0.0, 0.5), (0.8, 0.8), (0.8, 2.0)):
        flow, dp, est = flow_with_window(bound)
        tick(flow)
        est.inbox.append(("verdict", 1, verdict("cubic", 0.9, n=3, competitor_rate_ratio=first_ratio)))
        est.inbox.append(("verdict", 1, verdict("cubic", 0.9, n=4, competitor_rate_ratio=0.5)))  # not a second look
        tick(flow)
        assert dp.cwnd == 20 * MSS, (bound, first_ratio)
    flow, dp, est = flow_with_window(0.8)
    flow.switch("reno")
    tick(flow)
    est.inbox.append(("verdict", 1, verdict("reno", 0.9, n=3, competitor_rate_ratio=0.5)))
    tick(flow)
    assert flow.current == "reno" and not flow.start_ratio_seen


def identified_adaptive(trace=None, match_rate=False, hold_parity=True):
    from ccp_algs.probe import Probe
    from tests.unit.test_ccp_algs import FakeDirectory, FakeTelemetry, flow_record
    est = ScriptedEstimation()
    policy = SwitchPolicy("mirror", ("bbr", "cubic", "reno"), ("bbr", "cubic", "reno", "vegas"))
    probe = Probe(telemetry=FakeTelemetry(flow_record(flows=2)), directory=FakeDirectory())
    alg = Adaptive({"cubic": Cubic(), "bbr": Bbr(seed=1), "reno": Reno(), "probe": probe}, "probe", policy, est,
                   trace=trace, identified=True, match_rate=match_rate, hold_parity=hold_parity)
    dp = MockDatapath(alg.datapath_programs())
    return alg.new_flow(dp, datapath_info(mss=MSS)), dp, est


def identification(estimate, best, p, competitor_rate_ratio=None, competitor_epoch=None):
    return Verdict(1, FID, estimate, p, {best: round(100 * p)}, 3.0, row_estimate=best,
                   evidence=(("loss_cut", 0.71), ("spare", 0.98)), competitor_rate_ratio=competitor_rate_ratio,
                   competitor_epoch=competitor_epoch)


def test_active_identification_probes_until_a_commit_then_switches_once(tmp_path):
    flow, dp, est = identified_adaptive(trace=str(tmp_path / "t.csv"))
    tick(flow)
    assert flow.current == "probe" and dp.rate > 0               # paced at the fair share
    est.inbox.append(("verdict", 1, identification(None, "bbr", 0.7)))
    tick(flow)
    assert flow.current == "probe"                              # undecided: the probe goes on
    est.inbox.append(("verdict", 1, identification("bbr", "bbr", 0.97)))
    tick(flow)
    assert flow.current == "bbr"
    rec = decode(*reversed(est.published[0]))
    assert (rec.from_cca, rec.to_cca, rec.verdict) == ("probe", "bbr", "bbr")
    est.inbox.append(("verdict", 1, identification("reno", "reno", 0.99)))
    tick(flow)
    assert flow.current == "bbr" and len(est.published) == 1     # one switch: later verdicts are traced only
    text = (tmp_path / "t.csv").read_text()
    assert "identify: undecided, best bbr (70%); loss_cut=0.71 spare=0.98" in text


def test_a_commit_mirrors_the_competitors_from_their_rate_and_a_policy_elsewhere_from_its_own():
    flow, dp, est = identified_adaptive(match_rate=True)
    tick(flow)
    before = flow.state().cwnd_bytes
    est.inbox.append(("verdict", 1, identification("cubic", "cubic", 0.95, competitor_rate_ratio=2.0)))
    tick(flow)
    assert flow.current == "cubic"
    # twice its rate, reached by slow start: the window at once, the ssthresh at twice it
    assert flow.flow.ssthresh == pytest.approx(2 * before, rel=0.05) and flow.flow.cwnd < 1.5 * before
    assert "the competitor's rate: x2" in flow.switches[-1]["why"]
    flow, dp, est = identified_adaptive(match_rate=True)
    tick(flow)
    # mirror has no vegas here: the fallback, at its own rate
    est.inbox.append(("verdict", 1, identification("vegas", "vegas", 0.95, competitor_rate_ratio=2.0)))
    tick(flow)
    assert flow.current == "cubic" and "competitor's rate" not in flow.switches[-1]["why"]


def test_the_kernels_reductions_while_probing_are_not_cut_again_by_the_cca_that_takes_over():
    """The datapath counts the kernel's window reductions since the flow began; the probe
    does not cut on them. The algorithm a commit hands the flow to answers only those after
    it took over: with the count not handed on, Reno halved at its first report, nothing
    lost (every switch from the probe after a loss, 2026-12-06 traces: "0 lost: halve")."""
    flow, dp, est = identified_adaptive()
    for reductions in (0, 2, 3):                    # the kernel recovered three times while probing
        r = report(acked=10 * MSS, delivered=10, inflight=20, rtt_us=40_000, grown=5, reductions=reductions)
        r.bw_max = 1_250_000
        flow.on_report(r)
    est.inbox.append(("verdict", 1, identification("reno", "reno", 0.95)))
    tick_with = report(acked=10 * MSS, delivered=10, inflight=20, rtt_us=40_000, grown=5, reductions=3)
    flow.on_report(tick_with)
    assert flow.current == "reno"
    handed = flow.flow.cwnd
    flow.on_report(report(acked=MSS, delivered=1, inflight=20, rtt_us=40_000, grown=5, reductions=3))
    assert flow.flow.cwnd >= handed                 # no cut, no growth counted twice
    assert flow.flow.cwnd < handed + 5 * MSS
    flow.on_report(report(acked=MSS, delivered=1, loss=1, inflight=20, rtt_us=40_000, grown=5, reductions=4))
    assert flow.flow.cwnd == pytest.approx(handed / 2, rel=0.1)     # a reduction after the switch: cut


def test_a_commit_to_cubic_goes_on_along_the_competitors_epoch_where_measured():
    flow, dp, est = identified_adaptive(match_rate=True)
    tick(flow)
    est.inbox.append(("verdict", 1, identification("cubic", "cubic", 0.95, competitor_rate_ratio=1.0,
                                                   competitor_epoch=(100.0, 0.0, 6.0))))
    tick(flow)
    assert flow.current == "cubic" and flow.flow.competitor_epoch
    assert flow.flow.w_max == 100 * MSS and "the competitor's epoch: 6.0 s old" in flow.switches[-1]["why"]
    flow, dp, est = identified_adaptive(match_rate=False)       # not matched to them: its own fresh curve
    tick(flow)
    est.inbox.append(("verdict", 1, identification("cubic", "cubic", 0.95, competitor_epoch=(100.0, 0.0, 6.0))))
    tick(flow)
    assert flow.current == "cubic" and not flow.flow.competitor_epoch


def lose_once(flow):
    r = report(acked=MSS, delivered=1, loss=1, inflight=20, rtt_us=40_000, grown=0, reductions=1)
    r.bw_max = 1_250_000
    flow.on_report(r)
    tick(flow)


def test_a_mirror_of_a_loss_based_competitor_is_held_at_its_rate_after_the_switch(monkeypatch):
    """Their windows' ratio outlives every loss (both cut by one beta in one overflow): a
    flow that took over behind them stays behind, so after the switch's own match the agent
    matches again where their rate over its own is PARITY_RATIO apart, once per hold."""
    from ccp_agent import adaptive
    clock = [1000.0]
    monkeypatch.setattr(adaptive.time, "monotonic", lambda: clock[0])
    flow, dp, est = identified_adaptive(match_rate=True)
    tick(flow)
    est.inbox.append(("verdict", 1, identification("cubic", "cubic", 0.95, competitor_rate_ratio=1.0)))
    tick(flow)
    assert flow.current == "cubic"
    lose_once(flow)                                # out of slow start: its window stands
    hold = adaptive.parity_hold_s(0.04, 0.04)
    assert hold == pytest.approx(4.0)              # settle 2 s + a window of 2 s, no queue
    window = flow.flow.cwnd
    est.inbox.append(("verdict", 1, identification("cubic", "cubic", 0.99, competitor_rate_ratio=1.5)))
    tick(flow)
    assert flow.flow.ssthresh < 1.4 * window       # within the hold after the switch: not yet
    clock[0] += hold + 0.1
    est.inbox.append(("verdict", 1, identification("cubic", "cubic", 0.99, competitor_rate_ratio=1.1)))
    tick(flow)
    assert flow.flow.ssthresh < 1.4 * window       # within PARITY_RATIO: kept
    est.inbox.append(("verdict", 1, identification("cubic", "cubic", 0.99, competitor_rate_ratio=1.5)))
    tick(flow)
    assert flow.current == "cubic" and flow.flow.ssthresh == pytest.approx(1.5 * window, rel=0.05)
    assert len(flow.switches) == 1                 # a match, not a switch
    matched = flow.flow.ssthresh
    est.inbox.append(("verdict", 1, identification("cubic", "cubic", 0.99, competitor_rate_ratio=0.5)))
    tick(flow)
    assert flow.flow.ssthresh == matched           # once per hold
    clock[0] += hold + 0.1
    est.inbox.append(("verdict", 1, identification("cubic", "cubic", 0.99, competitor_rate_ratio=0.5)))
    tick(flow)
    assert flow.flow.cwnd < 0.6 * matched          # ahead of them: down at once
    # not where the flow runs another CCA than the best hypothesis, nor BBR, nor when off
    for ratio, best, committed, hold_parity in ((1.5, "reno", "cubic", True), (1.5, "bbr", "bbr", True),
                                                (1.5, "cubic", "cubic", False)):
        flow, dp, est = identified_adaptive(match_rate=True, hold_parity=hold_parity)
        tick(flow)
        est.inbox.append(("verdict", 1, identification(committed, committed, 0.95, competitor_rate_ratio=1.0)))
        tick(flow)
        lose_once(flow)
        matches = []
        flow.match_competitor_rate = lambda *a, **k: matches.append(a)
        clock[0] += 100
        est.inbox.append(("verdict", 1, identification(committed, best, 0.95, competitor_rate_ratio=ratio)))
        tick(flow)
        assert not matches, (best, committed, hold_parity)


def test_the_probe_undecided_is_trimmed_towards_the_competitors_departures_once_per_hold(monkeypatch):
    from ccp_agent import adaptive
    clock = [1000.0]
    monkeypatch.setattr(adaptive.time, "monotonic", lambda: clock[0])
    flow, dp, est = identified_adaptive(match_rate=True)
    tick(flow)
    hold = adaptive.parity_hold_s(0.04, 0.04)
    est.inbox.append(("verdict", 1, identification(None, "cubic", 0.6, competitor_rate_ratio=1.44)))
    tick(flow)
    assert flow.flow.share_gain == 1.0             # not before a hold on the probe: their slow start drains
    clock[0] += hold + 0.1
    est.inbox.append(("verdict", 1, identification(None, "cubic", 0.6, competitor_rate_ratio=1.44)))
    tick(flow)
    assert flow.current == "probe" and flow.flow.share_gain == pytest.approx(1.2)
    est.inbox.append(("verdict", 1, identification(None, "cubic", 0.7, competitor_rate_ratio=1.44)))
    tick(flow)
    assert flow.flow.share_gain == pytest.approx(1.2)       # once per hold
    clock[0] += hold + 0.1
    est.inbox.append(("verdict", 1, identification(None, "cubic", 0.7, competitor_rate_ratio=1.44)))
    tick(flow)
    assert flow.flow.share_gain == pytest.approx(1.44)
    flow, dp, est = identified_adaptive(match_rate=True, hold_parity=False)     # off: the fair share
    tick(flow)
    clock[0] += 100
    est.inbox.append(("verdict", 1, identification(None, "cubic", 0.6, competitor_rate_ratio=1.44)))
    tick(flow)
    assert flow.flow.share_gain == 1.0


def test_a_competitor_outside_the_four_leaves_the_probe_for_the_fallback():
    flow, dp, est = identified_adaptive()
    tick(flow)
    est.inbox.append(("verdict", 1, identification("unknown", "unknown", 0.99)))
    tick(flow)
    assert flow.current == "cubic" and dp.rate == UNPACED_RATE  # the probe's pacing lifted
    assert decode(*reversed(est.published[0])).verdict == "unknown"


def test_when_the_competitors_change_after_a_commit_the_flow_goes_back_to_the_probe_and_asks_again():
    flow, dp, est = identified_adaptive()
    tick(flow)
    est.inbox.append(("verdict", 1, identification("bbr", "bbr", 0.97)))
    tick(flow)
    assert flow.current == "bbr"
    est.inbox.append(("verdict", 1, Verdict(1, FID, None, 0.0, {}, 0.0, reidentify="a new competitor")))
    tick(flow)
    assert flow.current == "probe" and dp.rate > 0               # the fair share while it asks anew
    back = decode(*reversed(est.published[1]))
    assert (back.from_cca, back.to_cca, back.verdict) == ("bbr", "probe", None)
    est.inbox.append(("verdict", 1, identification("reno", "reno", 0.98)))
    tick(flow)
    assert flow.current == "reno" and len(est.published) == 3
    # a change announced while still on the probe moves nothing
    est.inbox.append(("verdict", 1, Verdict(1, FID, None, 0.0, {}, 0.0, reidentify="the competitor left")))
    tick(flow)
    assert flow.current == "probe"
    est.inbox.append(("verdict", 1, Verdict(1, FID, None, 0.0, {}, 0.0, reidentify="a new competitor")))
    tick(flow)
    assert flow.current == "probe" and len(est.published) == 4
