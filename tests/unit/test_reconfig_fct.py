"""The FCT-prolongation model (estimator/reconfig/fct.py): rows from reconfiguration records,
the paper's features, and an evaluation whose shuffled control fails."""
import json

import numpy as np
import pytest

from estimator.reconfig import fct


def _record(path, runs):
    with open(path, "w") as f:
        json.dump({"format": 2, "provenance": {"date": "2026-12-05", "commit": "abc", "command": "test"},
                   "records": runs}, f)
    return str(path)


def _run(cca, setting, g_migrated, g_main, repeat=0, **extra):
    return {"flow1": cca, "competitor": cca, "competitors": 1, "reconfig": setting, "seconds": 20.0,
            "goodput_mbps": g_migrated, "competitor_goodput_mbps": g_main, "repeat": repeat, **extra}


def test_a_run_is_its_ccas_day_night_and_the_transfer_time_difference(tmp_path):
    path = _record(tmp_path / "r.json", [
        _run("cubic", "100ms/10ms", 2.0, 16.0),
        _run("reno", "none", 16.0, 16.0),
        _run("bbr", "50ms", 10.0, 8.0),
        _run("cubic", "100ms/10ms", 2.0, 16.0, error="failed"),          # failed runs are left out
        _run("vegas", "100ms", 2.0, 16.0),                                # a CCA the model does not know
        {**_run("cubic", "100ms", 2.0, 16.0), "competitors": 2},          # not the paper's two flows
        _run("cubic", "100ms/50ms", 0.1, 16.0),                           # beyond the paper's duty cycle
    ])
    d = fct.dataset([path], size_mb=10)
    assert d.rows == [{"migrated_cca": "cubic", "main_cca": "cubic", "day_ms": 90.0, "night_ms": 10.0},
                      {"migrated_cca": "reno", "main_cca": "reno", "day_ms": 20_000.0, "night_ms": 0.0},
                      {"migrated_cca": "bbr", "main_cca": "bbr", "day_ms": 50.0, "night_ms": 0.0}]
    assert d.y == pytest.approx([80 / 2 - 80 / 16, 0.0, 80 / 10 - 80 / 8])
    assert d.groups == ["cubic/cubic/100/10", "reno/reno/0/0", "bbr/bbr/50/0"]
    assert len(fct.dataset([path], max_night_share=0.5).y) == 4          # unless asked for
    assert d.matrix()[0].tolist() == [0, 1, 0, 0, 1, 0, 90.0, 10.0]


def test_no_usable_run_and_an_unknown_cca_are_named(tmp_path):
    with pytest.raises(fct.FctDataError, match="no two-flow reconfiguration runs"):
        fct.dataset([_record(tmp_path / "r.json", [_run("vegas", "none", 1.0, 1.0)])])
    with pytest.raises(fct.FctDataError, match="migrated_cca 'vegas'"):
        fct.encode([{"migrated_cca": "vegas", "main_cca": "cubic", "day_ms": 1, "night_ms": 0}])


def test_held_out_configurations_are_predicted_where_the_target_follows_the_features_and_not_when_shuffled(tmp_path):
    rng = np.random.default_rng(1)
    runs = []
    for cca, scale in (("cubic", 1.0), ("reno", 0.8), ("bbr", 0.1)):
        for period in (50, 100, 150, 200, 250, 300, 400, 500, 700, 1000):
            for downtime in (0, period // 20, period // 10):      # the paper's duty cycle: nights <= 10 %
                # the migrated flow's goodput falls with the share of night and of short days
                g = 16 * (1 - scale * (downtime / period + 20 / period) / 2)
                for repeat in range(2):
                    runs.append(_run(cca, f"{period}ms/{downtime}ms" if downtime else f"{period}ms",
                                     max(g * rng.uniform(0.97, 1.03), 0.5), 16.0, repeat))
    d = fct.dataset([_record(tmp_path / "r.json", runs)], size_mb=10)
    ev = fct.evaluate(d, n_estimators=30)
    assert ev["configurations"] == 90 and ev["grouped"]["rows"] == 180
    assert ev["grouped"]["r2"] > 0.5 and ev["random"]["r2"] > 0.8      # between unseen periods: less
    assert ev["grouped_shuffled"]["r2"] < 0.2
    assert len(ev["per_configuration"]) == 90
    between = [_run(cca, f"{period}ms/{period // 15}ms", 16 * (1 - scale * (1 / 15 + 20 / period) / 2), 16.0)
               for cca, scale in (("cubic", 1.0), ("reno", 0.8), ("bbr", 0.1)) for period in (120, 350, 600)]
    other = fct.held_out(d, fct.dataset([_record(tmp_path / "o.json", between)]), n_estimators=30)
    assert other["rows"] == 9 and other["configurations"] == 9 and other["r2"] > 0.5
    assert "another seed's configurations" in fct.format_scores({**ev, "held_out": other})


def test_a_fitted_model_is_saved_with_its_card_and_predicts(tmp_path):
    runs = [_run(c, s, g, 16.0, r) for c in ("cubic", "bbr") for s, g in (("none", 16.0), ("100ms/10ms", 4.0))
            for r in range(3)]
    d = fct.dataset([_record(tmp_path / "r.json", runs)])
    path = str(tmp_path / "m.joblib")
    fct.save(fct.fit(d, n_estimators=10), path, fct.card(d, fct.evaluate(d, n_estimators=10, folds=2), 10.0, 0))
    card = json.load(open(path + ".json"))
    assert card["features"] == list(fct.FEATURES) and card["training_runs"] == 12 and card["size_mb"] == 10.0
    (slow,) = fct.predict(path, [{"migrated_cca": "cubic", "main_cca": "cubic", "day_ms": 90, "night_ms": 10}])
    assert slow == pytest.approx(80 / 4 - 80 / 16, rel=0.2)


def test_the_dark_share_is_the_nights_share_of_the_period_and_the_default_recipe_carries_it(tmp_path):
    X = fct.encode([{"migrated_cca": "cubic", "main_cca": "cubic", "day_ms": 90, "night_ms": 10},
                    {"migrated_cca": "reno", "main_cca": "reno", "day_ms": 20_000, "night_ms": 0}])
    assert fct.with_dark_share(X)[:, -1].tolist() == [0.1, 0.0]
    runs = [_run(c, s, g, 16.0, r) for c in ("cubic", "bbr") for s, g in (("none", 16.0), ("100ms/10ms", 4.0))
            for r in range(3)]
    d = fct.dataset([_record(tmp_path / "r.json", runs)])
    for recipe, encoded in (("dark-share", 9), ("paper", 8)):
        model = fct.fit(d, n_estimators=5, recipe=recipe)
        forest = model.named_steps["forest"] if hasattr(model, "named_steps") else model
        assert forest.n_features_in_ == encoded
        assert len(fct.card(d, {}, 10.0, 0, recipe)["encoded"]) == encoded
    assert fct.card(d, {}, 10.0, 0, "dark-share")["forest"]["min_samples_leaf"] == 1
    with pytest.raises(fct.FctDataError, match="recipe 'deep'"):
        fct.forest(recipe="deep")
