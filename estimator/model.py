"""Random Forest per local CCA (the ML-fairness paper): the competitor's CCA from Table I
features, scikit-learn estimator API, grid search over trees and depth with
folds split by experiment, persisted with its metadata.

``shared=True`` trains one forest for all local CCAs instead, with the local CCA
as four one-hot features: what the competitor does to the shared queue looks much
the same whatever flow 1 runs, and one forest learns it from four times the runs
(INT features, 160 held-out runs: 0.78 -> 0.81 mean accuracy).

    model = CCAEstimator().fit(X, y, local_cca=locals_, groups=experiment_ids)
    model.predict(X_new, local_cca="cubic")
    cross_val_score(CCAEstimator(), with_local_cca(X, locals_), y, groups=experiment_ids, cv=RunFolds(5))
    model.save("model.joblib");  CCAEstimator.load("model.joblib")
"""
from __future__ import annotations

import datetime
import json
import platform

import joblib
import numpy as np
import sklearn
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import GridSearchCV, GroupKFold, ParameterGrid

from telemetry.schema import CCA_LABELS

from .features import FEATURES

CCAS = CCA_LABELS
MODEL_FORMAT = 1
PAPER_GRID = {"n_estimators": [10, 50, 100, 200, 400, 600], "max_depth": [1, 5, 10, 15, 20, 30]}


class ModelError(ValueError):
    pass


def check_labels(labels, what: str):
    bad = sorted(set(labels) - set(CCAS))
    if bad:
        raise ModelError(f"unknown CCA label(s) in {what}: {', '.join(map(str, bad))} (known: {', '.join(CCAS)})")


