"""The estimator's folds: whole runs (an experiment's rows never straddle a split), every
CCA pair spread evenly over the folds. ``RunFolds`` is the scikit-learn splitter of it
(``cross_val_score``, ``GridSearchCV``: ``groups`` names each row's run); ``assign_folds``
is the same assignment for a list of runs."""
from __future__ import annotations

import numpy as np
from sklearn.model_selection import BaseCrossValidator

from .model import CCAS


def assign_folds(pairs, n_splits: int, seed: int = 0) -> np.ndarray:
    """Each run's fold (0..n_splits-1) from its CCA pair: per pair, in sorted order, the
    runs in a seeded random order dealt round the folds, each pair starting where the
    last one stopped, so the remainders spread too."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(pairs), int)
    by_pair: dict = {}
    for i, pair in enumerate(pairs):
        by_pair.setdefault(pair, []).append(i)
    offset = 0
    for pair in sorted(by_pair):
        idx = np.asarray(by_pair[pair])[rng.permutation(len(by_pair[pair]))]
        fold[idx] = (np.arange(len(idx)) + offset) % n_splits
        offset += len(idx)
    return fold


class RunFolds(BaseCrossValidator):
    """K folds of whole runs, CCA pairs spread evenly. ``X`` is the estimator's input (the
    local CCA's index in its first column), ``y`` the competitor's CCA, ``groups`` the run
    of each row; a run's pair is read from its first row."""

    def __init__(self, n_splits: int = 5, seed: int = 0):
        if n_splits < 2:
            raise ValueError("RunFolds needs n_splits >= 2")
        self.n_splits = n_splits
        self.seed = seed

    def get_n_splits(self, X=None, y=None, groups=None) -> int:
        return self.n_splits

    def _iter_test_masks(self, X=None, y=None, groups=None):
        if groups is None:
            raise ValueError("RunFolds needs groups: the run of each row")
        X, y, groups = np.asarray(X), np.asarray(y), np.asarray(groups)
        runs, first, row_run = np.unique(groups, return_index=True, return_inverse=True)
        order = np.argsort(first)                       # runs in the order they first appear
        pairs = [(CCAS[int(X[first[r], 0])], str(y[first[r]])) for r in order]
        fold_of_run = np.empty(len(runs), int)
        fold_of_run[order] = assign_folds(pairs, self.n_splits, self.seed)
        fold = fold_of_run[row_run.ravel()]
        for k in range(self.n_splits):
            yield fold == k
