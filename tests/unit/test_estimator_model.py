"""Majority vote and the per-local-CCA Random Forest on synthetic features."""
import numpy as np
import pytest

from estimator.features import FEATURES
from estimator.model import CCAS, CCAEstimator, ModelError, with_local_cca
from estimator.model_selection import RunFolds
from estimator.vote import MajorityVote, vote_series


def test_majority_vote_window():
    mv = MajorityVote(3)
    assert mv.verdict().estimate is None
    assert mv.update("bbr").estimate == "bbr"
    mv.update("cubic")
    v = mv.update("cubic")
    assert (v.estimate, v.confidence, v.votes) == ("cubic", pytest.approx(2 / 3), {"bbr": 1, "cubic": 2})
    mv.update("bbr")
    v = mv.update("bbr")                     # window: cubic, bbr, bbr
    assert v.estimate == "bbr" and v.votes == {"cubic": 1, "bbr": 2}
    assert vote_series(["a", "b", "b", "a", "a"], 1) == ["a", "b", "b", "a", "a"]
    with pytest.raises(ValueError):
        MajorityVote(0)


def synthetic(rng, experiments=24, rows=40):
    X, y, local, groups = [], [], [], []
    for e in range(experiments):
        comp = CCAS[e % 4]
        mine = CCAS[(e // 4) % 2]            # two local CCAs
        centre = np.arange(len(FEATURES)) * 0.1 + CCAS.index(comp)
        X.append(rng.normal(centre, 0.6, (rows, len(FEATURES))))
        y += [comp] * rows
        local += [mine] * rows
        groups += [e] * rows
    return np.vstack(X), np.array(y), np.array(local), np.array(groups)


def test_forest_per_local_cca_learns_and_round_trips(tmp_path):
    rng = np.random.default_rng(1)
    X, y, local, groups = synthetic(rng)
    est = CCAEstimator(grid={"n_estimators": [10, 30], "max_depth": [2, 8]}, folds=3).fit(X, y, local, groups)
    assert set(est.models_) == {"bbr", "cubic"}
    Xt, yt, lt, _ = synthetic(np.random.default_rng(2), experiments=8)
    sel = lt == "bbr"
    acc = (est.predict(Xt[sel], "bbr") == yt[sel]).mean()
    assert acc > 0.8, acc
    path = str(tmp_path / "m.joblib")
    est.save(path)
    back = CCAEstimator.load(path)
    np.testing.assert_array_equal(back.predict(Xt[sel], "bbr"), est.predict(Xt[sel], "bbr"))
    assert back.training_["bbr"]["experiments"] == 12
    with pytest.raises(ModelError, match="no model for local CCA 'vegas'"):
        back.predict(Xt[:2], "vegas")


def test_shared_forest_uses_the_local_cca_and_round_trips(tmp_path):
    # the same features mean different competitors under the two local CCAs: only a
    # forest that sees the local CCA can tell them apart
    rng = np.random.default_rng(4)
    X, y, local, groups = synthetic(rng)
    flipped = np.array([CCAS[3 - CCAS.index(c)] for c in y])
    y = np.where(local == "cubic", flipped, y)
    est = CCAEstimator(grid={"n_estimators": [30], "max_depth": [8]}, folds=3, shared=True).fit(X, y, local, groups)
    assert est.models_["bbr"] is est.models_["cubic"]
    Xt, yt, lt, _ = synthetic(np.random.default_rng(5), experiments=8)
    yt = np.where(lt == "cubic", np.array([CCAS[3 - CCAS.index(c)] for c in yt]), yt)
    for mine in ("bbr", "cubic"):
        sel = lt == mine
        assert (est.predict(Xt[sel], mine) == yt[sel]).mean() > 0.8, mine
    path = str(tmp_path / "shared.joblib")
    est.save(path)
    back = CCAEstimator.load(path)
    assert back.shared
    np.testing.assert_array_equal(back.predict(Xt, "cubic"), est.predict(Xt, "cubic"))
    proba = back.predict_proba(Xt[:3], "bbr")
    assert proba.shape == (3, len(CCAS)) and np.allclose(proba.sum(axis=1), 1)
    # rows of several local CCAs at once, in the single-array form: the same answers
    mixed = with_local_cca(Xt, lt)
    np.testing.assert_array_equal(back.predict(mixed), np.concatenate(
        [back.predict(Xt[i:i + 1], lt[i]) for i in range(len(Xt))]))


def test_bad_inputs_are_named(tmp_path):
    rng = np.random.default_rng(3)
    X, y, local, groups = synthetic(rng, experiments=8, rows=5)
    y = y.astype(object)
    y[0] = "westwood"
    with pytest.raises(ModelError, match="unknown CCA label.*westwood"):
        CCAEstimator(grid={"n_estimators": [5], "max_depth": [2]}).fit(X, y, local, groups)
    with pytest.raises(ModelError, match=r"X must be \(n, 8\)"):
        CCAEstimator().fit(X[:, :3], y, local, groups)
    junk = tmp_path / "junk.joblib"
    junk.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="not an intcc estimator model"):
        CCAEstimator.load(str(junk))
    import joblib
    joblib.dump({"metadata": {"format": 99}, "models": {}}, str(tmp_path / "old.joblib"))
    with pytest.raises(ModelError, match="format 99"):
        CCAEstimator.load(str(tmp_path / "old.joblib"))


def test_the_install_pins_the_scikit_learn_every_shipped_model_was_saved_with():
    """A model pickled by one scikit-learn loads only under it: the pin in setup.cfg makes pip
    install that version (or refuse) at install time, never a refusal at run time."""
    import configparser
    import glob
    import json
    import os
    import re
    import estimator
    root = os.path.dirname(os.path.dirname(estimator.__file__))
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(root, "setup.cfg"))
    pins = re.findall(r"^\s*scikit-learn==([\d.]+)\s*$", cfg["options"]["install_requires"], re.M)
    assert len(pins) == 1, "setup.cfg must pin scikit-learn to one version"
    cards = glob.glob(os.path.join(os.path.dirname(estimator.__file__), "models", "**", "*.joblib.json"), recursive=True)
    assert cards and {json.load(open(c))["sklearn"] for c in cards} == {pins[0]}


