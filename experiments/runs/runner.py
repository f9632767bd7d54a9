"""Run a scenario (experiments/runs/scenario.py) on the testbed and write its results:

    OUT/summary.json              {"format": 2, "scenario", "records": one per run (algorithm, loss_pct, ...)}
    OUT/runs/<run>/series.csv     t_s, goodput_mbps (receiver), cwnd_bytes, rtt_ms, retransmits (sender)
    OUT/runs/<run>/series.png     the same, plotted
    OUT/runs/<run>/trace.csv      a CCP agent's decisions (CCP algorithms only)
    OUT/goodput.png               mean goodput (± std over repeats) per algorithm and sweep value

One testbed (or ``jobs`` of them, each running a repeat at once), one datapath daemon
and (for INT-aware algorithms) one MQTT broker serve every run; the swept loss is changed
on the running nodes. A run whose flow fails is listed in OUT/failed.json; the rest go on.
"""
from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import threading
import time
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from int_node.runtime import run_path

from experiments.reports import fairness_plots
from experiments.testbed.agent_trace import split_agent_trace
from experiments.testbed.kernel_trace import KernelTcpTrace, summarize as summarize_kernel_trace
from experiments.testbed.linkctl import (check_emulation, check_loss, configured_loss_pct, emulation_lag_counts, emulation_lag_fields,
                      link_loss_counts, run_seed, seed_losses, set_loss, set_reconfig)
from experiments.runs.dataset_run import DatasetRun, npz_path, record_collection
from experiments.runs.metrics import mean_queue_delay_ms, queueing_delays_ms
from experiments.reports.plots import plot_overlay, plot_summary
from experiments.runs.services import dashboard, exclusive_testbeds, free_port
from experiments.runs.run_record import FlowResult, record, write_summary
from experiments.runs.separation_record import SeparationRecorder
from experiments.runs.slot_record import SlotRecorder
from experiments.runs.algorithm import KERNEL_CCAS, Algorithm, batch_agent
from experiments.runs.scenario import MAX_COMPETITORS, TOPOLOGY_SWEEPS, Scenario
from records import stamp

from experiments.testbed.teardown import teardown
from experiments.testbed.bed import Testbed
from experiments.testbed.topo import load_topo
from experiments.testbed.traffic import (MAIN_PORT, PORT_STRIDE, UDP_CROSS_AFTER_START_S, BackgroundFlow, RunFailed, iperf,
                                        overlap_fraction, tcp_counters)

TESTBED_NAME = "exp"
log = logging.getLogger(__name__)
CREDS = run_path("exp-broker", "credentials.json")


@dataclass
class Services:
    """What every run of a scenario shares: the CCP datapath and the broker, if needed."""
    scenario: Scenario
    datapath: Optional[Any] = None            # ccp_agent.datapath.DatapathProcess
    broker_url: Optional[str] = None
    agent_process: Optional[Callable] = None  # ccp_agent.datapath.AgentProcess


@dataclass
class RunSpec:
    """One run of a batch: its testbed, where its results go, its loss draws and port."""
    testbed: Testbed
    run_dir: str
    loss_seed: int
    port: int
    alg: Optional[Algorithm] = None           # the batch's algorithm as this run runs it (Scenario.run_setting)
    plan: Optional[dict] = None               # a collection's run: its plan (collection_plans.run_plan)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


#: Node ids of testbed k start at NODE_ID_STRIDE * k + the topology's (flows are told apart
#: by port: PORT_STRIDE)
NODE_ID_STRIDE = 100


def testbed_names(jobs: int) -> list[str]:
    return [TESTBED_NAME if k == 0 else f"{TESTBED_NAME}{k}" for k in range(jobs)]


def run_name(alg: Algorithm, key: str, value, rep: int) -> str:
    # a value is part of a directory name: a reconfig setting's "100ms/10ms" as "100ms+10ms"
    value = str(value).replace("/", "+").replace(os.sep, "+")
    return f"{slug(alg.label)}_{key}-{value}_r{rep}" if key != "none" else f"{slug(alg.label)}_r{rep}"


