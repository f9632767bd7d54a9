"""Scenario files: which algorithms, over which topology, at which settings.

    name = "lossy_link"
    topology = "wireless"          # experiments/testbed/topologies/<name>.toml, or a path
    seconds = 20                   # per run
    repeats = 3
    kernel_trace = false           # true: per-ACK kernel cwnd/state of the sender (runs/*/kernel_trace.csv)
    record_telemetry = false       # true: the sink's hop and estimate records (runs/*/telemetry.jsonl.gz)
    record_slots = false           # true: Dragonfly's captures at links with flow_slots (runs/*/slots.json.gz)
    node_rt_priority = 10          # the INT nodes under SCHED_FIFO at this priority (default 0: not)
    seed = 7                       # loss draws (default: a random one, recorded in summary.json)
    [params]                       # topology parameters (fixed for the scenario)
    rate_mbps = 10.0
    [sweep]                        # one run per value (and per algorithm and repeat)
    loss_pct = [0, 1, 2, 5, 10, 20]
    # or: competitor = [...] (below), or separation = [0, 4] (the bottleneck's queues)
    [[algorithms]]
    label = "kernel cubic"
    cca = "cubic"                  # kernel congestion control, or:
    [[algorithms]]
    label = "cubic-int L1"
    ccp = "cubic-int"              # a CCP algorithm ('intcc alg run NAME OPTIONS')
    options = ["--policy", "l1"]   # a project file here (estimator/models/...) is made absolute
    [quick]                        # overrides for --quick
    seconds = 8
    sweep = { loss_pct = [0, 5, 20] }

Fairness scenarios (the ML-fairness paper) add:

    [draw]                         # topology parameters drawn per repeat (a new testbed each)
    bottleneck_mbps = { log_uniform = [1, 10] }
    buffer_bdp = { log_uniform = [1, 100] }
    [sweep]
    competitor = ["bbr", "cubic", "reno"]   # every algorithm's competitor, in turn
    [[algorithms]]
    label = "oracle"
    same_as_competitor = true      # flow 1 runs the competitor's CCA
    same_as_competitor = "ccp"     # ... on the CCP datapath (the bound for a CCP flow)
    [[algorithms]]
    label = "not used"
    cca_random = ["bbr", "cubic", "reno"]   # flow 1 on one of these, drawn per run
    competitor_delay_s = 10        # (any algorithm) the competitors start this much later
    udp_cross_share = 2.0          # (any algorithm) UDP beside the competitors at this share of
                                   #   bottleneck_mbps, from their hosts (2: a flood at twice the link)
    [[algorithms]]
    label = "replaced"
    ccp = "adaptive"
    competitor_replaced_by = { cubic = "bbr", bbr = "reno" }   # the competitor (swept or given)
    competitor_replaced_after_s = 20   #   stops 20 s after its start, a flow of the CCA it maps
                                   #   to starts then (the record's competitor_ccas names both)
    competitor_leaves_after_s = 20 # (instead) the competitors stop 20 s after their start
    [[algorithms]]
    label = "reno beside cubic and bbr"
    cca = "reno"
    competitor = ["cubic", "bbr"]  # a mix of kernel CCAs: competitor k runs the k-th, in turn
    competitors = 2                #   (the record's competitor_ccas names each)
    [flows]
    main = ["s1", "r1"]
    competitor = ["s2", "r2"]      # every competitor's hosts, but where competitor_<k> names its own:
    competitor_2 = ["s3", "r3"]    #   the second competitor from s3 to r3 (a path of its own RTT)

Settings of a run's flows can be drawn too (per repeat, as the topology's):

    [draw]
    competitors = { integer = [1, 3] }          # how many competitors (all of the swept CCA)
    competitor_delay_s = { uniform = [0, 10] }  # they start this much after flow 1
    udp_cross_share = { uniform = [0, 0.3] }    # UDP cross traffic at this share of bottleneck_mbps
    competitor_rate_share = { uniform = [0.1, 0.4] }   # each competitor application-limited (iperf3 -b)
    comp_extra_delay_ms = { uniform = [0, 60] } # (a topology parameter) the competitors' longer RTT

Drawn values are seeded from the scenario's seed and the repeat (every algorithm of a
repeat meets the same network), the random pick from those and the competitor. With
``draw_per_sweep_value = true`` (top level) the sweep value is in the seed too: every
competitor meets networks of its own (N repeats of 4 competitors: 4N networks). A CCA the
kernel lacks (vegas; KERNEL_CCAS) runs on the CCP datapath, for flow 1 or the competitor.

Errors name the file and the field.
"""
from __future__ import annotations

