"""The submitter: ``intcc exp run SCENARIO --cluster ADDRESS``. It plans the scenario's
runs (units.py), starts one worker per testbed the cluster advertises (as many as there
are runs), hands each idle worker the next run, and merges each result into OUT as a
local run does: OUT/summary.json (rewritten after every run, in the local runner's order),
OUT/runs/<run>/, OUT/failed.json. Beside them OUT/cluster.json says where each run ran,
how long it took and how many attempts it needed.

A run whose flow failed, or whose worker raised or died (its node gone), is tried again
on any worker, up to ``retries`` more times. Run again with the same OUT to resume: the
runs in OUT/summary.json are kept and not run again (the seed is taken from it)."""
from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import tarfile
import time
from collections import deque
from dataclasses import dataclass, field, replace

from experiments.cluster.units import Unit, network_key, plan_units
from experiments.runs.algorithm import PROJECT
from experiments.runs.run_record import write_summary
from experiments.runs.runner import needs_ccp_datapath, plot_results, prepare
from experiments.runs.scenario import Scenario
from records import stamp

TESTBED_RESOURCE = "intcc_testbed"
DATAPATH_RESOURCE = "intcc_datapath"
#: how long the submitter waits for a worker where none is left (a node's restart)
NO_WORKER_TIMEOUT_S = 120.0


class ClusterError(RuntimeError):
    pass


def _ray():
    try:
        import ray
    except ImportError:
        raise ClusterError("--cluster needs Ray: pip install 'intcc[cluster]' (or make setup)") from None
    return ray


@dataclass
class Progress:
    total: int
    done: int = 0
    failed: int = 0
    retried: int = 0
    t0: float = field(default_factory=time.monotonic)
    done_here: int = 0          # in this invocation (a resumed job's ETA counts only these)

    def line(self, running: int) -> str:
        left = self.total - self.done - self.failed
        rate = (time.monotonic() - self.t0) / self.done_here if self.done_here else None
        eta = f"eta {rate * left / 60:.0f} min" if rate is not None else "eta ?"
        return f"running {running}, failed {self.failed}, retried {self.retried}; {eta}"


def _resume(sc: Scenario, out_dir: str, echo) -> tuple[Scenario, list[dict]]:
    """The records already in OUT/summary.json, and ``sc`` with their seed."""
    path = os.path.join(out_dir, "summary.json")
    if not os.path.exists(path):
        return sc, []
    with open(path) as f:
        summary = json.load(f)
    records = summary.get("records", [])
    if summary.get("scenario") != sc.name:
        raise ClusterError(f"{path} is scenario {summary.get('scenario')!r}, not {sc.name!r}: use another --out")
    seeds = {r.get("seed") for r in records}
    if records and len(seeds) == 1:
        seed, = seeds
        if sc.seed is not None and sc.seed != seed:
            raise ClusterError(f"{path} holds runs of seed {seed}, not --seed {sc.seed}: use another --out")
        sc = replace(sc, seed=seed)
    if records:
        echo(f"resuming {out_dir}: {len(records)} runs on disk are kept")
    return sc, records