def needs_ccp_datapath(sc, seed: int = 0) -> bool:
    """Whether any run of ``sc`` has a flow on the CCP datapath: a CCP algorithm, flow 1 on
    the competitor's CCA as CCP ('oracle ccp'), or a CCA the kernel lacks (vegas) for flow 1
    or a competitor; for a collection, any of its plans (of ``seed``) left to run."""
    if sc.collection:
        algs = [sc.run_setting(seed, rep, alg, None, 0)[1] for alg, _, reps in sc.batches(1) for rep in reps]
        return any(a.uses_ccp for a in algs)
    return any(a.ccp or a.same_on_ccp for a in sc.algorithms) or any(
        c not in KERNEL_CCAS for c in sc.sweep.get("competitor", []) + [c for a in sc.algorithms
                                                                       for c in [a.cca, a.competitor, *a.cca_random] if c])


def run_scenario(sc: Scenario, out_dir: str, echo=print, jobs: int = 1, dashboard_port: int | None = None) -> list[dict]:
    """Every run of ``sc``; ``jobs`` > 1 brings up that many testbeds (exp, exp1, ...) and
    runs as many repeats of one algorithm at once (Scenario.batches), one CCP agent
    serving all their flows. For low-rate runs (high loss), where the nodes idle: the
    testbeds share the machine's cores."""
    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    sc = prepare(sc, out_dir)
    jobs = max(1, min(jobs, len(sc.todo_repeats)))
    if jobs > 1 and dashboard_port:
        raise RuntimeError(f"--jobs {jobs} with --dashboard: one dashboard would show the nodes and flows of "
                           f"every testbed at once; use one testbed")
    batches = list(sc.batches(jobs))
    n_runs = sum(len(reps) for _, _, reps in batches)
    if not n_runs:
        echo(f"{sc.name}: no run left to do in {out_dir}")
        return []
    records: list[dict] = []
    failed: list[dict] = []
    echo(f"loss draws seeded from {sc.seed} (--seed {sc.seed} repeats them)")
    t_start = time.monotonic()
    provenance = stamp()                     # the code and command this run started with
    with RunSession(sc, out_dir, testbed_names(jobs), echo=echo, dashboard_port=dashboard_port) as session:
        for alg, sweep, reps in batches:
            for outcome in session.run_batch(alg, sweep, reps):
                label = f"{outcome.label:16s} {outcome.what}repeat {outcome.repeat}"
                if outcome.failure is not None:
                    failed.append(outcome.failure)
                    with open(os.path.join(out_dir, "failed.json"), "w") as f:
                        json.dump(failed, f, indent=1)
                    echo(f"[{len(records) + len(failed)}/{n_runs}] {label}: FAILED ({outcome.failure['error']}); "
                         f"kept in failed.json, the others go on")
                    continue
                for warning in outcome.warnings:
                    echo(f"WARNING {outcome.name}: {warning}")
                records.append(outcome.record)
                done = len(records) + len(failed)
                eta = (time.monotonic() - t_start) / done * (n_runs - done)
                echo(f"[{done}/{n_runs}] {label}: {outcome.record['goodput_mbps']:7.2f} Mbit/s, "
                     f"{outcome.record['retransmits']} retransmits  (eta {eta / 60:.0f} min)")
            write_summary(out_dir, sc.name, records, provenance)   # after every batch: readable mid-run
    if failed:
        echo(f"{len(failed)} of {n_runs} runs failed: {os.path.join(out_dir, 'failed.json')}")
    if not records:
        raise RuntimeError(f"every run failed; first: {failed[0]['error']}")
    plot_results(sc, records, out_dir)
    return records


def prepare(sc: Scenario, out_dir: str) -> Scenario:
    """``sc`` as it runs into ``out_dir``: its seed drawn if it has none (recorded), and a
    collection's runs already on disk skipped (and the collection's own record written)."""
    if sc.seed is None:
        sc = replace(sc, seed=random.SystemRandom().randrange(2**31))
    if sc.collection:       # a collection's runs on disk are kept, not run again
        sc = replace(sc, skip_repeats=sc.skip_repeats | {r for r in sc.todo_repeats if os.path.exists(
            npz_path(out_dir, sc.collection.plan(sc.seed, r)))})
        record_collection(out_dir, sc.collection, sc.seed, sc.seconds, sc.node_python, sc.node_rt_priority)
    return sc


def plot_results(sc: Scenario, records: list[dict], out_dir: str) -> None:
    """The scenario's overview plots of its records, in ``out_dir``."""
    if sc.collection:
        pass     # a collection's runs are data (OUT/runs/*.npz), each on a network of its own: no overlay
    elif "competitor" in sc.sweep:
        fairness_plots.plot(records, out_dir, sc.name)
    elif sc.sweep:
        key = next(iter(sc.sweep))
        plot_summary(records, key, os.path.join(out_dir, "goodput.png"), sc.description or sc.name)
    else:
        plot_overlay(records, out_dir, "cwnd_bytes", "cwnd (kB)", 1e-3, "cwnd.png", sc.description or sc.name)
        if any("competitor" in r for r in records):
            plot_overlay(records, out_dir, "jain", "Jain's index", 1, "jain.png", sc.description or sc.name)


