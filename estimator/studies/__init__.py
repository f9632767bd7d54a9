"""One-off studies the docs cite: each runnable with ``python -m estimator.studies.NAME``,
each printing the figures docs/estimator.md quotes. Not part of the estimator's API."""

import numpy as np


def paired(a: dict, b: dict, seed: int = 0) -> dict:
    """b - a per run (the keys of ``a``), its mean with a bootstrap 95 % CI, and how many
    runs went each way."""
    d = np.array([b[k] - a[k] for k in sorted(a)])
    boot = np.random.default_rng(seed).choice(d, (5000, len(d))).mean(axis=1)
    return {"mean": float(d.mean()), "ci95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
            "better_runs": int((d > 0).sum()), "worse_runs": int((d < 0).sum())}
