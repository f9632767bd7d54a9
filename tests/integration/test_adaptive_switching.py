"""Live CCA switching on real flows (real datapath, real portus agent, real broker and
sink, dumbbell 10 Mbit/s, 20 ms, 5 BDP with a kernel competitor): a flow switched between
cubic and bbr every second keeps moving; the adaptive agent's estimator (the shipped INT
model, fed by the sink over MQTT, in the agent's child) finds the flow and votes on it.

Whether the verdicts move the flow the right way — to bbr beside kernel bbr within 15 s,
not away from cubic beside kernel cubic — is the estimator's accuracy on this path, a
statistical property (2026-11-27: 7 of 7 and 9 of 11 runs), so those two tests carry the
``accuracy`` marker and run with ``make test-accuracy``, not in CI. The network is the
issue's BBR-coexistence setting (5 BDP); both flows start together, as in the
estimator's training runs (a competitor ahead by a few hundred ms made a kernel cubic
read as bbr or reno in 4 of 11 runs). In a 2 BDP buffer, where kernel BBR and CUBIC
settle near an even split with a full queue, BBR shows itself only from its first
ProbeRTT (~10 s): the shipped model does not switch within 25 s there (docs/datapath.md).

Active identification (``--identify active``) on the same bench: the flow starts on the
probe at the INT fair share and leaves it once, on a committed hypothesis; whether it
names the competitor right is accuracy again (marked).
"""
import csv
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import estimator
from broker.launch import BrokerProcess
from ccp_agent.datapath import AgentProcess, DatapathProcess
from ccp_algs.probe import payload_fraction
from experiments.runs.services import free_port
from experiments.testbed.traffic import BackgroundFlow, iperf, series
from tests.integration.tbutil import require_ccp_free, start_testbed

MODEL = os.path.join(os.path.dirname(estimator.__file__), "models", "archive", "cca_rf.joblib")
INT_MODEL = os.path.join(os.path.dirname(estimator.__file__), "models", "archive", "cca_rf_int_t2.joblib")
CREDS = "/run/intcc/test-broker/credentials.json"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    require_ccp_free()
    state = tmp_path_factory.mktemp("adaptive")
    with BrokerProcess("mosquitto", port=free_port(), credentials_file=CREDS) as broker:
        url = f"{broker.url}?credentials={CREDS}"
        # the sink's node measures each flow's RTT (the active identification reads its
        # competitors' in theirs); both paths alike: the passive model's accuracy tests read
        # CUBIC as BBR beside a competitor of twice flow 1's RTT
        tb = start_testbed("dumbbell", "adap", exporter=url, bottleneck_mbps=10.0, bottleneck_delay_ms=20.0,
                           buffer_bdp=5.0, flow_rtt=True)
        try:
            with DatapathProcess(state_dir=str(state / "dp")) as dp:
                dp.broker_url = url
                yield tb, dp
        finally:
            tb.down()


def switch_rows(trace):
    rows = list(csv.DictReader(open(trace)))
    start = min(float(r["t_s"]) for r in rows if r["event"] == "start" and r["dst_port"] == "5201")
    return [(float(r["t_s"]) - start, r["reason"]) for r in rows if r["event"] == "switch" and "->" in r["reason"]]


def test_a_flow_switched_every_second_keeps_moving(bench, tmp_path):
    """Scripted verdicts (tests/perf/bench_switching.py), the real everything else: the
    window and pacing hand-over must never stall the flow."""
    tb, dp = bench
    trace = str(tmp_path / "trace.csv")
    agent = subprocess.Popen([sys.executable, "-c", "from tests.perf.bench_switching import scripted_agent; "
                              f"scripted_agent({trace!r}, period_s=1.0)"],
                             stdout=subprocess.DEVNULL, stderr=open(tmp_path / "agent.log", "wb"))
    try:
        dp.wait_agent(True)
        other = BackgroundFlow(tb, "s2", "r2", "cubic", 15, 1.0, port=5202)
        out = iperf(tb, "s1", "r1", "ccp", 15, 1.0, port=5201)
        other.join()
    finally:
        agent.terminate()
        agent.wait(10)
        dp.wait_agent(False)
    switches = switch_rows(trace)
    assert len(switches) >= 8, (switches, (tmp_path / "agent.log").read_text()[-2000:])
    assert {why.split(":")[0] for _, why in switches} == {"cubic -> bbr", "bbr -> cubic"}
    goodputs = [row["goodput_mbps"] for row in series(out)]
    assert min(goodputs) > 0.5, goodputs


