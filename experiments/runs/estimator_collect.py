"""The estimator's training data: randomised dumbbell experiments (the ML-fairness paper, Table II).

Each run draws the bottleneck (1-10 Mbit/s, one-way delay 1-100 ms, buffer
1-100 BDP) from its own seed, runs flow 1 (s1 -> r1) and flow 2 (s2 -> r2)
with one of the four CCAs each (pairs cycle so every one of the 16 is equally
represented), captures flow 1 at s1's interface, and stores the Table I
features of ``samples`` evenly spaced ACKs (after a warm-up) with the run's
parameters in ``DIR/runs/<run>.npz``, beside the raw sender trace and the INT
series of flow 1 at the bottleneck (so features can be recomputed without
re-running). Runs already on disk are skipped: a collection can be stopped and
resumed. ``jobs`` > 1 runs that many testbeds at once (est0, est1, ...); their
nodes then share the CPU, which adds some jitter to the emulated links (see
docs/estimator.md).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time

import numpy as np

from telemetry.ccas import CCA_LABELS, KERNEL_CCAS
from estimator.capture import Capture, sender_trace
from estimator.dataset import CCAS, DATA_FORMAT, save_run
from estimator.features import TraceError, features
from estimator.sink_view import replayed_view, view_arrays
from estimator.int_series import bottleneck_series, causal_pick_share, flow_counts_from_jsonl, hop_series_from_jsonl

from experiments.runs.collection_plans import HARD_RANGES, RANGES, UDP_CROSS_PORT, UDP_CROSS_SHARE, run_plan
from experiments.runs.signals import restore as restore_signals, unwind_on_signals
from experiments.testbed.traffic import BackgroundFlow, RunFailed

KERNEL = set(KERNEL_CCAS)          # the others (vegas) run on the CCP datapath
#: flow 1's port when it runs through the CCP datapath (table2-live), one per CCA: the one
#: agent of a collection serves testbeds running different flow-1 CCAs at once, and tells
#: their flows apart by port (ccp_agent/by_port.py)
CCP_LOCAL_PORTS = {cca: 5301 + i for i, cca in enumerate(CCA_LABELS)}     # bbr 5301, cubic 5302, ...
#: the agent's own algorithm (the competitor's CCP flows take it) and its pins
CCP_AGENT = "vegas"


def _iperf_cca(cca: str, via_ccp: bool = False) -> str:
    return cca if cca in KERNEL and not via_ccp else "ccp"


def _via_ccp(plan: dict) -> bool:
    """Whether flow 1 runs its CCA as the adaptive agent does: a CCP algorithm."""
    return plan.get("local_via") == "ccp"


def flow1_port(plan: dict) -> int:
    return CCP_LOCAL_PORTS[plan["cca1"]] if _via_ccp(plan) else 5201


def needs_agent(plan: dict) -> bool:
    return _via_ccp(plan) or "vegas" in (plan["cca1"], plan["cca2"])


def check_agent(workdir: str):
    """A CCP flow whose agent is gone ran the datapath's Reno fallback: not the run planned."""
    try:
        with open(os.path.join(workdir, "dp", "stats.json")) as f:
            connected = json.load(f).get("agent_connected")
    except (OSError, ValueError) as e:
        raise RuntimeError(f"ccp: the datapath's stats are unreadable ({e})") from None
    if not connected:
        raise RuntimeError(f"ccp: the agent is gone, the flow ran the datapath's fallback "
                           f"(see {os.path.join(workdir, 'agent.log')}); run not kept")


def start_agent(plans: list, workdir: str):
    """(datapath, agent) serving the CCP flows of every testbed, or (None, None) when no plan
    has one: vegas, and flow 1's CCA by its port when flow 1 runs through CCP."""
    from ccp_agent.datapath import AgentProcess, DatapathProcess
    if not any(needs_agent(p) for p in plans):
        return None, None
    pins = [a for cca, port in CCP_LOCAL_PORTS.items() if cca != CCP_AGENT
            for a in ("--port-algorithm", f"{port}={cca}")] if any(map(_via_ccp, plans)) else []
    dp = DatapathProcess(state_dir=os.path.join(workdir, "dp")).start()
    try:
        agent = AgentProcess(CCP_AGENT, pins, log_path=os.path.join(workdir, "agent.log")).start()
        dp.wait_agent(True)
    except BaseException:
        dp.stop()
        raise
    return dp, agent


