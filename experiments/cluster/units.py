"""A scenario's plan as units of work: one run each (an algorithm, a sweep value, a
repeat), named as the local runner names them, in the order it would run them. The seed
makes the plan: the same seed gives the same units, and each unit the same network and
loss draws, whichever host runs it."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, replace
from typing import Any

from experiments.runs.algorithm import PROJECT
from experiments.runs.runner import run_name
from experiments.runs.scenario import Scenario


@dataclass(frozen=True)
class Unit:
    index: int          # its place in the local runner's order
    algorithm: str      # the scenario algorithm's label
    key: str            # the sweep's key ("none": no sweep)
    value: Any
    repeat: int
    run: str            # its run directory's name (runs/<run>)


def plan_units(sc: Scenario) -> list[Unit]:
    """The runs of ``sc`` left to do (its seed set: runner.prepare)."""
    if sc.seed is None:
        raise ValueError("plan_units: the scenario needs its seed (runner.prepare)")
    units = []
    for alg, sweep, reps in sc.batches(1):
        (key, value), = sweep.items()
        rep = reps[0]
        plan = sc.collection.plan(sc.seed, rep) if sc.collection else None
        name = plan["run"] if plan else run_name(alg, key, value, rep)
        units.append(Unit(len(units), alg.label, key, value, rep, name))
    return units


def network_key(sc: Scenario, unit: Unit) -> str:
    """The topology a unit runs on (its drawn parameters): a worker whose testbed already
    has it runs the unit without building a new one."""
    import json
    from experiments.testbed.linkctl import run_seed
    alg, _, _ = unit_batch(sc, unit)
    params, _, _ = sc.run_setting(sc.seed, unit.repeat, alg, unit.value,
                                  run_seed(sc.seed, unit.key, unit.value, unit.repeat))
    return json.dumps(sc.topology_params(params), sort_keys=True, default=str)


def unit_batch(sc: Scenario, unit: Unit) -> tuple:
    """(algorithm, {key: value}, [repeat]): the unit as RunSession.run_batch takes it."""
    alg = next((a for a in sc.algorithms if a.label == unit.algorithm), None)
    if alg is None:
        raise ValueError(f"unit {unit.run}: scenario {sc.name} has no algorithm {unit.algorithm!r}")
    return alg, {unit.key: unit.value}, [unit.repeat]


def relocate(obj, old_root: str, new_root: str = PROJECT):
    """``obj`` (a Scenario, its algorithms, their options) with every path under the
    submitter's checkout ``old_root`` moved under this host's ``new_root``: a scenario names
    its topology and model files by absolute path, and workers keep the project elsewhere."""
    old_root = old_root.rstrip("/") + "/"
    if old_root == new_root.rstrip("/") + "/":
        return obj

    def move(v):
        if isinstance(v, str):
            return os.path.join(new_root, v[len(old_root):]) if v.startswith(old_root) else v
        if isinstance(v, list):
            return [move(x) for x in v]
        if isinstance(v, tuple):
            return tuple(move(x) for x in v)
        if isinstance(v, dict):
            return {k: move(x) for k, x in v.items()}
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return replace(v, **{f.name: move(getattr(v, f.name)) for f in dataclasses.fields(v) if f.init})
        return v

    return move(obj)
