"""The studies' drivers on synthetic runs (the studies themselves run on collected data)."""
import json

from estimator.studies import seed_curve
from tests.unit.test_estimator_eval import fake_dataset


def test_seed_curve_scores_each_point_and_the_given_model_on_the_unseen_seed(tmp_path, monkeypatch):
    monkeypatch.setattr(seed_curve, "FEATURE_SET", "table1")     # the fake runs carry Table I rows only
    train_dirs = [fake_dataset(tmp_path / f"s{seed}", runs=32, seed=seed) for seed in (7, 8)]
    test_dir = fake_dataset(tmp_path / "s9", runs=32, seed=9)
    model_path = str(tmp_path / "m.joblib")
    seed_curve.train([r for d in train_dirs[:1] for r in seed_curve.load_dataset([d], "table1")],
                     {"n_estimators": [10], "max_depth": [5]}, feature_set="table1", shared=True).save(model_path)
    out = tmp_path / "curve.json"
    seed_curve.main([*train_dirs, "--test", test_dir, "--model", model_path, "--out", str(out)])
    res = json.loads(out.read_text())
    points = res["points"]
    assert [p["train_runs"] for p in points] == [32, 64] and [len(p["collections"]) for p in points] == [1, 2]
    assert all(p["test_runs"] == 32 and p["mean_accuracy"] > 0.9 for p in points)    # the fake CCAs separate
    assert "paired" not in points[0] and -1 <= points[1]["paired"]["mean"] <= 1
    assert res["models"][model_path]["test_runs"] == 32 and "paired" in res["models"][model_path]