def start_flows(tb, plan: dict, seconds: float) -> list:
    """Flow 1 (s1 -> r1, port 5201, cca1) now and the competitor (s2 -> r2, ports 5202..,
    cca2: comp_flows flows from comp_start_s on), each an iperf3 in a thread, then the UDP
    cross traffic if the plan has some (s2 -> r2, port UDP_CROSS_PORT, from flow 1's start).
    Flows of the same start go together (traffic.iperf: otherwise the thread started first
    leads)."""
    later = plan.get("comp_start_s", 0.0)
    n_comp = plan.get("comp_flows", 1)
    together = threading.Barrier(1 + n_comp) if not later else None
    flows = [BackgroundFlow(tb, "s1", "r1", _iperf_cca(plan["cca1"], _via_ccp(plan)), seconds, seconds,
                            port=flow1_port(plan), start_together=together)]
    flows += [BackgroundFlow(tb, "s2", "r2", _iperf_cca(plan["cca2"]), seconds - later, seconds - later, 5202 + k,
                             start_delay_s=later, start_together=together)
              for k in range(n_comp)]
    if plan.get("udp_mbps"):
        flows.append(BackgroundFlow(tb, "s2", "r2", "udp", seconds, seconds, UDP_CROSS_PORT,
                                    udp_mbps=plan["udp_mbps"]))
    return flows


def join_flows(flows: list, plan: dict) -> list:
    """Their iperf3 outputs once all ended; RunFailed naming each that failed."""
    errors, outs = [], []
    for i, f in enumerate(flows, 1):      # all end before any error is raised
        try:
            outs.append(f.join())
        except RunFailed as e:
            what = plan["cca1"] if i == 1 else "UDP cross traffic" if f.udp_mbps else plan["cca2"]
            errors.append(f"flow {i} ({what}): {e}")
    if errors:
        raise RunFailed("; ".join(errors))
    return outs


def goodputs(outs: list, plan: dict) -> dict:
    """The receivers' Mbit/s of join_flows' outputs: the TCP flows' (flow 1 first) as
    ``goodput_mbps``, the UDP cross traffic's apart."""
    tcp = outs[:-1] if plan.get("udp_mbps") else outs
    mbps = {"goodput_mbps": [o["end"]["sum_received"]["bits_per_second"] / 1e6 for o in tcp]}
    return mbps | {"udp_received_mbps": outs[-1]["received_mbps"]} if plan.get("udp_mbps") else mbps


