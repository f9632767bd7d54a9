"""``intcc estimator``: pack, train, evaluate (the ML-fairness paper's tables), estimate online. The
commands that run testbeds (``collect``, ``live-eval``) live with them in ``experiments.estimator_cli``
and join this group in ``intcc.cli``."""
from __future__ import annotations

import json
import os

import click

from telemetry.schema import CCA_LABELS

from . import DEFAULT_MODEL

# the forest `cv` measures by default, and `train --grid cv` ships
CV_FOREST = {"n_estimators": [200], "max_depth": [20]}

#: int_features.FEATURE_SETS' names (not imported here: numpy at every CLI start)
FEATURE_SET_NAMES = ["table1", "table1+int", "table1+int+dynamics", "table1+int+flows", "table1+int+flows+response",
                     "table1+int+flows+response+dips", "table1+int+flows+response+dips+ownloss",
                     "table1+int+flows+response+dips+ownloss+qcut"]
#: evaluate.CONDITIONS' names, for --by (the same reason)
BY_CONDITIONS = ("udp", "flows", "rtt", "buffer", "loss", "start", "share")
BY_HELP = ("also break the runs down by a condition of their network: UDP cross traffic, number of competing "
           "flows, competitor RTT / flow 1's, buffer, random loss, competitor's start, competitors' goodput "
           "share; repeatable")


@click.group("estimator")
def estimator_group():
    """Identify a competing flow's CCA from sender-side observations (Random Forest + vote)."""


