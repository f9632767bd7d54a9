"""``intcc testbed ...`` and ``intcc exp ...``."""
from __future__ import annotations

import json
import os
import sys
import time

import click

from experiments.testbed.topo import TopologyError, load_topo, parse_set

TOPO_DIR = os.path.join(os.path.dirname(__file__), "testbed", "topologies")


def _topo_path(topo: str) -> str:
    """A path, or the name of a shipped topology ('wireless')."""
    if os.path.exists(topo):
        return topo
    shipped = os.path.join(TOPO_DIR, topo if topo.endswith(".toml") else topo + ".toml")
    if os.path.exists(shipped):
        return shipped
    names = sorted(f[:-5] for f in os.listdir(TOPO_DIR) if f.endswith(".toml"))
    raise click.ClickException(f"no topology {topo!r} (a file, or one of: {', '.join(names)})")


@click.group("testbed")
def testbed_group():
    """Emulated testbed of network namespaces with INT nodes (needs root)."""


@testbed_group.command("up")
@click.argument("topo")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a topology parameter.")
@click.option("--name", help="Testbed name (default: the topology's name).")
@click.option("--exporter", default="jsonl", show_default=True, metavar="jsonl|capture|none|mqtt://HOST:PORT",
              help="What INT sinks do with telemetry: a JSON-lines file in the run dir (decoded; 'capture': "
                   "the raw bytes, for a replay), nothing, or publish it to an MQTT broker (see 'intcc broker run').")
@click.option("--node-python", metavar="cpython|pypy|PATH",
              help="Interpreter of every node (default: the topology's, else $INTCC_NODE_PYTHON, else "
                   "cpython). PyPy ('make setup' installs it) forwards ~3x the packets once its JIT is warm.")
@click.option("--node-rt-priority", type=click.IntRange(0, 99), metavar="0-99",
              help="Run every node under SCHED_FIFO at this priority (default: the topology's rt_priority "
                   "per node, else 0: the normal scheduler): their links' timers then wait for no host process.")
@click.option("--fast-path", is_flag=True,
              help="Every node forwards with its tc BPF fast path where its configuration compiles (no delay, "
                   "loss or wireless emulation on its links: docs/fast-path.md); the others say in their log "
                   "why not and forward in Python.")
def up_cmd(topo, sets, name, exporter, node_python, node_rt_priority, fast_path):
    """Build the testbed of TOPO (a .toml file or a shipped name) and start its nodes."""
    from experiments.testbed.bed import Testbed, TestbedError
    if exporter not in ("jsonl", "capture", "none") and not exporter.startswith(("mqtt://", "mqtts://")):
        raise click.BadParameter("must be jsonl, capture, none or an mqtt:// URL", param_hint="--exporter")
    try:
        t = load_topo(_topo_path(topo), parse_set(sets))
        if fast_path:
            for info in t.nodes.values():
                info["fast_path"] = True
        tb = Testbed(t, name).up(exporter=exporter, node_python=node_python, node_rt_priority=node_rt_priority)
    except (TopologyError, TestbedError) as exc:
        raise click.ClickException(str(exc))
    click.echo(f"testbed '{tb.name}' up ({tb.dir})")
    for h in tb.host_names:
        click.echo(f"  host {h:<6} {', '.join(tb.host_info(h)['addrs'])}  (intcc testbed exec {h} -- CMD)")
    for n in tb.node_names:
        info = tb.node_info(n)
        click.echo(f"  node {n:<6} id {info['node_id']}  INT {'/'.join(info['int']) or '-'}  "
                   f"python {info['python']}" + (f"  SCHED_FIFO {info['rt_priority']}" if info.get("rt_priority") else "")
                   + ("  fast path (see its log)" if info.get("fast_path") else "") + f"  log {info['log']}")


@testbed_group.command("down")
@click.option("--name", help="Testbed to remove (default: every intcc testbed).")
def down_cmd(name):
    """Remove a testbed: processes, namespaces, interfaces, run directory. Idempotent."""
    from experiments.testbed.teardown import list_testbeds, teardown
    names = [name] if name else list_testbeds()
    for n in names:
        removed = teardown(n)
        click.echo(f"testbed '{n}': removed {', '.join(removed) if removed else 'nothing'}")
    if not names:
        click.echo("no testbed to remove")