class CCAEstimator(ClassifierMixin, BaseEstimator):
    """One RandomForestClassifier per local (flow 1) CCA, or one for all (``shared``).

    A scikit-learn estimator: ``__init__`` only stores its parameters, so ``clone``,
    ``Pipeline``, ``GridSearchCV`` and ``cross_val_score`` apply. Its input names the
    local CCA in the first column (its index in ``CCAS``: ``with_local_cca`` builds it),
    the features after it; ``fit``, ``predict`` and ``predict_proba`` also take the
    features alone with ``local_cca`` given apart (a label per row, or one label for all),
    as the estimator's own code calls them. ``groups`` (a run's id per row) keeps a run's
    rows in one inner fold of the grid search; without it each row is its own group."""

    def __init__(self, grid: dict | None = None, folds: int = 3, seed: int = 0, n_jobs: int = 1,
                 feature_names=FEATURES, shared: bool = False):
        self.grid = grid
        self.folds = folds
        self.seed = seed
        self.n_jobs = n_jobs
        self.feature_names = feature_names
        self.shared = shared

    def _features_and_local(self, X, local_cca):
        """(features, local CCA label per row) from either input form."""
        X = np.asarray(X)
        if local_cca is None:
            if X.ndim != 2 or X.shape[1] != len(self.feature_names) + 1:
                raise ModelError(f"X must be (n, 1 + {len(self.feature_names)}): the local CCA's index in CCAS, "
                                 f"then the features (with_local_cca), got {X.shape}")
            index = X[:, 0].astype(int)
            if ((index < 0) | (index >= len(CCAS))).any():
                raise ModelError(f"the first column must index a local CCA in {', '.join(CCAS)}")
            return X[:, 1:].astype(float), np.asarray(CCAS)[index]
        if isinstance(local_cca, str):
            local_cca = np.full(len(X), local_cca)
        return X, np.asarray(local_cca)

    def fit(self, X, y, local_cca=None, groups=None):
        X, local_cca = self._features_and_local(X, local_cca)
        y = np.asarray(y)
        groups = np.arange(len(X)) if groups is None else np.asarray(groups)
        if X.ndim != 2 or X.shape[1] != len(self.feature_names):
            raise ModelError(f"X must be (n, {len(self.feature_names)}), got {X.shape}")
        check_labels(y, "y")
        check_labels(local_cca, "local_cca")
        self.classes_ = np.asarray(CCAS)
        self.n_features_in_ = len(self.feature_names) + 1
        self.models_, self.best_params_, self.cv_accuracy_, self.training_ = {}, {}, {}, {}
        self.training_runs_: list = []     # [collection seed, run index] of every training run
        self.split_: dict = {}             # how the dataset was split: {"seed", "test_fraction"}
        self.targets_: dict = {}           # accuracy targets of its release, from its card
        if self.shared:      # one forest, found under every local CCA it knows
            search = self._search(_with_local(X, local_cca), y, groups, "")
            for local in sorted(set(local_cca)):
                self._record(local, search, local_cca == local, y, groups)
            return self
        for local in sorted(set(local_cca)):
            sel = local_cca == local
            self._record(local, self._search(X[sel], y[sel], groups[sel], f"local CCA {local}: "), sel, y, groups)
        return self

    def _search(self, X, y, groups, what: str) -> GridSearchCV:
        n_groups = len(set(groups))
        if n_groups < 2:
            raise ModelError(f"{what}needs runs from >= 2 experiments, got {n_groups}")
        grid = self.grid or PAPER_GRID
        forest = RandomForestClassifier(random_state=self.seed, n_jobs=self.n_jobs)
        candidates = ParameterGrid(grid)
        if len(candidates) == 1:     # nothing to choose: no inner folds (4x faster), no cv accuracy
            return _Fixed(forest.set_params(**candidates[0]).fit(X, y), candidates[0])
        search = GridSearchCV(forest, grid, cv=GroupKFold(n_splits=min(self.folds, n_groups)), n_jobs=1)
        return search.fit(X, y, groups=groups)

    def _record(self, local, search, sel, y, groups):
        self.models_[local] = search.best_estimator_
        self.best_params_[local] = search.best_params_
        self.cv_accuracy_[local] = None if search.best_score_ is None else float(search.best_score_)
        self.training_[local] = {"rows": int(sel.sum()), "experiments": len(set(groups[sel])),
                                 "classes": {c: int((y[sel] == c).sum()) for c in sorted(set(y[sel]))}}

    def _inputs(self, X, local_cca: str):
        X = np.asarray(X)
        return _with_local(X, np.full(len(X), local_cca)) if self.shared else X

    def _by_local(self, X, local_cca, one):
        """``one(model, inputs)`` for the rows of each local CCA, stacked in the rows' order."""
        X, local = self._features_and_local(X, local_cca)
        local = local.astype(str)
        if len(set(local)) == 1:
            return one(self._model(str(local[0])), self._inputs(X, str(local[0])))
        out = None
        for name in map(str, sorted(set(local))):
            sel = local == name
            part = one(self._model(name), self._inputs(X[sel], name))
            if out is None:
                out = np.empty((len(X),) + part.shape[1:], part.dtype)
            out[sel] = part
        return out

    def predict(self, X, local_cca=None):
        return self._by_local(X, local_cca, lambda m, x: m.predict(x))

    def predict_proba(self, X, local_cca=None):
        """Probabilities in the order of ``classes_`` (CCAS), 0 for a CCA a forest never saw."""
        def proba(m, x):
            p = np.zeros((len(x), len(CCAS)))
            p[:, [CCAS.index(c) for c in m.classes_]] = m.predict_proba(x)
            return p
        return self._by_local(X, local_cca, proba)

    def _model(self, local_cca):
        if local_cca not in self.models_:
            raise ModelError(f"no model for local CCA {local_cca!r} (have: {', '.join(sorted(self.models_))})")
        return self.models_[local_cca]

    def metadata(self) -> dict:
        targets = getattr(self, "targets_", {})
        return {"format": MODEL_FORMAT, "features": list(self.feature_names), "ccas": list(CCAS),
                "sklearn": sklearn.__version__, "numpy": np.__version__, "python": platform.python_version(),
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "seed": self.seed, "shared": self.shared, "best_params": self.best_params_, "cv_accuracy": self.cv_accuracy_,
                "training": self.training_, "training_runs": self.training_runs_, "split": self.split_,
                **({"targets": targets} if targets else {})}

    def save(self, path: str):
        joblib.dump({"metadata": self.metadata(), "models": self.models_}, path, compress=3)
        with open(path + ".json", "w") as f:
            json.dump(self.metadata(), f, indent=1)

    @classmethod
    def load(cls, path: str) -> "CCAEstimator":
        try:
            blob = joblib.load(path)
        except Exception as e:   # a pickle from elsewhere fails in many ways
            raise ModelError(f"{path}: not an intcc estimator model ({type(e).__name__}: {e})") from None
        meta = blob.get("metadata") if isinstance(blob, dict) else None
        if not meta or meta.get("format") != MODEL_FORMAT:
            raise ModelError(f"{path}: model format {meta and meta.get('format')}, this intcc reads {MODEL_FORMAT}")
        if meta.get("sklearn") != sklearn.__version__:
            raise ModelError(f"{path}: trained with scikit-learn {meta.get('sklearn')}, this is "
                             f"{sklearn.__version__}: retrain it or install that version")
        est = cls(feature_names=tuple(meta["features"]), seed=meta.get("seed", 0), shared=bool(meta.get("shared", False)))
        est.classes_ = np.asarray(CCAS)
        est.n_features_in_ = len(est.feature_names) + 1
        est.models_ = blob["models"]
        est.best_params_ = meta.get("best_params", {})
        est.cv_accuracy_ = meta.get("cv_accuracy", {})
        est.training_ = meta.get("training", {})
        est.training_runs_ = meta.get("training_runs", [])
        est.split_ = meta.get("split", {})
        est.targets_ = _card(path).get("targets", {})
        return est


def _card(path: str) -> dict:
    """The model's metadata file beside it (``X.joblib.json``): what it was trained for,
    e.g. its accuracy targets; {} when absent or unreadable."""
    try:
        with open(path + ".json") as f:
            card = json.load(f)
    except (OSError, ValueError):
        return {}
    return card if isinstance(card, dict) else {}


class _Fixed:
    """A forest fitted with the only parameters given, in GridSearchCV's result shape."""

    def __init__(self, forest, params):
        self.best_estimator_, self.best_params_, self.best_score_ = forest, params, None


def with_local_cca(X, local_cca) -> np.ndarray:
    """The estimator's single-array input: the local CCA's index in CCAS, then the features."""
    X = np.asarray(X, float)
    local = np.full(len(X), local_cca) if isinstance(local_cca, str) else np.asarray(local_cca)
    check_labels(local, "local_cca")
    return np.hstack([np.searchsorted(np.asarray(CCAS), local)[:, None].astype(float), X])


def _with_local(X, local_cca):
    """X and the local CCA one-hot (columns in CCAS order): the shared forest's input."""
    return np.hstack([X, np.asarray(local_cca)[:, None] == np.asarray(CCAS)[None, :]]).astype(float)
