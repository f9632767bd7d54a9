"""Scenario files: which algorithms, over which topology, at which settings.

    name = "lossy_link"
    topology = "wireless"          # experiments/topologies/<name>.toml, or a path
    seconds = 20                   # per run
    repeats = 3
    kernel_trace = false           # true: per-ACK kernel cwnd/state of the sender (runs/*/kernel_trace.csv)
    seed = 7                       # loss draws (default: a random one, recorded in summary.json)
    [params]                       # topology parameters (fixed for the scenario)
    rate_mbps = 10.0
    [sweep]                        # one run per value (and per algorithm and repeat)
    loss_pct = [0, 1, 2, 5, 10, 20]
    [[algorithms]]
    label = "kernel cubic"
    cca = "cubic"                  # kernel congestion control, or:
    [[algorithms]]
    label = "cubic-int L1"
    ccp = "cubic-int"              # a CCP algorithm ('intcc alg run NAME OPTIONS')
    options = ["--policy", "l1"]
    [quick]                        # overrides for --quick
    seconds = 8
    sweep = { loss_pct = [0, 5, 20] }

Errors name the file and the field.
"""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

HERE = os.path.dirname(__file__)
SWEEPABLE = {"loss_pct"}        # applied at run time, without restarting the testbed


#: competing flows of one run: ports main + 1 .. main + n, below the next testbed's
MAX_COMPETITORS = 9


class ScenarioError(ValueError):
    pass


@dataclass
class Algorithm:
    label: str
    cca: Optional[str] = None            # kernel CCA
    ccp: Optional[str] = None            # CCP algorithm name
    options: List[str] = field(default_factory=list)
    competitor: Optional[str] = None     # kernel CCA of a competing flow (fairness scenarios)
    competitors: int = 1                 # how many such flows (ports above the main flow's)

    @property
    def needs_telemetry(self) -> bool:
        return self.ccp == "cubic-int"


@dataclass
class Scenario:
    name: str
    path: str
    topology: str
    seconds: float
    repeats: int
    params: Dict[str, object]
    sweep: Dict[str, list]
    algorithms: List[Algorithm]
    description: str = ""
    interval_s: float = 0.5
    kernel_trace: bool = False          # record the sender's per-ACK kernel state (kernel_trace.py)
    seed: Optional[int] = None          # loss draws; None: a random one per invocation (recorded)
    flows: Dict[str, List[str]] = field(default_factory=lambda: {"main": ["sta1", "sta2"]})

    @property
    def topology_path(self) -> str:
        if os.path.exists(self.topology):
            return self.topology
        return os.path.join(HERE, "topologies", f"{self.topology}.toml")

    def runs(self):
        """(algorithm, {sweep key: value}, repeat) for every run; algorithms innermost,
        so that drift over a long sweep (a busy machine) affects them alike."""
        for alg, sweep, reps in self.batches(1):
            yield alg, sweep, reps[0]

    def batches(self, jobs: int):
        """(algorithm, {sweep key: value}, [repeats]) for ``jobs`` testbeds at once: per
        sweep value, the repeats in groups of ``jobs``, each algorithm in turn on the
        whole group (one CCP agent serves them all)."""
        (key, values), = self.sweep.items() if self.sweep else (("none", [None]),)
        for value in values:
            for first in range(0, self.repeats, jobs):
                group = list(range(first, min(first + jobs, self.repeats)))
                for alg in self.algorithms:
                    yield alg, {key: value}, group


def resolve(name_or_path: str) -> str:
    if os.path.exists(name_or_path):
        return name_or_path
    cand = os.path.join(HERE, "scenarios", f"{name_or_path}.toml")
    if os.path.exists(cand):
        return cand
    known = sorted(f[:-5] for f in os.listdir(os.path.join(HERE, "scenarios")) if f.endswith(".toml"))
    raise ScenarioError(f"no scenario '{name_or_path}' (known: {', '.join(known)})")


def load(name_or_path: str, quick: bool = False) -> Scenario:
    path = resolve(name_or_path)
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: {e}") from None
    if quick:
        q = raw.get("quick", {})
        for k, v in q.items():
            if k == "sweep":
                raw.setdefault("sweep", {}).update(v)
            else:
                raw[k] = v

    def need(key, kind):
        if key not in raw:
            raise ScenarioError(f"{path}: missing field '{key}'")
        if not isinstance(raw[key], kind):
            raise ScenarioError(f"{path}: field '{key}' must be {kind.__name__ if isinstance(kind, type) else kind}")
        return raw[key]

    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ScenarioError(f"{path}: field 'seed' must be a whole number >= 0, not {seed!r}")
    algs = []
    for i, a in enumerate(need("algorithms", list)):
        where = f"{path}: algorithms[{i}]"
        if not isinstance(a, dict) or "label" not in a:
            raise ScenarioError(f"{where}: needs a 'label'")
        if bool(a.get("cca")) == bool(a.get("ccp")):
            raise ScenarioError(f"{where} ({a['label']}): give exactly one of 'cca' (kernel) or 'ccp'")
        unknown = set(a) - {"label", "cca", "ccp", "options", "competitor", "competitors"}
        if unknown:
            raise ScenarioError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        n = a.get("competitors", 1)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_COMPETITORS:
            raise ScenarioError(f"{where} ({a['label']}): 'competitors' must be a whole number in "
                                f"1..{MAX_COMPETITORS}, not {n!r}")
        if "competitors" in a and not a.get("competitor"):
            raise ScenarioError(f"{where} ({a['label']}): 'competitors' needs 'competitor' (their kernel CCA)")
        algs.append(Algorithm(a["label"], a.get("cca"), a.get("ccp"), [str(o) for o in a.get("options", [])],
                              a.get("competitor"), n))
    sweep = raw.get("sweep", {})
    if len(sweep) > 1 or any(k not in SWEEPABLE for k in sweep):
        raise ScenarioError(f"{path}: [sweep] takes one of {', '.join(sorted(SWEEPABLE))}")
    for k, v in sweep.items():
        if not isinstance(v, list) or not v:
            raise ScenarioError(f"{path}: sweep.{k} must be a non-empty list")
    sc = Scenario(name=raw.get("name", os.path.basename(path)[:-5]), path=path,
                  topology=need("topology", str), seconds=float(need("seconds", (int, float))),
                  repeats=int(raw.get("repeats", 1)), params=dict(raw.get("params", {})), sweep=sweep,
                  algorithms=algs, description=raw.get("description", ""),
                  interval_s=float(raw.get("interval_s", 0.5)),
                  kernel_trace=bool(raw.get("kernel_trace", False)),
                  seed=seed)
    if "flows" in raw:
        sc.flows = raw["flows"]
    if not os.path.exists(sc.topology_path):
        raise ScenarioError(f"{path}: topology '{sc.topology}' not found")
    if sc.repeats < 1 or sc.seconds <= 0:
        raise ScenarioError(f"{path}: repeats must be >= 1 and seconds > 0")
    return sc