@testbed_group.command("status")
@click.option("--name", help="Testbed (default: the only one up).")
def status_cmd(name):
    """Print hosts with addresses and nodes with pids and counters, as JSON."""
    from experiments.testbed.bed import Testbed, TestbedError
    try:
        click.echo(json.dumps(Testbed.attach(name).status(), indent=1))
    except TestbedError as exc:
        raise click.ClickException(str(exc))


@testbed_group.command("exec", context_settings={"ignore_unknown_options": True})
@click.option("--name", help="Testbed (default: the only one up).")
@click.argument("host")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(name, host, command):
    """Run COMMAND inside HOST's namespace: intcc testbed exec sta1 -- ping -6 ..."""
    from experiments.testbed.bed import Testbed, TestbedError
    try:
        tb = Testbed.attach(name)
    except TestbedError as exc:
        raise click.ClickException(str(exc))
    if host not in tb.host_names and host not in tb.node_names:
        raise click.ClickException(f"no host or node {host!r} in testbed '{tb.name}' "
                                   f"(hosts: {', '.join(tb.host_names)})")
    argv = tb.cmd(host, list(command))
    sys.stdout.flush()
    os.execvp(argv[0], argv)


@testbed_group.command("write")
@click.option("--name", help="Testbed (default: the only one up).")
@click.argument("node")
@click.argument("target", metavar="ELEMENT.HANDLER")
@click.argument("value")
def write_cmd(name, node, target, value):
    """Change a running node's parameter, e.g. ``ap1 wl1.distance_m 40``."""
    from experiments.testbed.bed import Testbed, TestbedError
    elem, _, handler = target.partition(".")
    try:
        reply = Testbed.attach(name).write(node, elem, handler, value)
    except (TestbedError, KeyError, OSError) as exc:
        raise click.ClickException(str(exc))
    click.echo(f"{node} {target} = {reply['value']}")


@click.group("exp")
def exp_group():
    """Scripted experiments on the testbed (scenario files)."""


@exp_group.command("list")
def list_cmd():
    """The scenarios and topologies this intcc ships, with their descriptions (a scenario
    may also be given to 'intcc exp run' as a path to a TOML file)."""
    import os
    from experiments.runs.scenario import HERE, TOPOLOGIES, describe, scenario_names, topology_names
    for title, folder, names in (("scenarios", os.path.join(HERE, "scenarios"), scenario_names()),
                                 ("topologies", TOPOLOGIES, topology_names())):
        click.echo(f"{title} ({folder}):")
        width = max(map(len, names), default=0)
        for name in names:
            click.echo(f"  {name:{width}s}  {describe(os.path.join(folder, name + '.toml'))}")


@exp_group.command("run")
@click.argument("scenario")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="results directory "
              "(default: results/<scenario>-<time>)")
@click.option("--quick", is_flag=True, help="the scenario's [quick] settings: fewer, shorter runs")
@click.option("--kernel-trace", is_flag=True, help="record the sender's kernel cwnd, ssthresh and CA state "
              "per ACK (tracefs) in runs/*/kernel_trace.csv, summarised in each record; with "
              "competitors, theirs too (column dport; kernel_trace_competitors)")
@click.option("--record-telemetry", is_flag=True, help="keep every hop and estimate record the sinks and agents "
              "published during each run in runs/*/telemetry.jsonl.gz (the sinks then publish to the run's broker)")
@click.option("--record-slots", is_flag=True, help="keep Dragonfly's per-flow 1 ms captures (FlowSlots at links "
              "with flow_slots, e.g. the dumbbell's with [params] flow_slots = true) in runs/*/slots.json.gz")
@click.option("--seed", type=click.IntRange(min=0), help="seed of the link-loss draws (default: the "
              "scenario's 'seed', else a random one; recorded in summary.json). Within a run of a "
              "scenario every algorithm of a repeat meets the same draws")
@click.option("--repeats", type=click.IntRange(min=1), help="repeats per algorithm and sweep value "
              "(default: the scenario's)")
@click.option("--first-repeat", type=click.IntRange(min=0), default=0, show_default=True,
              help="start at this repeat (with the same --seed: continues a run stopped early into another "
                   "--out; 'intcc exp fairness' / 'compare' pool both)")