def one_run(plan: dict, seconds: float, samples: int, warmup_frac: float, workdir: str, tb_name: str = "est",
            node_python: str | None = None, node_rt_priority: int = 0):
    """Run one experiment; returns (X, t, extra, raw) for flow 1. ``extra`` says how far
    the emulated links fell behind (linkctl.emulation_lag_fields, check_emulation)."""
    from experiments.testbed.linkctl import check_emulation, emulation_lag_counts, emulation_lag_fields
    from experiments.testbed.teardown import teardown
    from experiments.testbed.bed import Testbed
    from experiments.testbed.topo import load_topo
    topo = os.path.join(os.path.dirname(__file__), "..", "testbed", "topologies", "dumbbell.toml")
    teardown(tb_name)
    tb = Testbed(load_topo(topo, plan["params"]), tb_name).up(node_python=node_python,
                                                              node_rt_priority=node_rt_priority)
    pcap = os.path.join(workdir, f"{plan['run']}.pcap")
    try:
        lag_before = emulation_lag_counts(tb)
        with Capture(tb.ns("s1"), "intcc-sw1", pcap):
            outs = join_flows(start_flows(tb, plan, seconds), plan)
        lag = {"seconds": seconds, **emulation_lag_fields(lag_before, emulation_lag_counts(tb))}
        check_emulation(lag)
        if needs_agent(plan):
            check_agent(workdir)
        tr = sender_trace(pcap, sender=tb.addr("s1"))
        int_log = tb.node_info("sw2")["int_log"]
        per_hop = hop_series_from_jsonl(int_log, tb.addr("s1"), dport=flow1_port(plan))
        int_series = bottleneck_series(per_hop)     # the whole run's choice; the meta says how often the live one agreed
        # the competitor's packets at the bottleneck per 10 ms, per flow (features that do
        # not assume two flows can read each competing flow from its own packets later),
        # and the packets each lost on the way (its response to its own losses)
        comp_counts, comp_lost = flow_counts_from_jsonl(int_log, tb.addr("s2"), t0_s=float(int_series[0, 0]))
        # what a live sender receives: the sink's own records, replayed from its log
        sink_raw = view_arrays(replayed_view(int_log, tb.addr("s1"), dport=flow1_port(plan)))
    finally:
        tb.down()
        if os.path.exists(pcap):
            os.remove(pcap)
    F = features(tr)
    start = int(len(F) * warmup_frac)
    idx = np.unique(np.linspace(start, len(F) - 1, samples).astype(int))
    raw = {"ack_t": tr.ack_t, "rtt_s": tr.rtt_s.astype(np.float32), "acked_bytes": tr.acked_bytes.astype(np.int32),
           "send_t": tr.send_t, "retrans": tr.retrans.astype(bool), "sample_idx": idx, "int_series": int_series,
           "comp_packets_10ms": comp_counts, "comp_lost_10ms": comp_lost, **sink_raw}
    return F[idx], tr.ack_t[idx] - tr.ack_t[0], {"acks": int(len(F)), **goodputs(outs, plan), **lag,
                                                   "bottleneck_causal_share": causal_pick_share(per_hop),
                                                   "node_rt_priority": node_rt_priority}, raw


class CollectionError(ValueError):
    pass


def _interrupt(signum):
    raise KeyboardInterrupt(f"signal {signum}")


def _run_slice(plans, seconds, samples, warmup_frac, workdir, out_dir, node_python, node_rt_priority, tb_name,
               report):
    """Run ``plans`` one after the other on testbed ``tb_name``; report(event) each."""
    for p in plans:
        t0 = time.monotonic()
        try:
            X, t, extra, raw = one_run(p, seconds, samples, warmup_frac, workdir, tb_name, node_python,
                                       node_rt_priority)
        except (TraceError, RuntimeError, OSError) as e:
            report({"plan": p, "error": str(e)})
            continue
        save_run(os.path.join(out_dir, "runs", p["run"] + ".npz"), p, X, t, extra, raw)
        report({"plan": p, "extra": extra, "dt": time.monotonic() - t0})


def _worker(slot, plans, args, queue):
    # No Python handlers here: pyroute2 forks helpers that would inherit them and
    # unwind into this code. Ctrl-C is the parent's; its SIGTERM ends a worker at
    # once, and the parent then takes the worker's testbed down.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _run_slice(plans, *args, f"est{slot}", queue.put)
    finally:
        queue.put({"worker_done": slot})


def _option(key: str, value) -> str:
    if key == "udp_cross":
        return "with --udp-cross" if value else "without --udp-cross"
    return f"with --{key} {value}"