class PacingSamples(threading.Thread):
    """Flow 1's kernel pacing rate (``ss -tin`` in s1, bit/s) every 0.25 s while it runs:
    (CLOCK_MONOTONIC ns, rate), the largest of the sockets to port 5201 (iperf3's data
    connection; its control connection is idle)."""

    def __init__(self, tb):
        super().__init__(daemon=True)
        self.tb, self.samples, self.done = tb, [], threading.Event()

    def run(self):
        units = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}
        while not self.done.wait(0.25):
            out = self.tb.run("s1", ["ss", "-tin", "dport = :5201"], timeout=5).stdout
            rates = [float(v) * units[u] for v, u in re.findall(r"pacing_rate ([\d.]+)([KMG]?)bps", out)]
            if rates:
                self.samples.append((time.monotonic_ns(), max(rates)))


def beside(bench, tmp_path, competitor: str, seconds: int, options: list, pacing: PacingSamples | None = None):
    """Flow 1 (s1 -> r1, ccp) under ``adaptive OPTIONS`` beside flow 2 (s2 -> r2) on kernel
    ``competitor``, both started together (as the estimator's training runs start them):
    the agent (stopped) and flow 1's iperf3 output; ``pacing`` samples meanwhile."""
    tb, dp = bench
    agent = AgentProcess("adaptive", options + ["--broker", dp.broker_url, "--state-dir", dp.state_dir, "-v"],
                         log_path=str(tmp_path / "agent.log")).start()
    try:
        dp.wait_agent(True)
        together = threading.Barrier(2)
        other = BackgroundFlow(tb, "s2", "r2", competitor, seconds, 1.0, port=5202, start_together=together)
        if pacing is not None:
            pacing.start()
        try:
            out = iperf(tb, "s1", "r1", "ccp", seconds, 1.0, port=5201, start_together=together)
        finally:
            if pacing is not None:
                pacing.done.set()
                pacing.join()
        other.join()
        assert not agent.failure(), agent.failure()
    finally:
        agent.stop()
        dp.wait_agent(False)
    return agent, out


def run_adaptive(bench, tmp_path, competitor: str, seconds: int = 25):
    """Flow 1 (s1 -> r1, ccp) under ``adaptive`` (initial cubic, mirror, the INT model),
    flow 2 (s2 -> r2) on kernel ``competitor``; returns the switches, flow 1's per-second
    goodputs and the agent's log."""
    trace = tmp_path / "trace.csv"
    agent, out = beside(bench, tmp_path, competitor, seconds,
                        ["--identify", "passive", "--model", INT_MODEL, "--trace", str(trace), "--algorithms",
                         "bbr,cubic,reno"])
    log = agent.log()
    assert "estimation failed" not in log, log[-2000:]
    assert log.count(": verdict ") >= 15, log[-3000:]       # one per 0.5 s after 5 s of warm-up
    return switch_rows(trace), [row["goodput_mbps"] for row in series(out)], log


def test_the_int_estimator_in_the_agent_votes_on_the_live_flow(bench, tmp_path):
    """The mechanism, whatever the verdicts say: telemetry reaches the child's estimator
    (an INT model makes no estimate without it), a verdict per interval after the
    warm-up, with the competitor's rate from the sink's hop records (what a switch
    matches), every switch in the trace made from a verdict, and the flow never stalls."""
    switches, goodputs, log = run_adaptive(bench, tmp_path, "bbr", seconds=20)
    rates = [line.rsplit(" x", 1)[1] for line in log.splitlines() if ": verdict " in line]
    assert sum(r != "?" for r in rates) >= 0.8 * len(rates), rates
    assert all("verdict" in why and "the competitor's rate" in why for _, why in switches), switches
    assert min(goodputs) > 0, goodputs


@pytest.mark.accuracy
def test_beside_kernel_bbr_the_flow_moves_to_bbr_within_15_s(bench, tmp_path):
    switches, goodputs, log = run_adaptive(bench, tmp_path, "bbr")
    assert switches, f"no switch; the verdicts: {verdicts(log)}"
    t_s, why = switches[0]
    assert why.startswith("cubic -> bbr") and t_s <= 15.0, (switches, verdicts(log))
    assert min(goodputs) > 0, goodputs


@pytest.mark.accuracy
def test_beside_kernel_cubic_the_flow_stays_on_cubic(bench, tmp_path):
    switches, goodputs, log = run_adaptive(bench, tmp_path, "cubic")
    assert not switches, (switches, verdicts(log))
    assert min(goodputs) > 0, goodputs


def verdicts(log: str) -> list[str]:
    return [line.split(": verdict ", 1)[1].split(" ")[0] for line in log.splitlines() if ": verdict " in line]