@click.option("--seconds", type=click.FloatRange(min=1), help="length of each run (default: the scenario's)")
@click.option("--loss", "loss_pct", multiple=True, type=click.FloatRange(0, 100),
              help="link loss % to sweep instead of the scenario's list (repeatable: --loss 10 --loss 20)")
@click.option("--algorithm", "only", multiple=True, metavar="LABEL",
              help="run only this algorithm of the scenario (repeatable; its label, e.g. 'kernel cubic')")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1, 16),
              help="testbeds at once, each running a repeat of the same algorithm (one CCP agent "
              "serves them all). For low-rate runs (high link loss): the testbeds share the cores")
@click.option("--cluster", "cluster_address", metavar="ADDRESS",
              help="run on the Ray cluster at ADDRESS (host:port of its head, or 'auto' on one of its hosts): "
                   "each run on a testbed of a worker host, merged into OUT as a local run; a run that fails or "
                   "whose node dies is tried again; the same --out resumes. See docs/cluster.md")
@click.option("--retries", type=click.IntRange(0, 10), default=2, show_default=True,
              help="with --cluster: how many more times a run that failed is tried")
@click.option("--node-rt-priority", type=click.IntRange(0, 99), metavar="0-99",
              help="run the INT nodes under SCHED_FIFO at this priority (default: the scenario's "
                   "'node_rt_priority', else 0: the normal scheduler). With --jobs > 1 on few cores the "
                   "emulated links keep their rate only so (records: emulation_behind_ms)")
@click.option("--sweep-value", "sweep_values", multiple=True, metavar="VALUE",
              help="run only this value of the scenario's sweep (repeatable; e.g. --sweep-value reno for a "
                   "fairness scenario's competitor). The runs meet the networks the whole sweep's would")
@click.option("--dashboard", "dashboard_port", type=click.IntRange(1, 65535), is_flag=False, flag_value=8080,
              default=None, metavar="[PORT]",
              help="serve the live dashboard of the run's telemetry on 127.0.0.1:PORT (default 8080) while it "
                   "runs (the sinks then publish to the run's broker)")
def run_cmd(scenario, out_dir, quick, kernel_trace, record_telemetry, record_slots, seed, repeats, first_repeat, seconds, loss_pct, only, jobs,
            cluster_address, retries, node_rt_priority, sweep_values, dashboard_port):
    """Run SCENARIO (a name in experiments/runs/scenarios or a .toml path); print its table.

    Writes OUT/summary.json, per-run series.csv/series.png (goodput, cwnd, RTT),
    agent traces and OUT/goodput.png.
    """
    from experiments.runs.runner import run_scenario
    from experiments.reports.tables import table, table_by_algorithm
    from experiments.runs.scenario import ScenarioError, load
    from experiments.runs.signals import restore as restore_signals, unwind_on_signals
    from experiments.testbed.bed import TestbedError
    try:
        sc = load(scenario, quick=quick)
    except ScenarioError as e:
        raise click.ClickException(str(e))
    sc.kernel_trace = sc.kernel_trace or kernel_trace
    sc.record_telemetry = sc.record_telemetry or record_telemetry
    sc.record_slots = sc.record_slots or record_slots
    if seed is not None:
        sc.seed = seed
    if repeats:
        sc.repeats = repeats
    if first_repeat >= sc.repeats:
        raise click.ClickException(f"--first-repeat {first_repeat}: the scenario has {sc.repeats} repeats (0 to "
                                   f"{sc.repeats - 1})")
    sc.first_repeat = first_repeat
    if seconds:
        sc.seconds = seconds
    if node_rt_priority is not None:
        sc.node_rt_priority = node_rt_priority
    if loss_pct:
        if "loss_pct" not in sc.sweep:
            raise click.ClickException(f"--loss: scenario {sc.name} does not sweep loss_pct")
        sc.sweep = {"loss_pct": [int(p) if float(p).is_integer() else p for p in loss_pct]}
    if sweep_values:
        if not sc.sweep:
            raise click.ClickException(f"--sweep-value: scenario {sc.name} has no sweep")
        (key, values), = sc.sweep.items()
        unknown = [v for v in sweep_values if v not in map(str, values)]
        if unknown:
            raise click.ClickException(f"--sweep-value {unknown[0]!r}: not among scenario {sc.name}'s {key} values "
                                       f"({', '.join(map(str, values))})")
        sc.sweep = {key: [v for v in values if str(v) in sweep_values]}
    if only:
        labels = [a.label for a in sc.algorithms]
        unknown = [o for o in only if o not in labels]
        if unknown:
            raise click.ClickException(f"--algorithm {unknown[0]!r}: not in scenario {sc.name} "
                                       f"(its algorithms: {', '.join(labels)})")
        sc.algorithms = [a for a in sc.algorithms if a.label in only]
    if cluster_address and (jobs > 1 or dashboard_port):
        raise click.ClickException("--cluster runs each testbed on a worker host: without --jobs and --dashboard")
    out_dir = out_dir or os.path.join("results", f"{sc.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    n = sum(1 for _ in sc.runs())
    click.echo(f"{sc.name}: {n} runs of {sc.seconds:g} s" + (f" on {jobs} testbeds" if jobs > 1 else "")
               + f" -> {out_dir}")
    previous = unwind_on_signals(lambda signum: sys.exit(128 + signum))   # agents, datapath, testbeds stopped
    try:
        if cluster_address:
            from experiments.cluster.submit import run_on_cluster
            records = run_on_cluster(sc, out_dir, cluster_address, echo=click.echo, retries=retries)
        else:
            records = run_scenario(sc, out_dir, echo=click.echo, jobs=jobs, dashboard_port=dashboard_port)
    except (TestbedError, OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc))
    finally:
        restore_signals(previous)
    key = next(iter(sc.sweep), None)
    baseline = next((a.label for a in sc.algorithms if a.cca == "cubic"), None)
    click.echo("")
    if key == "competitor":
        from experiments.reports import fairness_report, fairness_tables
        click.echo(fairness_tables.format_rows(fairness_report.rows(records)))
        plots = "d_box.png, abs_d.png, runs/*/timeline.png"
    else:
        click.echo(table(records, key, baseline) if key else table_by_algorithm(records))
        plots = "goodput.png" if key else "cwnd.png (and jain.png with a competitor)"
    click.echo(f"\nresults in {out_dir}: summary.json, {plots}, runs/*/series.png")


