"""The CCP datapath end to end: the Rust daemon (BPF struct_ops 'ccp' + libccp),
a real pyportus agent (`intcc alg run ...`), kernel TCP flows (iperf3 -C ccp)
across the wireless testbed (two Python INT nodes, 10 ms one-way delay)."""
import csv
import os
import re
import signal
import statistics
import subprocess
import time

import pytest

from ccp_agent.datapath import AgentProcess, DatapathProcess, ReportRequester, ccp_registered
from experiments.testbed.linkctl import set_loss
from experiments.testbed.traffic import tcp_counters
from int_node import ioam
from tests.integration.tbutil import (SocketSampler, ccp_flow_with_a_blackout, fresh_datapath_stats, iperf3,
                                     ping_rtts_ms, require_ccp_free, start_testbed)

DELAY_MS = 10.0
INT_BYTES = ioam.Inserter(2).size     # 2 hops: 160 bytes


def set_rate(tb, mbps: float):
    """The wireless hop's rate, both directions (LinkShaper is writable at run time)."""
    tb.write("ap1", "shape1", "rate", f"{mbps}Mbps")
    tb.write("ap2", "shape0", "rate", f"{mbps}Mbps")


@pytest.fixture(scope="module")
def dp(tmp_path_factory):
    require_ccp_free()
    d = DatapathProcess(state_dir=str(tmp_path_factory.mktemp("dp")))
    d.start()
    yield d
    rc = d.stop()
    assert rc == 0, open(d.log_path).read()[-2000:]
    assert not ccp_registered(), "SIGTERM must unregister 'ccp'"
    assert not os.path.exists("/tmp/ccp/intcc-datapath")
    assert not os.path.exists("/tmp/ccp/intcc-datapath.agent")


@pytest.fixture(scope="module")
def tb(dp):
    t = start_testbed("wireless", "itdp", rate_mbps=100.0, delay_ms=DELAY_MS, buffer_pkts=100)
    yield t
    t.down()


@pytest.fixture
def agent_factory(dp, tmp_path):
    agents = []

    def make(name, *options):
        a = AgentProcess(name, list(options), log_path=str(tmp_path / f"agent-{name}-{len(agents)}.log"))
        agents.append(a)
        a.start()
        dp.wait_agent(True)
        return a

    yield make
    # An agent that raised (in new_flow, on_report) leaves its flows to the datapath's
    # fallback, which also moves data: its log and exit status tell.
    failures = [f for f in (a.failure() for a in agents) if f]
    for a in agents:
        a.stop()
    dp.wait_agent(False)
    assert not failures, failures[0]


