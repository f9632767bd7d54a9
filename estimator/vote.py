"""Majority vote over the last w estimates (the ML-fairness paper, Fig. 3)."""
from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np


@dataclass
class Verdict:
    estimate: str | None      # the most frequent label in the window (ties: the most recent of them)
    confidence: float         # its share of the window
    votes: dict               # label -> count in the window


class MajorityVote:
    def __init__(self, w: int):
        if w < 1:
            raise ValueError(f"window w must be >= 1, not {w}")
        self.w = w
        self._window: collections.deque = collections.deque(maxlen=w)
        self._counts: collections.Counter = collections.Counter()

    def update(self, label: str) -> Verdict:
        if len(self._window) == self.w:
            old = self._window[0]
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]
        self._window.append(label)
        self._counts[label] += 1
        return self.verdict()

    def verdict(self) -> Verdict:
        if not self._window:
            return Verdict(None, 0.0, {})
        top = max(self._counts.values())
        tied = {lab for lab, c in self._counts.items() if c == top}
        estimate = next(lab for lab in reversed(self._window) if lab in tied)
        return Verdict(estimate, top / len(self._window), dict(self._counts))


def vote_series(labels, w: int) -> list:
    """The verdict after each estimate of a sequence."""
    mv = MajorityVote(w)
    return [mv.update(lab).estimate for lab in labels]


def first_stable_correct(t_s: np.ndarray, correct: np.ndarray) -> float | None:
    """Time of the first verdict from which every later one is correct (None: the last
    is wrong, or there are none). Offline rows start after a run's warm-up, so their
    times include it."""
    if not len(correct) or not correct[-1]:
        return None
    wrong = np.flatnonzero(~correct)
    return float(t_s[wrong[-1] + 1] if len(wrong) else t_s[0])
