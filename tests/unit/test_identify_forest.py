"""The passive features' forest as a stage of active identification (estimator/identify/forest.py):
features from hop records, its evidence from a fitted forest, the Identifier with and without it."""
import math

import joblib
import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from estimator.identify import forest, identifier
from estimator.identify.evidence import UNKNOWN
from telemetry.ccas import CCA_LABELS
from tests.unit.fluid_bottleneck import OWN, run

KINDS = {"window": "reno", "bbr": "bbr", "vegas": "vegas"}


def _view(kind, seconds=12.0, **kw):
    view = forest.NodeView(keep_s=None)
    for rec in run(kind, seconds=seconds, **kw):
        if rec.node_id == 2:
            view.add(rec)
    return view


def _model(tmp_path, rows_by_label):
    """A forest over fixed rows per label (CUBIC's rows a copy of Reno's shifted: every class known)."""
    X, y = [], []
    for label, rows in rows_by_label.items():
        X += list(rows)
        y += [label] * len(rows)
    f = RandomForestClassifier(n_estimators=20, random_state=0).fit(np.nan_to_num(np.asarray(X)), y)
    path = tmp_path / "forest.joblib"
    joblib.dump({"forest": f, "features": list(forest.FEATURES), "classes": list(CCA_LABELS)}, path)
    forest.load.cache_clear()
    return str(path)


def _rows(kind, **kw):
    view = _view(kind, **kw)
    return view.features(OWN, np.arange(6.0, 12.0, 0.5) + 1_000, 0.04)


def test_the_features_are_the_passive_models_row_but_table_one_from_the_nodes_records():
    x = _rows("window", buffer_pkts=60)
    assert x.shape == (12, len(forest.FEATURES)) and np.isfinite(x).all()
    assert forest.NodeView().features(OWN, [1.0], 0.04) is None      # no records yet


def test_the_forest_stage_names_what_its_forest_names_and_leaves_unknown_at_a_quarter(tmp_path):
    rows = {KINDS[k]: _rows(k, **({"buffer_pkts": 60} if k == "window" else {})) for k in KINDS}
    rows["cubic"] = rows["reno"] + 1e3                    # a class no row below resembles
    stage = forest.ForestStage(_model(tmp_path, rows))
    view = _view("bbr")
    ev = stage.evidence(view, OWN, 1_011.0, 0.04)
    assert ev.stage == "forest" and ev.note == "bbr"
    assert max(ev.loglik, key=ev.loglik.get) == "bbr"
    assert ev.loglik[UNKNOWN] == pytest.approx(math.log(0.25))
    assert min(ev.loglik.values()) >= math.log(forest.FLOOR)


def test_the_stage_reads_the_mean_of_its_last_readings(tmp_path):
    rows = {"bbr": np.zeros((5, len(forest.FEATURES))), "cubic": np.ones((5, len(forest.FEATURES))),
            "reno": 2 * np.ones((5, len(forest.FEATURES))), "vegas": 3 * np.ones((5, len(forest.FEATURES)))}
    stage = forest.ForestStage(_model(tmp_path, rows))

    class Fixed:
        def __init__(self, value):
            self.value = value

        def features(self, *_):
            return np.full((1, len(forest.FEATURES)), float(self.value))
    for _ in range(forest.MEAN_OVER - 1):
        stage.evidence(Fixed(2), OWN, 0.0, 0.04)           # Reno twice
    ev = stage.evidence(Fixed(0), OWN, 0.0, 0.04)          # then BBR once: Reno's mean is higher
    assert ev.note == "reno" and ev.loglik["reno"] > ev.loglik["bbr"] > ev.loglik["cubic"]
    stage.reset()
    assert stage.evidence(Fixed(0), OWN, 0.0, 0.04).note == "bbr"


def test_a_file_that_is_no_forest_stage_model_is_refused_by_name(tmp_path):
    bad = tmp_path / "m.joblib"
    joblib.dump(RandomForestClassifier(), bad)
    forest.load.cache_clear()
    with pytest.raises(ValueError, match="not a forest-stage model"):
        forest.ForestStage(str(bad))


def test_the_identifier_adds_the_forest_as_one_stage_only_when_given_a_model(tmp_path, monkeypatch):
    rows = {KINDS[k]: _rows(k, **({"buffer_pkts": 60} if k == "window" else {})) for k in KINDS}
    rows["cubic"] = rows["reno"] + 1e3
    path = _model(tmp_path, rows)
    recs = run("vegas", seconds=10.0)
    without = identifier.Identifier(OWN, base_rtt_s=0.04)
    monkeypatch.setattr(identifier, "FOREST_MODEL", path)
    with_forest = identifier.Identifier(OWN, base_rtt_s=0.04)
    for idf in (without, with_forest):
        for rec in recs:
            idf.add(rec)
        idf.step()
    assert "forest" not in without.test.stages
    # what the agent publishes of each step is a valid identify record, the forest's too
    from telemetry.schema import IdentifyRecord, decode, encode
    measured = [[ev.stage, ev.measured] for ev in with_forest.test.evidence]
    assert "forest" in {m[0] for m in measured}
    decode(encode(IdentifyRecord(flow_id=OWN, ts_ns=1, node_id=2, verdict=None, best="vegas", posterior=0.5,
                                 evidence=measured[-64:])))
    assert max(with_forest.test.stages["forest"], key=with_forest.test.stages["forest"].get) == "vegas"
    # one stage among the others: the rest of the evidence is the same
    assert {k: v for k, v in with_forest.test.stages.items() if k != "forest"} == without.test.stages
