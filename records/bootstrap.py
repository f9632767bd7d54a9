"""Percentile bootstrap, the one way every interval in the records is computed: resample
runs (or pairs of runs that met the same network or loss draws) with replacement, apply
the statistic to every resample at once, take the percentiles."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

DEFAULT_RESAMPLES = 4000


def draws(stat: Callable[..., np.ndarray], samples: Sequence, resamples: int = DEFAULT_RESAMPLES,
          rng: np.random.Generator | None = None, paired: bool = True) -> np.ndarray:
    """``stat`` over ``resamples`` resamples of ``samples`` (arrays of one axis), as one
    array. ``stat`` takes each sample resampled as a (resamples, n) array and reduces the
    last axis. Paired: the samples are resampled together (they must be as long), so what a
    pair shared does not widen the interval."""
    rng = rng if rng is not None else np.random.default_rng(0)
    arrays = [np.asarray(s, float) for s in samples]
    if paired:
        if len({a.size for a in arrays}) != 1:
            raise ValueError("paired samples need as many values each")
        idx = rng.integers(0, arrays[0].size, (resamples, arrays[0].size))
        return stat(*(a[idx] for a in arrays))
    return stat(*(a[rng.integers(0, a.size, (resamples, a.size))] for a in arrays))


def interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` percentile interval of bootstrap draws (NaN draws left out)."""
    tail = (1 - level) / 2 * 100
    low, high = np.nanpercentile(np.asarray(values, float), [tail, 100 - tail])
    return float(low), float(high)


def mean_interval(values, resamples: int = DEFAULT_RESAMPLES, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """The bootstrap interval of a mean (the value itself for a single run)."""
    a = np.asarray(values, float)
    if a.size < 2:
        return float(a.mean()), float(a.mean())
    return interval(draws(lambda x: x.mean(axis=-1), [a], resamples, np.random.default_rng(seed)), level)
