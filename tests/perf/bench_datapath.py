"""Benchmark: the CCP datapath against the kernel, on an unconstrained veth pair.

Same run, same veth, interleaved rounds: iperf3 with native kernel reno, then with 'ccp'
driven by the CCP reno agent (ccp_algs/reno.py) through the intcc daemon, the program
folded in the kernel (reports only cross, routine ones sharing the daemon's wake-ups),
then the same with the daemon's --per-ack-events (every ACK crosses, libccp folds: the
design before the kernel fold), then the fold with --report-coalesce-us 2000 (routine
reports wait for the daemon's next wake-up; wake-ups per second printed).
Prints throughput, the ratios to native reno (target >= 0.95), CPU (cores busy,
machine-wide, per Gbit/s; the daemon's, target <= 0.03 cores) and the time from
`update_field` in Python to the cwnd applied in the kernel (target p99 <= 500 us), split
at the daemon's control-map write. The latency is taken
with an agent that commands a new window at every report (`const --alternate-pkts`): reno's
datapath grows the window itself and commands one only on a loss, a handful in a run. It
needs MIN_UPDATES updates, or says it could not get them:

  agent update_field (trace mono_ns) -> daemon writes the map (applied log
  written_ns) -> the BPF program applies it on the next ACK (applied_ns).

All three clocks are CLOCK_MONOTONIC. Beside it, the floor from the same veth: a native
reno flow's wait for its next ACK from a random instant (tests/perf/ackwait.py), which any
window change, the kernel's own included, waits for. Asserts nothing about speed.

    python -m tests.perf.bench_datapath        or        make bench
"""
from __future__ import annotations

import bisect
import csv
import json
import os
import statistics
import subprocess
import tempfile

from ccp_agent.datapath import AgentProcess, DatapathProcess, ccp_registered
from experiments.reports.compare import ratio_ci

from tests.integration.tbutil import fresh_datapath_stats
from tests.perf import ackwait, answer_help
from tests.perf.veth import VethPair

VETH = VethPair("dpb", "10.98.0")
NS_A, NS_B = VETH.ns_a, VETH.ns_b
SECONDS = 6
ROUNDS = 8    # native reno alone moves +-30 % between rounds: a CI needs several
LATENCY_SECONDS = 3
MIN_UPDATES = 1000
COALESCE_US = 2000


def busy_jiffies():
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields[:8]) - idle, sum(fields[:8])


def proc_cpu_s(pid: int) -> float:
    """CPU time of all the process's threads so far, from their schedstat (ns): utime and
    stime move in jiffies, steps of 0.0017 cores over a 6 s run, as large as what a daemon
    change moves."""
    total_ns = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total_ns += int(f.read().split()[0])
        except FileNotFoundError:
            pass     # a thread that ended
    return total_ns / 1e9


def proc_wakeups(pid: int) -> int:
    """Times the process's threads went to sleep and were woken (voluntary context switches)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in open(f"/proc/{pid}/task/{task}/status"):
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass     # a thread that ended
    return total


def iperf(cca: str, pids=()) -> dict:
    srv = subprocess.Popen(["ip", "netns", "exec", NS_B, "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
    try:
        VETH.wait_listening()
        b0, t0 = busy_jiffies()
        p0 = [proc_cpu_s(p) for p in pids]
        w0 = [proc_wakeups(p) for p in pids]
        client = subprocess.run(["ip", "netns", "exec", NS_A, "iperf3", "-c", "10.98.0.2", "-C", cca,
                                 "-t", str(SECONDS), "-J"], capture_output=True, text=True, timeout=SECONDS + 30)
        b1, t1 = busy_jiffies()
        p1 = [proc_cpu_s(p) for p in pids]
        w1 = [proc_wakeups(p) for p in pids]
    finally:
        _end_server(srv)
    try:
        res = json.loads(client.stdout)
        error = res.get("error")
    except ValueError:
        error = client.stderr.strip() or f"no output (rc {client.returncode})"
    if error:
        raise RuntimeError(f"iperf3 -C {cca}: {error}")
    gbps = res["end"]["sum_received"]["bits_per_second"] / 1e9
    cores = (b1 - b0) / (t1 - t0) * os.cpu_count()
    return {"cca": cca, "gbps": gbps, "cores_busy": cores, "cores_per_gbps": cores / gbps if gbps else None,
            "retransmits": res["end"]["sum_sent"].get("retransmits"),
            "process_cores": [(b - a) / SECONDS for a, b in zip(p0, p1)],
            "process_wakeups_per_s": [(b - a) / SECONDS for a, b in zip(w0, w1)]}


def _end_server(srv: subprocess.Popen) -> None:
    """A one-off server ends with its client's test; one whose client never came is killed."""
    try:
        srv.wait(timeout=10)
    except subprocess.TimeoutExpired:
        srv.kill()
        srv.wait()


