"""``intcc estimator reconfig-fct`` and ``reconfig-variant``: the reconfigurable-network paper's
FCT-prolongation model (fct.py) and TCP-variant classifier (variant.py): evaluate them on the
study's records, fit and ship them, predict with them."""
from __future__ import annotations

import json
import os

import click

from .fct import CCAS, DEFAULT_MAX_NIGHT_SHARE, DEFAULT_RECIPE, DEFAULT_SIZE_MB, RECIPES

DEFAULT_FCT_MODEL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "models", "reconfig_fct_rf.joblib")


def _records_option(f):
    return click.argument("records", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=True))(f)


def _paths(records) -> list[str]:
    return [os.path.join(r, "summary.json") if os.path.isdir(r) else r for r in records]


def _night_option(f):
    return click.option("--max-night-share", type=click.FloatRange(0, 1, max_open=True), default=DEFAULT_MAX_NIGHT_SHARE,
                        show_default=True, help="leave out settings whose night is a larger share of the period "
                        "(the paper's duty cycle: 90 %)")(f)


def _recipe_option(f):
    return click.option("--recipe", type=click.Choice(list(RECIPES)), default=DEFAULT_RECIPE, show_default=True,
                        help="paper: its four features and forest; dark-share: also the night's share of the "
                        "period, one run per leaf (docs/reconfiguration.md)")(f)


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
@click.option("--held-out", "held_out_records", multiple=True, type=click.Path(exists=True),
              help="records scored by a forest fitted on RECORDS (another seed, other configurations; repeatable)")
@_night_option
@_recipe_option
def eval_cmd(records, size_mb, seed, json_path, held_out_records, max_night_share, recipe):
    """R², MSE and MAE of out-of-fold predictions on RECORDS (results directories of
    'intcc exp run reconfiguration|reconfiguration_grid', or their records): configurations
    held out whole, runs at random, and a shuffled-target control.

    Example: intcc estimator reconfig-fct eval data/experiments/reconfiguration-seed7001-2026-12-04.json results/grid
    """
    from .fct import evaluate, format_scores, held_out
    data = _load(records, size_mb, max_night_share)
    click.echo(f"{len(data.y)} runs, {len(set(data.groups))} configurations ...", err=True)
    ev = evaluate(data, seed=seed, recipe=recipe)
    other = _load(held_out_records, size_mb, max_night_share) if held_out_records else None
    if other is not None:
        ev["held_out"] = held_out(data, other, seed=seed, recipe=recipe)
    click.echo(format_scores(ev))
    if json_path:
        from records.provenance import stamp
        with open(json_path, "w") as f:
            json.dump({"provenance": stamp(), "size_mb": size_mb, "max_night_share": max_night_share, "seed": seed, "recipe": recipe, "records": data.sources,
                       "held_out_records": other.sources if other is not None else [], **ev}, f, indent=1)


@reconfig_fct_group.command("fit")
@_records_option
@click.option("--model", "model_path", default=DEFAULT_FCT_MODEL, show_default="estimator/models/reconfig_fct_rf.joblib",
              type=click.Path(dir_okay=False))
@click.option("--size-mb", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_SIZE_MB, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@_night_option
@_recipe_option
def fit_cmd(records, model_path, size_mb, seed, max_night_share, recipe):
    """Evaluate on RECORDS, then fit on all of them and write the model and its card (MODEL.json)."""
    from .fct import card, evaluate, fit, format_scores, save
    data = _load(records, size_mb, max_night_share)
    ev = evaluate(data, seed=seed, recipe=recipe)
    click.echo(format_scores(ev))
    save(fit(data, seed=seed, recipe=recipe), model_path, card(data, ev, size_mb, seed, recipe))
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


DEFAULT_VARIANT_MODEL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "models", "reconfig_variant_rf.joblib")


def _datasets(paths):
    """Datasets from .npz files written by 'reconfig-variant dataset', or results directories."""
    from .variant import VariantDataError, from_results, load_dataset, merge
    try:
        return merge([from_results(p) if os.path.isdir(p) else load_dataset(p) for p in paths])
    except VariantDataError as e:
        raise click.ClickException(str(e))


def _window_option(f):
    from .variant import FOREST, WINDOW_S
    f = click.option("--trees", type=click.IntRange(1), default=FOREST["n_estimators"], show_default=True,
                     help="trees in the forest")(f)
    return click.option("--window-s", type=click.FloatRange(0.05, 10), default=WINDOW_S, show_default=True,
                        help="the length of trace a verdict reads (the paper's 0.5 s)")(f)