@dataclass
class RunOutcome:
    """One run of a batch: its record (and the checks' warnings), or what failed."""
    repeat: int
    name: str
    label: str                      # the algorithm as the run ran it
    what: str                       # its sweep value, for a progress line
    record: Optional[dict] = None
    failure: Optional[dict] = None
    warnings: tuple = ()


class RunSession:
    """What the runs of a scenario share on one machine, for as long as it is entered: its
    testbeds (``names``, one per run at once; torn down first, as a killed run may have
    left them), the MQTT broker, the dashboard and the CCP datapath where needed. ``lock``
    (default: services.exclusive_testbeds, one ``intcc exp run`` at a time) guards the
    testbeds against another run that would tear them down. ``sc`` is prepared (its seed
    set)."""

    def __init__(self, sc: Scenario, out_dir: str, names: list[str], echo=print,
                 dashboard_port: int | None = None, lock=None):
        if sc.seed is None:
            raise ValueError("RunSession: the scenario needs its seed (runner.prepare)")
        self.sc, self.out_dir, self.names, self.echo = sc, out_dir, names, echo
        self.dashboard_port = dashboard_port
        self.lock = lock if lock is not None else exclusive_testbeds()
        self.stack = ExitStack()
        self.testbeds: list = [None] * len(names)
        self.testbed_params: list = [None] * len(names)
        self.services: Optional[Services] = None
        self.exporter = "jsonl"

    def __enter__(self) -> "RunSession":
        from broker.launch import BrokerProcess
        from ccp_agent.datapath import AgentProcess, DatapathProcess
        sc, stack = self.sc, self.stack
        needs_tele = any(a.needs_telemetry for a in sc.algorithms)
        if sc.collection and (needs_tele or self.dashboard_port or sc.record_telemetry):
            raise RuntimeError(f"{sc.name}: a collection keeps flow 1 from the sinks' own logs (the jsonl "
                               f"exporter); run it without --record-telemetry and --dashboard")
        try:
            stack.enter_context(self.lock)
            broker_url = None
            if needs_tele or self.dashboard_port or sc.record_telemetry:
                broker = BrokerProcess("mosquitto", port=free_port(), credentials_file=CREDS,
                                       state_dir=os.path.join(self.out_dir, "broker"))
                stack.enter_context(broker)
                # every client finds its role's login in the run's credentials file: without it an
                # agent published as nobody and the broker's ACL dropped its estimates and switches
                broker_url = self.exporter = f"{broker.url}?credentials={CREDS}"
            if self.dashboard_port:
                stack.enter_context(dashboard(broker_url, self.dashboard_port, self.out_dir, self.echo))
            stack.callback(lambda: [tb.down() for tb in self.testbeds if tb is not None])
            for k in range(len(self.names) if not (sc.draw or sc.collection) else 0):
                self.testbed(k, sc.params)
            self.services = Services(sc, broker_url=broker_url, agent_process=AgentProcess)
            if needs_ccp_datapath(sc, sc.seed):
                self.services.datapath = DatapathProcess(state_dir=os.path.join(self.out_dir, "datapath"))
                stack.enter_context(self.services.datapath)
        except BaseException:
            stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stack.close()

    def testbed(self, k: int, params: dict) -> Testbed:
        """Testbed k with these topology parameters (a new one when they changed: [draw])."""
        if self.testbeds[k] is not None and self.testbed_params[k] == params:
            return self.testbeds[k]
        name = self.names[k]
        if self.testbeds[k] is not None:
            self.testbeds[k].down()
        teardown(name)
        self.echo(f"testbed {name}: {self.sc.topology} {params} (exporter {self.exporter.split('?')[0]}) ...")
        # testbed k's nodes publish ids NODE_ID_STRIDE * k higher: one broker keeps them apart
        topo = load_topo(self.sc.topology_path, params).with_node_ids_shifted(NODE_ID_STRIDE * k)
        self.testbeds[k] = Testbed(topo, name).up(exporter=self.exporter, node_rt_priority=self.sc.node_rt_priority,
                                                  node_python=self.sc.node_python)
        self.testbed_params[k] = params
        return self.testbeds[k]

    def run_batch(self, alg: Algorithm, sweep: dict, reps: list[int]) -> list[RunOutcome]:
        """Repeats ``reps`` of ``alg`` at the sweep's value, one per testbed, at once."""
        sc, base_seed = self.sc, self.sc.seed
        if len(reps) > len(self.names):
            raise ValueError(f"{len(reps)} repeats at once on {len(self.names)} testbeds")
        (key, value), = sweep.items()
        seeds = [run_seed(base_seed, key, value, rep) for rep in reps]
        settings = [sc.run_setting(base_seed, rep, alg, value, seed) for rep, seed in zip(reps, seeds)]
        params = [p for p, _, _ in settings]
        beds = [self.testbed(k, sc.topology_params(p)) for k, p in enumerate(params)]
        if key == "loss_pct":
            for tb in beds:
                set_loss(tb, value)
        elif key == "reconfig":
            for tb in beds:
                set_reconfig(tb, value)
        names = [plan["run"] if plan else run_name(alg, key, value, rep) for (_, _, plan), rep in zip(settings, reps)]
        specs = [RunSpec(tb, os.path.join(self.out_dir, "runs", name), seed, MAIN_PORT + PORT_STRIDE * k, run_alg, plan)
                 for k, (tb, name, seed, (_, run_alg, plan)) in enumerate(zip(beds, names, seeds, settings))]
        batch = _batch(self.services, alg, specs)
        what = f"{key} {value:<5} " if key != "none" else ""
        outcomes = []
        for rec, rep, name, loss_seed, spec, p in zip(batch, reps, names, seeds, specs, params):
            label = spec.alg.label if spec.plan else alg.label
            if isinstance(rec, RunFailed):
                outcomes.append(RunOutcome(rep, name, label, what, failure={
                    "run": name, "algorithm": alg.label, "repeat": rep, "loss_seed": loss_seed, key: value,
                    "error": str(rec)}))
                continue
            rec.update({"algorithm": alg.label, "repeat": rep, "run": name, "seed": base_seed,
                        "loss_seed": loss_seed, "flow1": spec.alg.ccp or spec.alg.cca,
                        "jobs": len(self.names), "node_rt_priority": sc.node_rt_priority})
            if sc.draw or spec.plan or TOPOLOGY_SWEEPS & set(sc.sweep):    # networks a report pairs by
                rec["params"] = p
            if spec.plan:
                rec["plan"] = spec.plan
            if spec.alg.competitor_delay_s:
                rec["competitor_delay_s"] = spec.alg.competitor_delay_s
            if spec.alg.udp_cross_mbps:
                rec["udp_cross_mbps"] = spec.alg.udp_cross_mbps
            if spec.alg.competitor_rate_mbps:
                rec["competitor_rate_mbps"] = spec.alg.competitor_rate_mbps
            if key != "none":
                rec[key] = value
            warnings = [w for w in (check_loss(rec, value if key == "loss_pct" else configured_loss_pct(spec.testbed)),
                                    check_emulation(rec)) if w]
            outcomes.append(RunOutcome(rep, name, label, what, record=rec, warnings=tuple(warnings)))
        return outcomes


