"""The sequential test: each stage's evidence is a log-likelihood per hypothesis (the four
CCAs and "unknown"); the stages add up, with a uniform prior; a verdict is committed once
one hypothesis's posterior reaches ``threshold``, and none before (the caller keeps a
neutral rate meanwhile). "unknown" is the hypothesis no kernel constant predicts: each stage
gives it a flat density over the measurement's range, so it wins where the measurements
fit none of the four.

A stage measures a property of the competitor (its cut, its queue, its answer to the
pulses) again and again: its repeated measurements narrow the counting error, not the
model's own spread. So a stage counts once, from the aggregate of its measurements
(aggregate(): their median and its error; the stage adds its model's spread), replaced as
measurements come (``set``), and no stage moves the odds between two hypotheses by more
than MAX_LOG_RATIO: a model wrong in its tail does not decide alone. ``add`` is the test
for independent evidence (each counted), kept for the unit tests of the stages alone."""
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


#: No one stage moves a hypothesis's odds by more than this (log)
MAX_LOG_RATIO = math.log(20.0)
#: The posterior a commit needs by default. Above what one stage can give alone (20:1 against
#: each of the other four: 20/24 = 0.83), so two stages must agree; below 0.95, which the
#: development replays showed to be cautious: runs whose best hypothesis ended at 0.90-0.95
#: were right in every case. Chosen on the development seeds' replays (docs/estimator.md).
COMMIT_POSTERIOR = 0.9


def aggregate(measurements) -> tuple[float, float]:
    """(median, its standard error) of [(value, its standard error), ...]: the spread of
    the values over sqrt(n), or their own errors' where larger."""
    values = sorted(v for v, _ in measurements)
    n = len(values)
    median = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
    mean = sum(values) / n
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / max(n - 1, 1) / n)
    own = math.sqrt(sum(e * e for _, e in measurements) / n / n)
    return median, 1.25 * max(spread, own)          # 1.25: a median's error over a mean's


@dataclass
class SequentialTest:
    threshold: float = COMMIT_POSTERIOR
    hypotheses: tuple = HYPOTHESES
    log_posterior: dict = field(default_factory=dict)
    evidence: list = field(default_factory=list)     # every measurement's, for the record
    stages: dict = field(default_factory=dict)       # stage -> its current Evidence (set)

    def __post_init__(self):
        if not 0.5 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0.5, 1), not {self.threshold}")
        self.log_posterior = {h: 0.0 for h in self.hypotheses}      # log of the (unnormalised) prior: uniform

    def _clamped(self, ev: Evidence) -> dict:
        missing = [h for h in self.hypotheses if h not in ev.loglik]
        if missing:
            raise ValueError(f"{ev.stage}: no likelihood for {', '.join(missing)}")
        top = max(ev.loglik[h] for h in self.hypotheses)
        return {h: max(ev.loglik[h], top - MAX_LOG_RATIO) for h in self.hypotheses}

    def add(self, ev: Evidence) -> None:
        """Independent evidence: counted, on top of what is there."""
        for h, v in self._clamped(ev).items():
            self.log_posterior[h] += v
        self.evidence.append(ev)

    def set(self, stage: str, ev: Evidence) -> None:
        """A stage's evidence from all its measurements so far: it replaces the stage's last."""
        new = self._clamped(ev)
        old = self.stages.get(stage)
        for h in self.hypotheses:
            self.log_posterior[h] += new[h] - (old[h] if old is not None else 0.0)
        self.stages[stage] = new

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