_rerun_option = click.option(
    "--rerun", "reruns", multiple=True, type=click.Path(exists=True), metavar="RESULTS",
    help="runs that replace those of the same seed, run name and network in RESULTS (repeatable): the cells a "
         "fix changed, run again")


def _records_with_reruns(results, reruns) -> list[dict]:
    """RESULTS' records, the runs of --rerun in place of those they ran again."""
    from experiments.reports.compare import CompareError, load_records, with_reruns
    try:
        records, replaced = with_reruns(load_records(results), load_records(reruns) if reruns else [])
    except CompareError as e:
        raise click.ClickException(str(e))
    if reruns:
        click.echo(f"--rerun: {replaced} runs of RESULTS replaced")
    return records


@exp_group.command("compare")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--baseline", default="kernel cubic", show_default=True, help="algorithm label to divide by")
@click.option("--key", default="loss_pct", show_default=True,
              help="sweep key to group by ('' for none: scenarios without a sweep)")
@click.option("--metric", default="goodput_mbps", show_default=True, help="record field to compare")
@click.option("--resamples", default=4000, show_default=True, help="bootstrap resamples")
@click.option("--seed", default=0, show_default=True)
@_rerun_option
@click.option("--json-out", "json_out", type=click.Path(dir_okay=False), metavar="FILE",
              help="also write the rows to FILE as JSON")
def compare_cmd(results, baseline, key, metric, resamples, seed, reruns, json_out):
    """Mean METRIC per algorithm (and KEY value) pooled over RESULTS (directories of
    'intcc exp run', or their summary.json), its ratio to BASELINE's mean and a bootstrap
    95 % confidence interval of that ratio.

    Example: intcc exp compare results/lossy_link-* --baseline "kernel cubic"
    """
    from experiments.reports.compare import CompareError, compare, format_rows
    records = _records_with_reruns(results, reruns)
    try:
        rows = compare(records, baseline, key or None, metric, resamples, seed)
    except CompareError as e:
        raise click.ClickException(str(e))
    click.echo(format_rows(rows, baseline, key or None, metric))
    if json_out:
        with open(json_out, "w") as f:
            json.dump(rows, f, indent=1)


