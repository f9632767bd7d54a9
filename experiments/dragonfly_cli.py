"""``intcc estimator dragonfly train`` and ``eval``: the in-network classifier trained and
scored on the captures of scenario results (``intcc exp run dragonfly --record-slots``), so
they live on the experiments' floor (``intcc.cli`` adds them to the dragonfly group)."""
from __future__ import annotations

import json
import os

import click

from estimator.dragonfly import DEFAULT_MODEL, TRAIN_CLASSES


@click.command("train")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="the ONNX model to write")
@click.option("--interval-ms", type=click.IntRange(min=10), default=1000, show_default=True,
              help="the dataframes' length: the verdict's delay after a flow starts")
@click.option("--windows-per-flow", type=click.IntRange(min=1), default=40, show_default=True,
              help="random sub-intervals drawn from each flow")
@click.option("--epochs", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--inputs", default="cbiq,ingress", show_default=True, metavar="NAMES",
              help="the per-slot series the model reads, comma-separated: cbiq, ingress (the paper's) and flight "
                   "(bytes in flight beyond the node: captures with the ACK side, since 2026-12-06)")
@click.option("--scaling", type=click.Choice(["max", "packets"]), default="max", show_default=True,
              help="each dataframe scaled per input by its maximum (the paper's), or all inputs in packets "
                   "(keeps the window's size and the flow's rate)")
def train_cmd(results, out_path, interval_ms, windows_per_flow, epochs, seed, inputs, scaling):
    """Train on the captures of scenario results (RESULTS: directories written by
    'intcc exp run dragonfly --record-slots'; each flow labelled by its port). Needs the
    training extra: pip install -e '.[train]'."""
    try:
        from estimator.dragonfly.train import DragonflyTrainer
    except ImportError as e:
        raise click.ClickException(f"training needs JAX ({e}): pip install -e '.[train]'")
    from experiments.runs.slot_record import labelled_flows

    from estimator.dragonfly.dataset import KNOWN_FEATURES, frames
    names = tuple(n.strip() for n in inputs.split(",") if n.strip())
    unknown = [n for n in names if n not in KNOWN_FEATURES]
    if unknown or not names:
        raise click.BadParameter(f"{inputs!r}: the inputs are among {', '.join(KNOWN_FEATURES)}", param_hint="--inputs")
    series, labels = [], []
    for r in results:
        for _, s, cca in labelled_flows(r):
            if cca in TRAIN_CLASSES:
                series.append(s)
                labels.append(cca)
    try:
        x, y = frames(series, labels, interval_ms, per_flow=windows_per_flow, seed=seed, features=names)
    except ValueError as e:
        raise click.ClickException(str(e))
    if not len(y):
        raise click.ClickException(f"no flow of {', '.join(TRAIN_CLASSES)} with {interval_ms} ms of capture in "
                                   f"{', '.join(results)}")
    click.echo(f"{len(series)} flows, {len(y)} dataframes of {interval_ms} ms", err=True)
    clf = DragonflyTrainer(TRAIN_CLASSES, epochs=epochs, patience=5, seed=seed, inputs=names,
                           scaling=scaling).fit(x, y)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    best = max(h["held_out_accuracy"] for h in clf.history_)
    from records.provenance import stamp
    made = stamp()
    clf.save(out_path, {"trained_on": " ".join(os.path.relpath(r) for r in results), "flows": len(series),
                        "frames": len(y), "epochs": len(clf.history_), "held_out_accuracy": round(best, 3),
                        "date": made["date"], "commit": made["commit"], "command": made["command"]})
    click.echo(f"{out_path}: {len(clf.history_)} epochs, accuracy on the 30 % of dataframes held out {best:.2f}")


@click.command("eval")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--model", "model_path", default=DEFAULT_MODEL, show_default="the shipped model, estimator/models/",
              type=click.Path(exists=True, dir_okay=False))
@click.option("--windows-per-flow", type=click.IntRange(min=1), default=40, show_default=True,
              help="random sub-intervals drawn from each flow")
@click.option("--seed", type=int, default=1, show_default=True, help="the sub-intervals' draw")
@click.option("--json-out", "json_path", type=click.Path(dir_okay=False),
              help="write the scores as a record (date, commit, command)")
def eval_cmd(results, model_path, windows_per_flow, seed, json_path):
    """Score a model on the captures of scenario results it was not trained on: macro F1
    (with a 95 % CI that resamples flows) and per class over random sub-intervals of the
    model's length, and the confusion."""
    import numpy as np
    from sklearn.metrics import confusion_matrix, f1_score

    from experiments.runs.slot_record import labelled_flows
    from records.provenance import stamp

    from estimator.dragonfly.cnn import OnnxClassifier
    from estimator.dragonfly.dataset import frames
    model = OnnxClassifier(model_path)
    flows = [(s, c) for r in results for _, s, c in labelled_flows(r) if c in model.classes_]
    # per flow, so that the confidence interval resamples flows (a flow's sub-intervals are not independent)
    try:
        per_flow = [frames([s], [c], model.n_slots, per_flow=windows_per_flow, seed=seed + i, features=model.inputs)
                    for i, (s, c) in enumerate(flows)]
    except ValueError as e:
        raise click.ClickException(str(e))
    per_flow = [(x, y) for x, y in per_flow if len(y)]
    if not per_flow:
        raise click.ClickException(f"no flow of {', '.join(model.classes_)} with {model.n_slots} slots of capture")
    preds = [model.predict(x) for x, _ in per_flow]
    y = np.concatenate([y for _, y in per_flow])
    pred = np.concatenate(preds)
    classes = list(model.classes_)
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(1000):
        pick = rng.integers(0, len(per_flow), len(per_flow))
        boot.append(f1_score(np.concatenate([per_flow[i][1] for i in pick]), np.concatenate([preds[i] for i in pick]),
                             labels=classes, average="macro", zero_division=0))
    res = {"model": os.path.relpath(model_path), "model_meta": model.meta, "inputs": list(model.inputs),
           "results": list(results),
           "interval_ms": model.n_slots, "flows": len(per_flow), "frames": int(len(y)),
           "macro_f1": round(float(f1_score(y, pred, average="macro")), 3),
           "macro_f1_ci95_by_flow": [round(float(v), 3) for v in np.percentile(boot, [2.5, 97.5])],
           "accuracy": round(float(np.mean(pred == y)), 3),
           "f1": dict(zip(classes, (round(float(v), 3) for v in f1_score(y, pred, labels=classes, average=None)))),
           "confusion": {"labels": classes, "rows_true": confusion_matrix(y, pred, labels=classes).tolist()}}
    click.echo(f"{res['flows']} flows, {res['frames']} sub-intervals of {model.n_slots} ms: macro F1 "
               f"{res['macro_f1']:.3f} (95 % CI over flows {res['macro_f1_ci95_by_flow'][0]:.2f}-"
               f"{res['macro_f1_ci95_by_flow'][1]:.2f}), accuracy {res['accuracy']:.3f}; "
               + ", ".join(f"{c} {v:.2f}" for c, v in res["f1"].items()))
    if json_path:
        made = stamp()
        with open(json_path, "w") as f:
            json.dump({**res, "provenance": made}, f, indent=1)