def test_the_default_model_is_the_current_release_and_eval_prints_its_own_targets():
    from estimator import DEFAULT_MODEL
    from estimator.evaluate import format_tables
    model = CCAEstimator.load(DEFAULT_MODEL)
    assert model.targets_["mean_accuracy"] == 0.85 and model.targets_["vote_w50"] == 0.90
    res = {"table3": {c: {d: 0.5 for d in CCAS} for c in CCAS}, "mean_accuracy": 0.5,
           "table4": {"50": {"mean": 0.6}}, "time_to_stable_correct": {}}
    text = format_tables(res, model.targets_)
    assert "mean accuracy over pairs: 0.500  (target 0.85" in text and "at w=50:  (target 0.9" in text
    assert "paper" not in text                                    # the paper's figures are not this model's
    assert "no target recorded" in format_tables(res, {})


def test_the_estimator_follows_scikit_learns_api_clone_pipeline_grid_search_and_cross_val_score():
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer
    X, y, local, groups = synthetic(np.random.default_rng(11), experiments=24)
    Xl = with_local_cca(X, local)
    est = CCAEstimator(grid={"n_estimators": [10], "max_depth": [4]}, folds=2, seed=1)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "models_")
    scores = cross_val_score(est, Xl, y, groups=groups, cv=RunFolds(3))
    assert scores.shape == (3,) and scores.mean() > 0.5                   # the synthetic CCAs are separable
    pipe = Pipeline([("same", FunctionTransformer()), ("rf", clone(est))]).fit(Xl, y)
    assert (pipe.predict(Xl) == y).mean() > 0.8
    search = GridSearchCV(est, {"shared": [False, True]}, cv=RunFolds(2)).fit(Xl, y, groups=groups)
    assert search.best_params_["shared"] in (False, True)
    # the control: shuffled labels score at chance
    shuffled = np.random.default_rng(0).permutation(y)
    assert cross_val_score(est, Xl, shuffled, groups=groups, cv=RunFolds(3)).mean() < 0.4


def test_run_folds_keep_a_run_whole_and_deal_the_folds_as_the_list_of_runs_is_dealt():
    from estimator.evaluate import fold_of
    from estimator.model_selection import assign_folds
    X, y, local, groups = synthetic(np.random.default_rng(2), experiments=16)
    Xl = with_local_cca(X, local)
    seen = set()
    for train, test in RunFolds(4, seed=3).split(Xl, y, groups):
        assert not set(groups[train]) & set(groups[test])
        seen |= set(groups[test])
    assert seen == set(groups)
    runs = list(dict.fromkeys(groups))
    first = {g: i for i, g in reversed(list(enumerate(groups)))}
    pairs = [(local[first[g]], y[first[g]]) for g in runs]
    by_run = dict(zip(runs, assign_folds(pairs, 4, 3)))
    for k, (_, test) in enumerate(RunFolds(4, seed=3).split(Xl, y, groups)):
        assert {by_run[g] for g in groups[test]} == {k}

    class R:                                  # fold_of over Run objects deals the same way
        def __init__(self, pair):
            self.pair = pair
    assert list(fold_of([R(p) for p in pairs], 4, 3)) == [by_run[g] for g in runs]