def run_identified(bench, tmp_path, competitor: str, seconds: int = 20, pacing_out: list | None = None):
    """Flow 1 under ``adaptive --identify active`` (the probe, then one switch), flow 2 on
    kernel ``competitor``: the identify rows of the trace, the switches, flow 1's goodputs,
    the reports the daemon served on request meanwhile."""
    trace = tmp_path / "trace.csv"
    before = bench[1].stats()["daemon"]["report_requests"]
    pacing = PacingSamples(bench[0])
    _, out = beside(bench, tmp_path, competitor, seconds,
                    ["--identify", "active", "--trace", str(trace), "--algorithms", "bbr,cubic,reno,vegas"],
                    pacing=pacing)
    served = bench[1].stats()["daemon"]["report_requests"] - before
    rows = list(csv.DictReader(open(trace)))
    identify = [r["reason"] for r in rows if r["event"] == "verdict" and r["reason"].startswith("identify:")]
    paced = [r["reason"] for r in rows if r["reason"].startswith("probe: rate x")]
    if pacing_out is not None:      # each switch's CLOCK_MONOTONIC ns and what it switched to; the pacing samples
        pacing_out.extend(([(int(r["mono_ns"]), r["reason"].split(" -> ", 1)[1].split(":")[0]) for r in rows
                            if r["event"] == "switch" and " -> " in r["reason"]], pacing.samples))
    return identify, paced, switch_rows(trace), [row["goodput_mbps"] for row in series(out)], served


def test_active_identification_probes_at_the_fair_share_then_switches_once(bench, tmp_path):
    """The mechanism, whatever it names: the flow starts on the probe, paced at the fair
    share the bottleneck's stamped port rate gives (10 Mbit/s over 2 flows), the
    identification reads the sink's hop records and its stages' measurements reach the
    trace, with the competitor's base RTT as the sink's node measured it, at most one switch
    leaves the probe, on a committed hypothesis, and the flow never stalls."""
    pacing = []
    identify, paced, switches, goodputs, served = run_identified(bench, tmp_path, "cubic", pacing_out=pacing)
    # the competitor's path, as flow 1's: 20 ms at the bottleneck and two access links of 1 ms
    # each way (its own measure, not flow 1's stand-in: that is never traced)
    path_ms = 2 * (20 + 2 * 1)
    read = [float(m.group(1)) for r in identify for m in [re.search(r"competitors' base RTT ([\d.]+) ms", r)] if m]
    assert read and path_ms <= read[-1] <= 1.1 * path_ms, (read[-3:], path_ms)
    # 10 Mbit/s over 2 flows, of which the payload's share (probe.payload_fraction: two INT hops)
    share_mbps = float(re.search(r"fair share ([\d.]+) Mbit/s", paced[-1]).group(1)) if paced else None
    assert share_mbps == pytest.approx(5 * payload_fraction(1428, 2), rel=0.01), paced[-3:]
    # the probe asks for a report every eighth of its pulse period (ccp_agent/cadence.py): at
    # least half of those over its phase, far more than the identification's own requests
    # (one per verdict step, at most 4 a second) would make
    period_s = int(re.search(r"period (\d+) ms", paced[-1]).group(1)) / 1e3
    probe_s = switches[0][0] if switches else 20
    assert 0.5 * 8 / period_s > 4
    assert served >= 0.5 * probe_s * 8 / period_s, (served, probe_s, period_s)
    assert any("spare=" in r and "elasticity=" in r for r in identify), identify[:5]
    # each switch leaves the probe on a commit, or (a commit whose switch made the share
    # clearly worse) goes back to it: never from one CCA to another
    for i, (_, why) in enumerate(switches):
        if i % 2 == 0:
            assert why.startswith("probe -> ") and "identified" in why, switches
            # onto the competitor's own CCA from its rate at the bottleneck (--match-rate, on)
            named = why.split("identified ", 1)[1].split(" ", 1)[0]
            if why.startswith(f"probe -> {named}:"):
                assert "the competitor's rate: x" in why, switches
        else:
            assert "-> probe: re-identify: the switch made it worse" in why, switches
    assert len(switches) <= 3, switches
    assert min(goodputs) > 0, goodputs
    # a window CCA that takes over does not pace: the probe's rate is lifted (a Rate of 0 never
    # reached the datapath, and CUBIC went on at the probe's last fair share for good)
    switched, samples = pacing
    assert len(samples) > 20, samples
    for i, (at_ns, to) in enumerate(switched):
        until_ns = switched[i + 1][0] if i + 1 < len(switched) else float("inf")
        after = [rate for t, rate in samples if at_ns + 0.5e9 <= t < until_ns]
        if to in ("cubic", "reno", "vegas") and after:
            # (the kernel's own pacing for an RTO's slow start, a sample or two, as its CCAs)
            assert np.median(after) > 1e9, (to, sorted(after)[:10])
        if to == "probe":
            assert max(after, default=0) < 20e6, after[:5]
    first_ns = switched[0][0] if switched else float("inf")
    assert max(rate for t, rate in samples if t < first_ns) < 20e6     # the probe paces (at 5 Mbit/s and its pulses)


