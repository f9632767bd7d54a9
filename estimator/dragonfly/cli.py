"""``intcc estimator dragonfly``: run the in-network classifier beside a node (verdicts on
``intcc/v1/cca/<flow-id>``). Its ``train`` and ``eval``, which read scenario results, live on
the experiments' floor (experiments/dragonfly_cli.py) and join this group in ``intcc.cli``."""
from __future__ import annotations

import json

import click

from . import DEFAULT_MODEL


@click.group("dragonfly")
def dragonfly_group():
    """In-network CCA classification (Dragonfly): every flow through a node's queue named
    from its per-slot bytes in the queue and ingress bytes (docs/dragonfly.md)."""


@dragonfly_group.command("watch")
@click.option("--control", "control_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="the node's control socket (a testbed's: 'intcc testbed status NAME' lists them)")
@click.option("--model", "model_path", default=DEFAULT_MODEL, show_default="the shipped model, estimator/models/",
              type=click.Path(exists=True, dir_okay=False), help="an ONNX model written by 'train'")
@click.option("--broker", "broker_url", help="publish verdicts on intcc/v1/cca/<flow-id> there (the sink's login)")
@click.option("--node-id", type=click.IntRange(0, 0xFFFFFF), help="default: the node's INTTransit node_id")
@click.option("--period-s", type=click.FloatRange(min=0.05), default=0.5, show_default=True,
              help="drain and classify this often")
@click.option("--seconds", type=click.FloatRange(min=0), help="stop after this long")
@click.option("--json", "as_json", is_flag=True, help="print each record as JSON")
def watch_cmd(control_path, model_path, broker_url, node_id, period_s, seconds, as_json):
    """Name every flow through a node's FlowSlots tables, each period (Ctrl-C stops)."""
    import logging
    import threading

    from .cnn import OnnxClassifier
    from .watch import watch
    logging.basicConfig(level=logging.INFO, format="%(message)s")   # "watching ...": it is ready
    model = OnnxClassifier(model_path)
    stop = threading.Event()
    if seconds:
        threading.Timer(seconds, stop.set).start()

    def show(rec):
        if as_json:
            click.echo(json.dumps(rec.to_dict()))
        else:
            top = ", ".join(f"{c} {p:.2f}" for c, p in sorted(rec.scores.items(), key=lambda kv: -kv[1]))
            click.echo(f"node {rec.node_id}  [{rec.src}]:{rec.sport} -> [{rec.dst}]:{rec.dport}  "
                       f"{rec.verdict:6} ({top}; {rec.interval_ms:g} ms)")
    try:
        live = watch(control_path, model, broker_url, period_s, node_id, stop, on_record=show)
    except (ValueError, OSError) as e:
        raise click.ClickException(str(e))
    except KeyboardInterrupt:
        stop.set()
        return
    click.echo(f"{live.counters['records']} verdicts; flows evicted {live.counters['evicted']}, "
               f"missed drains {live.counters['missed_takes']}", err=True)
