"""Run a scenario (experiments/scenario.py) on the testbed and write its results:

    OUT/summary.json              one record per run (algorithm, loss_pct, repeat, goodput_mbps, ...)
    OUT/runs/<run>/series.csv     t_s, goodput_mbps (receiver), cwnd_bytes, rtt_ms, retransmits (sender)
    OUT/runs/<run>/series.png     the same, plotted
    OUT/runs/<run>/trace.csv      a CCP agent's decisions (CCP algorithms only)
    OUT/goodput.png               mean goodput (± std over repeats) per algorithm and sweep value

One testbed, one datapath daemon and (for INT-aware algorithms) one MQTT broker
serve every run; the swept loss is changed on the running nodes.
"""
from __future__ import annotations

import csv
import json
import os
import re
import random
import socket
import statistics
import subprocess
import time
import zlib
from contextlib import ExitStack, nullcontext

from .kernel_trace import KernelTcpTrace, summarize as summarize_kernel_trace
from .scenario import Algorithm, Scenario
from .testbed import Testbed, teardown
from .topo import load_topo

TESTBED_NAME = "exp"
CREDS = "/run/intcc/exp-broker/credentials.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def set_loss(tb: Testbed, loss_pct: float):
    """Every loss element on the testbed (wireless channels and RandomLoss), both directions."""
    for node, el in _loss_elements(tb):
        tb.write(node, el, "loss" if el.startswith("wl") else "p", f"{loss_pct}%")


def _loss_elements(tb: Testbed):
    for node in tb.state["nodes"]:
        for el in tb.counters(node):
            if re.fullmatch(r"(wl|loss)\d+", el):
                yield node, el


def run_seed(base_seed: int, key: str, value, repeat: int) -> int:
    """The loss draws' seed of one run: the same for every algorithm of a repeat (common
    random numbers: compared runs meet the same fate for the same transmission, see
    int_node.loss_draws), another for each repeat and sweep value."""
    return zlib.crc32(f"{base_seed}/{key}={value}/{repeat}".encode())


def seed_losses(tb: Testbed, seed: int):
    """Restart every loss element's draws from ``seed`` (each element its own stream)."""
    for node, el in _loss_elements(tb):
        tb.write(node, el, "seed", str(zlib.crc32(f"{seed}/{node}/{el}".encode())))


def link_loss_counts(tb: Testbed):
    passed = lost = 0
    for node in tb.state["nodes"]:
        for el, c in tb.counters(node).items():
            if re.fullmatch(r"wl\d+", el):
                passed += c.get("passed", 0)
                lost += c.get("link_losses", 0)
    return passed, lost


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
        res = tb.run(client, ["iperf3", "-6", "-c", tb.addr(server), "-p", str(port), "-t", str(seconds),
                              "-i", str(interval_s), "-C", cca, "-J", "--get-server-output"],
                     timeout=seconds + 40)
        out = json.loads(res.stdout)
        if "error" in out:
            raise RuntimeError(f"iperf3 {client} -> {server} ({cca}): {out['error']}")
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


def run_scenario(sc: Scenario, out_dir: str, echo=print) -> list[dict]:
    from broker.launch import BrokerProcess
    from ccp_algs.datapath import AgentProcess, DatapathProcess

    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    runs = list(sc.runs())
    needs_ccp = any(a.ccp for a in sc.algorithms)
    needs_tele = any(a.needs_telemetry for a in sc.algorithms)
    client, server = sc.flows["main"]
    records: list[dict] = []
    base_seed = sc.seed if sc.seed is not None else random.SystemRandom().randrange(2**31)
    echo(f"loss draws seeded from {base_seed} (--seed {base_seed} repeats them)")
    t_start = time.monotonic()
    with ExitStack() as stack:
        exporter, broker_url = "jsonl", None
        if needs_tele:
            broker = BrokerProcess("mosquitto", port=_free_port(), credentials_file=CREDS,
                                   state_dir=os.path.join(out_dir, "broker"))
            stack.enter_context(broker)
            broker_url = broker.url
            exporter = f"{broker.url}?credentials={CREDS}"
        teardown(TESTBED_NAME)
        echo(f"testbed {sc.topology} {sc.params} (exporter {exporter.split('?')[0]}) ...")
        tb = Testbed(load_topo(sc.topology_path, sc.params), TESTBED_NAME).up(exporter=exporter)
        stack.callback(tb.down)
        dp = None
        if needs_ccp:
            dp = DatapathProcess(state_dir=os.path.join(out_dir, "datapath"))
            stack.enter_context(dp)
        for i, (alg, sweep, rep) in enumerate(runs, 1):
            (key, value), = sweep.items()
            if key == "loss_pct":
                set_loss(tb, value)
            name = f"{slug(alg.label)}_{key}-{value}_r{rep}" if key != "none" else f"{slug(alg.label)}_r{rep}"
            run_dir = os.path.join(out_dir, "runs", name)
            os.makedirs(run_dir, exist_ok=True)
            loss_seed = run_seed(base_seed, key, value, rep)
            rec = _one_run(tb, dp, alg, sc, client, server, run_dir, broker_url, AgentProcess, loss_seed)
            rec.update({"algorithm": alg.label, "repeat": rep, "run": name, "seed": base_seed,
                        "loss_seed": loss_seed})
            if key != "none":
                rec[key] = value
            records.append(rec)
            with open(os.path.join(out_dir, "summary.json"), "w") as f:   # resumable reading
                json.dump(records, f, indent=1)
            elapsed = time.monotonic() - t_start
            eta = elapsed / i * (len(runs) - i)
            what = f"{key} {value:<5} " if key != "none" else ""
            echo(f"[{i}/{len(runs)}] {alg.label:16s} {what}repeat {rep}: "
                 f"{rec['goodput_mbps']:7.2f} Mbit/s, {rec['retransmits']} retransmits  (eta {eta / 60:.0f} min)")
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