import math
import os
import random
import tomllib
import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from experiments.runs.algorithm import KERNEL_CCAS, PROJECT, Algorithm
from experiments.runs.collection_plans import DISTRIBUTIONS, Collection, plan_algorithm

HERE = os.path.dirname(__file__)
TOPOLOGIES = os.path.join(os.path.dirname(HERE), "testbed", "topologies")
#: loss_pct and reconfig (a reconfigured link's period and downtime, "100ms/10ms") are applied
#: at run time, without restarting the testbed; competitor sets every algorithm's competing
#: flows' CCA
SWEEPABLE = {"loss_pct", "competitor", "reconfig"}
#: topology parameters a sweep may set (each value a testbed of its own): how the bottleneck
#: queues, a structural choice the runs compare on the same drawn networks
TOPOLOGY_SWEEPS = {"separation"}
DRAWS = ("log_uniform", "uniform", "integer")
#: drawn like topology parameters, but settings of a run's flows: how many competitors, how
#: much later they start, and UDP cross traffic beside them at this share of bottleneck_mbps
#: (from the competitor's hosts, at a constant rate: no CCA, no answer to loss)
RUN_DRAWS = ("competitors", "competitor_delay_s", "udp_cross_share", "competitor_rate_share")


#: competing flows of one run: ports main + 1 .. main + n, below the next testbed's
MAX_COMPETITORS = 9


class ScenarioError(ValueError):
    pass


def _check_reconfig(path: str, value) -> None:
    """A reconfig sweep value: "none", "PERIOD" or "PERIOD/DOWNTIME", the downtime shorter."""
    from experiments.testbed.linkctl import parse_reconfig
    from int_node.units import parse_time_ns
    try:
        period, downtime = (parse_time_ns(t) for t in parse_reconfig(value))
    except ValueError as e:
        raise ScenarioError(f"{path}: sweep.reconfig value {value!r}: {e} (\"none\", \"50ms\" or \"100ms/10ms\")") from None
    if downtime and downtime >= period:
        raise ScenarioError(f"{path}: sweep.reconfig value {value!r}: the downtime must be shorter than the period")


