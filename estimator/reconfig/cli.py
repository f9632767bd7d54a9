"""``intcc estimator reconfig-fct``: the reconfigurable-network paper's FCT-prolongation model
(fct.py): evaluate it on the study's records, fit and ship it, predict with it."""
from __future__ import annotations

import json
import os

import click

from .fct import CCAS, DEFAULT_MAX_NIGHT_SHARE, DEFAULT_SIZE_MB

DEFAULT_FCT_MODEL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "models", "reconfig_fct_rf.joblib")


def _records_option(f):
    return click.argument("records", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=True))(f)


def _paths(records) -> list[str]:
    return [os.path.join(r, "summary.json") if os.path.isdir(r) else r for r in records]


def _night_option(f):
    return click.option("--max-night-share", type=click.FloatRange(0, 1, max_open=True), default=DEFAULT_MAX_NIGHT_SHARE,
                        show_default=True, help="leave out settings whose night is a larger share of the period "
                        "(the paper's duty cycle: 90 %)")(f)


def _load(records, size_mb, max_night_share):
    from .fct import FctDataError, dataset
    try:
        return dataset(_paths(records), size_mb, max_night_share)
    except FctDataError as e:
        raise click.ClickException(str(e))


@click.group("reconfig-fct")
def reconfig_fct_group():
    """How much a path reconfiguration prolongs a migrated flow's transfer (the paper's Random Forest)."""


@reconfig_fct_group.command("eval")
@_records_option
@click.option("--size-mb", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_SIZE_MB, show_default=True,
              help="the transfer whose prolongation is predicted")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json-out", "json_path", type=click.Path(dir_okay=False), metavar="FILE")
@_night_option
def eval_cmd(records, size_mb, seed, json_path, max_night_share):
    """R², MSE and MAE of out-of-fold predictions on RECORDS (results directories of
    'intcc exp run reconfiguration|reconfiguration_grid', or their records): configurations
    held out whole, runs at random, and a shuffled-target control.

    Example: intcc estimator reconfig-fct eval data/experiments/reconfiguration-seed7001-2026-12-04.json results/grid
    """
    from .fct import evaluate, format_scores
    data = _load(records, size_mb, max_night_share)
    click.echo(f"{len(data.y)} runs, {len(set(data.groups))} configurations ...", err=True)
    ev = evaluate(data, seed=seed)
    click.echo(format_scores(ev))
    if json_path:
        from records.provenance import stamp
        with open(json_path, "w") as f:
            json.dump({"provenance": stamp(), "size_mb": size_mb, "max_night_share": max_night_share, "seed": seed, "records": data.sources,
                       **ev}, f, indent=1)


@reconfig_fct_group.command("fit")
@_records_option
@click.option("--model", "model_path", default=DEFAULT_FCT_MODEL, show_default="estimator/models/reconfig_fct_rf.joblib",
              type=click.Path(dir_okay=False))
@click.option("--size-mb", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_SIZE_MB, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@_night_option
def fit_cmd(records, model_path, size_mb, seed, max_night_share):
    """Evaluate on RECORDS, then fit on all of them and write the model and its card (MODEL.json)."""
    from .fct import card, evaluate, fit, format_scores, save
    data = _load(records, size_mb, max_night_share)
    ev = evaluate(data, seed=seed)
    click.echo(format_scores(ev))
    save(fit(data, seed=seed), model_path, card(data, ev, size_mb, seed))
    click.echo(f"wrote {model_path} and its card {model_path}.json")


@reconfig_fct_group.command("predict")
@click.option("--model", "model_path", default=DEFAULT_FCT_MODEL, show_default="estimator/models/reconfig_fct_rf.joblib",
              type=click.Path(exists=True, dir_okay=False))
@click.option("--migrated", type=click.Choice(CCAS), required=True, help="the migrated flow's CCA")
@click.option("--main", type=click.Choice(CCAS), required=True, help="the main flow's CCA")
@click.option("--period-ms", type=click.FloatRange(min=0), required=True, help="0: no reconfiguration")
@click.option("--downtime-ms", type=click.FloatRange(min=0), default=0.0, show_default=True)
def predict_cmd(model_path, migrated, main, period_ms, downtime_ms):
    """The predicted prolongation (s) of the migrated flow's transfer (the model card's size)
    over the main flow's.

    Example: intcc estimator reconfig-fct predict --migrated cubic --main cubic --period-ms 100 --downtime-ms 10
    """
    from .fct import day_ms, predict
    if period_ms and downtime_ms >= period_ms:
        raise click.BadParameter("the downtime must be shorter than the period", param_hint="--downtime-ms")
    with open(model_path + ".json") as f:
        size_mb = json.load(f)["size_mb"]
    row = {"migrated_cca": migrated, "main_cca": main, "day_ms": day_ms(period_ms, downtime_ms), "night_ms": downtime_ms}
    s = predict(model_path, [row])[0]
    click.echo(f"{s:+.2f} s ({size_mb:g} MB transfers)")
