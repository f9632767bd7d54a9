"""An algorithm of a scenario: what flow 1 runs (a kernel CCA or a CCP algorithm), beside
which competitors, and the CCP agent its runs need."""
from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional

from telemetry import ccas

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: CCAs this kernel has built in (telemetry/ccas.py); any other CCA named in a scenario
#: (vegas) runs on the CCP datapath as the algorithm of that name
KERNEL_CCAS = ccas.KERNEL_CCAS


def _identifies_actively(options: List[str]) -> bool:
    """Whether an adaptive algorithm with these options identifies actively (its
    ``--identify``, else the agent's default): then it reads the hop records."""
    from ccp_agent.switching import DEFAULT_IDENTIFY
    given = [options[i + 1] for i, o in enumerate(options[:-1]) if o == "--identify"]
    return (given[-1] if given else DEFAULT_IDENTIFY) == "active"


def _model_uses_int(options: List[str]) -> bool:
    """Whether the ``--model`` in an adaptive algorithm's options has features beyond
    Table I (from the metadata saved beside it); the agent checks the model itself."""
    from estimator import DEFAULT_MODEL
    from estimator.features import TraceError
    from estimator.int_features import uses_int
    if "--model" not in options:
        path = DEFAULT_MODEL                      # the agent's default when no --model is given
    elif options.index("--model") + 1 >= len(options):
        return False
    else:
        path = options[options.index("--model") + 1]
    if not os.path.isabs(path) and not os.path.exists(path):
        path = os.path.join(PROJECT, path)
    try:
        with open(path + ".json") as f:
            features = json.load(f).get("features", [])
        return uses_int(features)
    except (OSError, ValueError, AttributeError, TraceError):
        return False


