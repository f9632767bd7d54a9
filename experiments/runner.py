"""Run a scenario (experiments/scenario.py) on the testbed and write its results:

    OUT/summary.json              one record per run (algorithm, loss_pct, repeat, goodput_mbps, ...)
    OUT/runs/<run>/series.csv     t_s, goodput_mbps (receiver), cwnd_bytes, rtt_ms, retransmits (sender)
    OUT/runs/<run>/series.png     the same, plotted
    OUT/runs/<run>/trace.csv      a CCP agent's decisions (CCP algorithms only)
    OUT/goodput.png               mean goodput (± std over repeats) per algorithm and sweep value

One testbed (or ``jobs`` of them, each running a repeat at once), one datapath daemon
and (for INT-aware algorithms) one MQTT broker serve every run; the swept loss is changed
on the running nodes. A run whose flow fails is listed in OUT/failed.json; the rest go on.
"""
from __future__ import annotations

import csv
import fcntl
import json
import logging
import os
import re
import random
import shutil
import socket
import statistics
import subprocess
import time
from contextlib import ExitStack, contextmanager, nullcontext

from .kernel_trace import KernelTcpTrace, summarize as summarize_kernel_trace
from .linkctl import check_loss, configured_loss_pct, link_loss_counts, run_seed, seed_losses, set_loss
from .scenario import Algorithm, Scenario
from .testbed import RUN_ROOT, Testbed, teardown
from .topo import load_topo

TESTBED_NAME = "exp"
log = logging.getLogger(__name__)
CREDS = "/run/intcc/exp-broker/credentials.json"


#: How long iperf3 may take past its run time: at 20 % link loss the closing exchange on
#: its control connection can sit in RTO backoff (1, 2, 4, ... s) for a minute.
IPERF_GRACE_S = 180


class RunFailed(RuntimeError):
    """One run failed (its flow, not the testbed): recorded in failed.json, the rest go on."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


#: Sender-side kernel TCP counters kept per run (how the sender recovered from losses).
TCP_COUNTERS = ("Tcp.RetransSegs", "TcpExt.TCPTimeouts", "TcpExt.TCPLossProbes", "TcpExt.TCPLossProbeRecovery",
                "TcpExt.TCPSackRecovery", "TcpExt.TCPLostRetransmit", "TcpExt.TCPLossUndo",
                "TcpExt.TCPFullUndo", "TcpExt.TCPPartialUndo", "TcpExt.TCPDSACKUndo", "TcpExt.TCPSpuriousRTOs",
                "TcpExt.TCPDSACKRecv")


def tcp_counters(tb: Testbed, host: str) -> dict[str, int]:
    """The host namespace's TCP counters (/proc/net/snmp and netstat: header line, value line)."""
    out = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        lines = tb.run(host, ["cat", path]).stdout.splitlines()
        for head, vals in zip(lines[::2], lines[1::2]):
            group, names = head.split(":", 1)
            for name, val in zip(names.split(), vals.split(":", 1)[1].split()):
                key = f"{group}.{name}"
                if key in TCP_COUNTERS:
                    out[key] = int(val)
    return out