@click.group("reconfig-variant")
def reconfig_variant_group():
    """Which TCP variant a flow runs, from half a second of its window and RTT (the paper's classifier)."""


@reconfig_variant_group.command("dataset")
@click.argument("results", type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), metavar="FILE.npz")
def variant_dataset_cmd(results, out_path):
    """The flows of RESULTS (a directory of 'intcc exp run reconfiguration|reconfiguration_grid
    --kernel-trace') on a 10 ms grid, in one compressed file to commit and train on.

    Example: intcc estimator reconfig-variant dataset results/grid --out data/estimator/reconfig_variant/grid.npz
    """
    from .variant import save_dataset
    data = _datasets([results])
    save_dataset(data, out_path)
    click.echo(f"{len(data.flows)} flows of {len({f.run for f in data.flows})} runs -> {out_path}")


@reconfig_variant_group.command("eval")
@click.argument("datasets", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--held-out", "held_out_paths", multiple=True, type=click.Path(exists=True),
              help="datasets scored by a model fitted on DATASETS (another seed; repeatable)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json-out", "json_path", type=click.Path(dir_okay=False), metavar="FILE")
@_window_option
def variant_eval_cmd(datasets, held_out_paths, seed, json_path, window_s, trees):
    """Accuracy per window and per flow on DATASETS out of fold (runs held out, settings held
    out, windows at random, a shuffled-label control), and on --held-out datasets.

    Example: intcc estimator reconfig-variant eval data/estimator/reconfig_variant/grid.npz --held-out other-seed.npz
    """
    from .variant import MIN_ACKS, evaluate, format_confusion, format_scores, held_out
    data = _datasets(datasets)
    click.echo(f"{len(data.flows)} flows, windows of {window_s:g} s ...", err=True)
    ev = evaluate(data, seed=seed, window_s=window_s, n_estimators=trees)
    other = _datasets(held_out_paths) if held_out_paths else None
    if other is not None:
        ev["held_out"] = held_out(data, other, seed=seed, window_s=window_s, n_estimators=trees)
    click.echo(format_scores(ev))
    click.echo("")
    click.echo(format_confusion(ev.get("held_out", ev["by_run"])))
    if json_path:
        from records.provenance import stamp
        with open(json_path, "w") as f:
            json.dump({"provenance": stamp(), "window_s": window_s, "seed": seed, "trees": trees, "min_acks": MIN_ACKS,
                       "datasets": list(datasets), "held_out_datasets": list(held_out_paths), "records": data.sources,
                       "held_out_records": other.sources if other is not None else [], **ev}, f, indent=1)
            f.write("\n")


@reconfig_variant_group.command("fit")
@click.argument("datasets", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--model", "model_path", default=DEFAULT_VARIANT_MODEL, show_default="estimator/models/reconfig_variant_rf.joblib",
              type=click.Path(dir_okay=False))
@click.option("--seed", type=int, default=0, show_default=True)
@_window_option
def variant_fit_cmd(datasets, model_path, seed, window_s, trees):
    """Evaluate on DATASETS, then fit on all of them and write the model and its card (MODEL.json)."""
    from .variant import card, evaluate, fit, format_scores, save
    data = _datasets(datasets)
    ev = evaluate(data, seed=seed, window_s=window_s, n_estimators=trees)
    click.echo(format_scores(ev))
    save(fit(data, seed=seed, window_s=window_s, n_estimators=trees), model_path,
         card(data, ev, seed, window_s, n_estimators=trees))
    click.echo(f"wrote {model_path} and its card {model_path}.json")


@reconfig_variant_group.command("predict")
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("--model", "model_path", default=DEFAULT_VARIANT_MODEL, show_default="estimator/models/reconfig_variant_rf.joblib",
              type=click.Path(exists=True, dir_okay=False))
def variant_predict_cmd(trace, model_path):
    """The CCA of each flow in TRACE (a run's kernel_trace.csv): its windows' verdicts and their majority.

    Example: intcc estimator reconfig-variant predict results/grid/runs/cubic-pair_reconfig-100ms+10ms_r0/kernel_trace.csv
    """
    from .variant import VariantDataError, predict_trace
    try:
        flows = predict_trace(model_path, trace)
    except VariantDataError as e:
        raise click.ClickException(str(e))
    for f in flows:
        if not f["windows"]:
            click.echo(f"port {f['dport']}: no window with traffic")
            continue
        counts = ", ".join(f"{c} {n}" for c, n in f["counts"].items())
        click.echo(f"port {f['dport']}: {f['verdict']}  ({f['windows']} windows: {counts}; {f['quiet_windows']} without traffic)")