@dataclass
class Algorithm:
    label: str
    cca: Optional[str] = None            # kernel CCA
    ccp: Optional[str] = None            # CCP algorithm name
    options: List[str] = field(default_factory=list)
    competitor: Optional[str] = None     # kernel CCA of a competing flow (fairness scenarios)
    competitors: int = 1                 # how many such flows (ports above the main flow's)
    same_as_competitor: bool = False     # flow 1 runs the competitor's CCA (set per run)
    cca_random: List[str] = field(default_factory=list)    # flow 1's kernel CCA drawn from these per run
    competitor_delay_s: float = 0.0      # the competitors start this much after flow 1
    same_on_ccp: bool = False            # same_as_competitor as the CCP algorithm of that name
    udp_cross_mbps: float = 0.0          # UDP cross traffic beside the competitors (0: none)
    udp_cross_share: float = 0.0         # ... set per run at this share of bottleneck_mbps (2: a flood)
    competitor_rate_mbps: float = 0.0    # each competitor application-limited at this rate (0: not)
    competitor_mix: List[str] = field(default_factory=list)   # competitor k runs mix[k % len] (kernel CCAs)
    # a competitor replaced: {its CCA: the CCA of the flow that takes its place} (kernel CCAs); the
    # first stops and the second starts this long after the competitors' start (0: not replaced)
    competitor_replaced_by: Dict[str, str] = field(default_factory=dict)
    competitor_replaced_after_s: float = 0.0
    competitor_leaves_after_s: float = 0.0   # the competitors stop this long after their start (0: not)

    def competitor_cca(self, k: int) -> str:
        """The kernel CCA of competitor ``k`` (the mix's, in turn, else ``competitor``)."""
        return self.competitor_mix[k % len(self.competitor_mix)] if self.competitor_mix else self.competitor

    def competitor_window_s(self, k: int, seconds: float) -> tuple[float, float]:
        """(start, duration) of competitor ``k`` in a run of ``seconds`` from flow 1's start:
        from ``competitor_delay_s`` to the run's end, or to its leaving; where it is
        replaced, the first until the replacement and the second from then."""
        start, end = self.competitor_delay_s, seconds
        if self.competitor_leaves_after_s:
            end = min(end, start + self.competitor_leaves_after_s)
        if self.competitor_replaced_after_s:
            handover = start + self.competitor_replaced_after_s
            start, end = (start, handover) if k == 0 else (handover, end)
        return start, max(end - start, 0.0)

    @property
    def needs_telemetry(self) -> bool:
        """The sink's records over MQTT: cubic-int reads them, and so does the adaptive
        agent whose model has INT features."""
        return self.ccp in ("cubic-int", "probe") or (self.ccp == "adaptive" and (
            _model_uses_int(self.options) or _identifies_actively(self.options)))

    @property
    def initial(self) -> str:
        """The adaptive agent's first algorithm (its ``--initial``; cubic by default)."""
        opts = self.options
        if _identifies_actively(opts):
            return "probe"
        return next((opts[i + 1] for i, o in enumerate(opts[:-1]) if o == "--initial"), "cubic")

    def for_run(self, competitor: Optional[str], seed: int) -> "Algorithm":
        """This algorithm as one run runs it: the swept competitor in place, flow 1's CCA
        resolved (the competitor's, or drawn from ``cca_random`` with ``seed``)."""
        alg = replace(self, competitor=competitor or self.competitor)
        if self.competitor_replaced_by:      # the competitor, then the flow that takes its place
            alg = replace(alg, competitors=2, competitor_mix=[alg.competitor,
                                                               self.competitor_replaced_by[alg.competitor]])
        if self.same_as_competitor and self.same_on_ccp:
            return replace(alg, ccp=alg.competitor)
        if self.same_as_competitor:
            alg = replace(alg, cca=alg.competitor)
        elif self.cca_random:
            alg = replace(alg, cca=random.Random(seed).choice(self.cca_random))
        if alg.cca and alg.cca not in KERNEL_CCAS:
            alg = replace(alg, cca=None, ccp=alg.cca)
        return alg

    def with_draws(self, params: Dict[str, object]) -> "Algorithm":
        """This algorithm with a run's drawn flow settings (RUN_DRAWS) in place."""
        alg = self
        if "competitors" in params:
            alg = replace(alg, competitors=int(params["competitors"]))
        if "competitor_delay_s" in params:
            alg = replace(alg, competitor_delay_s=float(params["competitor_delay_s"]))
        if "competitor_rate_share" in params:
            alg = replace(alg, competitor_rate_mbps=round(float(params["competitor_rate_share"])
                                                          * float(params["bottleneck_mbps"]), 3))
        share = params.get("udp_cross_share", self.udp_cross_share)       # a drawn share wins
        if share:
            alg = replace(alg, udp_cross_mbps=round(float(share) * float(params["bottleneck_mbps"]), 3))
        return alg

    @property
    def competitor_on_ccp(self) -> bool:
        return bool(self.competitor) and self.competitor not in KERNEL_CCAS

    @property
    def uses_ccp(self) -> bool:
        """Whether a run of it (as it runs: Algorithm.for_run) has a flow on the CCP datapath."""
        return bool(self.ccp) or self.competitor_on_ccp

    def agent(self, competitor_ports: list[int]) -> tuple[str, list[str]] | None:
        """The CCP agent this run needs (algorithm, options), or None: flow 1's algorithm,
        with a competitor that runs on CCP pinned to its ports (ccp_agent/by_port.py), or
        the competitor's alone when flow 1 runs in the kernel."""
        if self.ccp:
            pins = []
            if self.competitor_on_ccp and self.competitor != self.ccp:
                pins = [a for p in competitor_ports for a in ("--port-algorithm", f"{p}={self.competitor}")]
            return self.ccp, list(self.options) + pins
        if self.competitor_on_ccp:
            return self.competitor, []
        return None


def competitor_ports(alg: Algorithm, port: int) -> list[int]:
    """The ports of a run's competitors: above flow 1's (``port``)."""
    return [port + 1 + k for k in range(alg.competitors)] if alg.competitor else []


def batch_agent(runs: list[tuple[Algorithm, int]]) -> tuple[str, list[str]] | None:
    """The one CCP agent serving a batch's runs (each an algorithm as it runs and flow 1's
    port), or None when every flow is in the kernel. Runs that need the same agent share it;
    runs of plain CCP algorithms (no options: a collection's, each run its own CCA pair) share
    the first's, with every other CCP flow pinned to its algorithm by port
    (ccp_agent/by_port.py). Otherwise ValueError: such runs cannot share one agent."""
    ports = [p for alg, port in runs for p in competitor_ports(alg, port)]
    needs = [n for n in (alg.agent(ports) for alg, _ in runs) if n]
    if not needs:
        return None
    if all(n == needs[0] for n in needs):
        return needs[0]
    if any(alg.options for alg, _ in runs):
        raise ValueError(f"the runs need different CCP agents ({', '.join(sorted({str(n) for n in needs}))})")
    default = needs[0][0]
    flows = {}
    for alg, port in runs:
        if alg.ccp:
            flows[port] = alg.ccp
        if alg.competitor_on_ccp:
            flows.update(dict.fromkeys(competitor_ports(alg, port), alg.competitor))
    return default, [a for p, name in sorted(flows.items()) if name != default
                     for a in ("--port-algorithm", f"{p}={name}")]