@exp_group.command("fairness")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--plots", "plot_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="also draw d_box.png and abs_d.png (the ML-fairness paper Figs. 6 and 7) in DIR")
@click.option("--json-out", "json_out", type=click.Path(dir_okay=False), metavar="FILE",
              help="also write the rows to FILE as JSON")
@click.option("--table-out", "table_out", type=click.Path(dir_okay=False), metavar="FILE",
              help="write the pair runs' mean goodputs g(i, j) as the table 'intcc alg run adaptive --policy "
                   "best-response --table FILE' reads")
@click.option("--markdown", "markdown_out", type=click.Path(dir_okay=False), metavar="FILE",
              help="also write mean |D| per mode and competitor, and each adaptive mode's paired cut, gap to "
                   "the oracle, harm and paper-method |D|, as a Markdown table (as in docs/fairness.md)")
@click.option("--markdown-mode", "markdown_modes", multiple=True, metavar="MODE",
              help="detail only this mode in --markdown's table (repeatable; default: every mode but the "
                   "baselines)")
@click.option("--versus", "versus_modes", multiple=True, metavar="MODE",
              help="also pair every other mode with MODE on the same networks: its mean |D| minus MODE's, "
                   "per competitor and averaged, with a paired bootstrap CI (repeatable)")
@_rerun_option
def fairness_cmd(results, plot_dir, json_out, table_out, markdown_out, markdown_modes, versus_modes, reruns):
    """D, mean |D| (bootstrap 95 % CI), harm against the oracle, Jain and switches per
    competitor and mode, pooled over RESULTS (directories of 'intcc exp run' of a
    fairness scenario, e.g. fairness_switching). With fairness_pairs' results of the same
    seed among them, also the paper's offline |D| (Eqs. 1-3) beside the live one. Then
    each mode against not used and the oracle on the same networks, the estimator's
    verdicts, and where each adaptive mode's D comes from (before flow 1's first switch,
    after it on the competitor's CCA, on another).

    Example: intcc exp fairness results/fairness_switching-S1 results/fairness_pairs-S1
    """
    from experiments.reports import fairness_plots, fairness_report, fairness_tables
    records = _records_with_reruns(results, reruns)
    if not any(r.get("competitor") for r in records):
        raise click.ClickException("no run in RESULTS has a competitor: not a fairness scenario's results")
    offline = fairness_report.offline_d(records, lambda r: os.path.dirname(r["source"]))
    table = fairness_report.rows(records, offline)
    click.echo(fairness_tables.format_rows(table))
    try:
        versus = fairness_report.comparisons(records, versus=versus_modes)
    except ValueError as e:
        raise click.ClickException(f"--versus: {e}")
    if versus:
        click.echo("\n" + fairness_tables.format_comparisons(versus))
    verdicts = fairness_report.verdict_table(records)
    if verdicts:
        click.echo("\nthe estimator's verdicts, by time since flow 1's start or last switch:\n"
                   + fairness_tables.format_verdict_table(verdicts))
    fairness_report.fill_parts(records, lambda r: os.path.dirname(r["source"]))
    parts = fairness_report.parts_table(records)
    if parts:
        click.echo("\nwhere D comes from, by what flow 1 ran:\n" + fairness_tables.format_parts_table(parts))
    if plot_dir:
        os.makedirs(plot_dir, exist_ok=True)
        fairness_plots.plot(records, plot_dir, "fairness", timelines=False)
        click.echo(f"plots in {plot_dir}: d_box.png, abs_d.png")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"rows": table, "comparisons": versus, "verdicts": verdicts, "parts": parts}, f, indent=1)
    if markdown_out:
        try:
            text = fairness_tables.format_markdown(table, versus, list(markdown_modes) or None)
        except ValueError as e:
            raise click.ClickException(f"--markdown-mode: {e}")
        with open(markdown_out, "w") as f:
            f.write(text + "\n")
        click.echo(f"Markdown table in {markdown_out}")
    if table_out:
        pairs = fairness_report.goodput_table(records)
        if not pairs["goodput_mbps"]:
            raise click.ClickException("--table-out: no pair runs (fairness_pairs) in RESULTS")
        with open(table_out, "w") as f:
            json.dump(pairs, f, indent=1)
        click.echo(f"goodput table of {len(pairs['goodput_mbps'])} pairs in {table_out}")