def _check_run_draw(path: str, name: str, kind: str, low, high, algs: list, sweep: dict, params: dict,
                    draw: dict) -> None:
    """A drawn flow setting (RUN_DRAWS) within its range, with what it needs."""
    if name not in RUN_DRAWS:
        return
    if "competitor" not in sweep and not all(a.competitor for a in algs):
        raise ScenarioError(f"{path}: draw.{name} needs a competitor for every algorithm "
                            f"('competitor', or [sweep] competitor)")
    if name == "competitors" and (kind != "integer" or not 1 <= low <= high <= MAX_COMPETITORS):
        raise ScenarioError(f"{path}: draw.competitors must be {{ integer = [low, high] }} within "
                            f"1..{MAX_COMPETITORS}, not {{ {kind} = [{low}, {high}] }}")
    if name == "competitor_delay_s" and low < 0:
        raise ScenarioError(f"{path}: draw.competitor_delay_s must be >= 0, not [{low}, {high}]")
    if name in ("udp_cross_share", "competitor_rate_share"):
        if not 0 <= low <= high < 1:
            raise ScenarioError(f"{path}: draw.{name} is a share of the bottleneck in [0, 1), "
                                f"not [{low}, {high}]")
        if "bottleneck_mbps" not in params and "bottleneck_mbps" not in draw:
            raise ScenarioError(f"{path}: draw.{name} needs the topology parameter "
                                f"bottleneck_mbps (in [params] or [draw])")


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
    record_telemetry: bool = False      # keep the broker's hop and estimate records per run (telemetry_record.py)
    record_slots: bool = False          # keep Dragonfly's captures per run (slot_record.py)
    seed: Optional[int] = None          # loss draws; None: a random one per invocation (recorded)
    flows: Dict[str, List[str]] = field(default_factory=lambda: {"main": ["sta1", "sta2"]})
    draw: Dict[str, Dict[str, list]] = field(default_factory=dict)    # param -> {kind: [low, high]}
    draw_per_sweep_value: bool = False  # each sweep value's repeats meet networks of their own
    first_repeat: int = 0               # repeats first_repeat .. repeats - 1 (continuing a run)
    node_rt_priority: int = 0           # the INT nodes' SCHED_FIFO priority (0: the normal scheduler)
    node_python: Optional[str] = None   # the INT nodes' interpreter (None: $INTCC_NODE_PYTHON, else cpython)
    collection: Optional[Collection] = None     # [collection]: each repeat a plan's network and flows, kept as data
    skip_repeats: frozenset = frozenset()       # repeats not run (a collection's runs already on disk)

    def competitor_pair(self, k: int) -> List[str]:
        """[sender, receiver] of competitor ``k`` (0-based): ``[flows] competitor_<k+1>`` where
        given (competitors of different RTTs on hosts of their own), else ``competitor``."""
        return self.flows.get(f"competitor_{k + 1}") if k and f"competitor_{k + 1}" in self.flows \
            else self.flows["competitor"]

    def run_setting(self, seed: int, repeat: int, alg: Algorithm, sweep_value, pick_seed: int
                    ) -> tuple[dict, Algorithm, dict | None]:
        """What one run runs: its parameters (the topology's and the drawn flow settings), the
        algorithm as it runs it (a random pick drawn with ``pick_seed``), and a collection's
        plan (None outside a collection: then the run's name is the runner's)."""
        if self.collection:
            plan = self.collection.plan(seed, repeat)
            return dict(plan["params"]), plan_algorithm(plan), plan
        params = self.params_for(seed, repeat, sweep_value)
        for key in TOPOLOGY_SWEEPS & set(self.sweep):
            params[key] = sweep_value
        competitor = sweep_value if "competitor" in self.sweep else None
        return params, alg.for_run(competitor, pick_seed).with_draws(params), None

    def params_for(self, seed: int, repeat: int, sweep_value=None) -> Dict[str, object]:
        """The topology parameters of a repeat (and sweep value, with ``draw_per_sweep_value``):
        ``params`` with the ``draw`` values drawn (rounded to 4 significant digits, as recorded)."""
        params = dict(self.params)
        point = f"{sweep_value}/" if self.draw_per_sweep_value else ""
        for name, spec in sorted(self.draw.items()):
            (kind, (low, high)), = spec.items()
            rng = random.Random(zlib.crc32(f"{seed}/draw/{name}/{point}{repeat}".encode()))
            if kind == "integer":
                params[name] = rng.randint(low, high)
                continue
            value = (math.exp(rng.uniform(math.log(low), math.log(high))) if kind == "log_uniform"
                     else rng.uniform(low, high))
            params[name] = float(f"{value:.4g}")
        return params

    @staticmethod
    def topology_params(params: Dict[str, object]) -> Dict[str, object]:
        """``params`` without the flows' settings (RUN_DRAWS): what the topology takes."""
        return {k: v for k, v in params.items() if k not in RUN_DRAWS}

    @property
    def topology_path(self) -> str:
        if os.path.exists(self.topology):
            return self.topology
        return os.path.join(TOPOLOGIES, f"{self.topology}.toml")

    def runs(self):
        """(algorithm, {sweep key: value}, repeat) for every run; algorithms innermost,
        so that drift over a long sweep (a busy machine) affects them alike."""
        for alg, sweep, reps in self.batches(1):
            yield alg, sweep, reps[0]

    @property
    def todo_repeats(self) -> List[int]:
        return [r for r in range(self.first_repeat, self.repeats) if r not in self.skip_repeats]

    def batches(self, jobs: int):
        """(algorithm, {sweep key: value}, [repeats]) for ``jobs`` testbeds at once: the
        repeats in groups of ``jobs``, per group every sweep value, each algorithm in turn
        on the whole group (one CCP agent serves them all). Groups outermost: a long run
        stopped early has every sweep value alike."""
        (key, values), = self.sweep.items() if self.sweep else (("none", [None]),)
        todo = self.todo_repeats
        for first in range(0, len(todo), jobs):
            group = todo[first:first + jobs]
            for value in values:
                for alg in self.algorithms:
                    yield alg, {key: value}, group


def _project_file(option: str) -> str:
    """An option naming a file of the project (estimator/models/archive/cca_rf.joblib) as an absolute
    path: the agent may run from anywhere."""
    path = os.path.join(PROJECT, option)
    return path if "/" in option and not os.path.isabs(option) and os.path.isfile(path) else option


def topology_hosts(topology_path: str) -> List[str]:
    """The host names a topology file declares (its [[hosts]])."""
    with open(topology_path, "rb") as f:
        return [h.get("name") for h in tomllib.load(f).get("hosts", []) if isinstance(h, dict)]


