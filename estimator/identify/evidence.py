"""The sequential test: evidence from independent measurements adds up as log-likelihoods
per hypothesis (the four CCAs and "unknown"), with a uniform prior; a verdict is committed
once one hypothesis's posterior reaches ``threshold``, and none before (the caller keeps a
neutral rate meanwhile). "unknown" is the hypothesis no kernel constant predicts: each stage
gives it a flat density over the measurement's range, so it wins where the measurements
fit none of the four."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from telemetry.ccas import CCA_LABELS

UNKNOWN = "unknown"
HYPOTHESES = CCA_LABELS + (UNKNOWN,)


@dataclass
class Evidence:
    """One measurement's log-likelihood per hypothesis, and what it was (for the record)."""
    stage: str
    loglik: dict
    measured: float | None = None
    note: str = ""


#: No one measurement moves a hypothesis's odds by more than this (log): successive
#: stretches of one flow are not independent, and a model's tail (a normal far from its
#: mean) would otherwise decide alone
MAX_LOG_RATIO = math.log(20.0)


@dataclass
class SequentialTest:
    threshold: float = 0.95
    hypotheses: tuple = HYPOTHESES
    log_posterior: dict = field(default_factory=dict)
    evidence: list = field(default_factory=list)

    def __post_init__(self):
        if not 0.5 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0.5, 1), not {self.threshold}")
        self.log_posterior = {h: 0.0 for h in self.hypotheses}      # log of the (unnormalised) prior: uniform

    def add(self, ev: Evidence) -> None:
        missing = [h for h in self.hypotheses if h not in ev.loglik]
        if missing:
            raise ValueError(f"{ev.stage}: no likelihood for {', '.join(missing)}")
        top = max(ev.loglik[h] for h in self.hypotheses)
        for h in self.hypotheses:
            self.log_posterior[h] += max(ev.loglik[h], top - MAX_LOG_RATIO)
        self.evidence.append(ev)

    def posterior(self) -> dict:
        top = max(self.log_posterior.values())
        w = {h: math.exp(v - top) for h, v in self.log_posterior.items()}
        total = sum(w.values())
        return {h: w[h] / total for h in self.hypotheses}

    def verdict(self) -> str | None:
        """The hypothesis whose posterior reached the threshold, else None (undecided)."""
        post = self.posterior()
        best = max(post, key=post.get)
        return best if post[best] >= self.threshold else None

    def best(self) -> tuple[str, float]:
        post = self.posterior()
        best = max(post, key=post.get)
        return best, post[best]