@exp_group.command("separation")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--metric", type=click.Choice(["jain_total", "jain_mean"]), default="jain_total", show_default=True,
              help="Jain's index of the two flows' goodputs over the whole run (jain_total), or the mean of "
                   "its per-second values after the first 20 % (jain_mean)")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="also draw Jain against the RTT ratio, FIFO and separated, per algorithm (PNG)")
@click.option("--json-out", "json_out", type=click.Path(dir_okay=False), metavar="FILE",
              help="also write the rows to FILE as JSON")
@click.option("--markdown", "markdown_out", type=click.Path(dir_okay=False), metavar="FILE",
              help="also write the table as Markdown (as in docs/separation.md)")
@_rerun_option
def separation_cmd(results, metric, plot_path, json_out, markdown_out, reruns):
    """One FIFO against RTT separation on the same networks, pooled over RESULTS
    (directories of 'intcc exp run' of a scenario with [sweep] separation = [0, K], e.g.
    rtt_separation): per algorithm and RTT ratio, mean Jain each way, the paired difference
    with a bootstrap 95 % interval, runs at the paper's 0.95, flow 1's share, and how
    often the node put the two flows in different queues. With runs beside a UDP flood
    (rtt_separation_udp), also the share of their fair share the TCP flows keep.

    Example: intcc exp separation results/rtt_separation-S1 --plot jain.png
    """
    from experiments.reports import separation
    records = _records_with_reruns(results, reruns)
    try:
        table = separation.rows(records, metric)
    except separation.SeparationReportError as e:
        raise click.ClickException(str(e))
    click.echo(separation.format_rows(table))
    udp = separation.udp_rows(records)
    if udp:
        click.echo("\n" + separation.format_udp_rows(udp))
    click.echo("\nGoodput each way (flow 1, its competitors; networks run both ways):\n"
               + separation.format_goodput_markdown(separation.goodput_rows(records)))
    queueing = separation.queueing_rows(records)
    if queueing:
        click.echo("\n" + separation.format_queueing_rows(queueing))
    accuracy = separation.rtt_accuracy(records)
    if accuracy:
        click.echo("\n" + separation.format_rtt_accuracy(accuracy))
    if plot_path:
        separation.plot(records, plot_path, metric)
        click.echo(f"plot in {plot_path}")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"jain": table, "udp": udp, "queueing": queueing, "rtt_accuracy": accuracy}, f, indent=1)
    if markdown_out:
        with open(markdown_out, "w") as f:
            f.write(separation.format_markdown(table) + "\n")
            if udp:
                f.write("\n" + separation.format_udp_markdown(udp) + "\n")
        click.echo(f"Markdown table in {markdown_out}")


@exp_group.command("reconfig")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--fct-mb", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              help="the transfer whose completion time is read from the migrated flow's goodput series (MB)")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="also draw each flow's goodput and the FCT prolongation against the period (PNG)")
@click.option("--series-plot", "series_plot", type=click.Path(dir_okay=False), metavar="FILE",
              help="also draw goodput against time of both flows per setting, for --algorithm (PNG)")
@click.option("--algorithm", default=None, help="the algorithm of --series-plot (default: the first)")
@click.option("--against", "against", default=None, metavar="ALGORITHM",
              help="also pair every other algorithm's runs with this one's, repeat by repeat: goodput ratio, "
                   "prolongation from goodput and the main flow's difference (e.g. 'kernel cubic')")
@click.option("--record-out", "record_out", type=click.Path(dir_okay=False), metavar="FILE",
              help="write the run's summary with each run's goodput series: the record docs/reconfiguration.md "
                   "is rebuilt from (one RESULTS directory)")