def collect(out_dir: str, runs: int, seconds: float = 60.0, seed: int = 1, samples: int = 100,
            warmup_frac: float = 0.1, progress=None, echo=print, without_vegas: bool = False,
            jobs: int = 1, node_python: str | None = None, distribution: str = "paper",
            node_rt_priority: int = 0, udp_cross: bool = False) -> dict:
    """Collect runs 0..runs-1 into out_dir (skipping those on disk), ``jobs`` testbeds
    at a time. ``without_vegas`` leaves out the runs that need the CCP datapath (a
    later resume fills them in). ``node_python``: the INT nodes' interpreter
    (int_node/runtime.py; None: $INTCC_NODE_PYTHON, else cpython); ``node_rt_priority``
    their SCHED_FIFO priority (0: none; each run's meta says how far its links fell behind).
    ``udp_cross``: UDP cross traffic in half the runs (run_plan)."""
    import multiprocessing as mp
    from int_node.runtime import ENV_VAR, InterpreterError, node_python as resolve_node_python
    node_python = (node_python or os.environ.get(ENV_VAR) or "cpython").strip()
    try:
        resolve_node_python(node_python)
    except InterpreterError as e:
        raise CollectionError(str(e)) from None
    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    record_path = os.path.join(out_dir, "collection.json")
    if os.path.exists(record_path):
        with open(record_path) as f:
            before = json.load(f).get("node_python", "cpython")     # older datasets: cpython
        if before != node_python and os.listdir(os.path.join(out_dir, "runs")):
            # the nodes' speed shapes the emulated links: one dataset, one interpreter
            raise CollectionError(f"{out_dir} was collected with node interpreter '{before}', not "
                                  f"'{node_python}': resume with --node-python {before}")
        with open(record_path) as f:
            recorded = json.load(f)
        defaults = {"distribution": "paper", "seed": None, "udp_cross": False}     # older datasets: the defaults
        for key, now in (("distribution", distribution), ("seed", seed), ("udp_cross", udp_cross)):
            was = recorded.get(key, defaults[key])
            if was != now and os.listdir(os.path.join(out_dir, "runs")):
                raise CollectionError(f"{out_dir} was collected {_option(key, was)}, not {_option(key, now)}: "
                                      f"resume with the same, or collect into another directory")
    with open(record_path, "w") as f:
        json.dump({"seed": seed, "seconds": seconds, "samples": samples, "warmup_frac": warmup_frac,
                   "ranges": RANGES, "distribution": distribution,
                   "hard_ranges": HARD_RANGES if distribution == "hard" else None, "ccas": CCAS,
                   "format": DATA_FORMAT, "node_python": node_python, "node_rt_priority": node_rt_priority,
                   "udp_cross": udp_cross, "udp_cross_share": UDP_CROSS_SHARE if udp_cross else None}, f, indent=1)
    plans = [run_plan(i, seed, distribution, udp_cross) for i in range(runs)]
    todo = [p for p in plans if not os.path.exists(os.path.join(out_dir, "runs", p["run"] + ".npz"))]
    done, failed = runs - len(todo), []
    if without_vegas:
        todo = [p for p in todo if not needs_agent(p)]
    workdir = tempfile.mkdtemp(prefix="intcc-collect-")
    dp = agent = None
    procs = []

    def report(ev):
        nonlocal done
        p = ev["plan"]
        if "error" in ev:
            failed.append({"run": p["run"], "error": ev["error"]})
            echo(f"{p['run']} {p['cca1']} vs {p['cca2']}: FAILED {ev['error']}")
            return
        done += 1
        if ev["extra"].get("emulation_off"):
            echo(f"{p['run']}: an emulated link ({ev['extra']['emulation_behind_worst_link']}) fell behind its rate "
                 f"by {ev['extra']['emulation_behind_ms_link_max']:.0f} ms: the host was too busy for its nodes "
                 f"(kept, flagged in the run's meta: emulation_off)")
        if progress:
            progress(p, ev["extra"], ev["dt"])

    # SIGTERM ends a collection like Ctrl-C: through the finally blocks that stop
    # the testbeds, the datapath and the agent (a run cut short is not kept).
    previous = unwind_on_signals(_interrupt)
    try:
        dp, agent = start_agent(todo, workdir)
        args = (seconds, samples, warmup_frac, workdir, out_dir, node_python, node_rt_priority)
        jobs = max(1, min(jobs, len(todo)))
        if jobs == 1:
            _run_slice(todo, *args, "est", report)
        else:
            ctx = mp.get_context("fork")
            queue = ctx.Queue()
            procs = [ctx.Process(target=_worker, args=(k, todo[k::jobs], args, queue), daemon=False)
                     for k in range(jobs)]
            for pr in procs:
                pr.start()
            running = jobs
            while running:
                ev = queue.get()
                if "worker_done" in ev:
                    running -= 1
                else:
                    report(ev)
    finally:
        restore_signals(previous)
        for pr in procs:
            if pr.is_alive():
                pr.terminate()     # SIGTERM: the worker's finally blocks take its testbed down
        for pr in procs:
            pr.join(60)
        if procs:
            from experiments.testbed.teardown import teardown
            for k in range(len(procs)):
                teardown(f"est{k}")
        if agent:
            agent.stop()
        if dp:
            dp.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return {"runs": runs, "done": done, "failed": failed, "left": runs - done - len(failed)}