def _ccp_flow(tb, port: int, seconds: float):
    """A running sta1 -> sta2 iperf3 flow with congestion control ccp: (server, client)."""
    srv = tb.popen("sta2", ["iperf3", "-s", "-1", "-J", "-p", str(port)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    tb.wait_listening("sta2", port)
    cli = tb.popen("sta1", ["iperf3", "-6", "-c", tb.addr("sta2"), "-p", str(port), "-t", str(seconds), "-J",
                            "-C", "ccp", "--get-server-output"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return srv, cli


def goodput_mbps(out):
    return out["end"]["sum_received"]["bits_per_second"] / 1e6


def link_goodput_mbps(out, rate_mbps: float) -> float:
    """The goodput a link of ``rate_mbps`` carries: MSS payload bytes per frame of MSS + 86
    (Ethernet, IPv6, TCP with timestamps) + the INT headers."""
    mss = out["start"]["tcp_mss_default"]
    return rate_mbps * mss / (mss + 86 + INT_BYTES)


def goodput_at_least(floor_mbps, run, attempts: int = 2):
    """``run()``'s iperf3 result where its goodput passed the floor (Mbit/s, or a function
    of the result giving it), else a failure naming every attempt's goodput per second.
    A second attempt because the 10 Mbit/s hop runs through two Python nodes sharing the
    host's two CPUs: in 2 module runs of 5 here a flow met a slow spell (vegas, delay-based,
    reads its jitter as queueing: 4.3 and 6.3 Mbit/s where the runs around gave 8.2-8.9 and
    8.7 alone; reno 6.8 of its floor 7.6 in the same run): an algorithm that cannot fill the
    link fails both attempts."""
    seen = []
    for _ in range(attempts):
        out = run()
        floor = floor_mbps(out) if callable(floor_mbps) else floor_mbps
        if goodput_mbps(out) > floor:
            return out
        seen.append((round(goodput_mbps(out), 2), [round(iv["sum"]["bits_per_second"] / 1e6, 1)
                                                   for iv in out["intervals"]]))
    pytest.fail(f"goodput (Mbit/s, then per second) under {floor:.2f} in every attempt: {seen}")


def test_const_cwnd_gives_cwnd_over_rtt(tb, dp, agent_factory):
    """Goodput = cwnd / RTT, with the flow's own mean RTT: on a shared 2-core machine the
    Python node's queueing can add milliseconds over an idle ping."""
    set_rate(tb, 100)
    # the path's floor: the smallest ping (a busy host only adds to a ping; with the median,
    # a clean-clone run saw an idle RTT of 23.6 ms above the flow's mean 21.3 ms)
    idle_rtt_s = min(ping_rtts_ms(tb, "sta1", tb.addr("sta2"), count=20)) / 1e3
    window_bytes = {}
    for pkts in (10, 20):
        agent = agent_factory("const", "--cwnd-pkts", str(pkts))
        out = iperf3(tb, "sta1", "sta2", seconds=5, extra=["-C", "ccp", "-O", "1"])
        mss = out["start"]["tcp_mss_default"]
        rtt_s = out["end"]["streams"][0]["sender"]["mean_rtt"] / 1e6
        got = goodput_mbps(out)
        expected = pkts * mss * 8 / rtt_s / 1e6
        agent.stop()
        dp.wait_agent(False)
        assert rtt_s >= 0.9 * idle_rtt_s, (rtt_s, idle_rtt_s)
        assert abs(got - expected) <= 0.15 * expected, (pkts, got, expected, rtt_s, idle_rtt_s, mss)
        window_bytes[pkts] = got * 1e6 / 8 * rtt_s
    assert 1.7 <= window_bytes[20] / window_bytes[10] <= 2.3, window_bytes


def _rto_ms(tb, port: int):
    """The kernel's retransmission timeout (ms) of sta1's data connection to ``port`` (the
    one that has sent the most; iperf3's control connection idles beside it), from ss."""
    out = tb.run("sta1", ["ss", "-tin", "dport", f"= :{port}"]).stdout
    found = [(int(m.group(2)), float(m.group(1))) for m in
             re.finditer(r"\brto:([0-9.]+)\b.*?\bbytes_sent:(\d+)", out, re.S)]
    assert found, out
    return max(found)[1]


def test_an_agents_minimum_rto_reaches_the_kernel_and_one_out_of_range_is_counted(tb, dp, agent_factory):
    """Register rto_min goes to the socket (bpf_setsockopt TCP_BPF_RTO_MIN): the kernel's
    RTO, the smoothed RTT plus at least it, falls from over 200 ms to the RTT plus 30 ms;
    1 ms (under 2 jiffies) the kernel refuses, counted, and the RTO stays the kernel's."""
    set_rate(tb, 100)
    rtos, stats = {}, {}
    for rto_min_ms, port in ((30, 5231), (1, 5232)):
        agent = agent_factory("const", "--cwnd-pkts", "10", "--rto-min-ms", str(rto_min_ms))
        before = fresh_datapath_stats(dp)["kernel"]
        srv, cli = _ccp_flow(tb, port, 3)
        try:
            time.sleep(2)
            rtos[rto_min_ms] = _rto_ms(tb, port)
            cli.communicate(timeout=30)
        finally:
            for p in (srv, cli):
                if p.poll() is None:
                    p.kill()
                p.wait()
        agent.stop()
        dp.wait_agent(False)
        after = fresh_datapath_stats(dp)["kernel"]
        stats[rto_min_ms] = {k: after[k] - before[k] for k in ("rto_min_set", "rto_min_refused")}
    rtt_ms = 2 * DELAY_MS
    assert rtt_ms + 30 <= rtos[30] <= rtt_ms + 30 + 40, (rtos, stats)
    assert stats[30]["rto_min_set"] >= 1 and stats[30]["rto_min_refused"] == 0, stats
    assert rtos[1] >= 200, rtos
    assert stats[1]["rto_min_set"] == 0 and stats[1]["rto_min_refused"] >= 1, stats


def test_a_requested_report_comes_at_the_next_ack_not_the_programs_next(tb, dp, agent_factory, tmp_path):
    """pyportus runs the agent only in its callbacks: news for it (the estimator's verdict)
    waits for the flow's next report, once per RTT (~25 ms here). A report requested of the
    daemon (ReportRequester) comes at the flow's next ACK instead, through the kernel's fold."""
    # not 100: there the testbed's Python nodes kept both CPUs busy, the agent waited for
    # one (RTT 60-90 ms, requested reports 3-275 ms late; failed 3 runs in 5, either
    # --report-coalesce-us): the test measured the host, not the request
    set_rate(tb, 20)
    trace = tmp_path / "cubic.csv"
    agent_factory("cubic", "--trace", str(trace))
    port = 5213
    srv, cli = _ccp_flow(tb, port, 6)
    try:
        deadline = time.monotonic() + 4
        sid = None
        while sid is None and time.monotonic() < deadline:
            time.sleep(0.2)
            sid = next((int(r["sid"]) for r in csv.DictReader(open(trace))
                        if r["event"] == "start" and r["dst_port"] == str(port)), None)
        assert sid is not None, "the agent never took the flow over"
        time.sleep(1)
        before = fresh_datapath_stats(dp)
        requester, sent_ns = ReportRequester(), []
        for _ in range(10):
            sent_ns.append(time.monotonic_ns())
            assert requester.request(sid)
            time.sleep(0.2)
        assert requester.request(99_999_999)          # no such flow: counted, nothing else
        # the daemon may write its stats between the datagram's arrival and its read (CI:
        # the last request missing from the next write): wait for a write that has all 11
        deadline = time.monotonic() + 5
        while True:
            after = fresh_datapath_stats(dp)
            handled = sum(after["daemon"][k] - before["daemon"][k] for k in ("report_requests", "report_requests_unserved"))
            if handled >= 11 or time.monotonic() > deadline:
                break
    finally:
        cli.communicate(timeout=30)
        srv.wait(timeout=10)
    daemon = {k: after["daemon"][k] - before["daemon"][k] for k in ("report_requests", "report_requests_unserved")}
    assert daemon == {"report_requests": 10, "report_requests_unserved": 1}, daemon
    assert after["kernel"]["requested_reports"] - before["kernel"]["requested_reports"] == 10
    reports = sorted(int(r["mono_ns"]) for r in csv.DictReader(open(trace))
                     if r["sid"] == str(sid) and r["event"] in ("report", "loss") and r["mono_ns"])
    rtts_ms = [float(r["rtt_us"]) / 1e3 for r in csv.DictReader(open(trace)) if r["sid"] == str(sid) and r["rtt_us"]]
    delays_ms = [(next(t for t in reports if t > s) - s) / 1e6 for s in sent_ns]
    # unrequested, the next report is ~RTT/2 away on average; requested, an ACK away
    assert statistics.median(delays_ms) < statistics.median(rtts_ms) / 4, (delays_ms, statistics.median(rtts_ms))


def set_distance(tb, metres: float):
    """The wireless hop's AP distance, both directions: at 1 m the channel's own
    packet error rate is nil (at 10 m it drops a packet now and then)."""
    tb.write("ap1", "wl1", "distance_m", str(metres))
    tb.write("ap2", "wl0", "distance_m", str(metres))


def decision_rows(trace, out) -> list[dict]:
    """The agent's decisions (reports, losses, timeouts, recoveries) for the data connection
    of an iperf3 result (its control connection has few reports)."""
    port = str(out["start"]["connected"][0]["remote_port"])
    rows = list(csv.DictReader(open(trace)))
    sids = {r["sid"] for r in rows if r["event"] == "start" and r["dst_port"] == port}
    return [r for r in rows if r["event"] in ("report", "loss", "timeout", "recovery") and r["sid"] in sids]


def test_reno_saws_and_fills_a_10_mbit_link(tb, dp, agent_factory, tmp_path):
    set_rate(tb, 10)
    set_distance(tb, 1)     # every cut from the queue: a channel error halved Reno mid-climb (flaked)
    trace = tmp_path / "reno.csv"
    agent_factory("reno", "--trace", str(trace))
    ports = iter(range(5201, 5300, 30))
    try:
        out = goodput_at_least(lambda out: 0.9 * link_goodput_mbps(out, 10),
                               lambda: iperf3(tb, "sta1", "sta2", seconds=18, port=next(ports),
                                              extra=["-C", "ccp", "-O", "2"]))
    finally:
        set_rate(tb, 100)
        set_distance(tb, 10)
    rows = decision_rows(trace, out)
    sender = max({r["sid"] for r in rows}, key=lambda s: sum(1 for r in rows if r["sid"] == s))
    rows = [r for r in rows if r["sid"] == sender]
    # A sawtooth: loss episodes (halvings with no growth between them) separated
    # by additive increase; each halving cuts cwnd to about half.
    episodes, grew = [], True
    for i, r in enumerate(rows):
        if r["event"] == "loss" and r["reason"].endswith("halve"):
            before, after = int(r["cwnd_before_bytes"]), int(r["cwnd_bytes"])   # the datapath grew it since
            assert after <= 0.55 * before, (before, after)
            if grew:
                episodes.append(i)
            grew = False
        elif r["reason"] == "congestion avoidance" and int(r["cwnd_bytes"]) > int(rows[i - 1]["cwnd_bytes"]):
            grew = True
    # the first episode ends slow start; at least two more come from congestion avoidance
    assert len(episodes) >= 3, f"no sawtooth: {len(episodes)} loss episodes in {len(rows)} reports"
    for a, b in zip(episodes[1:], episodes[2:]):
        seg = [int(r["cwnd_bytes"]) for r in rows[a:b]]
        assert max(seg) >= 1.3 * seg[0], f"cwnd did not climb between cuts: {seg[0]} -> {max(seg)}"


def _received_mbps(out):
    """Per-second goodput at the receiver: the sender's intervals count application
    writes, which stop for seconds while a send buffer filled in a fast phase drains."""
    return [iv["sum"]["bits_per_second"] / 1e6 for iv in out["server_output_json"]["intervals"]]


def test_agent_killed_mid_flow_falls_back_then_retakes_the_flow(tb, dp, agent_factory, tmp_path):
    set_rate(tb, 100)
    first = agent_factory("const", "--cwnd-pkts", "10")
    srv, cli = _ccp_flow(tb, 5202, 12)
    try:
        time.sleep(3)
        first.kill()                              # SIGKILL: no goodbye
        dp.wait_agent(False)
        time.sleep(3)
        taken_before = dp.stats()["daemon"]["creates"]
        agent_factory("const", "--cwnd-pkts", "10")
        time.sleep(4)
        out, err = cli.communicate(timeout=30)
    finally:
        srv.kill()
        srv.wait()
    import json
    ivs = _received_mbps(json.loads(out))[:12]
    assert min(ivs) > 0.5, f"the flow stalled: {ivs}"
    controlled = statistics.median(ivs[1:3])      # 10 packets per 20 ms: ~5.7 Mbit/s
    fallback = max(ivs[4:6])                      # Reno fallback grows past it
    retaken = statistics.median(ivs[-3:])
    assert fallback > 2 * controlled, ivs
    assert retaken < 1.5 * controlled, f"the restarted agent did not take the running flow over: {ivs}"
    assert dp.stats()["daemon"]["creates"] > taken_before    # re-announced in the new epoch


def test_fifty_concurrent_flows_none_stalls(tb, dp, agent_factory):
    set_rate(tb, 100)
    agent_factory("reno")
    with SocketSampler(tb, "sta1", 5203) as sockets:
        out = iperf3(tb, "sta1", "sta2", seconds=8, extra=["-C", "ccp", "-P", "50"], port=5203)
    stats = dp.stats()
    assert stats["kernel"]["events_lost"] == 0
    assert stats["daemon"]["creates"] >= 50
    port_of = {c["socket"]: c["local_port"] for c in out["start"]["connected"]}
    streams = {port_of[s["sender"]["socket"]]: s["receiver"]["bytes"] for s in out["end"]["streams"]}
    assert len(streams) == 50 and set(streams) <= set(sockets.rtos), (streams, sockets.rtos)
    fair = sum(streams.values()) / 50
    # A flow far below its share must have been held by the kernel's retransmission timer
    # (a burst of drops at the CPU-bound node, with RTTs of a second behind it: an RTO of
    # seconds), not by a window the datapath left it, which still brings an ACK each RTT
    starved = {port: got for port, got in streams.items() if got < 0.1 * fair}
    no_timeout = {port: got for port, got in starved.items() if sockets.rtos[port] < 1}
    assert not no_timeout, (no_timeout, {p: (sockets.rtos[p], sockets.longest_silence_s[p]) for p in starved}, fair)
    # 50 slow starts into a 100-packet buffer lose heavily at first, and the CPU-bound node
    # forwards what the host lets it (4.3 and 17.6 Mbit/s seen in busy suites): the floor on
    # the sum is relative to the kernel's own reno with 50 flows, measured right after
    native = iperf3(tb, "sta1", "sta2", seconds=8, extra=["-C", "reno", "-P", "50"], port=5203)
    assert goodput_mbps(out) > 0.5 * goodput_mbps(native), (goodput_mbps(out), goodput_mbps(native))


def test_vegas_agent_controls_a_flow(tb, dp, agent_factory):
    set_rate(tb, 10)
    agent_factory("vegas")
    # its linear ramp to the link's window takes ~1-2 s here (6.97 Mbit/s once with -O 1 in a busy suite)
    # delay-based: it keeps a few packets queued, so it fills the 10 Mbit/s link without losses
    try:
        goodput_at_least(7, lambda: iperf3(tb, "sta1", "sta2", seconds=7, extra=["-C", "ccp", "-O", "2"],
                                           port=5204))
    finally:
        set_rate(tb, 100)
    assert dp.stats()["daemon"]["cmds_written"] > 0


def test_bbr_fills_the_link_and_the_kernel_measures_its_ack_aggregation(tb, dp, agent_factory, tmp_path):
    """ccp bbr paces near the link's rate; the BPF program measures ACK aggregation per
    ACK against the bandwidth the agent sends (register bw) and the agent widens its
    target by it (the trace's "aggregation N"): N stays 0 unless the register reached
    the kernel and the signal came back."""
    import re
    set_rate(tb, 10)
    trace = tmp_path / "bbr.csv"
    agent_factory("bbr", "--trace", str(trace))
    try:
        goodput_at_least(7, lambda: iperf3(tb, "sta1", "sta2", seconds=6, extra=["-C", "ccp", "-O", "2"],
                                           port=5206))
    finally:
        set_rate(tb, 100)
    reasons = [r["reason"] for r in csv.DictReader(open(trace)) if r["event"] == "report"]
    aggregation = [int(m[1]) for m in (re.search(r"aggregation (\d+)", why) for why in reasons) if m]
    assert aggregation and max(aggregation) > 0, reasons[-5:]


def test_every_rto_reaches_the_agent_once(tb, dp, agent_factory, tmp_path):
    """A blackout of the wireless hop makes the sender time out; the agent hears
    of it (one report per RTO at most: while the path is dark no ACK carries
    one, so back-to-back RTOs arrive as one) and restarts from 1 MSS, unless the
    kernel found the RTO spurious and undid it on the same ACK (F-RTO, timestamps):
    then the report names the undo and the window is the one restored."""
    set_rate(tb, 10)
    trace = tmp_path / "cubic.csv"
    agent_factory("cubic", "--trace", str(trace))
    undo_keys = ("TcpExt.TCPLossUndo", "TcpExt.TCPSpuriousRTOs")
    counters = tcp_counters(tb, "sta1")
    before = counters.get("TcpExt.TCPTimeouts", 0)
    undos_before = sum(counters.get(k, 0) for k in undo_keys)
    try:
        ccp_flow_with_a_blackout(tb, 5210, seconds=7, dark_at_s=2.0, dark_s=1.2)
    finally:
        set_rate(tb, 100)
    counters = tcp_counters(tb, "sta1")
    rtos = counters.get("TcpExt.TCPTimeouts", 0) - before
    kernel_undos = sum(counters.get(k, 0) for k in undo_keys) - undos_before
    rows = list(csv.DictReader(open(trace)))
    timeouts = [r for r in rows if r["event"] == "timeout"]
    assert rtos >= 1, "a 1.2 s blackout must time out"
    assert 1 <= len(timeouts) <= rtos, (len(timeouts), rtos)
    undone = [r for r in timeouts if "undo" in r["reason"]]
    assert len(undone) <= kernel_undos, (undone, kernel_undos)
    for r in timeouts:                        # cwnd 1 MSS after the timeout, as the kernel
        assert int(r["cwnd_bytes"]) <= 1500 or r in undone, r


def traced_lossy_ccp_flow(tb, port: int, seconds: float, loss_pct: float = 2, cca: str = "ccp"
                          ) -> tuple[list[dict], int]:
    """A ccp (or ``cca``) flow over the 10 Mbit/s hop at loss_pct, its sender traced per
    ACK (kernel_trace.py), and its MSS."""
    from experiments.testbed.kernel_trace import KernelTcpTrace
    set_rate(tb, 10)
    set_loss(tb, loss_pct)
    try:
        with KernelTcpTrace(port=port) as trace:
            out = iperf3(tb, "sta1", "sta2", seconds=seconds, extra=["-C", cca], port=port)
    finally:
        set_loss(tb, 0)
        set_rate(tb, 100)
    return trace.rows, out["start"]["tcp_mss_default"]


def recovery_windows(rows: list[dict]) -> list[list[int]]:
    """Per recovery of the data connection (not iperf3's control one), the kernel's window
    on each of its ACKs."""
    from experiments.testbed.kernel_trace import data_port
    port = data_port(rows)
    windows, current = [], None
    for r in (r for r in rows if r["sport"] == port):
        if r["event"] == "tcp_cong_state_set":
            current = [] if r["ca_state"] == "recovery" else None
            if current is not None:
                windows.append(current)
        elif r["event"] == "tcp_probe" and current is not None:
            current.append(r["cwnd_pkts"])
    return windows


def fresh_kernel_stats(dp) -> dict:
    """The kernel counters from a stats.json written after now."""
    return fresh_datapath_stats(dp)["kernel"]


def test_the_kernels_response_to_a_loss_lasts_until_the_agent_answers(tb, dp, agent_factory):
    """Until the agent answers a recovery, PRR aims at the kernel's ssthresh (the agent's
    loss_beta of the window: 0.7 here, counted in cut_hold_acks). Any answer ends it, even
    the same window again (a const agent's, which the daemon must still pass on as a new
    command): held ACKs are the few before the answer, not the whole recovery (before that
    fix: every ACK of it). An answer that keeps the window cuts nothing: it applies at
    once, not paced by PRR (counted in uncut_recovery_acks)."""
    agent_factory("const", "--cwnd-pkts", "20", "--loss-beta", "0.7")
    held_before = dp.stats()["kernel"]["cut_hold_acks"]
    uncut_before = dp.stats()["kernel"]["uncut_recovery_acks"]
    rows, _ = traced_lossy_ccp_flow(tb, port=5211, seconds=5)
    held = fresh_kernel_stats(dp)["cut_hold_acks"] - held_before
    windows = recovery_windows(rows)
    recoveries, recovery_acks = len(windows), sum(map(len, windows))
    assert recoveries >= 3, recoveries
    assert 0 < held < 0.5 * recovery_acks, (held, recovery_acks, recoveries)
    uncut = dp.stats()["kernel"]["uncut_recovery_acks"] - uncut_before
    assert uncut > 0.3 * recovery_acks, (uncut, held, recovery_acks)


def test_the_kernels_cut_before_the_answer_is_the_algorithms(tb, dp, agent_factory):
    """ccp_ssthresh takes the cut from the agent's loss_beta register, not CUBIC's for
    every flow: a const agent never cuts, so no recovery ACK is held below its window
    (with CUBIC's 0.7 for all, as before, some are), and the daemon took the agent's
    registers (no contract mismatch)."""
    agent_factory("const", "--cwnd-pkts", "20")
    before = fresh_kernel_stats(dp)
    rows, _ = traced_lossy_ccp_flow(tb, port=5213, seconds=4)
    after = fresh_kernel_stats(dp)
    assert len(recovery_windows(rows)) >= 3
    assert after["controlled_acks"] > before["controlled_acks"]
    assert after["cut_hold_acks"] == before["cut_hold_acks"]
    assert dp.stats()["daemon"]["contract_mismatches"] == 0


def test_a_recovery_steps_down_to_the_agents_cut_as_kernel_prr_does(tb, dp, agent_factory):
    """ccp cubic's 0.7 cut is reached by PRR during the recovery, as kernel cubic's: the
    window ends long recoveries near 0.7-0.8 of where it began. (The daemon once handed
    libccp the kernel's PRR window as the Cwnd register, which came back as the command:
    PRR then aimed at where it already was and windows stayed flat, median 1.0.)"""
    agent_factory("cubic")
    recoveries = [w for w in recovery_windows(traced_lossy_ccp_flow(tb, port=5212, seconds=6)[0]) if w]
    # recoveries long enough for PRR to show (half a window of ACKs) from a window of 10+
    long_ones = [c[-1] / c[0] for c in recoveries if c[0] >= 10 and len(c) >= c[0] / 2]
    assert len(long_ones) >= 5, (len(long_ones), len(recoveries))
    assert statistics.median(long_ones) < 0.9, sorted(long_ones)


def test_every_recovery_the_kernel_begins_reaches_the_agent_as_a_loss(tb, dp, agent_factory, tmp_path):
    """A recovery the kernel begins reaches the agent as a loss, also one that RACK's
    reordering timer began between ACKs: the next ACK's report carries the losses marked
    since the last report, not only that ACK's (rs->losses). Before, those never reached
    the agent, and ccp cubic cut for none of them (a fifth of the recoveries at 10 % link
    loss) where kernel cubic cuts for each."""
    from experiments.testbed.kernel_trace import data_port
    trace = tmp_path / "cubic.csv"
    agent_factory("cubic", "--trace", str(trace))
    # 12 s: one suite run of 8 s saw only 7 recoveries (the flow in RTO backoff early), too few to judge
    rows, _ = traced_lossy_ccp_flow(tb, port=5214, seconds=12, loss_pct=10)
    port = data_port(rows)
    rows = [r for r in rows if r["sport"] == port]
    entries, state = [], "open"     # (time, began by a timer: no ACK just before)
    for i, r in enumerate(rows):
        if r["event"] != "tcp_cong_state_set":
            continue
        if r["ca_state"] == "recovery" and state != "recovery":
            acks_before = [x for x in rows[max(0, i - 3):i] if x["event"] == "tcp_probe"]
            by_timer = not acks_before or float(r["t_s"]) - float(acks_before[-1]["t_s"]) > 200e-6
            entries.append((float(r["t_s"]), by_timer))
        state = r["ca_state"]
    reported = sorted(int(r["mono_ns"]) / 1e9 for r in csv.DictReader(open(trace))
                      if r["event"] in ("loss", "timeout"))
    unheard = [(t, timer) for t, timer in entries if not any(t - 1e-3 <= x <= t + 0.05 for x in reported)]
    by_timer = [e for e in entries if e[1]]
    assert len(entries) >= 20 and by_timer, (len(entries), len(by_timer))
    assert len(unheard) <= 0.05 * len(entries), (unheard, len(entries), len(by_timer))


def test_slow_start_grows_the_window_on_the_ack_that_earns_it_as_the_kernels(tb, dp, agent_factory):
    """In slow start each ACK grows the window by the packets it delivers, on that ACK, as
    tcp_slow_start (the BPF program's grow_per_ack): tcp_probe fires before an ACK is
    processed, so the window it shows has grown by every packet delivered before. Grown
    by the agent (per report) the window lagged a round; grown by the daemon's run of the
    datapath program it lagged an ACK: short by the last ACK's packets at every probe."""
    from experiments.testbed.kernel_trace import data_port
    agent_factory("cubic", "--no-hystart")
    rows, mss = traced_lossy_ccp_flow(tb, port=5213, seconds=2, loss_pct=0)
    port = data_port(rows)
    probes = [r for r in rows if r["sport"] == port and r["event"] == "tcp_probe"]
    # from the second ACK: the first acks iperf3's 37-byte cookie, sent alone, and grows
    # nothing as the kernel's (tcp_is_cwnd_limited: 1 segment out of 10 in flight)
    before_cut = [r for r in probes if r["ssthresh_pkts"] > 100000][1:61]
    assert len(before_cut) >= 40, len(before_cut)
    first = before_cut[0]
    delivered = [-(-(r["snd_una"] - first["snd_una"]) // mss) for r in before_cut]   # packets so far (ceil)
    grown = [r["cwnd_pkts"] - first["cwnd_pkts"] for r in before_cut]
    on_time = sum(g == d for g, d in zip(grown, delivered))
    assert on_time >= 0.9 * len(before_cut), list(zip(delivered, grown))


def slow_start_exit(rows) -> tuple[int, str]:
    """The window at which slow start ended (the first ACK after which the window grew
    less than 25 % in two base RTTs: slow start at least doubles it, ~17 segments per RTT
    on this hop, cubic before its first loss grows it 5 % per RTT), or 0 when a loss ended
    it; and the first 0.3 s of the window as text, for a failure's message. Two RTTs, not
    one: ACKs come through the Python node in bursts, and a window that stood still for an
    RTT between two of them read as slow start's end (19 where the kernel left it at 28)."""
    from experiments.testbed.kernel_trace import data_port
    port = data_port(rows)
    ours = [r for r in rows if r["sport"] == port]
    probes = [(float(r["t_s"]), r["cwnd_pkts"], r["srtt_us"]) for r in ours if r["event"] == "tcp_probe"]
    t0 = probes[0][0]                     # (tracefs text: the times are strings)
    window_text = " ".join(f"{t - t0:.3f}:{w}" for t, w, _ in probes if t - t0 < 0.3)
    look_ahead_s = 2 * min(srtt for _, _, srtt in probes) / 1e6
    for i, (t, w, _) in enumerate(probes):
        later = next((w2 for t2, w2, _ in probes[i:] if t2 >= t + look_ahead_s), None)
        if later is None:
            break
        if w > 10 and later < 1.25 * w:        # (10: the first round, iperf3's cookie alone)
            lost = any(r["event"] == "tcp_cong_state_set" and r["ca_state"] in ("recovery", "loss")
                       and float(r["t_s"]) <= t + look_ahead_s for r in ours)
            return (0 if lost else w), window_text
    return 0, window_text


def lowest_common_exit(exits: list[int]) -> int:
    """The smallest window at which at least two of these slow starts ended (within
    15 %): the round in which the queue first shows. One early exit alone (a delay
    spike through the Python node) is not it; 0 when no two agree."""
    ends = sorted(e for e in exits if e)
    return next((e for i, e in enumerate(ends) if any(abs(o - e) <= 0.15 * e for o in ends[i + 1:])), 0)


def test_hystart_ends_slow_start_at_the_kernels_window(tb, dp, agent_factory):
    """HyStart's delay detection per ACK in the datapath (register ss_exit_rtt), as
    tcp_cubic: slow start ends in the round the queue shows, at kernel cubic's window.
    Decided only at the agent's reports it ended a round late, at twice the window.
    On this hop kernel cubic and ccp cubic alike end slow start at ~45 segments or, about
    half the time (the first samples of that round miss the queue), a round later at ~90:
    one pair of flows agrees by chance. So: up to 8 flows of each, and ccp must end at
    the kernel's lower window (seen at least twice) at least once. A round-late ccp ends at
    ~90 or ~180, never there; a correct one misses it 8 times in ~1 run of 250."""
    agent_factory("cubic")
    kernel, ccp = [], []
    for attempt in range(8):
        kernel.append(slow_start_exit(traced_lossy_ccp_flow(tb, port=5217 + 2 * attempt, seconds=1,
                                                            loss_pct=0, cca="cubic")[0]))
        ccp.append(slow_start_exit(traced_lossy_ccp_flow(tb, port=5218 + 2 * attempt, seconds=1,
                                                         loss_pct=0)[0]))
        lowest = lowest_common_exit([w for w, _ in kernel])
        # (the kernel's lower window is known once a higher one was seen too, or at the end)
        known = lowest and (any(w > 1.5 * lowest for w, _ in kernel) or attempt == 7)
        if known and any(0.75 * lowest <= w <= 1.35 * lowest for w, _ in ccp):
            return
    pytest.fail("slow start's end, (kernel, ccp) windows (0: a loss ended it): "
                f"{[(k[0], c[0]) for k, c in zip(kernel, ccp)]}; the kernel's lowest (twice): {lowest}; "
                f"last pair's windows:\nkernel {kernel[-1][1]}\nccp {ccp[-1][1]}")


def test_a_restarted_datapath_takes_back_the_flows_of_the_one_that_died(tb, dp, agent_factory):
    """kill -9 of the daemon mid-flow: the flow goes on (the dead registration's Reno
    fallback), and the restarted daemon, taking over its pinned maps, controls it again
    within a second, with socket ids that do not collide with the old ones."""
    set_rate(tb, 100)
    agent_factory("const", "--cwnd-pkts", "10")
    srv, cli = _ccp_flow(tb, 5203, 9)

    def ours():
        return [f for f in dp.flows() if 5203 in (f.get("sport"), f.get("dport"))]
    try:
        time.sleep(2)
        before = ours()
        assert before, "the flow was not controlled before the kill"
        dp.kill()                                         # SIGKILL: no goodbye, pins stay
        time.sleep(1.5)
        dp.start()
        t0 = time.monotonic()
        while not ours() and time.monotonic() - t0 < 5:
            time.sleep(0.02)
        took_s = time.monotonic() - t0
        again = ours()
        acks0 = dp.stats()["kernel"]["controlled_acks"]
        time.sleep(1.5)
        acks1 = dp.stats()["kernel"]["controlled_acks"]
        out, _ = cli.communicate(timeout=30)
    finally:
        srv.kill()
        srv.wait()
    assert again, "the restarted datapath never took the running flow back"
    assert took_s <= 1.0, f"took {took_s:.2f} s"
    assert acks1 > acks0, "no controlled ACKs after the restart"
    sids = {(f["sport"], f["dport"]): f["sid"] for f in before}
    for f in again:     # the same socket keeps its id; none of the old ids names another socket
        assert sids.get((f["sport"], f["dport"]), f["sid"]) == f["sid"], (before, again)
        assert f["sid"] not in {v for k, v in sids.items() if k != (f["sport"], f["dport"])}
    import json
    assert min(_received_mbps(json.loads(out))[:8]) > 0.5


def test_an_agent_removes_its_socket_file_however_it_ends(tmp_path):
    """portus exits from its own signal handler; the agent's socket file must not outlive it."""
    from ccp_agent.datapath import AGENT_SOCKET
    for end in ("stop", "kill"):
        a = AgentProcess("const", log_path=str(tmp_path / f"{end}.log")).start()
        assert os.path.exists(AGENT_SOCKET)
        pid = a.proc.pid
        os.kill(pid, signal.SIGTERM if end == "stop" else signal.SIGKILL)
        a.proc.wait(10)
        deadline = time.monotonic() + 2
        while os.path.exists(AGENT_SOCKET) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not os.path.exists(AGENT_SOCKET), f"{AGENT_SOCKET} left behind after {end}"
        a.stop()


def test_the_example_algorithm_grows_a_segments_per_round_in_the_kernel(tb, dp, agent_factory, tmp_path, monkeypatch):
    """docs/algorithms.md's example (tests/examples/aimd.py), named in the environment as an
    algorithm outside the package is: its congestion avoidance, a = 3 segments per window,
    grows per ACK in the kernel (the additive family); the agent only takes it in."""
    monkeypatch.setenv("INTCC_ALGORITHMS", "aimd=tests.examples.aimd:Aimd")
    set_rate(tb, 10)
    set_distance(tb, 1)
    trace = tmp_path / "aimd.csv"
    agent_factory("aimd", "--increase-pkts", "3", "--beta", "0.5", "--trace", str(trace))
    try:
        out = iperf3(tb, "sta1", "sta2", seconds=15, port=5290, extra=["-C", "ccp", "-O", "2"])
    finally:
        set_rate(tb, 100)
        set_distance(tb, 10)
    rows = decision_rows(trace, out)
    mss = int(out["start"]["tcp_mss_default"])
    steps = [(int(b["cwnd_bytes"]) - int(a["cwnd_bytes"])) / mss for a, b in zip(rows, rows[1:])
             if b["reason"] == "congestion avoidance (datapath)" and a["event"] == "report"]
    cuts = [r for r in rows if r["event"] == "loss" and "cut to 0.5" in r["reason"]]
    assert len(steps) >= 30 and len(cuts) >= 2, (len(steps), len(cuts))
    per_round = statistics.mean(steps)
    assert 2.4 <= per_round <= 3.6, f"{per_round:.2f} segments per report in congestion avoidance (a = 3)"


def test_const_with_a_rate_paces_the_flow_at_it(tb, dp, agent_factory):
    """--rate-mbps: the window (200 segments, ~115 Mbit/s over this path's RTT) above the
    link's 100 Mbit/s, the pacing rate alone sets the goodput (less the TCP/IP headers)."""
    set_rate(tb, 100)
    agent = agent_factory("const", "--cwnd-pkts", "200", "--rate-mbps", "20")
    out = iperf3(tb, "sta1", "sta2", seconds=5, extra=["-C", "ccp", "-O", "1"])
    agent.stop()
    dp.wait_agent(False)
    assert 0.85 * 20 <= goodput_mbps(out) <= 1.02 * 20, goodput_mbps(out)
