"""The estimator scored on the live path: runs of a collection plan, each on a
fresh dumbbell whose sink publishes over MQTT, flow 1 observed as a live sender observes
it (estimator.online.OnlineEstimator: a capture at s1, the sink's flow and hop records
from the broker), one estimate per interval from flow 1's start. Per run: the verdict at
the end (majority vote over ``window``) and the time from flow 1's start to the first
verdict from which every later one is right.

    intcc estimator live-eval --model M --runs 32 --seed K --distribution hard --out F
"""
from __future__ import annotations

import collections
import ipaddress
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from estimator.capture import Capture, PcapTail
from records import stamp
from estimator.vote import first_stable_correct

from experiments.runs.collection_plans import run_plan
from experiments.runs.plan_flows import check_agent, goodputs, join_flows, needs_agent, start_agent, start_flows
from experiments.runs.runner import CREDS
from experiments.runs.services import free_port
from experiments.testbed.traffic import RunFailed


def live_run(plan: dict, model, seconds: float, window: int, interval_s: float, workdir: str, broker_url: str,
             tb_name: str = "estlive") -> dict:
    """One run: the verdicts over time and the score."""
    from broker.subscriber import TelemetryView
    from estimator.online import OnlineEstimator
    from telemetry.schema import FlowRecord, HopRecord

    from experiments.testbed.teardown import teardown
    from experiments.testbed.bed import Testbed
    from experiments.testbed.topo import load_topo
    topo = os.path.join(os.path.dirname(__file__), "..", "testbed", "topologies", "dumbbell.toml")
    teardown(tb_name)
    est = OnlineEstimator(model, plan["cca1"], window)
    records: collections.deque = collections.deque(maxlen=200_000)     # paho's thread -> this loop
    tb = Testbed(load_topo(topo, plan["params"]), tb_name).up(exporter=f"{broker_url}?credentials={CREDS}")
    pcap = os.path.join(workdir, f"{plan['run']}.pcap")
    steps = []
    try:
        with TelemetryView(broker_url) as view, Capture(tb.ns("s1"), "intcc-sw1", pcap):
            view.on_record(lambda rec, topic: records.append(rec) if isinstance(rec, (FlowRecord, HopRecord))
                           else None)
            est.observer.sender = ipaddress.ip_address(tb.addr("s1")).packed
            t0 = time.monotonic()
            flows = start_flows(tb, plan, seconds)
            tail = PcapTail(pcap)
            next_t = t0 + interval_s
            while time.monotonic() < t0 + seconds + 1 and flows[0].running:
                time.sleep(max(0.0, next_t - time.monotonic()))
                next_t += interval_s
                est.feed_pcap(tail)
                while records:
                    est.add_record(records.popleft())
                step = est.step()
                if step is not None:
                    steps.append((time.monotonic() - t0, step.estimate, step.verdict.estimate,
                                  round(step.verdict.confidence, 3)))
            outs = join_flows(flows, plan)
        if needs_agent(plan):
            check_agent(workdir)
    finally:
        tb.down()
        if os.path.exists(pcap):
            os.remove(pcap)
    truth = plan["cca2"]
    t = np.array([s[0] for s in steps])
    right = np.array([s[2] == truth for s in steps], dtype=bool)
    stable = first_stable_correct(t, right) if len(steps) else None
    return {"run": plan["run"], "cca1": plan["cca1"], "cca2": truth, "plan": plan,
            "verdicts": len(steps), "final": steps[-1][2] if steps else None,
            "correct": bool(steps and steps[-1][2] == truth),
            "first_stable_correct_s": None if stable is None else round(float(stable), 2),
            "telemetry_records": est.telemetry.records,
            # top_flows entries of flows that are not TCP (the UDP cross traffic), left out
            "not_tcp_entries": est.hop_flows.not_tcp_entries,
            **goodputs(outs, plan), "timeline": steps}


@dataclass(frozen=True)
class PlanUnit:
    """One run of the plan, as a cluster's worker is handed it."""
    index: int
    run: str