def reconfig_cmd(results, fct_mb, plot_path, series_plot, algorithm, against, record_out):
    """A migrated flow against the main flow under path reconfiguration, from RESULTS
    (directories of 'intcc exp run' of a scenario with [sweep] reconfig, e.g.
    reconfiguration, or records --record-out wrote): per algorithm and setting, each flow's
    goodput, the migrated flow's share, its time to deliver --fct-mb and the prolongation
    of that time against the same repeat without reconfiguration, with bootstrap 95 %
    intervals over repeats.

    Example: intcc exp reconfig results/reconfiguration-S1 --plot reconfig.png
    """
    from experiments.reports import reconfig
    try:
        records = reconfig.load(list(results))
    except reconfig.ReconfigReportError as e:
        raise click.ClickException(str(e))
    click.echo(reconfig.format_markdown(reconfig.rows(records, fct_mb), fct_mb))
    if against:
        try:
            click.echo("\n" + reconfig.format_paired_markdown(reconfig.paired(records, against)))
        except reconfig.ReconfigReportError as e:
            raise click.ClickException(str(e))
    if plot_path:
        reconfig.plot(records, plot_path, fct_mb)
        click.echo(f"plot in {plot_path}")
    if series_plot:
        alg = algorithm or records[0]["algorithm"]
        try:
            reconfig.plot_series(records, series_plot, alg)
        except reconfig.ReconfigReportError as e:
            raise click.ClickException(str(e))
        click.echo(f"goodput over time of {alg} in {series_plot}")
    if record_out:
        if len(results) != 1 or not os.path.isdir(results[0]):
            raise click.ClickException("--record-out takes one RESULTS directory")
        n = reconfig.record_with_series(results[0], record_out)
        click.echo(f"{n} runs with their series in {record_out}")


@exp_group.command("trace")
@click.option("--flows", default=30, show_default=True, type=click.IntRange(min=1), help="transfers in the trace")
@click.option("--seed", default=1, show_default=True, type=click.IntRange(min=0))
@click.option("--link-mbps", default=10.0, show_default=True, type=click.FloatRange(min=0.1),
              help="the bottleneck the load is a share of")
@click.option("--load", default=0.8, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="offered load: the trace's bytes over its span, as a share of the link")
@click.option("--size-mb", nargs=2, type=click.FloatRange(min=0, min_open=True), default=(1.0, 10.0),
              show_default=True, metavar="LOW HIGH", help="transfer sizes, log-uniform between (MB)")
@click.option("--rtt-median-ms", default=40.0, show_default=True, type=click.FloatRange(min=1),
              help="median of the log-normal RTTs (clipped to the paper's 1-224 ms)")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="CSV file to write")
def trace_cmd(flows, seed, link_mbps, load, size_mb, rtt_median_ms, out_path):
    """Write a synthetic long-flow trace with MAWI-like sizes and RTTs (the RTT-separation
    paper's FCT test), to replay with 'intcc exp replay'.

    Columns flow,start_s,size_bytes,rtt_ms; the generator's parameters in its first line.

    Example: intcc exp trace --flows 30 --seed 1 --out trace.csv
    """
    from experiments.runs import flow_trace
    lo, hi = (int(mb * 1e6) for mb in size_mb)
    try:
        got = flow_trace.generate(flows, seed, link_mbps, load, (lo, hi), rtt_median_ms)
    except ValueError as e:
        raise click.ClickException(str(e))
    comment = flow_trace.header(generator="experiments/runs/flow_trace.py", flows=flows, seed=seed,
                                link_mbps=link_mbps, load=load, size_bytes=f"{lo}-{hi} log-uniform",
                                rtt_ms=f"log-normal median {rtt_median_ms:g} sigma 1 clipped 1-224")
    flow_trace.write_csv(got, out_path, comment)
    span = got[-1].start_s
    click.echo(f"{flows} transfers over {span:.0f} s, {sum(f.size_bytes for f in got) / 1e6:.0f} MB in all -> {out_path}")


@exp_group.command("replay")
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("--cca", "ccas", multiple=True, default=("cubic",), show_default=True,
              type=click.Choice(["cubic", "reno", "bbr"]), help="kernel CCA of every transfer (repeatable)")
@click.option("--separation", "separations", multiple=True, type=click.IntRange(0, 8), default=(0, 4),
              show_default=True, help="queues at the bottleneck, 0 for one FIFO (repeatable)")
@click.option("--bottleneck-mbps", default=10.0, show_default=True, type=click.FloatRange(min=0.1),
              help="the bottleneck's rate (a trace's load is of the rate it was drawn for)")
@click.option("--buffer-bdp", default=1.0, show_default=True, type=click.FloatRange(min=0.05),
              help="the FIFO's buffer, in BDPs of the longest pair's RTT")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="results directory "
              "(default: results/replay-<trace>-<time>)")