def iperf(tb: Testbed, client: str, server: str, cca: str, seconds: float, interval_s: float,
          port: int = 5201) -> dict:
    srv = tb.popen(server, ["iperf3", "-s", "-1", "-J", "-p", str(port)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        tb.wait_listening(server, port)
        try:
            res = tb.run(client, ["iperf3", "-6", "-c", tb.addr(server), "-p", str(port), "-t", str(seconds),
                                  "-i", str(interval_s), "-C", cca, "-J", "--get-server-output"],
                         timeout=seconds + IPERF_GRACE_S)
        except subprocess.TimeoutExpired:
            raise RunFailed(f"iperf3 {client} -> {server} ({cca}) did not end {IPERF_GRACE_S} s after its "
                            f"{seconds:g} s (its closing exchange stuck in RTO backoff?)") from None
        try:
            out = json.loads(res.stdout)
        except json.JSONDecodeError:
            raise RunFailed(f"iperf3 {client} -> {server} ({cca}) wrote no JSON: "
                            f"{(res.stderr or res.stdout).strip()[:300]}") from None
        if "error" in out:
            raise RunFailed(f"iperf3 {client} -> {server} ({cca}): {out['error']}")
        return out
    finally:
        srv.kill()
        srv.wait()


def series(out: dict) -> list[dict]:
    """Per-interval rows: receiver goodput, sender cwnd, RTT and retransmits."""
    recv = out.get("server_output_json", {}).get("intervals", [])
    rows = []
    for i, iv in enumerate(out["intervals"]):
        st = iv["streams"][0]
        rx = recv[i]["sum"]["bits_per_second"] / 1e6 if i < len(recv) else None
        rows.append({"t_s": round(st["end"], 3), "goodput_mbps": rx, "cwnd_bytes": st.get("snd_cwnd"),
                     "rtt_ms": st.get("rtt", 0) / 1e3, "retransmits": st.get("retransmits", 0)})
    return rows


def plot_series(rows: list[dict], title: str, path: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [r["t_s"] for r in rows]
    fig, ax = plt.subplots(3, 1, figsize=(7, 6), sharex=True)
    ax[0].plot(t, [r["goodput_mbps"] or 0 for r in rows])
    ax[0].set_ylabel("goodput\nMbit/s")
    ax[1].plot(t, [(r["cwnd_bytes"] or 0) / 1e3 for r in rows])
    ax[1].set_ylabel("cwnd\nkB")
    ax[2].plot(t, [r["rtt_ms"] for r in rows])
    ax[2].set_ylabel("RTT ms")
    ax[2].set_xlabel("time (s)")
    ax[0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_summary(records: list[dict], key: str, path: str, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for alg in dict.fromkeys(r["algorithm"] for r in records):
        xs = sorted({r[key] for r in records if r["algorithm"] == alg})
        vals = [[r["goodput_mbps"] for r in records if r["algorithm"] == alg and r[key] == x] for x in xs]
        ax.errorbar(xs, [statistics.mean(v) for v in vals],
                    yerr=[statistics.stdev(v) if len(v) > 1 else 0 for v in vals], marker="o", capsize=3,
                    label=alg)
    ax.set_xlabel(key.replace("_pct", " (%)").replace("_", " "))
    ax.set_ylabel("goodput (Mbit/s)")
    ax.set_title(title)
    ax.grid(alpha=.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def testbed_names(jobs: int) -> list[str]:
    return [TESTBED_NAME if k == 0 else f"{TESTBED_NAME}{k}" for k in range(jobs)]


@contextmanager
def _exclusive_testbeds():
    """One ``intcc exp run`` at a time: each begins by tearing down the testbeds it will
    use (leftovers of a killed run), which would pull them from under a running one."""
    os.makedirs(RUN_ROOT, exist_ok=True)
    with open(os.path.join(RUN_ROOT, "exp-run.lock"), "a+") as lock:   # closing it releases the lock
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise RuntimeError(f"another 'intcc exp run' (pid {lock.read().strip() or '?'}) is using the exp "
                               f"testbeds: wait for it or stop it first") from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        yield


def run_name(alg: Algorithm, key: str, value, rep: int) -> str:
    return f"{slug(alg.label)}_{key}-{value}_r{rep}" if key != "none" else f"{slug(alg.label)}_r{rep}"


def run_scenario(sc: Scenario, out_dir: str, echo=print, jobs: int = 1) -> list[dict]:
    """Every run of ``sc``; ``jobs`` > 1 brings up that many testbeds (exp, exp1, ...) and
    runs as many repeats of one algorithm at once (Scenario.batches), one CCP agent
    serving all their flows. For low-rate runs (high loss), where the nodes idle: the
    testbeds share the machine's cores."""
    from broker.launch import BrokerProcess
    from ccp_algs.datapath import AgentProcess, DatapathProcess

    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    needs_ccp = any(a.ccp for a in sc.algorithms)
    needs_tele = any(a.needs_telemetry for a in sc.algorithms)
    jobs = max(1, min(jobs, sc.repeats))
    if jobs > 1 and needs_tele:
        # testbeds alike publish the same node ids (intcc/v1/hop/<node-id>) to one broker
        raise RuntimeError(f"--jobs {jobs}: INT-aware algorithms ({', '.join(a.label for a in sc.algorithms if a.needs_telemetry)}) "
                           f"need one testbed (their telemetry would mix across testbeds)")
    batches = list(sc.batches(jobs))
    n_runs = sum(len(reps) for _, _, reps in batches)
    client, server = sc.flows["main"]
    records: list[dict] = []
    failed: list[dict] = []
    base_seed = sc.seed if sc.seed is not None else random.SystemRandom().randrange(2**31)
    echo(f"loss draws seeded from {base_seed} (--seed {base_seed} repeats them)")
    t_start = time.monotonic()
    with ExitStack() as stack:
        stack.enter_context(_exclusive_testbeds())
        exporter, broker_url = "jsonl", None
        if needs_tele:
            broker = BrokerProcess("mosquitto", port=_free_port(), credentials_file=CREDS,
                                   state_dir=os.path.join(out_dir, "broker"))
            stack.enter_context(broker)
            broker_url = broker.url
            exporter = f"{broker.url}?credentials={CREDS}"
        testbeds = []
        for name in testbed_names(jobs):
            teardown(name)
            echo(f"testbed {name}: {sc.topology} {sc.params} (exporter {exporter.split('?')[0]}) ...")
            tb = Testbed(load_topo(sc.topology_path, sc.params), name).up(exporter=exporter)
            stack.callback(tb.down)
            testbeds.append(tb)
        dp = None
        if needs_ccp:
            dp = DatapathProcess(state_dir=os.path.join(out_dir, "datapath"))
            stack.enter_context(dp)
        for alg, sweep, reps in batches:
            (key, value), = sweep.items()
            beds = testbeds[:len(reps)]
            if key == "loss_pct":
                for tb in beds:
                    set_loss(tb, value)
            names = [run_name(alg, key, value, rep) for rep in reps]
            run_dirs = [os.path.join(out_dir, "runs", name) for name in names]
            seeds = [run_seed(base_seed, key, value, rep) for rep in reps]
            batch = _batch(beds, dp, alg, sc, client, server, run_dirs, broker_url, AgentProcess, seeds)
            for rec, rep, name, loss_seed in zip(batch, reps, names, seeds):
                what = f"{key} {value:<5} " if key != "none" else ""
                if isinstance(rec, RunFailed):
                    failed.append({"run": name, "algorithm": alg.label, "repeat": rep, "loss_seed": loss_seed,
                                   key: value, "error": str(rec)})
                    with open(os.path.join(out_dir, "failed.json"), "w") as f:
                        json.dump(failed, f, indent=1)
                    echo(f"[{len(records) + len(failed)}/{n_runs}] {alg.label:16s} {what}repeat {rep}: "
                         f"FAILED ({rec}); kept in failed.json, the others go on")
                    continue
                rec.update({"algorithm": alg.label, "repeat": rep, "run": name, "seed": base_seed,
                            "loss_seed": loss_seed})
                if key != "none":
                    rec[key] = value
                warning = check_loss(rec, value if key == "loss_pct" else configured_loss_pct(beds[0]))
                if warning:
                    echo(f"WARNING {name}: {warning}")
                records.append(rec)
                done = len(records) + len(failed)
                eta = (time.monotonic() - t_start) / done * (n_runs - done)
                echo(f"[{done}/{n_runs}] {alg.label:16s} {what}repeat {rep}: "
                     f"{rec['goodput_mbps']:7.2f} Mbit/s, {rec['retransmits']} retransmits  (eta {eta / 60:.0f} min)")
            with open(os.path.join(out_dir, "summary.json"), "w") as f:   # resumable reading
                json.dump(records, f, indent=1)
    if failed:
        echo(f"{len(failed)} of {n_runs} runs failed: {os.path.join(out_dir, 'failed.json')}")
    if not records:
        raise RuntimeError(f"every run failed; first: {failed[0]['error']}")
    if sc.sweep:
        key = next(iter(sc.sweep))
        plot_summary(records, key, os.path.join(out_dir, "goodput.png"), sc.description or sc.name)
    else:
        plot_overlay(records, out_dir, "cwnd_bytes", "cwnd (kB)", 1e-3, "cwnd.png", sc.description or sc.name)
        if any("competitor" in r for r in records):
            plot_overlay(records, out_dir, "jain", "Jain's index", 1, "jain.png", sc.description or sc.name)
    return records


def plot_overlay(records, out_dir, column, ylabel, scale, filename, title):
    """One line per algorithm (its first repeat) of a series column over time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in records:
        if r["repeat"] != 0:
            continue
        with open(os.path.join(out_dir, "runs", r["run"], "series.csv")) as f:
            rows = [x for x in csv.DictReader(f) if x.get(column) not in (None, "")]
        ax.plot([float(x["t_s"]) for x in rows], [float(x[column]) * scale for x in rows], label=r["algorithm"])
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, filename), dpi=90)
    plt.close(fig)


def jain(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    if not xs or not any(xs):
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def time_to_plateau_s(rows: list[dict], fraction: float = 0.9) -> float | None:
    """Seconds until cwnd first reaches ``fraction`` of its median over the run's
    second half: when the window has grown to where the flow settles (paper 003
    Fig. 7's "reaches ssthresh"; works for kernel flows, which leave no trace)."""
    cw = [(r["t_s"], r["cwnd_bytes"]) for r in rows if r.get("cwnd_bytes")]
    if len(cw) < 4:
        return None
    settled = statistics.median(c for _, c in cw[len(cw) // 2:])
    return next((t for t, c in cw if c >= fraction * settled), None)


def slow_start_exit_s(trace_csv: str) -> float | None:
    """Seconds from the flow's start to its first window cut (where ssthresh is set)."""
    if not os.path.exists(trace_csv):
        return None
    starts, sender = {}, None
    with open(trace_csv) as f:
        rows = list(csv.DictReader(f))
    counts = {}
    for r in rows:
        counts[r["sid"]] = counts.get(r["sid"], 0) + 1
    if not counts:
        return None
    sender = max(counts, key=counts.get)      # the data flow (iperf3's control flow is tiny)
    for r in rows:
        if r["sid"] != sender:
            continue
        if r["event"] == "start":
            starts[sender] = float(r["t_s"])
        elif r["ssthresh_bytes"] and sender in starts:
            return float(r["t_s"]) - starts[sender]
    return None


#: Testbed k's main flow listens on port MAIN_PORT + PORT_STRIDE·k, its competitor one
#: above: the kernel trace (tracefs sees every namespace) and the agent's trace tell the
#: flows of parallel testbeds apart by port.
MAIN_PORT = 5201
PORT_STRIDE = 100


def split_agent_trace(path: str, dirs_by_port: dict[int, str]) -> int:
    """One agent's trace of several testbeds' flows -> each run's trace.csv, by the ports
    on each flow's start row: the iperf3 server's port is the client's destination port
    and the source port of the server's own sockets (iperf3 sets the CCA on both ends).
    Returns the rows no run claimed (then the combined trace is kept beside the runs,
    else removed)."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames or ["t_s"], list(reader)
    port_of_sid = {}
    for r in rows:
        if r["event"] == "start":
            port_of_sid[r["sid"]] = next((int(r[k]) for k in ("dst_port", "src_port")
                                         if r.get(k) and int(r[k]) in dirs_by_port), None)
    out = {port: [] for port in dirs_by_port}
    unclaimed = 0
    for r in rows:
        port = port_of_sid.get(r["sid"])
        if port in out:
            out[port].append(r)
        else:
            unclaimed += 1
    for port, run_dir in dirs_by_port.items():
        with open(os.path.join(run_dir, "trace.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fields)
            w.writeheader()
            w.writerows(out[port])
    if not unclaimed:
        os.remove(path)
    return unclaimed


def _batch(beds, dp, alg: Algorithm, sc: Scenario, client, server, run_dirs, broker_url, AgentProcess,
           loss_seeds) -> list[dict]:
    """One algorithm's runs, one on each testbed of ``beds``, at once under one agent."""
    import threading
    for d in run_dirs:
        os.makedirs(d, exist_ok=True)
    ports = [MAIN_PORT + PORT_STRIDE * k for k in range(len(beds))]
    trace_path = run_dirs[0] + ".agent-trace.csv"      # split into each run's trace.csv
    log_path = os.path.join(run_dirs[0], "agent.log")
    raws: list = [None] * len(beds)

    def flow(k):
        try:
            raws[k] = _flow(beds[k], alg, sc, client, server, run_dirs[k], loss_seeds[k], ports[k])
        except BaseException as e:      # reported by the batch
            raws[k] = e

    agent = None
    try:
        if alg.ccp:
            opts = list(alg.options) + ["--trace", trace_path]
            if alg.needs_telemetry:
                opts += ["--broker", broker_url, "--state-dir", dp.state_dir]
            agent = AgentProcess(alg.ccp, opts, log_path=log_path).start()
            dp.wait_agent(True)
        threads = [threading.Thread(target=flow, args=(k,)) for k in range(len(beds))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        failure = agent.failure() if agent is not None else None
        if agent is not None:
            agent.stop()
            dp.wait_agent(False)
    if failure:
        raise RuntimeError(f"the {alg.ccp} agent failed, the flow ran the datapath's fallback:\n{failure}")
    for raw in raws:
        if isinstance(raw, BaseException) and not isinstance(raw, RunFailed):
            raise raw
    if alg.ccp:
        if split_agent_trace(trace_path, dict(zip(ports, run_dirs))):
            log.warning("agent trace rows of no run's flow kept in %s", trace_path)
        for d in run_dirs[1:]:
            shutil.copy(log_path, os.path.join(d, "agent.log"))
    records = []
    for d, raw in zip(run_dirs, raws):
        try:
            records.append(raw if isinstance(raw, RunFailed) else _record(alg, sc, d, raw))
        except RunFailed as e:
            records.append(e)
    return records


def _competitor(tb, sc, alg, holder, port: int):
    c_client, c_server = sc.flows["competitor"]
    try:
        holder["out"] = iperf(tb, c_client, c_server, alg.competitor, sc.seconds, sc.interval_s, port=port)
    except Exception as e:     # reported with the run
        holder["error"] = str(e)


def _flow(tb, alg: Algorithm, sc: Scenario, client, server, run_dir, loss_seed: int, port: int) -> dict:
    """One run's flows on ``tb`` (the agent, if any, is up): iperf3's output and counters."""
    import threading
    before = link_loss_counts(tb)
    tcp_before = tcp_counters(tb, client)
    comp, comp_thread = {}, None
    extra = {}
    seed_losses(tb, loss_seed)      # last thing before the flows: nothing else draws
    try:
        if alg.competitor:
            comp_thread = threading.Thread(target=_competitor, args=(tb, sc, alg, comp, port + 1))
            comp_thread.start()
        with (KernelTcpTrace(port=port) if sc.kernel_trace else nullcontext()) as ktrace:
            out = iperf(tb, client, server, "ccp" if alg.ccp else alg.cca, sc.seconds, sc.interval_s, port=port)
        if ktrace is not None:
            ktrace.write_csv(os.path.join(run_dir, "kernel_trace.csv"))
            extra["kernel_trace"] = summarize_kernel_trace(ktrace.rows)
            if ktrace.lost_events:
                extra["kernel_trace"] = {**(extra["kernel_trace"] or {}), "lost_events": ktrace.lost_events}
    finally:
        if comp_thread is not None:
            comp_thread.join()
    after = link_loss_counts(tb)
    tcp_after = tcp_counters(tb, client)
    return {"out": out, "comp": comp, "extra": extra, "passed": after[0] - before[0],
            "lost": after[1] - before[1], "lost_configured": after[2] - before[2],
            "sender_tcp": {k.split(".")[1]: tcp_after[k] - tcp_before.get(k, 0) for k in tcp_after}}


def _record(alg: Algorithm, sc: Scenario, run_dir: str, raw: dict) -> dict:
    """A run's record, series.csv, iperf3.json and plot from what _flow gathered."""
    out, comp, extra = raw["out"], raw["comp"], dict(raw["extra"])
    rows = series(out)
    if alg.competitor:
        if "out" not in comp:
            raise RunFailed(f"competitor flow failed: {comp.get('error')}")
        crows = series(comp["out"])
        for r, c in zip(rows, crows):
            r["competitor_goodput_mbps"] = c["goodput_mbps"]
            r["jain"] = jain([r["goodput_mbps"], c["goodput_mbps"]])
        warm = [r["jain"] for r in rows if r["t_s"] > 0.2 * sc.seconds and r.get("jain") is not None]
        extra |= {"competitor": alg.competitor,
                 "competitor_goodput_mbps": comp["out"]["end"]["sum_received"]["bits_per_second"] / 1e6,
                 "jain_mean": statistics.mean(warm) if warm else None,
                 "jain_min": min(warm) if warm else None}
        extra["jain_total"] = jain([out["end"]["sum_received"]["bits_per_second"],
                                    comp["out"]["end"]["sum_received"]["bits_per_second"]])
    with open(os.path.join(run_dir, "series.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]) if rows else ["t_s"])
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(run_dir, "iperf3.json"), "w") as f:
        json.dump(out, f)
    plot_series(rows, f"{alg.label}", os.path.join(run_dir, "series.png"))
    passed, lost, lost_configured = raw["passed"], raw["lost"], raw["lost_configured"]
    return {"goodput_mbps": out["end"]["sum_received"]["bits_per_second"] / 1e6,
            "retransmits": out["end"]["sum_sent"].get("retransmits", 0),
            "seconds": sc.seconds, "link_packets": passed + lost,
            "measured_link_loss_pct": 100 * lost / max(passed + lost, 1),
            "measured_configured_loss_pct": 100 * lost_configured / max(passed + lost, 1),
            "mss": out["start"].get("tcp_mss_default"),
            "slow_start_exit_s": slow_start_exit_s(os.path.join(run_dir, "trace.csv")),
            "plateau_s": time_to_plateau_s(rows),
            "sender_tcp": raw["sender_tcp"], **extra}


def table_by_algorithm(records: list[dict]) -> str:
    """For scenarios without a sweep: one row per algorithm, means over repeats."""
    cols = [("goodput_mbps", "goodput Mbit/s", "{:.2f}"), ("retransmits", "retx", "{:.0f}"),
            ("slow_start_exit_s", "ss exit s", "{:.2f}"), ("plateau_s", "plateau s", "{:.2f}"), ("competitor_goodput_mbps", "competitor", "{:.2f}"),
            ("jain_mean", "Jain mean", "{:.3f}"), ("jain_min", "Jain min", "{:.3f}")]
    cols = [c for c in cols if any(r.get(c[0]) is not None for r in records)]
    lines = [f"{'algorithm':22s}" + "".join(f"{h:>15s}" for _, h, _ in cols)]
    for a in dict.fromkeys(r["algorithm"] for r in records):
        cells = []
        for key, _, fmt in cols:
            v = [r[key] for r in records if r["algorithm"] == a and r.get(key) is not None]
            cells.append(f"{fmt.format(statistics.mean(v)):>15s}" if v else f"{'-':>15s}")
        lines.append(f"{a:22s}" + "".join(cells))
    return "\n".join(lines)


def table(records: list[dict], key: str = "loss_pct", baseline: str | None = None) -> str:
    algs = list(dict.fromkeys(r["algorithm"] for r in records))
    values = sorted({r[key] for r in records})

    def mean(alg, v):
        g = [r["goodput_mbps"] for r in records if r["algorithm"] == alg and r[key] == v]
        return statistics.mean(g) if g else None

    head = f"{'goodput Mbit/s':18s}" + "".join(f"{key.replace('_pct', ' %')} {v:<5}".rjust(12) for v in values)
    lines = [head]
    for a in algs:
        lines.append(f"{a:18s}" + "".join(f"{mean(a, v):12.2f}" if mean(a, v) is not None else " " * 12
                                          for v in values))
    if baseline in algs:
        lines += ["", f"{'ratio to ' + baseline:18s}"]
        for a in algs:
            cells = []
            for v in values:
                m, b = mean(a, v), mean(baseline, v)
                cells.append(f"{m / b:12.2f}" if m is not None and b else " " * 12)
            lines.append(f"{a:18s}" + "".join(cells))
    return "\n".join(lines)