class LiveEvaluation:
    """What the live runs share: the model, the broker, the CCP datapath and agent where a
    plan needs them, a work directory; ``run(i)`` runs plan run ``i`` on testbed
    ``testbed_name`` (one at a time: one broker, and testbeds alike publish the same node
    ids)."""

    def __init__(self, model_path: str, seed: int, distribution: str, udp_cross: bool, indices: list,
                 seconds: float, window: int, interval_s: float, testbed_name: str = "estlive"):
        from estimator.model import CCAEstimator
        self.model = CCAEstimator.load(model_path)
        self.seed, self.distribution, self.udp_cross = seed, distribution, udp_cross
        self.indices, self.seconds, self.window, self.interval_s = list(indices), seconds, window, interval_s
        self.testbed_name = testbed_name
        self.workdir = self.broker = self.dp = self.agent = None

    def plan(self, index: int) -> dict:
        return run_plan(index, self.seed, self.distribution, self.udp_cross)

    def __enter__(self) -> "LiveEvaluation":
        from broker.launch import BrokerProcess
        self.workdir = tempfile.mkdtemp(prefix="intcc-live-")
        try:
            self.broker = BrokerProcess("mosquitto", port=free_port(), credentials_file=CREDS,
                                        state_dir=os.path.join(self.workdir, "broker")).__enter__()
            self.dp, self.agent = start_agent([self.plan(i) for i in self.indices], self.workdir)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def run(self, index: int) -> dict:
        return live_run(self.plan(index), self.model, self.seconds, self.window, self.interval_s, self.workdir,
                        self.broker.url, tb_name=self.testbed_name)

    def __exit__(self, *exc) -> None:
        if self.agent:
            self.agent.stop()
        if self.dp:
            self.dp.stop()
        if self.broker is not None:
            self.broker.__exit__(None, None, None)
        self.agent = self.dp = self.broker = None
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def live_eval(model_path: str, runs: int, seed: int, distribution: str = "hard", seconds: float = 30.0,
              window: int = 50, interval_s: float = 0.5, out_path: str | None = None, echo=print,
              first: int = 0, udp_cross: bool = False, cluster: str | None = None, retries: int = 2) -> dict:
    """Runs ``first``..``first + runs - 1`` of the plan (``seed``, ``distribution``,
    ``udp_cross``), one at a time, or on the testbeds of the Ray cluster at ``cluster``
    (each tried ``retries`` more times if it fails)."""
    indices = list(range(first, first + runs))
    settings = dict(model_path=os.path.abspath(model_path), seed=seed, distribution=distribution,
                    udp_cross=udp_cross, indices=indices, seconds=seconds, window=window, interval_s=interval_s)
    results, failed = [], []

    if cluster:
        _live_eval_on_cluster(settings, cluster, results, failed, echo, retries)
    else:
        with LiveEvaluation(**settings) as live:
            for k, i in enumerate(indices, 1):
                plan, t_run = live.plan(i), time.monotonic()
                try:
                    res = live.run(i)
                except (RunFailed, RuntimeError, OSError) as e:
                    failed.append({"run": plan["run"], "error": str(e)})
                    echo(f"[{k}/{runs}] {plan['run']} {plan['cca1']} vs {plan['cca2']}: FAILED {e}")
                    continue
                results.append(res)
                echo(f"[{k}/{runs}] {plan['run']} {_verdict_text(res)}, {res['verdicts']} verdicts "
                     f"({time.monotonic() - t_run:.0f} s)")
    summary = summarise(results)
    summary.update(model=model_path, seed=seed, distribution=distribution, seconds=seconds, window=window,
                   interval_s=interval_s, failed=failed, runs=results, provenance=stamp())
    if out_path:
        with open(out_path, "w") as f:
            json.dump(summary, f, indent=1)
    return summary


def _verdict_text(res: dict) -> str:
    return (f"{res['cca1']:>5} vs {res['cca2']:<5} final {res['final']} ({'right' if res['correct'] else 'WRONG'}), "
            f"stable correct from {res['first_stable_correct_s']} s")


def _live_eval_on_cluster(settings: dict, address: str, results: list, failed: list, echo, retries: int) -> None:
    """The runs on the cluster's testbeds (experiments/cluster/): ``results`` in the plan's
    order, whichever finished first."""
    import pickle
    from experiments.cluster.submit import Job, dispatch
    plans = {i: run_plan(i, settings["seed"], settings["distribution"], settings["udp_cross"])
             for i in settings["indices"]}
    units = [PlanUnit(i, plan["run"]) for i, plan in plans.items()]
    got: dict = {}

    def on_result(unit, res, attempt):
        if res["failure"] is not None:
            return res["failure"]["error"], res["failure"]
        got[unit.index] = res["result"]
        return None, _verdict_text(res["result"])

    def on_failed(unit, attempt, error, failure):
        failed.append({"run": unit.run, "error": error, "attempts": attempt})

    job = Job("live", pickle.dumps(settings), any(needs_agent(p) for p in plans.values()), "live-eval")
    dispatch(job, units, address, on_result, on_failed, echo=echo, retries=retries)
    results += [got[i] for i in sorted(got)]


def summarise(results: list[dict]) -> dict:
    """Accuracy of the final verdict (overall, per local CCA, per pair) and the median time
    from flow 1's start to the first stable correct verdict (runs that reach one)."""
    def acc(rs):
        return round(float(np.mean([r["correct"] for r in rs])), 3) if rs else None
    by_local = collections.defaultdict(list)
    by_pair = collections.defaultdict(list)
    for r in results:
        by_local[r["cca1"]].append(r)
        by_pair[f"{r['cca1']} vs {r['cca2']}"].append(r)
    times = [r["first_stable_correct_s"] for r in results if r["first_stable_correct_s"] is not None]
    return {"live_runs": len(results), "final_accuracy": acc(results),
            "per_local": {k: acc(v) for k, v in sorted(by_local.items())},
            "per_pair": {k: acc(v) for k, v in sorted(by_pair.items())},
            "stable_correct_runs": len(times),
            "median_stable_correct_s": round(float(np.median(times)), 2) if times else None}
