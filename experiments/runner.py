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
import socket
import statistics
import subprocess
import time
from contextlib import ExitStack

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
    for node in tb.state["nodes"]:
        for el in tb.counters(node):
            if re.fullmatch(r"(wl|loss)\d+", el):
                tb.write(node, el, "loss" if el.startswith("wl") else "p", f"{loss_pct}%")


def link_loss_counts(tb: Testbed):
    passed = lost = 0
    for node in tb.state["nodes"]:
        for el, c in tb.counters(node).items():
            if re.fullmatch(r"wl\d+", el):
                passed += c.get("passed", 0)
                lost += c.get("link_losses", 0)
    return passed, lost


def iperf(tb: Testbed, client: str, server: str, cca: str, seconds: float, interval_s: float,
          port: int = 5201) -> dict:
    srv = tb.popen(server, ["iperf3", "-s", "-1", "-J", "-p", str(port)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
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
            name = f"{slug(alg.label)}_{key}-{value}_r{rep}"
            run_dir = os.path.join(out_dir, "runs", name)
            os.makedirs(run_dir, exist_ok=True)
            rec = _one_run(tb, dp, alg, sc, client, server, run_dir, broker_url, AgentProcess)
            rec.update({"algorithm": alg.label, key: value, "repeat": rep, "run": name})
            records.append(rec)
            with open(os.path.join(out_dir, "summary.json"), "w") as f:   # resumable reading
                json.dump(records, f, indent=1)
            elapsed = time.monotonic() - t_start
            eta = elapsed / i * (len(runs) - i)
            echo(f"[{i}/{len(runs)}] {alg.label:16s} {key} {value:<5} repeat {rep}: "
                 f"{rec['goodput_mbps']:7.2f} Mbit/s, {rec['retransmits']} retransmits  (eta {eta / 60:.0f} min)")
    if sc.sweep:
        key = next(iter(sc.sweep))
        plot_summary(records, key, os.path.join(out_dir, "goodput.png"), sc.description or sc.name)
    return records


def _one_run(tb, dp, alg: Algorithm, sc: Scenario, client, server, run_dir, broker_url, AgentProcess) -> dict:
    agent = None
    before = link_loss_counts(tb)
    try:
        if alg.ccp:
            opts = list(alg.options) + ["--trace", os.path.join(run_dir, "trace.csv")]
            if alg.needs_telemetry:
                opts += ["--broker", broker_url, "--state-dir", dp.state_dir]
            agent = AgentProcess(alg.ccp, opts, log_path=os.path.join(run_dir, "agent.log")).start()
            dp.wait_agent(True)
        out = iperf(tb, client, server, "ccp" if alg.ccp else alg.cca, sc.seconds, sc.interval_s)
    finally:
        if agent is not None:
            agent.stop()
            dp.wait_agent(False)
    after = link_loss_counts(tb)
    rows = series(out)
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
            "mss": out["start"].get("tcp_mss_default")}


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