def _unpack(blob: bytes, runs_dir: str, name: str) -> None:
    """A run's files (its directory, and <run>.* beside it) into ``runs_dir``, replacing
    what an earlier attempt left."""
    shutil.rmtree(os.path.join(runs_dir, name), ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member in tar.getmembers():       # the run's own files, nothing outside them
            own = member.name == name or member.name.startswith(name + "/") or (
                member.name.startswith(name + ".") and "/" not in member.name)
            if not own or member.issym() or member.islnk() or ".." in member.name.split("/"):
                raise ClusterError(f"run {name}: its files name {member.name!r}, outside runs/{name}")
        tar.extractall(runs_dir, filter="data")


@dataclass
class Job:
    """What the workers run: ``kind`` names the worker's session (worker.SESSIONS), ``blob``
    its settings (pickled: the scenario, or the live evaluation's), the same for every unit."""
    kind: str
    blob: bytes
    needs_datapath: bool
    name: str


def dispatch(job: Job, units: list, address: str, on_result, on_failed, echo=print, retries: int = 2,
             network: dict | None = None, already_done: int = 0) -> None:
    """Every unit (each with a ``run`` name) on a worker of the cluster at ``address``.
    ``on_result(unit, res, attempt)`` takes a worker's answer and returns (None, its
    progress text), or (the error, the failure record) where the unit failed and is to be
    tried again; ``on_failed(unit, attempt, error, failure)`` takes a unit that failed every
    attempt. ``network``: run name -> the network it runs on (a worker gets a unit of the
    network its testbed has first)."""
    ray = _ray()
    from experiments.cluster.worker import TestbedWorker
    if not ray.is_initialized():
        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
    resources = ray.cluster_resources()
    testbeds = int(resources.get(TESTBED_RESOURCE, 0))
    if testbeds < 1:
        raise ClusterError(f"the cluster at {address} advertises no {TESTBED_RESOURCE}: start its workers with "
                           f"ray start ... --resources '{{\"{TESTBED_RESOURCE}\": N, \"{DATAPATH_RESOURCE}\": 1}}'")
    wants = {TESTBED_RESOURCE: 1}
    if job.needs_datapath:
        # one CCP datapath per kernel: a host runs one such testbed at a time
        testbeds = min(testbeds, int(resources.get(DATAPATH_RESOURCE, 0)))
        if testbeds < 1:
            raise ClusterError(f"{job.name} runs flows on the CCP datapath and the cluster advertises no "
                               f"{DATAPATH_RESOURCE} (one per host: --resources '{{\"{DATAPATH_RESOURCE}\": 1, ...}}')")
        wants[DATAPATH_RESOURCE] = 1
    actor_cls = ray.remote(TestbedWorker).options(resources=wants, num_cpus=0, max_restarts=0)
    own_commit = stamp().get("commit")
    network = network or {}
    pending = deque((u, 1) for u in units)
    starting: dict = {}          # info ref -> actor
    idle: list = []
    running: dict = {}           # result ref -> (actor, unit, attempt)
    alive: list = []             # actors that came up
    built: dict = {}             # actor -> the network its testbed has
    progress = Progress(len(units) + already_done, done=already_done)
    n_workers = min(testbeds, len(units))

    def start_worker():
        actor = actor_cls.remote()
        starting[actor.info.remote()] = actor

    def failed_attempt(unit, attempt: int, error: str, failure: dict | None = None):
        if attempt <= retries:
            progress.retried += 1
            echo(f"  {unit.run}: attempt {attempt} failed ({error.strip().splitlines()[-1] if error.strip() else '?'}); "
                 f"tried again")
            pending.append((unit, attempt + 1))
            return
        progress.failed += 1
        on_failed(unit, attempt, error, failure)
        echo(f"[{progress.done + progress.failed}/{progress.total}] {unit.run}: FAILED after {attempt} attempts "
             f"({error}); kept in failed.json, the others go on")

    for _ in range(n_workers):
        start_worker()
    echo(f"{job.name}: {len(units)} runs on {n_workers} testbeds of the cluster at {address}")
    last_alive = time.monotonic()
    try:
        while pending or running:
            while idle and pending:
                actor = idle.pop()
                # a run on the network the worker's testbed has first: no testbed built anew
                k = next((i for i, (u, _) in enumerate(pending)
                          if actor in built and network.get(u.run) == built[actor]), 0)
                unit, attempt = pending[k]
                del pending[k]
                built[actor] = network.get(unit.run)
                running[actor.run.remote(job.kind, job.blob, PROJECT, unit)] = (actor, unit, attempt)
            if not running and not idle and not starting:
                start_worker()          # every worker died: wait for the cluster to place one anew
            ready, _ = ray.wait(list(running) + list(starting), num_returns=1, timeout=5.0)
            if running or idle:
                last_alive = time.monotonic()
            elif time.monotonic() - last_alive > NO_WORKER_TIMEOUT_S:
                raise ClusterError(f"no worker for {NO_WORKER_TIMEOUT_S:.0f} s: the cluster has no free "
                                   f"{TESTBED_RESOURCE} left ({len(pending)} runs not done)")
            for ref in ready:
                if ref in starting:
                    actor = starting.pop(ref)
                    try:
                        info = ray.get(ref)
                    except Exception as e:          # it never came up: another takes its place
                        echo(f"  a worker did not start ({type(e).__name__}: {str(e).splitlines()[0]})")
                        continue
                    if info["commit"] != own_commit:
                        raise ClusterError(f"worker {info['host']} slot {info['slot']} runs commit {info['commit']}, "
                                           f"this submitter {own_commit}: the same code on every host "
                                           f"(git checkout {own_commit} && make setup there)")
                    alive.append(actor)
                    idle.append(actor)
                    continue
                actor, unit, attempt = running.pop(ref)
                try:
                    res = ray.get(ref)
                except ray.exceptions.RayActorError as e:      # the worker (or its node) died
                    alive.remove(actor)
                    failed_attempt(unit, attempt, f"worker died: {str(e).splitlines()[0]}")
                    start_worker()
                    continue
                except ray.exceptions.RayTaskError as e:
                    idle.append(actor)
                    failed_attempt(unit, attempt, str(e.cause if e.cause is not None else e))
                    continue
                idle.append(actor)
                error, text = on_result(unit, res, attempt)
                if error is not None:
                    failed_attempt(unit, attempt, error, text)
                    continue
                progress.done += 1
                progress.done_here += 1
                echo(f"[{progress.done + progress.failed}/{progress.total}] {unit.run} on {res['host']}/{res['slot']}: "
                     f"{text}  ({progress.line(len(running))})")
    finally:
        for actor in alive:
            try:
                ray.get(actor.close.remote(), timeout=60)
            except Exception:
                pass
            ray.kill(actor)
        for actor in starting.values():
            ray.kill(actor)


def run_on_cluster(sc: Scenario, out_dir: str, address: str, echo=print, retries: int = 2) -> list[dict]:
    """Every run of ``sc`` on the Ray cluster at ``address`` ("auto": the one this host
    belongs to); the records, as run_scenario returns them."""
    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    sc, kept = _resume(sc, out_dir, echo)
    sc = prepare(sc, out_dir)
    done_runs = {r["run"] for r in kept}
    planned = plan_units(sc)
    units = [u for u in planned if u.run not in done_runs]
    order = {u.run: u.index for u in planned}
    if not units:
        echo(f"{sc.name}: no run left to do in {out_dir}")
        return kept
    echo(f"loss draws seeded from {sc.seed} (--seed {sc.seed} repeats them)")
    provenance = stamp()
    records: dict[str, dict] = {r["run"]: r for r in kept}
    failed: list[dict] = []
    where: dict[str, dict] = {}
    if os.path.exists(os.path.join(out_dir, "cluster.json")):
        with open(os.path.join(out_dir, "cluster.json")) as f:
            where = json.load(f).get("runs", {})

    def ordered() -> list[dict]:        # the local runner's order
        return sorted(records.values(), key=lambda r: order.get(r["run"], len(order)))

    def save():
        write_summary(out_dir, sc.name, ordered(), provenance)
        with open(os.path.join(out_dir, "cluster.json.part"), "w") as f:
            json.dump({"address": address, "provenance": provenance, "runs": where}, f, indent=1)
        os.replace(os.path.join(out_dir, "cluster.json.part"), os.path.join(out_dir, "cluster.json"))
        if failed:
            with open(os.path.join(out_dir, "failed.json"), "w") as f:
                json.dump(failed, f, indent=1)

    def on_result(unit: Unit, res: dict, attempt: int):
        where[unit.run] = {"host": res["host"], "slot": res["slot"], "attempts": attempt,
                           "seconds": round(res["seconds"], 2)}
        if res["failure"] is not None:
            save()
            return res["failure"]["error"], res["failure"]
        if res["files"]:
            _unpack(res["files"], os.path.join(out_dir, "runs"), unit.run)
        records[unit.run] = rec = res["record"]
        for warning in res["warnings"]:
            echo(f"WARNING {unit.run}: {warning}")
        save()
        return None, f"{rec['goodput_mbps']:7.2f} Mbit/s, {rec['retransmits']} retransmits"

    def on_failed(unit: Unit, attempt: int, error: str, failure: dict | None):
        failed.append({**(failure or {"run": unit.run, "algorithm": unit.algorithm, "repeat": unit.repeat,
                                      unit.key: unit.value, "error": error}), "attempts": attempt})
        save()

    job = Job("scenario", pickle.dumps(sc), needs_ccp_datapath(sc, sc.seed), sc.name)
    dispatch(job, units, address, on_result, on_failed, echo=echo, retries=retries,
             network={u.run: network_key(sc, u) for u in units}, already_done=len(kept))
    if failed:
        echo(f"{len(failed)} of {len(units) + len(kept)} runs failed: {os.path.join(out_dir, 'failed.json')}")
    if not records:
        raise ClusterError(f"every run failed; first: {failed[0]['error']}")
    plot_results(sc, ordered(), out_dir)
    return ordered()