def iperf_for(seconds: float):
    """One ccp flow for ``seconds``, nothing measured (the latency phase)."""
    srv = subprocess.Popen(["ip", "netns", "exec", NS_B, "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
    try:
        VETH.wait_listening()
        subprocess.run(["ip", "netns", "exec", NS_A, "iperf3", "-c", "10.98.0.2", "-C", "ccp", "-t", str(seconds)],
                       capture_output=True, timeout=seconds + 30)
    finally:
        _end_server(srv)


def apply_latencies_us(trace_csv: str, applied_csv: str):
    """Pair each update_field with the first kernel application of that cwnd after it."""
    applied = {}
    with open(applied_csv) as f:
        for r in csv.DictReader(f):
            applied.setdefault(int(r["cwnd_bytes"]), []).append(
                (int(r["written_ns"]), int(r["applied_ns"]), int(r["ipc_ns"])))
    for v in applied.values():
        v.sort()
    total, to_map, to_ipc, map_to_applied = [], [], [], []
    with open(trace_csv) as f:
        for r in csv.DictReader(f):
            if r["event"] not in ("report", "loss", "timeout", "recovery"):
                continue
            t, cwnd = int(r["mono_ns"]), int(r["cwnd_bytes"])
            cands = applied.get(cwnd, [])
            i = bisect.bisect_left(cands, (t, 0, 0))
            if i < len(cands) and cands[i][0] - t < 1_000_000_000:
                to_map.append((cands[i][0] - t) / 1e3)
                total.append((cands[i][1] - t) / 1e3)
                to_ipc.append((cands[i][2] - t) / 1e3)
                map_to_applied.append((cands[i][1] - cands[i][0]) / 1e3)
    return total, to_map, to_ipc, map_to_applied


def best_gbps(runs):
    return max(r["gbps"] for r in runs)


def median_run(runs):
    return sorted(runs, key=lambda r: r["gbps"])[len(runs) // 2]


def loss_free_ratio(natives, ccps) -> dict:
    """ccp / native reno over the rounds of each without a retransmission (medians)."""
    clean = [[r["gbps"] for r in runs if r["retransmits"] == 0] for runs in (natives, ccps)]
    ratio = statistics.median(clean[1]) / statistics.median(clean[0]) if all(clean) else None
    return {"native_rounds": len(clean[0]), "ccp_rounds": len(clean[1]), "ratio": ratio}


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, round((len(v) - 1) * p))] if v else float("nan")


def ccp_round(tmp: str, per_ack_events: bool = False, coalesce: bool = False) -> tuple[dict, dict]:
    """One ccp run under a fresh daemon and reno agent: (iperf figures, daemon stats).
    coalesce: routine reports wait for the daemon's next wake-up (--report-coalesce-us 2000)."""
    tag = "per-ack" if per_ack_events else "fold-coalesce" if coalesce else "fold"
    with DatapathProcess(state_dir=os.path.join(tmp, f"dp-{tag}"), per_ack_events=per_ack_events,
                         report_coalesce_us=COALESCE_US if coalesce else None) as dp:
        with AgentProcess("reno", log_path=os.path.join(tmp, f"agent-{tag}.log")) as agent:
            dp.wait_agent(True)
            run = iperf("ccp", [dp.proc.pid, agent.proc.pid])
            stats = fresh_datapath_stats(dp)
        run["cca"] = ("ccp, per-ACK events" if per_ack_events else "ccp, fold, reports wait" if coalesce
                      else "ccp, kernel fold")
        run["reports_waited"] = stats["kernel"].get("reports_waited", 0)
        run["kernel_reports"] = stats["kernel"].get("kernel_reports", 0)
        return run, stats


def run_benchmark() -> dict:
    if ccp_registered():
        raise RuntimeError("'ccp' is already registered: stop the running datapath first")
    tmp = tempfile.mkdtemp(prefix="intcc-bench-dp-")
    VETH.up()
    try:
        with DatapathProcess(state_dir=tmp) as dp:
            fallback = iperf("ccp", [dp.proc.pid])    # no agent: the BPF Reno fallback alone
        natives, ccps, per_acks, waits = [], [], [], []
        for i in range(ROUNDS):    # interleaved: the machine's speed drifts between runs
            print(f"round {i + 1}/{ROUNDS}", flush=True)
            natives.append(iperf("reno"))
            run, stats = ccp_round(tmp)
            ccps.append(run)
            per_acks.append(ccp_round(tmp, per_ack_events=True)[0])
            waits.append(ccp_round(tmp, coalesce=True)[0])
        with DatapathProcess(state_dir=tmp, applied_log=os.path.join(tmp, "applied.csv")) as dp:
            with AgentProcess("const", ["--cwnd-pkts", "400", "--alternate-pkts", "401", "--trace",
                                        os.path.join(tmp, "latency-trace.csv")],
                              log_path=os.path.join(tmp, "latency-agent.log")):
                dp.wait_agent(True)
                iperf_for(LATENCY_SECONDS)
        # the floor: a native flow's wait for its next ACK, where any window change lands
        print("the next-ACK wait of native reno", flush=True)
        ack_wait = ackwait.measure(lambda: iperf("reno"))
    finally:
        VETH.down()
    total, to_map, to_ipc, map_to_applied = apply_latencies_us(os.path.join(tmp, "latency-trace.csv"),
                                               os.path.join(tmp, "applied.csv"))
    fallback["cca"] = "ccp, no agent"
    native, ccp, per_ack, wait = median_run(natives), median_run(ccps), median_run(per_acks), median_run(waits)
    return {"runs": natives + ccps + per_acks + waits, "native": native, "ccp": ccp, "per_ack": per_ack,
            "wait": wait, "paired_wait": ratio_ci([r["gbps"] for r in waits], [r["gbps"] for r in natives], paired=True),
            "fallback": fallback, "ratio": ccp["gbps"] / native["gbps"], "ratio_per_ack": per_ack["gbps"] / native["gbps"],
            # the best of the rounds: what each can do when the other processes leave it alone
            "best_ratio": best_gbps(ccps) / best_gbps(natives), "best_ratio_per_ack": best_gbps(per_acks) / best_gbps(natives),
            # rounds without a retransmission: the runs of either that met losses at the
            # receiving veth's backlog settle at a window of ~100-200 and ~20 Gbit/s, the others
            # at ~7,000 and ~32 (ss, 2026-11-28); which one a round gets is luck, on both sides
            "loss_free": loss_free_ratio(natives, ccps),
            # the round's own native run is the baseline: the speed the machine had then
            "paired": ratio_ci([r["gbps"] for r in ccps], [r["gbps"] for r in natives], paired=True),
            "paired_per_ack": ratio_ci([r["gbps"] for r in per_acks], [r["gbps"] for r in natives], paired=True),
            "daemon_cores": statistics.median(r["process_cores"][0] for r in ccps),
            "daemon_cores_per_ack": statistics.median(r["process_cores"][0] for r in per_acks),
            "daemon_cores_wait": statistics.median(r["process_cores"][0] for r in waits),
            # wake-ups per second of the daemon and the agent, median over the rounds
            "wakeups": {name: [statistics.median(r["process_wakeups_per_s"][j] for r in runs) for j in (0, 1)]
                        for name, runs in (("fold", ccps), ("wait", waits), ("per_ack", per_acks))},
            "reports_waited_share": sum(r["reports_waited"] for r in waits) / max(1, sum(r["kernel_reports"] for r in waits)),
            "update_to_applied_us": {"n": len(total), "p50": pct(total, .5), "p99": pct(total, .99),
                                     "max": max(total, default=float("nan"))},
            "update_to_map_write_us": {"p50": pct(to_map, .5), "p99": pct(to_map, .99)},
            "update_to_daemon_recv_us": {"p50": pct(to_ipc, .5), "p99": pct(to_ipc, .99)},
            "map_write_to_applied_us": {"p50": pct(map_to_applied, .5), "p99": pct(map_to_applied, .99)},
            "native_next_ack_wait_us": ack_wait,
            "daemon": stats, "dir": tmp}


def report(r: dict) -> str:
    lines = [f"{'run':40} {'Gbit/s':>8} {'cores busy':>10} {'cores/Gbit/s':>12} {'retx':>6}  daemon, agent cores"]
    rows = [("fallback", r["fallback"])] + [(f"round {i % ROUNDS + 1}", x) for i, x in enumerate(r["runs"])]
    rows += [("median", r["native"]), ("median", r["ccp"]), ("median", r["per_ack"]), ("median", r["wait"])]
    for k, x in rows:
        procs = ", ".join(f"{c:.2f}" for c in x["process_cores"])
        lines.append(f"{k + ' (' + x['cca'] + ')':40} {x['gbps']:>8.2f} {x['cores_busy']:>10.2f} "
                     f"{x['cores_per_gbps']:>12.3f} {x['retransmits']:>6}  {procs}")
    u, m = r["update_to_applied_us"], r["update_to_map_write_us"]
    k = r["daemon"]["kernel"]
    (pm, pl, ph), (am, al, ah) = r["paired"], r["paired_per_ack"]
    lines += [f"throughput ratio ccp / native reno (means of {ROUNDS} rounds, paired by round, 95 % CI): "
              f"kernel fold {pm:.2f} ({pl:.2f}-{ph:.2f}) (target >= 0.95), per-ACK events {am:.2f} ({al:.2f}-{ah:.2f})",
              f"throughput ratio ccp / native reno (medians of {ROUNDS}): kernel fold {r['ratio']:.2f}, "
              f"per-ACK events {r['ratio_per_ack']:.2f}",
              f"throughput ratio ccp / native reno (best of {ROUNDS}): kernel fold {r['best_ratio']:.2f}, "
              f"per-ACK events {r['best_ratio_per_ack']:.2f}",
              f"throughput ratio ccp / native reno (medians of the rounds without a retransmission, "
              f"{r['loss_free']['ccp_rounds']} and {r['loss_free']['native_rounds']} of {ROUNDS}): kernel fold "
              + (f"{r['loss_free']['ratio']:.2f}" if r["loss_free"]["ratio"] is not None else "none to compare"),
              f"daemon cores (median): kernel fold {r['daemon_cores']:.3f} (target <= 0.03), "
              f"per-ACK events {r['daemon_cores_per_ack']:.3f}, fold with reports waiting {r['daemon_cores_wait']:.3f}",
              "wake-ups per second (median), daemon / agent: " + ", ".join(
                  f"{label} {r['wakeups'][name][0]:.0f} / {r['wakeups'][name][1]:.0f}"
                  for name, label in (("fold", "kernel fold"), ("wait", "fold with reports waiting"),
                                      ("per_ack", "per-ACK events")))
              + f"; {100 * r['reports_waited_share']:.0f} % of its reports waited for a wake-up",
              f"throughput ratio fold with reports waiting (--report-coalesce-us {COALESCE_US}) / native reno "
              f"(paired, 95 % CI): {r['paired_wait'][0]:.2f} ({r['paired_wait'][1]:.2f}-{r['paired_wait'][2]:.2f})"]
    if u["n"] < MIN_UPDATES:
        lines.append(f"update_field -> cwnd applied in kernel: NOT MEASURED, {u['n']} updates paired in "
                     f"{LATENCY_SECONDS} s (needs {MIN_UPDATES}); the figures below are not a measurement")
    lines += [f"update_field -> cwnd applied in kernel (const agent, a new window every report): p50 "
              f"{u['p50']:.0f} us, p99 {u['p99']:.0f} us, max {u['max']:.0f} us over {u['n']} updates  "
              f"(target p99 <= 500 us)",
              f"  update_field -> daemon receives it: p50 {r['update_to_daemon_recv_us']['p50']:.0f} us, "
              f"p99 {r['update_to_daemon_recv_us']['p99']:.0f} us",
              f"  update_field -> daemon's map write: p50 {m['p50']:.0f} us, p99 {m['p99']:.0f} us",
              f"  map write -> applied at the flow's next ACK: p50 {r['map_write_to_applied_us']['p50']:.0f} us, "
              f"p99 {r['map_write_to_applied_us']['p99']:.0f} us",
              f"  the floor, native reno's wait for its next ACK from a random instant (same veth, same run): "
              + ackwait.describe(r["native_next_ack_wait_us"]),
              f"datapath: {k['controlled_acks']} controlled ACKs, {k['events_lost']} events lost, "
              f"{r['daemon']['daemon']['ipc_send_dropped']} reports dropped (agent queue full)",
              f"files: {r['dir']}"]
    return "\n".join(lines)


def test_datapath_benchmark():
    r = run_benchmark()
    print("\n" + report(r))
    assert r["ccp"]["gbps"] > 0 and r["update_to_applied_us"]["n"] > 0


if __name__ == "__main__":
    answer_help(__doc__)
    from records import stamp
    prov = stamp()
    # the first line names the run, as a record kept in data/bench/ needs
    print(f"# provenance: date {prov['date']}, commit {prov['commit']}, command: {prov['command']}")
    print(report(run_benchmark()))