@estimator_group.command("pack")
@click.option("--data", "data_dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="a collected dataset (runs with their raw sender traces)")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="where the compact copy goes")
def pack_cmd(data_dir, out_dir):
    """A compact copy of a dataset to ship (Table I rows, sampled ACK times and base RTTs,
    the sink's record stream of flow 1, the competitor's packets per 10 ms): train, cv
    and eval read it as they read the full one (INT features from the record stream)."""
    from .dataset import pack_dataset
    from .features import TraceError
    try:
        n = pack_dataset(data_dir, out_dir)
    except (TraceError, OSError) as e:
        raise click.ClickException(str(e))
    click.echo(f"{n} runs packed into {out_dir}")


@estimator_group.command("train")
@click.option("--data", "data_dir", required=True, multiple=True, type=click.Path(exists=True, file_okay=False),
              help="dataset directory; repeat to combine collections of different seeds")
@click.option("--model", "model_path", required=True, type=click.Path(dir_okay=False))
@click.option("--grid", type=click.Choice(["paper", "small", "compact", "cv"]), default="small", show_default=True,
              help="paper: trees 10-600 x depth 1-30; small: a quick subset; compact: 50 trees "
                   "(a model file of a few MB, to ship); cv: the forest 'cv' measures (200 trees, depth 20)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--features", "feature_set", type=click.Choice(FEATURE_SET_NAMES),
              default="table1", show_default=True,
              help="table1: the ML-fairness paper's sender-side features; table1+int: plus the bottleneck's INT "
                   "telemetry (queue, arrivals, drops, the competitor's rate); table1+int+dynamics: plus "
                   "the competitor's backoff at drops and its growth (experimental); table1+int+flows: table1+int "
                   "plus the competitors read from their own packets at the bottleneck; +response: and "
                   "how they respond to the queue and its drops; +dips: the busiest competitor's dips (BBR's "
                   "ProbeRTT); +ownloss: the competitors' own losses and their cut after each; +qcut: that cut "
                   "read over the RTT of its time, queue included")
@click.option("--forest", type=click.Choice(["per-local", "shared"]), default="per-local", show_default=True,
              help="per-local: one forest per local CCA (the ML-fairness paper); shared: one forest for all, the local "
                   "CCA as an input (learns the competitor from four times the runs)")
@click.option("--test-fraction", type=click.FloatRange(0.05, 0.95), default=0.5, show_default=True,
              help="share of each CCA pair's runs held out (recorded in the model; eval uses the same)")
def train_cmd(data_dir, model_path, grid, seed, feature_set, forest, test_fraction):
    """Train on the training share of a dataset (split by experiment, seeded)."""
    from .evaluate import load_dataset, split, train
    from .features import TraceError
    from .model import ModelError, PAPER_GRID
    grids = {"paper": PAPER_GRID, "small": {"n_estimators": [50, 200], "max_depth": [5, 15, 30]},
             "compact": {"n_estimators": [50], "max_depth": [15, 30]},
             "cv": CV_FOREST}
    try:
        runs = load_dataset(data_dir, feature_set)
        tr, te = split(runs, test_fraction, seed=seed)
        model = train(tr, grids[grid], seed=seed, feature_set=feature_set, shared=forest == "shared")
    except (TraceError, ModelError) as e:
        raise click.ClickException(str(e))
    model.split_ = {"seed": seed, "test_fraction": test_fraction}
    model.save(model_path)
    cv = ", ".join(f"{k} {v:.2f}" if v is not None else f"{k} -" for k, v in model.cv_accuracy_.items())
    click.echo(f"trained on {len(tr)} runs ({len(te)} held out): cv accuracy {cv} -> {model_path}")


@estimator_group.command("curve")
@click.option("--data", "data_dir", required=True, multiple=True, type=click.Path(exists=True, file_okay=False),
              help="dataset directory; repeat to combine collections of different seeds")
@click.option("--seed", type=int, default=0, show_default=True, help="split and forest seed")
@click.option("--features", "feature_set", type=click.Choice(FEATURE_SET_NAMES),
              default="table1+int", show_default=True)
@click.option("--forest", type=click.Choice(["per-local", "shared"]), default="shared", show_default=True)
@click.option("--fractions", default="0.25,0.5,0.75,1", show_default=True,
              help="shares of each CCA pair's training runs to train on")
def curve_cmd(data_dir, seed, feature_set, forest, fractions):
    """Learning curve: held-out accuracy against the number of training runs (one forest
    of 200 trees, depth 20, per point; the same held-out half throughout)."""
    from .evaluate import learning_curve, load_dataset, split
    from .features import TraceError
    from .model import ModelError
    try:
        fracs = [float(f) for f in fractions.split(",")]
    except ValueError:
        raise click.BadParameter(f"not a comma-separated list of numbers: {fractions!r}", param_hint="--fractions")
    if not fracs or not all(0 < f <= 1 for f in fracs):
        raise click.BadParameter("fractions must be in (0, 1]", param_hint="--fractions")
    try:
        tr, te = split(load_dataset(data_dir, feature_set), seed=seed)
        click.echo(f"{len(tr)} training runs, {len(te)} held out ({feature_set}, {forest} forest)")
        for row in learning_curve(tr, te, fracs, {"n_estimators": [200], "max_depth": [20]}, seed,
                                  feature_set, forest == "shared"):
            click.echo(f"  {row['train_runs']:4d} training runs: mean accuracy {row['mean_accuracy']:.3f}, "
                       f"vote w=50 {row['vote50']:.3f}")
    except (TraceError, ModelError) as e:
        raise click.ClickException(str(e))


@estimator_group.command("cv")
@click.option("--data", "data_dir", required=True, multiple=True, type=click.Path(exists=True, file_okay=False),
              help="dataset directory; repeat to combine collections of different seeds")
@click.option("--folds", type=click.IntRange(min=2), default=5, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="fold and forest seed")
@click.option("--features", "feature_set", type=click.Choice(FEATURE_SET_NAMES),
              default="table1+int", show_default=True)
@click.option("--forest", type=click.Choice(["per-local", "shared"]), default="shared", show_default=True)
@click.option("--trees", type=click.IntRange(min=1), default=CV_FOREST["n_estimators"][0], show_default=True)
@click.option("--depth", type=click.IntRange(min=1), default=CV_FOREST["max_depth"][0], show_default=True)
@click.option("--json-out", "json_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="also write the tables, with every run's accuracy and conditions, to FILE as JSON")
@click.option("--shuffle-labels", is_flag=True,
              help="the control that must fail: competitor labels permuted across runs (expect ~0.25)")
@click.option("--by", "conditions", multiple=True, type=click.Choice(BY_CONDITIONS), help=BY_HELP)
def cv_cmd(data_dir, folds, seed, feature_set, forest, trees, depth, json_path, shuffle_labels, conditions):
    """Tables III and IV with every run held out once (k folds split by experiment, one
    forest per fold trained on the other folds): uses the whole dataset for both."""
    from .evaluate import cross_validate, load_dataset, shuffled_labels
    from .features import TraceError
    from .model import ModelError
    try:
        runs = load_dataset(data_dir, feature_set)
        if shuffle_labels:
            runs = shuffled_labels(runs, seed)
        click.echo(f"{len(runs)} runs, {folds} folds ({feature_set}, {forest} forest, {trees} trees, depth {depth})"
                   + ("; labels SHUFFLED across runs (control: chance is ~0.25)" if shuffle_labels else ""))

        def progress(k, res):
            click.echo(f"  fold {k + 1}/{folds}: so far mean accuracy {res['mean_accuracy']:.3f}, "
                       f"vote w=50 {res['table4']['50']['mean']:.3f} over {res['test_runs']} runs", err=True)

        res = cross_validate(runs, folds, {"n_estimators": [trees], "max_depth": [depth]}, seed, feature_set,
                             forest == "shared", progress)
    except (TraceError, ModelError) as e:
        raise click.ClickException(str(e))
    _emit_tables(res, json_path, conditions)


@estimator_group.command("eval")
@click.option("--data", "data_dir", required=True, multiple=True, type=click.Path(exists=True, file_okay=False),
              help="dataset directory; repeat to combine collections of different seeds")
@click.option("--model", "model_path", default=DEFAULT_MODEL, show_default="the current release, estimator/models/", type=click.Path(exists=True, dir_okay=False))
@click.option("--seed", type=int, help="split seed (default: the one the model was trained with)")
@click.option("--all", "every_run", is_flag=True,
              help="every run of DATA the model was not trained on (a test set collected apart), not the "
                   "held-out half of the model's split")
@click.option("--json-out", "json_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="also write the tables, with every run's accuracy and conditions, to FILE as JSON")
@click.option("--by", "conditions", multiple=True, type=click.Choice(BY_CONDITIONS), help=BY_HELP)
def eval_cmd(data_dir, model_path, seed, every_run, json_path, conditions):
    """Tables III and IV on the held-out runs (the model's split, or with --all every run
    it was not trained on)."""
    from .evaluate import evaluate, held_out, load_dataset, not_trained_on
    from .features import TraceError
    from .int_features import feature_set_of
    from .model import CCAEstimator, ModelError
    try:
        model = CCAEstimator.load(model_path)
        runs = load_dataset(data_dir, feature_set_of(model.feature_names))
        te, trained_on = not_trained_on(runs, model) if every_run else held_out(runs, model, seed=seed)
        if not model.training_runs_:
            click.echo("note: the model does not list its training runs (trained before they were "
                       "recorded): the held-out half is the split's alone", err=True)
        if trained_on:
            click.echo(f"note: {trained_on} runs of the held-out half were among the model's training "
                       "runs (the dataset changed since training?): left out", err=True)
        if not te:
            raise TraceError(f"{', '.join(data_dir)}: no held-out run the model was not trained on")
        res = evaluate(model, te)
    except (TraceError, ModelError) as e:
        raise click.ClickException(str(e))
    _emit_tables({**res, "model": os.path.relpath(model_path), "targets": model.targets_}, json_path, conditions,
                 model.targets_)


def _emit_tables(res: dict, json_path: str | None, conditions=(), targets=None):
    """Print Tables III and IV (and the runs by each condition asked); also write them, with
    their provenance, as JSON if asked."""
    from records import stamp
    from .evaluate import format_by_condition, format_tables
    click.echo(format_tables(res, targets))
    for condition in conditions:
        click.echo("\n" + format_by_condition(res, condition))
    if json_path:
        made = stamp()       # before the file is opened: rewriting a tracked record is no change to the code
        with open(json_path, "w") as f:
            json.dump({**res, "provenance": made}, f, indent=1)


@estimator_group.command("run")
@click.option("--netns", required=True, help="the sender's network namespace (testbed: intcc-<tb>-<host>)")
@click.option("--interface", required=True, help="the sender's interface in it")
@click.option("--model", "model_path", default=DEFAULT_MODEL, show_default="the current release, estimator/models/", type=click.Path(exists=True, dir_okay=False))
@click.option("--local-cca", required=True, type=click.Choice(CCA_LABELS),
              help="the CCA of the observed (local) flow")
@click.option("--sender", help="the sender's address (default: whoever sends most)")
@click.option("--window", type=click.IntRange(min=1), default=50, show_default=True, help="majority vote window w")
@click.option("--interval-s", type=click.FloatRange(min=0.05), default=0.5, show_default=True,
              help="one estimate per interval (training rows are ~0.5 s apart)")
@click.option("--broker", "broker_url", help="publish verdicts on intcc/v1/estimate/<flow-id> there")
@click.option("--telemetry", "telemetry_url",
              help="read the sink's flow telemetry there (needed by a model trained with INT features; "
                   "default: --broker)")
@click.option("--seconds", type=click.FloatRange(min=0), help="stop after this long")
@click.option("--json", "as_json", is_flag=True, help="print each verdict as JSON")
def run_cmd(netns, interface, model_path, local_cca, sender, window, interval_s, broker_url, telemetry_url,
            seconds, as_json):
    """Estimate online for a live flow (root): capture, features, forest, vote, publish."""
    import tempfile
    import time as _time
    from .capture import Capture, PcapTail
    from .features import TraceError
    from .loop import EstimationLoop, WatchedFlow
    from .model import CCAEstimator, ModelError
    from .online import OnlineEstimator, Publisher
    try:
        est = OnlineEstimator(CCAEstimator.load(model_path), local_cca, window, sender)
    except (ModelError, TraceError) as e:
        raise click.ClickException(str(e))
    url = telemetry_url or broker_url
    if est.uses_int and not url:
        raise click.ClickException(f"{model_path} uses INT features: give --telemetry (or --broker) "
                                   f"where the sink publishes")
    pub = Publisher(broker_url) if broker_url else None
    loop = EstimationLoop(pub)
    view = None
    if est.uses_int:
        from broker.subscriber import TelemetryView
        view = TelemetryView(url).start()
        view.on_record(lambda rec, topic: loop.add_record(rec))     # paho's thread; the loop's deque
    pcap = tempfile.mktemp(prefix="intcc-est-", suffix=".pcap")
    errors: list = []
    try:
        with Capture(netns, interface, pcap):
            flow = WatchedFlow(est, tail=PcapTail(pcap))
            loop.watch(0, flow)
            t_end = _time.monotonic() + seconds if seconds else None
            said_alone = False
            while (t_end is None or _time.monotonic() < t_end) and not errors:
                _time.sleep(interval_s)
                steps = loop.step_all(lambda key, e: errors.append(e))
                if not steps and not said_alone and flow.alone():
                    click.echo("the flow is alone on its path (the sink's hop records show no other flow): "
                               "no estimate until a competitor arrives", err=True)
                    said_alone = True
                for _key, step, rec in steps:       # published by the loop
                    if as_json:
                        click.echo(json.dumps({**rec.to_dict(), "t_s": round(step.t_s, 3), "raw": step.estimate}))
                    else:
                        click.echo(f"{step.t_s:7.1f} s  flow {step.flow_id}: estimate {step.estimate:5}  verdict "
                                   f"{rec.estimate} ({rec.confidence:.0%} of {sum(rec.votes.values())})")
    except TraceError as e:
        raise click.ClickException(str(e))
    except KeyboardInterrupt:
        pass
    finally:
        loop.stop()
        if pub:
            pub.close()
        if view:
            view.stop()
        if os.path.exists(pcap):
            os.remove(pcap)
    if errors:
        raise click.ClickException(str(errors[0]))