def replay_cmd(trace, ccas, separations, bottleneck_mbps, buffer_bdp, out_dir):
    """Replay TRACE (from 'intcc exp trace', or any CSV flow,start_s,size_bytes,rtt_ms) on
    the four-pair dumbbell, once per CCA and number of queues, and print the transfers'
    flow completion times against one FIFO, paired ('intcc exp fct' pools results). Root.

    Each pair of hosts carries the flows of one RTT quartile of the trace, at its geometric
    mean; each flow is one iperf3 transfer of its bytes. Writes OUT/summary.json and
    OUT/runs/<cca>-sep<K>/separation.json.

    Example: intcc exp replay data/traces/mawi_like-seed12.csv --cca cubic --cca bbr
    """
    import hashlib
    from experiments.reports import fct
    from experiments.runs import flow_trace, replay
    from experiments.runs.signals import restore as restore_signals, unwind_on_signals
    from experiments.testbed.bed import TestbedError
    if os.geteuid() != 0:
        raise click.ClickException("replay needs root (network namespaces): run it with sudo")
    if 0 not in separations or len(separations) < 2:
        click.echo("note: without both --separation 0 and a K > 0, 'intcc exp fct' has nothing to pair")
    try:
        flows = flow_trace.read_csv(trace)
    except flow_trace.TraceError as e:
        raise click.ClickException(str(e))
    with open(trace, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with open(trace, encoding="utf-8") as f:
        first = f.readline().strip()
    info = {"path": trace, "id": digest[:12], "sha256": digest, "flows": len(flows),
            "header": first.lstrip("# ") if first.startswith("#") else None}
    name = os.path.splitext(os.path.basename(trace))[0]
    out_dir = out_dir or os.path.join("results", f"replay-{name}-{time.strftime('%Y%m%d-%H%M%S')}")
    click.echo(f"{len(flows)} transfers of {trace}, {len(ccas)} CCA x {len(separations)} settings -> {out_dir}")
    previous = unwind_on_signals(lambda signum: sys.exit(128 + signum))
    try:
        summary = replay.run(flows, info, out_dir, list(ccas), list(separations), " ".join(["intcc"] + sys.argv[1:]),
                             echo=click.echo, bottleneck_mbps=bottleneck_mbps, buffer_bdp=buffer_bdp)
    except (TestbedError, OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc))
    finally:
        restore_signals(previous)
    try:
        click.echo("\n" + fct.format_rows(fct.rows([summary])))
    except fct.FctReportError as e:
        click.echo(str(e))
    click.echo(f"\nresults in {out_dir}/summary.json")


@exp_group.command("fct")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="also draw the FCT CDF each way, per CCA (PNG)")
@click.option("--json-out", "json_out", type=click.Path(dir_okay=False), metavar="FILE")
@click.option("--markdown", "markdown_out", type=click.Path(dir_okay=False), metavar="FILE",
              help="also write the tables as Markdown (as in docs/separation.md)")
def fct_cmd(results, plot_path, json_out, markdown_out):
    """Flow completion times of replayed traces, one FIFO against RTT separation, pooled
    over RESULTS (directories or summary.json files of 'intcc exp replay'): per CCA the mean
    FCT each way and its change with a bootstrap 95 % interval (transfers paired), median,
    90th percentile, and per RTT quartile.

    Example: intcc exp fct results/replay-mawi_like-seed12-* --plot fct_cdf.png
    """
    from experiments.reports import fct
    summaries = []
    for path in results:
        path = os.path.join(path, "summary.json") if os.path.isdir(path) else path
        try:
            with open(path, encoding="utf-8") as f:
                summaries.append(json.load(f))
        except (OSError, json.JSONDecodeError) as e:
            raise click.ClickException(f"{path}: {e}")
    try:
        table = fct.rows(summaries)
    except fct.FctReportError as e:
        raise click.ClickException(str(e))
    click.echo(fct.format_rows(table))
    lost = {k: n for k, n in fct.failed(summaries).items() if n}
    if lost:
        click.echo("unfinished transfers (left out): " + ", ".join(f"{c} K={k}: {n}" for (c, k), n in sorted(lost.items())))
    if plot_path:
        fct.plot(summaries, plot_path)
        click.echo(f"plot in {plot_path}")
    if json_out:
        with open(json_out, "w") as f:
            json.dump(table, f, indent=1)
    if markdown_out:
        with open(markdown_out, "w") as f:
            f.write(fct.format_markdown(table) + "\n\n" + fct.format_pair_markdown(table) + "\n")
        click.echo(f"Markdown tables in {markdown_out}")