def _competitor(tb, sc, alg, holder):
    c_client, c_server = sc.flows["competitor"]
    try:
        holder["out"] = iperf(tb, c_client, c_server, alg.competitor, sc.seconds, sc.interval_s, port=5202)
    except Exception as e:     # reported with the run
        holder["error"] = str(e)


def _one_run(tb, dp, alg: Algorithm, sc: Scenario, client, server, run_dir, broker_url, AgentProcess,
             loss_seed: int) -> dict:
    import threading
    agent = None
    before = link_loss_counts(tb)
    tcp_before = tcp_counters(tb, client)
    comp, comp_thread = {}, None
    extra = {}
    try:
        if alg.ccp:
            opts = list(alg.options) + ["--trace", os.path.join(run_dir, "trace.csv")]
            if alg.needs_telemetry:
                opts += ["--broker", broker_url, "--state-dir", dp.state_dir]
            agent = AgentProcess(alg.ccp, opts, log_path=os.path.join(run_dir, "agent.log")).start()
            dp.wait_agent(True)
        seed_losses(tb, loss_seed)      # last thing before the flows: nothing else draws
        if alg.competitor:
            comp_thread = threading.Thread(target=_competitor, args=(tb, sc, alg, comp))
            comp_thread.start()
        with (KernelTcpTrace(port=5201) if sc.kernel_trace else nullcontext()) as ktrace:
            out = iperf(tb, client, server, "ccp" if alg.ccp else alg.cca, sc.seconds, sc.interval_s)
        if ktrace is not None:
            ktrace.write_csv(os.path.join(run_dir, "kernel_trace.csv"))
            extra["kernel_trace"] = summarize_kernel_trace(ktrace.rows)
            if ktrace.lost_events:
                extra["kernel_trace"] = {**(extra["kernel_trace"] or {}), "lost_events": ktrace.lost_events}
    finally:
        if comp_thread is not None:
            comp_thread.join()
        failure = agent.failure() if agent is not None else None
        if agent is not None:
            agent.stop()
            dp.wait_agent(False)
    if failure:
        raise RuntimeError(f"the {alg.ccp} agent failed, the flow ran the datapath's fallback:\n{failure}")
    after = link_loss_counts(tb)
    tcp_after = tcp_counters(tb, client)
    rows = series(out)
    if alg.competitor:
        if "out" not in comp:
            raise RuntimeError(f"competitor flow failed: {comp.get('error')}")
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
    passed, lost = after[0] - before[0], after[1] - before[1]
    return {"goodput_mbps": out["end"]["sum_received"]["bits_per_second"] / 1e6,
            "retransmits": out["end"]["sum_sent"].get("retransmits", 0),
            "seconds": sc.seconds, "measured_link_loss_pct": 100 * lost / max(passed + lost, 1),
            "mss": out["start"].get("tcp_mss_default"),
            "slow_start_exit_s": slow_start_exit_s(os.path.join(run_dir, "trace.csv")),
            "plateau_s": time_to_plateau_s(rows),
            "sender_tcp": {k.split(".")[1]: tcp_after[k] - tcp_before.get(k, 0) for k in tcp_after}, **extra}


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