@pytest.mark.accuracy
@pytest.mark.parametrize("competitor", ["cubic", "bbr"])
def test_active_identification_names_a_kernel_competitor(bench, tmp_path, competitor):
    identify, _, switches, goodputs, _ = run_identified(bench, tmp_path, competitor, seconds=30)
    assert switches and switches[0][1].startswith(f"probe -> {competitor}"), (switches, identify[-3:])


def test_a_competitor_that_leaves_after_the_commit_sends_the_flow_back_to_the_probe(bench, tmp_path):
    """Re-identification, the mechanism: a low threshold commits early (whatever it names),
    the competitor stops at 12 s, and once its packets have been gone for the change's
    window the flow is back on the probe (paced at the fair share of one: the port), the
    switch announced with no verdict; the flow never stalls."""
    tb, dp = bench
    trace = tmp_path / "trace.csv"
    agent = AgentProcess("adaptive", ["--identify", "active", "--identify-threshold", "0.51", "--trace", str(trace),
                                      "--algorithms", "bbr,cubic,reno,vegas", "--broker", dp.broker_url,
                                      "--state-dir", dp.state_dir, "-v"],
                         log_path=str(tmp_path / "agent.log")).start()
    try:
        dp.wait_agent(True)
        together = threading.Barrier(2)
        other = BackgroundFlow(tb, "s2", "r2", "reno", 12, 1.0, port=5202, start_together=together)
        out = iperf(tb, "s1", "r1", "ccp", 24, 1.0, port=5201, start_together=together)
        other.join()
        assert not agent.failure(), agent.failure()
    finally:
        agent.stop()
        dp.wait_agent(False)
    switches = switch_rows(trace)
    assert len(switches) >= 2, (switches, agent.log()[-2000:])
    # (a commit whose switch made the share clearly worse went back to the probe before:
    # switch_share.py; the commit after it is the one watched)
    left = [(t, why) for t, why in switches if why.endswith("-> probe: re-identify: the competitor left")]
    assert left and 12 < left[0][0] < 18, switches
    # named while the competitor counted at the bottleneck: before 12 s, or in the second
    # its port still counts it (flows of the last second) with its last packets queued
    named = [(t, why) for t, why in switches if t < left[0][0] and why.startswith("probe -> ")]
    assert named and "identified" in named[-1][1] and named[-1][0] < 13.5, switches
    goodputs = [row["goodput_mbps"] for row in series(out)]
    assert min(goodputs) > 0, goodputs
    # alone on the probe: the port's 10 Mbit/s less headers (8.6), a queue the competitor left drained
    assert np.mean(goodputs[-4:]) > 7.5, goodputs


def test_a_udp_competitor_is_read_as_not_tcp_and_no_control_connection_is_named(bench, tmp_path):
    """No CCA to name: beside UDP at 1.5 Mbit/s (no TCP competitor; iperf3's own control
    connection is no competitor either), the identification's stretches measure the port's
    use and not_tcp only, and any switch is to the fallback on "unknown"; the flow never
    stalls. (A commit needs the port-use stage to see the port partly idle: on this
    dumbbell it reads the port busy, its rate taken from windows whose queue never emptied;
    docs/estimator.md.)"""
    tb, dp = bench
    trace = tmp_path / "trace.csv"
    agent = AgentProcess("adaptive", ["--identify", "active", "--trace", str(trace), "--algorithms",
                                      "bbr,cubic,reno,vegas", "--broker", dp.broker_url, "--state-dir", dp.state_dir],
                         log_path=str(tmp_path / "agent.log")).start()
    try:
        dp.wait_agent(True)
        udp = BackgroundFlow(tb, "s2", "r2", "udp", 12, 1.0, port=5300, udp_mbps=1.5)
        out = iperf(tb, "s1", "r1", "ccp", 12, 1.0, port=5201)
        got = udp.join()
        assert not agent.failure(), agent.failure()
    finally:
        agent.stop()
        dp.wait_agent(False)
    rows = list(csv.DictReader(open(trace)))
    identify = [r["reason"] for r in rows if r["event"] == "verdict" and r["reason"].startswith("identify:")]
    assert any("not_tcp=1.0" in r for r in identify), identify[:5]
    assert not any(stage in r for r in identify for stage in ("elasticity=", "queue_level=", "loss_cut=")), identify
    assert all(why.startswith("probe -> cubic: identified unknown") for _, why in switch_rows(trace))
    goodputs = [row["goodput_mbps"] for row in series(out)]
    assert min(goodputs) > 0, goodputs
    assert got["received_mbps"] > 1.3, got            # the UDP flow kept its rate