def _check_flow_hosts(sc: "Scenario", path: str, flows_given: bool) -> None:
    """Every flow's sender and receiver is a host of the topology, checked at load, not when
    a testbed is already up (a [flows] table left out takes the wireless topology's hosts)."""
    if not isinstance(sc.flows, dict) or not all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(h, str) for h in v) for v in sc.flows.values()):
        raise ScenarioError(f"{path}: [flows] maps a role to [sender, receiver], e.g. main = [\"s1\", \"r1\"]")
    hosts = topology_hosts(sc.topology_path)
    for role, pair in sc.flows.items():
        missing = [h for h in pair if h not in hosts]
        if missing:
            hint = "" if flows_given else " (the default flow; give [flows] main = [sender, receiver])"
            raise ScenarioError(f"{path}: flow '{role}' names host {', '.join(map(repr, missing))}, which topology "
                                f"'{sc.topology}' does not have{hint}; its hosts: {', '.join(hosts)}")


COLLECTION_FIELDS = {"distribution": str, "udp_cross": bool, "samples": int, "warmup_frac": (int, float)}


def _competitor_changes(where: str, a: dict) -> tuple[dict, float, float]:
    """An algorithm's replaced or leaving competitor (competitor_replaced_by,
    competitor_replaced_after_s, competitor_leaves_after_s), checked."""
    by, after, leaves = a.get("competitor_replaced_by", {}), a.get("competitor_replaced_after_s", 0.0), \
        a.get("competitor_leaves_after_s", 0.0)
    for name, v in (("competitor_replaced_after_s", after), ("competitor_leaves_after_s", leaves)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ScenarioError(f"{where} ({a['label']}): '{name}' must be a number of seconds >= 0, not {v!r}")
    if not isinstance(by, dict) or not all(isinstance(k, str) and isinstance(v, str) and k in KERNEL_CCAS
                                            and v in KERNEL_CCAS for k, v in by.items()):
        raise ScenarioError(f"{where} ({a['label']}): 'competitor_replaced_by' maps a competitor's kernel CCA to "
                            f"the kernel CCA of the flow that takes its place ({', '.join(KERNEL_CCAS)}), "
                            f"e.g. {{ cubic = \"bbr\" }}, not {by!r}")
    if bool(by) != bool(after):
        raise ScenarioError(f"{where} ({a['label']}): 'competitor_replaced_by' and 'competitor_replaced_after_s' "
                            f"go together (who takes the competitor's place, and when)")
    if by and a.get("competitors", 1) != 1:
        raise ScenarioError(f"{where} ({a['label']}): a replaced competitor is one flow, then another "
                            f"(not 'competitors' = {a['competitors']})")
    if by and leaves:
        raise ScenarioError(f"{where} ({a['label']}): a competitor is replaced or leaves, not both")
    return dict(by), float(after), float(leaves)


def _load_collection(path: str, raw: dict) -> Optional[Collection]:
    """A scenario's [collection] table: its runs' networks and flows come from the plans
    (collection_plans.run_plan), so it takes no [sweep], [draw] or [[algorithms]]."""
    table = raw.get("collection")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ScenarioError(f"{path}: [collection] must be a table")
    unknown = set(table) - set(COLLECTION_FIELDS)
    if unknown:
        raise ScenarioError(f"{path}: collection: unknown field(s) {', '.join(sorted(unknown))} "
                            f"(known: {', '.join(COLLECTION_FIELDS)})")
    for key, kind in COLLECTION_FIELDS.items():
        if key in table and (not isinstance(table[key], kind) or (kind is int and isinstance(table[key], bool))):
            raise ScenarioError(f"{path}: collection.{key} has the wrong type ({table[key]!r})")
    c = Collection(**table)
    if c.distribution not in DISTRIBUTIONS:
        raise ScenarioError(f"{path}: collection.distribution {c.distribution!r} is none of {', '.join(DISTRIBUTIONS)}")
    if c.samples < 1 or not 0 <= c.warmup_frac < 1:
        raise ScenarioError(f"{path}: collection: samples >= 1 and 0 <= warmup_frac < 1, not "
                            f"{c.samples} and {c.warmup_frac}")
    given = [k for k in ("sweep", "draw", "algorithms") if k in raw]
    if given:
        raise ScenarioError(f"{path}: a [collection] draws each run's network and flows from its plan: "
                            f"drop {', '.join(given)}")
    return c


def scenario_names() -> List[str]:
    return sorted(f[:-5] for f in os.listdir(os.path.join(HERE, "scenarios")) if f.endswith(".toml"))


def topology_names() -> List[str]:
    return sorted(f[:-5] for f in os.listdir(TOPOLOGIES) if f.endswith(".toml"))


def describe(path: str) -> str:
    """A TOML file's 'description' (scenario or topology), '' when it has none or is unreadable."""
    try:
        with open(path, "rb") as f:
            return str(tomllib.load(f).get("description", ""))
    except (OSError, tomllib.TOMLDecodeError):
        return ""


def resolve(name_or_path: str) -> str:
    if os.path.exists(name_or_path):
        return name_or_path
    cand = os.path.join(HERE, "scenarios", f"{name_or_path}.toml")
    if os.path.exists(cand):
        return cand
    raise ScenarioError(f"no scenario '{name_or_path}' (known: {', '.join(scenario_names())}; "
                        f"'intcc exp list' describes them)")


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
    rt = raw.get("node_rt_priority", 0)
    if isinstance(rt, bool) or not isinstance(rt, int) or not 0 <= rt <= 99:
        raise ScenarioError(f"{path}: field 'node_rt_priority' must be a SCHED_FIFO priority 1-99 "
                            f"(0: the normal scheduler), not {rt!r}")
    collection = _load_collection(path, raw)
    algs = [Algorithm("collect")] if collection else []
    for i, a in enumerate([] if collection else need("algorithms", list)):
        where = f"{path}: algorithms[{i}]"
        if not isinstance(a, dict) or "label" not in a:
            raise ScenarioError(f"{where}: needs a 'label'")
        unknown = set(a) - {"label", "cca", "ccp", "options", "competitor", "competitors", "same_as_competitor",
                            "cca_random", "competitor_delay_s", "udp_cross_share", "competitor_replaced_by",
                            "competitor_replaced_after_s", "competitor_leaves_after_s"}
        if unknown:
            raise ScenarioError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        picks = [k for k in ("cca", "ccp", "same_as_competitor", "cca_random") if a.get(k)]
        if len(picks) != 1:
            raise ScenarioError(f"{where} ({a['label']}): give exactly one of 'cca' (kernel), 'ccp', "
                                f"'same_as_competitor' or 'cca_random' (not {', '.join(picks) or 'none'})")
        if "cca_random" in a and (not isinstance(a["cca_random"], list)
                                  or not all(isinstance(c, str) for c in a["cca_random"])):
            raise ScenarioError(f"{where} ({a['label']}): 'cca_random' must be a list of kernel CCA names")
        same = a.get("same_as_competitor", False)
        if same not in (True, False, "ccp"):
            raise ScenarioError(f"{where} ({a['label']}): 'same_as_competitor' is true, false or \"ccp\" "
                                f"(on the CCP datapath), not {same!r}")
        delay = a.get("competitor_delay_s", 0.0)
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
            raise ScenarioError(f"{where} ({a['label']}): 'competitor_delay_s' must be a number >= 0, "
                                f"not {delay!r}")
        udp_share = a.get("udp_cross_share", 0.0)
        if isinstance(udp_share, bool) or not isinstance(udp_share, (int, float)) or udp_share < 0:
            raise ScenarioError(f"{where} ({a['label']}): 'udp_cross_share' must be a number >= 0 (a share of "
                                f"bottleneck_mbps; 2 floods the link twice over), not {udp_share!r}")
        if udp_share and "bottleneck_mbps" not in raw.get("params", {}) and "bottleneck_mbps" not in raw.get("draw", {}):
            raise ScenarioError(f"{where} ({a['label']}): 'udp_cross_share' needs the topology parameter "
                                f"bottleneck_mbps (in [params] or [draw])")
        n = a.get("competitors", 1)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_COMPETITORS:
            raise ScenarioError(f"{where} ({a['label']}): 'competitors' must be a whole number in "
                                f"1..{MAX_COMPETITORS}, not {n!r}")
        if "competitors" in a and not a.get("competitor"):
            raise ScenarioError(f"{where} ({a['label']}): 'competitors' needs 'competitor' (their kernel CCA)")
        competitor, mix = a.get("competitor"), []
        if isinstance(competitor, list):     # a mix: competitor k runs mix[k % len]
            if not competitor or not all(c in KERNEL_CCAS for c in competitor):
                raise ScenarioError(f"{where} ({a['label']}): a list of competitors must name kernel CCAs "
                                    f"({', '.join(KERNEL_CCAS)}), not {competitor!r}")
            competitor, mix = competitor[0], list(competitor)
        replaced_by, replaced_after_s, leaves_after_s = _competitor_changes(where, a)
        algs.append(Algorithm(a["label"], a.get("cca"), a.get("ccp"), [_project_file(str(o)) for o in a.get("options", [])],
                              competitor, n, bool(same),
                              list(a.get("cca_random", [])), float(delay), same == "ccp", competitor_mix=mix,
                              udp_cross_share=float(udp_share), competitor_replaced_by=replaced_by,
                              competitor_replaced_after_s=replaced_after_s, competitor_leaves_after_s=leaves_after_s))
    sweep = raw.get("sweep", {})
    if len(sweep) > 1 or any(k not in SWEEPABLE and k not in TOPOLOGY_SWEEPS for k in sweep):
        raise ScenarioError(f"{path}: [sweep] takes one of {', '.join(sorted(SWEEPABLE | TOPOLOGY_SWEEPS))}")
    for k, v in sweep.items():
        if not isinstance(v, list) or not v:
            raise ScenarioError(f"{path}: sweep.{k} must be a non-empty list")
    for value in sweep.get("reconfig", []):
        _check_reconfig(path, value)
    for a in algs:
        firsts = sweep.get("competitor", [a.competitor] if a.competitor else [])
        missing = [c for c in firsts if a.competitor_replaced_by and c not in a.competitor_replaced_by]
        if missing or (a.competitor_replaced_by and not firsts):
            raise ScenarioError(f"{path}: {a.label}: 'competitor_replaced_by' names no flow to take the place of "
                                f"{', '.join(missing) or 'a competitor (none given)'}")
    if "competitor" not in sweep:
        for a in algs:
            if (a.same_as_competitor or a.competitor_delay_s) and not a.competitor:
                raise ScenarioError(f"{path}: {a.label}: 'same_as_competitor' and 'competitor_delay_s' need a "
                                    f"competitor ('competitor', or [sweep] competitor)")
    draw = raw.get("draw", {})
    for name, spec in draw.items():
        ok = (isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in DRAWS
              and isinstance(next(iter(spec.values())), list) and len(next(iter(spec.values()))) == 2
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in next(iter(spec.values()))))
        if not ok:
            raise ScenarioError(f"{path}: draw.{name} must be {{ log_uniform = [low, high] }}, "
                                f"{{ uniform = [low, high] }} or {{ integer = [low, high] }}, not {spec!r}")
        (kind, (low, high)), = spec.items()
        if not low <= high or (kind == "log_uniform" and low <= 0):
            raise ScenarioError(f"{path}: draw.{name}: need low <= high{' and low > 0' if kind == 'log_uniform' else ''}"
                                f", not [{low}, {high}]")
        if kind == "integer" and not (isinstance(low, int) and isinstance(high, int)):
            raise ScenarioError(f"{path}: draw.{name}: integer bounds must be whole numbers, not [{low}, {high}]")
        _check_run_draw(path, name, kind, low, high, algs, sweep, raw.get("params", {}), draw)
    sc = Scenario(name=raw.get("name", os.path.basename(path)[:-5]), path=path,
                  topology=need("topology", str), seconds=float(need("seconds", (int, float))),
                  repeats=int(raw.get("repeats", 1)), params=dict(raw.get("params", {})), sweep=sweep,
                  algorithms=algs, description=raw.get("description", ""),
                  interval_s=float(raw.get("interval_s", 0.5)),
                  kernel_trace=bool(raw.get("kernel_trace", False)),
                  record_telemetry=bool(raw.get("record_telemetry", False)),
                  record_slots=bool(raw.get("record_slots", False)),
                  seed=seed, draw=draw, draw_per_sweep_value=bool(raw.get("draw_per_sweep_value", False)),
                  node_rt_priority=rt, collection=collection)
    if "flows" in raw:
        sc.flows = raw["flows"]
    if not os.path.exists(sc.topology_path):
        raise ScenarioError(f"{path}: topology '{sc.topology}' not found")
    _check_flow_hosts(sc, path, flows_given="flows" in raw)
    if sc.repeats < 1 or sc.seconds <= 0:
        raise ScenarioError(f"{path}: repeats must be >= 1 and seconds > 0")
    return sc