def _batch(services: Services, alg: Algorithm, specs: list[RunSpec]) -> list:
    """One algorithm's runs, one per spec (each on its own testbed), at once under one
    agent: a record per run, or the RunFailed that ended it."""
    import threading
    dp = services.datapath
    for spec in specs:
        os.makedirs(spec.run_dir, exist_ok=True)
    trace_path = specs[0].run_dir + ".agent-trace.csv"      # split into each run's trace.csv
    log_path = os.path.join(specs[0].run_dir, "agent.log")
    results: list = [None] * len(specs)

    def flow(k):
        try:
            results[k] = _flow(services.scenario, specs[k].alg or alg, specs[k])
        except BaseException as e:      # reported by the batch
            results[k] = e

    agent = recorder = None
    runs = [spec.alg or alg for spec in specs]
    try:     # runs whose flows are all in the kernel need no agent and are not touched by one
        need = batch_agent([(run, spec.port) for run, spec in zip(runs, specs)])
    except ValueError as e:
        raise RuntimeError(f"{alg.label}: {e}; run with --jobs 1") from None
    flow1_traced = any(a.ccp for a in runs)
    try:
        if services.scenario.record_telemetry:
            from .telemetry_record import TelemetryRecorder
            recorder = TelemetryRecorder(services.broker_url, [s.run_dir for s in specs], NODE_ID_STRIDE).start()
        if need:
            name, opts = need
            # flow 1's decisions are traced; a competitor's agent (flow 1 in the kernel) is not
            opts = opts + (["--trace", trace_path] if flow1_traced else []) + ["--state-dir", dp.state_dir]
            if alg.needs_telemetry:
                opts += ["--broker", services.broker_url]
            agent = services.agent_process(name, opts, log_path=log_path).start()
            dp.wait_agent(True)
        threads = [threading.Thread(target=flow, args=(k,)) for k in range(len(specs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if recorder is not None:
            recorder.stop()
        failure = agent.failure() if agent is not None else None
        if agent is not None:
            agent.stop()
            dp.wait_agent(False)
    if failure:
        raise RuntimeError(f"the {need[0]} agent failed, the flow ran the datapath's fallback:\n{failure}")
    for res in results:
        if isinstance(res, BaseException) and not isinstance(res, RunFailed):
            raise res
    if need and flow1_traced:
        competitor_dirs = {spec.port + 1 + k: spec.run_dir for spec, run in zip(specs, runs)
                           for k in range(run.competitors) if run.competitor_on_ccp}
        if split_agent_trace(trace_path, {spec.port: spec.run_dir for spec in specs}, competitor_dirs):
            log.warning("agent trace rows of no run's flow kept in %s", trace_path)
        for spec in specs[1:]:
            shutil.copy(log_path, os.path.join(spec.run_dir, "agent.log"))
    records = []
    for spec, res in zip(specs, results):
        try:
            records.append(res if isinstance(res, RunFailed)
                           else record(spec.alg or alg, services.scenario, spec.run_dir, res))
        except RunFailed as e:
            records.append(e)
    return records


#: the UDP cross traffic's port, above a run's competitors' (main + 1 .. main + MAX_COMPETITORS)
UDP_CROSS_PORT_OFFSET = MAX_COMPETITORS + 1


def _flow(sc: Scenario, alg: Algorithm, spec: RunSpec) -> FlowResult:
    """One run's flows on its testbed (the agent, if any, is up): iperf3's output and counters."""
    tb, port = spec.testbed, spec.port
    client, server = sc.flows["main"]
    before = link_loss_counts(tb)
    lag_before = emulation_lag_counts(tb)
    tcp_before = tcp_counters(tb, client)
    sinks = {n: info["int_log"] for n, info in tb.state["nodes"].items() if info.get("int_log")}
    log_offsets = {n: os.path.getsize(p) if os.path.exists(p) else 0 for n, p in sinks.items()}
    comp, competitors, udp, out, flow1_data = {}, [], None, None, None
    extra = {}
    dataset = (DatasetRun(tb, sc.flows["main"], sc.flows["competitor"][0], port, spec.plan, sc.collection, spec.run_dir)
               if spec.plan else None)
    seed_losses(tb, spec.loss_seed)      # last thing before the flows: nothing else draws
    try:
        competitor_ports = [port + 1 + k for k in range(alg.competitors)] if alg.competitor else []
        # flows of the same start go together: none a round ahead of the others in slow start
        # and UDP cross traffic with them: started first, a flood would fill the queue and the
        # host's CPUs while the TCP flows were still being set up, and end before they did
        windows = [alg.competitor_window_s(k, sc.seconds) for k in range(len(competitor_ports))]
        same_start = sum(1 for start_s, _ in windows if not start_s)
        n_together = 1 + same_start + (1 if alg.udp_cross_mbps else 0)
        together = threading.Barrier(n_together) if n_together > 1 else None
        with (KernelTcpTrace(port=port, more_ports=competitor_ports) if sc.kernel_trace else nullcontext()) as ktrace, \
                (dataset.capture() if dataset else nullcontext()), \
                (SlotRecorder(tb, spec.run_dir) if sc.record_slots else nullcontext()), \
                SeparationRecorder(tb, spec.run_dir, [port, *competitor_ports],
                                   senders={port: client, **{p: sc.competitor_pair(k)[0]
                                                             for k, p in enumerate(competitor_ports)}}) as separation:
            competitors = [BackgroundFlow(tb, *sc.competitor_pair(k), "ccp" if alg.competitor_on_ccp else alg.competitor_cca(k),
                                          windows[k][1], sc.interval_s, port=p, start_delay_s=windows[k][0],
                                          start_together=together if not windows[k][0] else None,
                                          rate_mbps=alg.competitor_rate_mbps or None)
                           for k, p in enumerate(competitor_ports)]
            if alg.competitor_mix:
                extra["competitor_ccas"] = [alg.competitor_cca(k) for k in range(len(competitor_ports))]
            if alg.udp_cross_mbps:     # beside the competitors, from their hosts, above their ports
                udp = BackgroundFlow(tb, *sc.flows["competitor"], "udp", sc.seconds, sc.interval_s,
                                     port=port + UDP_CROSS_PORT_OFFSET, udp_mbps=alg.udp_cross_mbps,
                                     start_together=together, udp_after_start_s=UDP_CROSS_AFTER_START_S)
            out = iperf(tb, client, server, "ccp" if alg.ccp else alg.cca, sc.seconds, sc.interval_s, port=port,
                        start_together=together)
            # iperf3 counts its seconds from its first data and returns at their end: when they began
            flow1_end = time.time()
            flow1_data = (flow1_end - out["end"]["sum_sent"]["seconds"], flow1_end)
        separated = separation.summary()
        if separated:
            extra["separation_state"] = separated
        if ktrace is not None:
            ktrace.write_csv(os.path.join(spec.run_dir, "kernel_trace.csv"))
            extra["kernel_trace"] = summarize_kernel_trace(ktrace.rows, port)
            if competitor_ports:     # the competitors' senders, traced beside flow 1's
                extra["kernel_trace_competitors"] = [summarize_kernel_trace(ktrace.rows, p) for p in competitor_ports]
            if ktrace.lost_events:
                extra["kernel_trace"] = {**(extra["kernel_trace"] or {}), "lost_events": ktrace.lost_events}
    finally:
        for competitor in competitors:
            try:
                comp.setdefault("outs", []).append(competitor.join())
            except Exception as e:     # reported with the run
                comp["error"] = str(e)
        if udp is not None:            # cross traffic: not a competitor in the run's shares
            try:
                got = udp.join()
                extra["udp_cross"] = {k: got[k] for k in ("received_mbps", "loss_fraction", "send_s") if k in got}
                if flow1_data is not None and got.get("started_at") and got.get("send_s"):
                    extra["udp_cross"]["overlap_fraction"] = overlap_fraction(
                        flow1_data, (got["started_at"], got["started_at"] + got["send_s"]))
            except Exception as e:
                comp["error"] = f"UDP cross traffic: {e}"
    after = link_loss_counts(tb)
    # how faithful the emulation was: a host too busy for its links makes every figure suspect
    lag = emulation_lag_fields(lag_before, emulation_lag_counts(tb))
    extra.update(lag)
    if dataset and not comp.get("error"):
        meta = {"seconds": sc.seconds, **lag, "node_rt_priority": sc.node_rt_priority}
        check_emulation(meta)          # its emulation_off flag, as the run's record has it
        dataset.save([out, *comp.get("outs", [])], extra.get("udp_cross", {}).get("received_mbps"), meta)
    tcp_after = tcp_counters(tb, client)
    rates = [l.rate_mbps for l in (tb.topo.links if tb.topo else []) if l.rate_mbps]
    delays = [mean_queue_delay_ms(p, log_offsets[n], tb.addr(client), port, min(rates))
              for n, p in sinks.items()] if rates else []
    if any(d is not None for d in delays):         # the bottleneck's queueing delay (INT, jsonl exporter)
        extra["queue_delay_ms_mean"] = max(d for d in delays if d is not None)
    # every flow's own, from the INT transit delays (bufferbloat: what each flow waits)
    flows = [(tb.addr(client), port)] + [(tb.addr(sc.competitor_pair(k)[0]), p) for k, p in enumerate(competitor_ports)]
    queueing = {}
    for n, p in sinks.items():
        for dport, got in queueing_delays_ms(p, log_offsets[n], flows).items():
            if got["packets"] > queueing.get(str(dport), {}).get("packets", 0):
                queueing[str(dport)] = got
    if queueing:
        extra["queueing_ms"] = queueing
    return FlowResult(out, comp, extra, link_passed=after[0] - before[0], link_lost=after[1] - before[1],
                      link_lost_configured=after[2] - before[2],
                      sender_tcp={k.split(".")[1]: tcp_after[k] - tcp_before.get(k, 0) for k in tcp_after})
