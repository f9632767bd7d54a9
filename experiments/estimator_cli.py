"""``intcc estimator collect`` and ``intcc estimator live-eval``: the estimator's commands
that run testbeds, so they live on the experiments' floor (``intcc.cli`` adds them to the
estimator group)."""
from __future__ import annotations

import sys

import click

from estimator import DEFAULT_MODEL


@click.command("collect")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="dataset directory")
@click.option("--runs", type=click.IntRange(min=1), default=64, show_default=True,
              help="experiments (the 16 CCA pairs cycle)")
@click.option("--seconds", type=click.FloatRange(min=5), default=60.0, show_default=True,
              help="run length (paper: 60 s)")
@click.option("--seed", type=int, default=1, show_default=True, help="seed of the run parameters")
@click.option("--samples", type=click.IntRange(min=1), default=100, show_default=True,
              help="feature rows kept per run (evenly spaced ACKs)")
@click.option("--without-vegas", is_flag=True,
              help="leave out runs needing the CCP datapath (busy or absent); a later resume adds them")
@click.option("--jobs", type=click.IntRange(min=1, max=8), default=1, show_default=True,
              help="testbeds run at once (exp, exp1, ...)")
@click.option("--node-python", metavar="cpython|pypy|PATH",
              help="interpreter of the INT nodes (default: $INTCC_NODE_PYTHON, else cpython); recorded "
                   "in collection.json, and a resume must use the same")
@click.option("--distribution", type=click.Choice(["paper", "hard", "table2", "table2-live"]), default="paper",
              show_default=True,
              help="paper: Table II (rate, delay, buffer uniform); hard: buffer on a log scale, the "
                   "competitor's RTT 0.5-4x flow 1's, starting 0-10 s later, as 1-3 flows, 0-1 % link "
                   "loss in half the runs; table2: Table II with the buffer on a log scale, nothing "
                   "else changed (fairness_switching's networks); table2-live: those networks with flow 1 "
                   "a CCP algorithm as the adaptive agent runs it, and the competitor 0-10 s late in "
                   "half the runs (docs/estimator.md)")
@click.option("--node-rt-priority", type=click.IntRange(0, 99), default=0, show_default=True, metavar="0-99",
              help="run the INT nodes under SCHED_FIFO at this priority: with --jobs above 1 on few cores "
                   "the emulated links keep their rate only so (each run's meta: emulation_behind_ms, "
                   "emulation_off). 0: the normal scheduler")
@click.option("--udp-cross", is_flag=True,
              help="UDP cross traffic in half the runs: constant bit rate from s2 to r2 at 5-30 % of the "
                   "bottleneck's rate for the whole run (each run's meta: udp_mbps, udp_received_mbps); "
                   "the other parameters stay those of --seed and --distribution")
@click.option("--cluster", metavar="ADDRESS",
              help="run on the Ray cluster at ADDRESS (its head's host:port, or 'auto'): each run on a worker "
                   "host's testbed, collected here (docs/cluster.md); instead of --jobs")
@click.option("--retries", type=click.IntRange(0, 10), default=2, show_default=True,
              help="with --cluster: how many more times a run that failed is tried")
def collect_cmd(out_dir, runs, seconds, seed, samples, without_vegas, jobs, node_python, distribution,
                node_rt_priority, udp_cross, cluster, retries):
    """Randomised dumbbell runs (root); resumable: runs on disk are skipped. The runs are
    those of the scenario estimator_collect (intcc exp run estimator_collect runs them too)."""
    from estimator.features import TraceError

    from experiments.runs.estimator_collect import CollectionError, collect
    from experiments.runs.scenario import ScenarioError

    try:
        res = collect(out_dir, runs, seconds, seed, samples, echo=click.echo, without_vegas=without_vegas,
                      jobs=jobs, node_python=node_python, distribution=distribution,
                      node_rt_priority=node_rt_priority, udp_cross=udp_cross, cluster=cluster, retries=retries)
    except (TraceError, OSError, CollectionError, ScenarioError, RuntimeError) as e:
        raise click.ClickException(str(e))
    except KeyboardInterrupt:
        from estimator.dataset import run_paths
        click.echo(f"\ninterrupted: testbed and datapath stopped; {len(run_paths(out_dir))} runs kept in {out_dir} "
                   f"(the same command resumes)", err=True)
        raise SystemExit(130)
    click.echo(f"{res['done']}/{runs} runs in {out_dir}; {len(res['failed'])} failed, {res['left']} left to do")


@click.command("live-eval")
@click.option("--model", "model_path", default=DEFAULT_MODEL, show_default="the current release, estimator/models/", type=click.Path(exists=True, dir_okay=False))
@click.option("--runs", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--first", type=click.IntRange(min=0), default=0, show_default=True,
              help="run index to start from (the plan's runs first..first+runs-1)")
@click.option("--seed", type=int, required=True,
              help="the plan's seed: one the model's training data never used")
@click.option("--distribution", type=click.Choice(["paper", "hard", "table2"]), default="hard", show_default=True)
@click.option("--seconds", type=click.FloatRange(min=5), default=30.0, show_default=True)
@click.option("--window", type=click.IntRange(min=1), default=50, show_default=True, help="majority vote window w")
@click.option("--interval-s", type=click.FloatRange(min=0.05), default=0.5, show_default=True)
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="write every run's verdicts as JSON")
@click.option("--udp-cross", is_flag=True, help="the runs of a collection with --udp-cross (the same draws)")
@click.option("--cluster", metavar="ADDRESS",
              help="run on the Ray cluster at ADDRESS (its head's host:port, or 'auto'): each run on a worker "
                   "host's testbed (docs/cluster.md)")
@click.option("--retries", type=click.IntRange(0, 10), default=2, show_default=True,
              help="with --cluster: how many more times a run that failed is tried")
def live_eval_cmd(model_path, runs, first, seed, distribution, seconds, window, interval_s, out_path, udp_cross,
                  cluster, retries):
    """Score a model on the live path (root): each run on a fresh dumbbell whose sink
    publishes over MQTT, flow 1 observed as a live sender observes it; the verdict at the
    end and the time from flow 1's start to a stable correct verdict."""
    from estimator.features import TraceError
    from estimator.model import ModelError

    from experiments.runs.estimator_live import live_eval
    from experiments.runs.signals import restore as restore_signals, unwind_on_signals
    previous = unwind_on_signals(lambda signum: sys.exit(128 + signum))   # its testbeds, agent and datapath stopped
    try:
        res = live_eval(model_path, runs, seed, distribution, seconds, window, interval_s, out_path,
                        echo=click.echo, first=first, udp_cross=udp_cross, cluster=cluster, retries=retries)
    except (ModelError, TraceError, OSError, RuntimeError) as e:
        raise click.ClickException(str(e))
    finally:
        restore_signals(previous)
    click.echo(f"{res['live_runs']} live runs ({len(res['failed'])} failed): final verdict (w={window}) right in "
               f"{res['final_accuracy']}; per local CCA {res['per_local']}; {res['stable_correct_runs']} runs reach "
               f"a stable correct verdict, median {res['median_stable_correct_s']} s after flow 1's start")
