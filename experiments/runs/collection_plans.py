"""The runs of an estimator collection: each run's network and CCA pair, drawn from the
collection's seed and distribution (reproducible: run ``index`` of seed ``seed`` is always
the same), and how the runner runs one (a scenario's [collection]: Collection)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from telemetry.ccas import CCA_LABELS as CCAS
from experiments.runs.algorithm import KERNEL_CCAS, Algorithm

RANGES = {"bottleneck_mbps": (1.0, 10.0), "bottleneck_delay_ms": (1.0, 100.0), "buffer_bdp": (1.0, 100.0)}
#: The "hard" distribution: the paper's ranges with the buffer on a log scale,
#: and what the paper's runs never had: a competitor of another RTT, arriving later, as
#: 1-3 flows of its CCA, and random link loss in half the runs.
HARD_RANGES = {"rtt_factor": (0.5, 4.0),        # the competitor's base RTT / flow 1's, log scale
               "comp_start_s": (0.0, 10.0),     # the competitor starts this much later
               "comp_flows": (1, 3),            # ... as this many flows of its CCA
               "loss_pct": (0.0, 1.0)}          # in half the runs, else 0
#: "table2": the paper's ranges with the buffer on a log scale and nothing else changed
#: (both flows start together, one competitor, the same RTT, no link loss): the networks
#: fairness_switching draws, where the adaptive agent's verdicts are judged.
#: "table2-live": the same networks with flow 1 as the adaptive agent runs it, its CCA a CCP
#: algorithm on our datapath (kernel flows look different to the model: CCP BBR was read
#: as cubic), and in half the runs the competitor arriving 0-10 s after flow 1 (the late
#: start, where a competitor enters a queue flow 1 already fills).
DISTRIBUTIONS = ("paper", "hard", "table2", "table2-live")
LATE_START_S = (0.0, 10.0)
#: --udp-cross: constant-bit-rate UDP from s2 to r2 (iperf3 -u) through the
#: bottleneck in half the runs, at this share of its rate for the whole run: traffic that
#: answers no loss and belongs to no CCA, beside the competitor. Drawn on a stream of its
#: own: a collection's other parameters stay those of its seed and distribution.
UDP_CROSS_SHARE = (0.05, 0.30)
UDP_CROSS_PORT = 5300
ACCESS_DELAY_MS = 1.0                           # dumbbell.toml's access links


def run_plan(index: int, seed: int, distribution: str = "paper", udp_cross: bool = False) -> dict:
    """The parameters of run ``index`` of a collection: reproducible from the seed.
    ``udp_cross``: with ``udp_mbps``, the rate of the UDP cross traffic (0: none in this run)."""
    plan = _plan(index, seed, distribution)
    if not udp_cross:
        return plan
    rng = np.random.default_rng([seed, index, 29])
    share = float(rng.uniform(*UDP_CROSS_SHARE)) if rng.random() < 0.5 else 0.0
    return plan | {"udp_mbps": round(share * plan["params"]["bottleneck_mbps"], 3)}


def _plan(index: int, seed: int, distribution: str) -> dict:
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {distribution!r} (known: {', '.join(DISTRIBUTIONS)})")
    if distribution == "hard":
        return _hard_plan(index, seed)
    pair = index % 16
    plan = {"run": f"run{index:05d}", "index": index, "seed": seed, "cca1": CCAS[pair // 4], "cca2": CCAS[pair % 4]}
    if distribution in ("table2", "table2-live"):
        rng = np.random.default_rng([seed, index, 2])
        params = {k: round(float(rng.uniform(*RANGES[k])), 3) for k in ("bottleneck_mbps", "bottleneck_delay_ms")}
        params["buffer_bdp"] = round(float(np.exp(rng.uniform(*np.log(RANGES["buffer_bdp"])))), 3)
        plan |= {"distribution": distribution, "params": params}
        if distribution == "table2-live":
            late = np.random.default_rng([seed, index, 22])       # the networks stay table2's
            plan |= {"local_via": "ccp",
                     "comp_start_s": round(float(late.uniform(*LATE_START_S)), 3) if late.random() < 0.5 else 0.0}
        return plan
    rng = np.random.default_rng([seed, index])
    return plan | {"params": {k: round(float(rng.uniform(lo, hi)), 3) for k, (lo, hi) in RANGES.items()}}


def _hard_plan(index: int, seed: int) -> dict:
    rng = np.random.default_rng([seed, index, 28])
    (r_lo, r_hi), (d_lo, d_hi), (b_lo, b_hi) = (RANGES[k] for k in ("bottleneck_mbps", "bottleneck_delay_ms",
                                                                       "buffer_bdp"))
    delay = float(rng.uniform(d_lo, d_hi))
    factor = float(np.exp(rng.uniform(*np.log(HARD_RANGES["rtt_factor"]))))
    # one-way delay without the extras: the bottleneck and two access links; the longer
    # path gets the extra on its two access links
    half_rtt = delay + 2 * ACCESS_DELAY_MS
    main_extra = half_rtt * (1 / factor - 1) / 2 if factor < 1 else 0.0
    comp_extra = half_rtt * (factor - 1) / 2 if factor >= 1 else 0.0
    params = {"bottleneck_mbps": round(float(rng.uniform(r_lo, r_hi)), 3), "bottleneck_delay_ms": round(delay, 3),
              "buffer_bdp": round(float(np.exp(rng.uniform(np.log(b_lo), np.log(b_hi)))), 3),
              "main_extra_delay_ms": round(main_extra, 3), "comp_extra_delay_ms": round(comp_extra, 3),
              "loss_pct": round(float(rng.uniform(*HARD_RANGES["loss_pct"])), 3) if rng.random() < 0.5 else 0.0}
    pair = index % 16
    lo, hi = HARD_RANGES["comp_flows"]
    return {"run": f"run{index:05d}", "index": index, "seed": seed, "distribution": "hard", "params": params,
            "rtt_factor": round(factor, 3), "comp_start_s": round(float(rng.uniform(*HARD_RANGES["comp_start_s"])), 3),
            "comp_flows": int(rng.integers(lo, hi + 1)), "cca1": CCAS[pair // 4], "cca2": CCAS[pair % 4]}


@dataclass(frozen=True)
class Collection:
    """A scenario's [collection]: repeat r runs run_plan(r, seed, distribution, udp_cross),
    its network and flows, and keeps flow 1 as a dataset run (estimator/dataset.py):
    ``samples`` feature rows after a warm-up of ``warmup_frac`` of its ACKs."""
    distribution: str = "paper"
    udp_cross: bool = False
    samples: int = 100
    warmup_frac: float = 0.1

    def plan(self, seed: int, repeat: int) -> dict:
        return run_plan(repeat, seed, self.distribution, self.udp_cross)


def plan_algorithm(plan: dict) -> Algorithm:
    """A plan's flows as the runner runs them: flow 1 on cca1 (a CCP algorithm where the
    plan says so or the kernel lacks it), comp_flows competitors on cca2 from comp_start_s,
    UDP cross traffic at udp_mbps."""
    cca1 = plan["cca1"]
    on_ccp = plan.get("local_via") == "ccp" or cca1 not in KERNEL_CCAS
    return Algorithm(f"{cca1} vs {plan['cca2']}", cca=None if on_ccp else cca1, ccp=cca1 if on_ccp else None,
                     competitor=plan["cca2"], competitors=int(plan.get("comp_flows", 1)),
                     competitor_delay_s=float(plan.get("comp_start_s", 0.0)),
                     udp_cross_mbps=float(plan.get("udp_mbps", 0.0)))
