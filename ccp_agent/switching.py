"""When a flow of the adaptive agent changes algorithm, on the estimator's verdict of its
competitor (the ML-fairness paper, Section IV).

- ``mirror``: the competitor's CCA (the paper's rule);
- ``best-response``: the local CCA with the smallest expected |D| against it, from a
  measured goodput table g(local, competitor) shipped beside the model
  (D = (G1 - G2) / (G1 + G2), the ML-fairness paper Eq. (3)); the expectation is over the vote's
  shares (a vote of 70 % bbr, 30 % vegas weighs each local CCA's |D| against both), and
  over networks where the table has each pair's mean |D| per network.

Hysteresis: a flow keeps an algorithm at least ``min_dwell_s``; a verdict from fewer than
``min_votes`` estimates (the first seconds of a flow, when the vote has just begun; the
vote goes on across a switch), or whose top share is below ``min_confidence``, or
"unknown", changes nothing. With ``min_votes_unanimous`` K > 0 a vote of fewer than
``min_votes`` counts once it has K estimates that all name the same CCA: the first switch
need not wait for ``min_votes`` when the estimates agree from the first.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

POLICIES = ("mirror", "best-response")
#: how the adaptive agent names a flow's competitor (`intcc alg run adaptive --identify`): active
#: probes and reads its answers in the hop records; passive votes over the model's estimates
IDENTIFY_MODES = ("active", "passive")
DEFAULT_IDENTIFY = "active"


class SwitchingError(ValueError):
    pass


@dataclass
class GoodputTable:
    """g[(local, competitor)] = (local goodput, competitor goodput), Mbit/s, measured, and
    where measured per network, the mean |D| over them (what a flow meets: the |D| of mean
    goodputs hides a pair that is unfair one way on some networks, the other on others)."""
    goodput: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    mean_abs_d: dict[tuple[str, str], float] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str) -> GoodputTable:
        """A JSON file: {"goodput_mbps": [{"local": .., "competitor": .., "local_mbps": ..,
        "competitor_mbps": .. [, "mean_abs_d": ..]}, ...]}."""
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            rows = doc["goodput_mbps"]
            table = {(r["local"], r["competitor"]): (float(r["local_mbps"]), float(r["competitor_mbps"]))
                     for r in rows}
            mean_abs_d = {(r["local"], r["competitor"]): float(r["mean_abs_d"]) for r in rows if "mean_abs_d" in r}
        except OSError as e:
            raise SwitchingError(f"{path}: cannot read the goodput table ({e.strerror})") from None
        except (ValueError, KeyError, TypeError) as e:
            raise SwitchingError(f"{path}: not a goodput table ({type(e).__name__}: {e}); expected "
                                 f'{{"goodput_mbps": [{{"local", "competitor", "local_mbps", '
                                 f'"competitor_mbps"}}, ...]}}') from None
        return cls(table, mean_abs_d)

    def abs_d(self, local: str, competitor: str) -> float:
        if (local, competitor) in self.mean_abs_d:
            return self.mean_abs_d[(local, competitor)]
        g1, g2 = self.goodput[(local, competitor)]
        return abs(g1 - g2) / (g1 + g2) if g1 + g2 > 0 else 1.0

    def check_covers(self, locals_: tuple[str, ...], competitors: tuple[str, ...]):
        missing = [(a, b) for a in locals_ for b in competitors if (a, b) not in self.goodput]
        if missing:
            raise SwitchingError("the goodput table lacks " + ", ".join(f"({a}, {b})" for a, b in missing)
                                 + ": best-response needs every local CCA against every CCA the model names")


@dataclass
class SwitchPolicy:
    policy: str
    local_ccas: tuple[str, ...]          # what the agent can run for a flow
    competitor_ccas: tuple[str, ...]     # what the model can name
    min_dwell_s: float = 5.0
    min_confidence: float = 0.6
    table: GoodputTable | None = None
    min_votes: int = 10
    min_votes_unanimous: int = 0         # 0: off

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise SwitchingError(f"policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        if self.policy == "best-response":
            if self.table is None:
                raise SwitchingError("best-response needs a goodput table (--table FILE)")
            self.table.check_covers(self.local_ccas, self.competitor_ccas)

    def target(self, competitor: str, shares: dict | None = None) -> str | None:
        """The local CCA for a flow that competes with ``competitor`` (None: none fits);
        best-response weighs |D| by ``shares`` (label -> votes) where given."""
        if self.policy == "mirror":
            return competitor if competitor in self.local_ccas else None
        weights = {c: n for c, n in (shares or {}).items() if c in self.competitor_ccas and n > 0} or {competitor: 1}

        def expected_abs_d(local):
            return sum(n * self.table.abs_d(local, c) for c, n in weights.items()) / sum(weights.values())
        return min(self.local_ccas, key=lambda local: (expected_abs_d(local), local))

    def before_any_verdict(self) -> str:
        """best-response's start: the smallest |D| expected against every CCA the model
        names, alike (the paper's "not used" draws the local CCA at random instead)."""
        return self.target(self.competitor_ccas[0], dict.fromkeys(self.competitor_ccas, 1))

    def decide(self, current: str, in_control_s: float, estimate: str | None, confidence: float,
               votes: int, shares: dict | None = None) -> str | None:
        """The algorithm to switch to now, or None (stay). ``votes``: estimates in the vote;
        ``shares``: their count per label (best-response weighs by them)."""
        if estimate is None or estimate == "unknown" or confidence < self.min_confidence:
            return None
        if votes < self.min_votes and not (0 < self.min_votes_unanimous <= votes and confidence >= 1.0):
            return None
        if in_control_s < self.min_dwell_s:
            return None
        target = self.target(estimate, shares)
        return target if target is not None and target != current else None
