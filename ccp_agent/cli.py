"""``intcc alg`` (run a CCP algorithm) and ``intcc datapath`` (the BPF datapath daemon)."""
from __future__ import annotations

import json
import logging
import os

import click

from ccp_algs.contract import CCP_KERNEL, INTCC_DATAPATH, ContractError, DatapathCapabilities, read_datapath_contract
from ccp_algs.registry import ALGORITHMS, Param, algorithm_class
from estimator import DEFAULT_IDENTIFY_FOREST, DEFAULT_MODEL
from estimator.identify.evidence import COMMIT_POSTERIOR
from telemetry.schema import CCA_LABELS

from .datapath import DEFAULT_STATE_DIR
from .switching import DEFAULT_IDENTIFY, IDENTIFY_MODES, POLICIES
from .portus_compat import IPC_CHOICES, AlgorithmError, start


@click.group("alg")
def alg_group():
    """CCP algorithms (portus agents): list them, run one.

    An agent controls every flow whose congestion control is 'ccp', through the
    intcc BPF datapath ('intcc datapath run', IPC unix) or ccp-kernel (IPC netlink).
    """


def _common(f):
    f = click.option("--ipc", type=click.Choice(IPC_CHOICES), default="unix", show_default=True,
                     help="unix: the intcc BPF datapath; netlink: ccp-kernel")(f)
    f = click.option("--trace", "trace", type=click.Path(dir_okay=False),
                     help="CSV of every decision: time, flow, cwnd, RTT, acked, losses, reason")(f)
    f = click.option("-v", "--verbose", is_flag=True, help="log every decision to stderr")(f)
    f = click.option("--decisions", "decisions_url", metavar="URL",
                     help="publish each flow's decisions there for the dashboard (intcc/v1/decision/<flow-id>, "
                          "rate-limited); default: --broker where the algorithm has one")(f)
    f = click.option("--port-algorithm", "pins", multiple=True, metavar="PORT=NAME",
                     help="flows with this TCP port (either end) run algorithm NAME with its defaults "
                          "instead (repeatable): e.g. a vegas competitor beside an adaptive flow")(f)
    f = click.option("--state-dir", default=DEFAULT_STATE_DIR, show_default=True,
                     help="the intcc datapath daemon's state: its contract.json (version, capabilities); "
                          "for cubic-int also flows.json (which flow is which)")(f)
    f = click.option("--rt-priority", type=click.IntRange(1, 99), metavar="1-99",
                     help="run the agent under SCHED_FIFO at this priority (not its estimator): on a host whose "
                          "CPUs the flows keep busy, a report or a verdict then waits for no other task; give "
                          "'intcc datapath run' the same option. Root or CAP_SYS_NICE")(f)
    return f


def _realtime(priority: int | None):
    """SCHED_FIFO for this process from now on (threads and children started later inherit it)."""
    if priority is None:
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError as e:
        raise click.ClickException(f"--rt-priority {priority}: cannot run under SCHED_FIFO ({e.strerror}; "
                                   f"needs root or CAP_SYS_NICE)")


def _capabilities(ipc: str, state_dir: str = DEFAULT_STATE_DIR) -> DatapathCapabilities:
    """What the datapath under the agent offers: ccp-kernel only libccp's primitives; the
    intcc datapath what its contract.json says (all of them before a daemon has written
    one: the register handshake still guards). Another contract version is an error."""
    if ipc == "netlink":
        return CCP_KERNEL
    try:
        return read_datapath_contract(state_dir) or INTCC_DATAPATH
    except ContractError as e:
        raise click.ClickException(str(e))


def _run(make_alg, ipc: str, verbose: bool, state_dir: str, decisions_url: str | None = None,
         pins: tuple[str, ...] = (), rt_priority: int | None = None):
    """Build the algorithm for the datapath under it (make_alg(capabilities)) and run it,
    with other algorithms for the ``pins``' ports (by_port.py)."""
    from .by_port import ByPort, PinError, parse_pins
    try:
        by_port = parse_pins(pins)
    except PinError as e:
        raise click.ClickException(str(e))
    # -v: every decision to stderr (losses at INFO, reports at DEBUG); --trace keeps them all as CSV
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    alg = make_alg(_capabilities(ipc, state_dir))
    if by_port:
        alg = ByPort(alg, by_port)
    feed = None
    if decisions_url:
        from .decisions import DecisionFeed
        feed = DecisionFeed(decisions_url, state_dir, alg.name).start()
        alg.trace.listeners.append(feed)
    try:
        _realtime(rt_priority)      # after the feed's thread started: only the agent's own
    except click.ClickException:
        if feed is not None:
            feed.stop()
        raise
    click.echo(f"intcc alg: {alg.name} on portus ({ipc} IPC); flows with TCP congestion control "
               f"'ccp' are controlled. Ctrl-C stops." + (" Decisions go to the broker." if feed else ""), err=True)
    try:
        start(alg, ipc)
    except AlgorithmError as e:
        raise click.ClickException(str(e))
    finally:
        if feed is not None:
            feed.stop()


@alg_group.group("run")
def run_group():
    """Run algorithm NAME as the CCP agent (blocks until SIGINT/SIGTERM)."""


def _option(param: Param):
    """A click option for an algorithm's Param."""
    flag = "--" + param.name.replace("_", "-")
    if param.kind is bool:
        return click.option(f"{flag}/--no-{flag[2:]}", param.name, default=param.default, show_default=True,
                            help=param.help)
    if param.choices:
        kind = click.Choice(param.choices)
    elif param.kind is int:
        kind = click.IntRange(min=param.min, max=param.max, min_open=param.min_open)
    elif param.kind is float:
        kind = click.FloatRange(min=param.min, max=param.max, min_open=param.min_open)
    else:
        kind = str
    return click.option(flag, param.name, type=kind, default=param.default, show_default=True, help=param.help)


def _algorithm_command(name: str):
    alg_class = algorithm_class(name)

    def command(ipc, trace, verbose, state_dir, pins=(), decisions_url=None, broker_url=None, rt_priority=None,
                **params):
        runtime = {}
        if alg_class.needs_telemetry:
            from .flows import FlowDirectory
            from .telemetry_feed import TelemetryFeed
            feed = TelemetryFeed(broker_url).start()
            runtime = {"telemetry": feed, "directory": FlowDirectory(state_dir)}
        if alg_class.needs_cadence:
            from .cadence import ReportCadence
            runtime["cadence"] = ReportCadence().start()
        try:
            _run(lambda caps: alg_class(**params, **runtime, trace=trace, capabilities=caps), ipc, verbose,
                 state_dir, decisions_url or broker_url, pins, rt_priority)
        finally:
            for helper in ("telemetry", "cadence"):
                if helper in runtime:
                    runtime[helper].stop()

    command.__doc__ = alg_class.summary
    command = _common(command)           # options list outermost first: the algorithm's, then these
    if alg_class.needs_telemetry:
        command = click.option("--broker", "broker_url", default="mqtt://127.0.0.1:1883", show_default=True,
                               help="MQTT broker the INT sink publishes to")(command)
    for param in reversed(alg_class.params):
        command = _option(param)(command)
    return run_group.command(name)(command)


for _name in ALGORITHMS:
    _algorithm_command(_name)


@run_group.command("adaptive")
@click.option("--model", "model_path", default=DEFAULT_MODEL, show_default="the current release, estimator/models/",
              type=click.Path(exists=True, dir_okay=False),
              help="estimator model (.joblib): it names each flow's competitor")
@click.option("--policy", type=click.Choice(POLICIES), default="mirror", show_default=True,
              help="mirror: the competitor's CCA; best-response: the smallest expected |D| (--table)")
@click.option("--table", "table_path", type=click.Path(dir_okay=False),
              help="measured goodput table g(local, competitor) for best-response (JSON)")
@click.option("--initial", help="the algorithm every flow starts on [default: cubic; best-response: the "
                                "smallest expected |D| in --table against any competitor the model names, alike]")
@click.option("--algorithms", default=",".join(CCA_LABELS), show_default=True,
              help="the algorithms a flow may move between (comma-separated, one datapath program)")
@click.option("--window", type=click.IntRange(min=1), default=50, show_default=True, help="majority vote window")
@click.option("--interval-s", type=click.FloatRange(min=0.05), default=0.5, show_default=True,
              help="one estimate per flow per interval")
@click.option("--min-dwell-s", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="a flow keeps an algorithm at least this long")
@click.option("--min-confidence", type=click.FloatRange(min=0, max=1), default=0.6, show_default=True,
              help="a verdict whose share of the vote is lower changes nothing")
@click.option("--warmup-s", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="no estimates in a flow's first seconds, or a new algorithm's (out of the model's training)")
@click.option("--min-votes", type=click.IntRange(min=1), default=10, show_default=True,
              help="a verdict from fewer estimates (a vote just begun) changes nothing")
@click.option("--min-votes-unanimous", type=click.IntRange(min=0), default=0, show_default=True, metavar="K",
              help="but a vote of fewer than --min-votes counts once it has K estimates, all naming the same CCA "
                   "(0: never): a first switch that need not wait when the estimates agree from the first; measured with "
                   "K=3 and not adopted, a vote that small flipped on the transient after the switch (docs/fairness.md)")
@click.option("--match-rate/--no-match-rate", default=True, show_default=True,
              help="a switch also brings the flow to its competitor's rate at the bottleneck (INT models: the "
                   "sink's hop records): the new CCA goes on from the window the competitor has, not the gap "
                   "the old one left; with --identify active, onto their CUBIC also along their epoch")
@click.option("--match-at-start-below", type=click.FloatRange(min=0), default=0.0, show_default=True,
              metavar="RATIO",
              help="also bring the flow to its competitor's rate at the estimator's first verdict (the warm-up's "
                   "end), keeping its CCA, where the competitor's rate over the flow's is below RATIO (0: never; "
                   "0.8: where the flow has over 1.25x its competitor's): the first seconds' gap does not wait "
                   "for a switch")
@click.option("--identify", type=click.Choice(IDENTIFY_MODES), default=DEFAULT_IDENTIFY, show_default=True,
              help="active: every flow starts on the probe (its INT fair share, with rate pulses) and the "
                   "competitor is named from its answers in the sink's hop records (estimator/identify/), then "
                   "the flow switches (back to the probe when the competitors change); needs --broker. passive: "
                   "the estimator's model and its vote (--model, --window and the options after them)")
@click.option("--identify-threshold", type=click.FloatRange(min=0.5, max=1.0, min_open=True, max_open=True),
              default=COMMIT_POSTERIOR, show_default=True, metavar="POSTERIOR",
              help="--identify active commits to a hypothesis (and switches) once its posterior reaches this; "
                   "lower commits sooner and more often wrongly (below 0.83 one stage alone can commit)")
@click.option("--identify-forest", "forest_model", default=DEFAULT_IDENTIFY_FOREST, metavar="MODEL|none",
              show_default="the release, estimator/models/identify_forest.joblib",
              help="--identify active: the passive features' Random Forest (what the hop records tell of the "
                   "queue and the competitors) as one more stage of the sequential test, at most 20:1 like "
                   "every stage ('python -m lab.estimator.forest_stage train' makes one; docs/estimator.md); "
                   "none: the stages alone")
@click.option("--hold-parity/--no-hold-parity", default=True, show_default=True,
              help="--identify active, mirroring a loss-based competitor (cubic, reno): after the switch the flow "
                   "is brought to the competitors' rate again wherever theirs over its own is 1.2x or more apart "
                   "(either way), its CCA kept: their windows' ratio outlives every loss, so a flow that took over "
                   "behind stays behind; and on the probe, undecided, its rate is trimmed towards the "
                   "competitors' departures at the bottleneck (up to twice the fair share, never below it)")
@click.option("--broker", "broker_url",
              help="publish verdicts and switches on intcc/v1/estimate/<flow-id>; a model trained with INT "
                   "features reads the sink's flow telemetry there too (then required)")
@_common
def run_adaptive(model_path, policy, table_path, initial, algorithms, window, interval_s, min_dwell_s,
                 min_confidence, warmup_s, min_votes, min_votes_unanimous, match_rate, match_at_start_below, identify,
                 identify_threshold, forest_model, hold_parity, broker_url, ipc, trace, verbose, state_dir,
                 decisions_url, pins=(), rt_priority=None):
    """Switch each flow's algorithm on the estimator's verdict of its competitor (the ML-fairness paper)."""
    from ccp_algs.registry import UnknownAlgorithm
    from estimator.model import CCAEstimator, ModelError
    from telemetry.schema import CCA_LABELS
    from .estimation import EstimatorProcess
    from .switching import GoodputTable, SwitchingError, SwitchPolicy
    names = tuple(dict.fromkeys(n.strip() for n in algorithms.split(",") if n.strip()))
    _refuse_options_of_the_other_mode(click.get_current_context(), identify)
    if identify == "active":
        return _run_identified(names, policy, table_path, broker_url, ipc, trace, verbose, state_dir, decisions_url,
                               pins, rt_priority, identify_threshold, match_rate=match_rate, hold_parity=hold_parity,
                               forest_model=forest_model)
    if initial is None and policy == "mirror":
        initial = "cubic"
    if initial is not None and initial not in names:
        names = (initial,) + names
    try:
        hosted = {n: algorithm_class(n)() for n in names}
        model = CCAEstimator.load(model_path)
        named = sorted({str(c) for m in model.models_.values() for c in getattr(m, "classes_", [])})
        unknown = sorted(set(named) - set(CCA_LABELS))
        if unknown:
            raise SwitchingError(f"{model_path} names CCAs this intcc does not know: {', '.join(unknown)}")
        no_forest = [n for n in names if n not in model.models_]
        if no_forest:
            raise SwitchingError(f"{model_path} has no forest for local CCA {', '.join(no_forest)} (it has "
                                 f"{', '.join(sorted(model.models_))}): leave it out of --algorithms")
        from estimator.int_features import feature_set_of
        if feature_set_of(model.feature_names) != "table1" and not broker_url:
            raise SwitchingError(f"{model_path} uses INT features ({feature_set_of(model.feature_names)}): give "
                                 f"--broker, the MQTT broker the INT sink publishes to")
        table = GoodputTable.load(table_path) if table_path else None
        switch_policy = SwitchPolicy(policy, names, tuple(named), min_dwell_s, min_confidence, table, min_votes,
                                     min_votes_unanimous)
        if initial is None:
            initial = switch_policy.before_any_verdict()
    except (ModelError, SwitchingError, UnknownAlgorithm) as e:
        raise click.ClickException(str(e))
    estimation = EstimatorProcess(model_path, window, interval_s, broker_url, state_dir, warmup_s).start()
    try:
        _run(_adaptive_maker(hosted, initial, switch_policy, estimation, trace, match_rate=match_rate,
                             match_at_start_below=match_at_start_below),
             ipc, verbose, state_dir, decisions_url or broker_url, pins, rt_priority)
    finally:
        estimation.stop()


#: options that only one way of identifying reads: given with the other, they would be ignored
_ONLY_FOR_IDENTIFY = {
    "passive": ("model_path", "initial", "window", "interval_s", "min_dwell_s", "min_confidence", "warmup_s",
                "min_votes", "min_votes_unanimous", "match_at_start_below"),
    "active": ("identify_threshold", "forest_model", "hold_parity"),
}


def _refuse_options_of_the_other_mode(ctx: click.Context, identify: str) -> None:
    """An option of the other mode given on the command line is an error, not silently
    ignored: a passive study's --model or --window run active would measure the wrong thing."""
    from click.core import ParameterSource
    for mode, params in _ONLY_FOR_IDENTIFY.items():
        if mode == identify:
            continue
        given = [p for p in ctx.command.params if p.name in params
                 and ctx.get_parameter_source(p.name) == ParameterSource.COMMANDLINE]
        if given:
            flags = ", ".join("/".join(p.opts + p.secondary_opts) for p in given)
            raise click.ClickException(f"{flags} only applies with --identify {mode} (this agent identifies "
                                       f"{identify}ly): add --identify {mode}, or leave {flags} out")


def _adaptive_maker(hosted, initial, switch_policy, verdicts, trace, **options):
    """The agent's algorithm for _run, built once the datapath's capabilities are known."""
    from ccp_algs.handover import HandoverError
    from .adaptive import Adaptive

    def make(caps):
        try:
            return Adaptive(hosted, initial, switch_policy, verdicts, trace=trace, capabilities=caps, **options)
        except HandoverError as e:
            raise click.ClickException(str(e))
    return make


def _run_identified(names, policy, table_path, broker_url, ipc, trace, verbose, state_dir, decisions_url, pins,
                    rt_priority, threshold: float = COMMIT_POSTERIOR, match_rate: bool = True,
                    hold_parity: bool = True, forest_model: str | None = None):
    """adaptive --identify active: flows start on the probe; the identification's verdict
    switches each once (ccp_agent/identification.py)."""
    from ccp_algs.probe import Probe
    from ccp_algs.registry import UnknownAlgorithm
    from .cadence import ReportCadence
    from .flows import FlowDirectory
    from .identification import IdentificationProcess
    from .switching import GoodputTable, SwitchingError, SwitchPolicy
    from .telemetry_feed import TelemetryFeed
    if not broker_url:
        raise click.ClickException("--identify active reads the sink's hop records: give --broker, the MQTT broker "
                                   "the INT sink publishes to")
    forest_model = None if forest_model in (None, "none") else forest_model
    if forest_model is not None:
        from estimator.identify.forest import load
        try:
            load(forest_model)            # here, not in the child: a bad file is named at start
        except Exception as e:          # joblib's unpickling fails in many ways: each named, none a traceback
            raise click.ClickException(f"--identify-forest {forest_model}: {e}")
    try:
        hosted = {n: algorithm_class(n)() for n in names}
        table = GoodputTable.load(table_path) if table_path else None
        switch_policy = SwitchPolicy(policy, names, CCA_LABELS, table=table)
    except (SwitchingError, UnknownAlgorithm) as e:
        raise click.ClickException(str(e))
    feed = TelemetryFeed(broker_url).start()
    cadence = ReportCadence().start()
    hosted["probe"] = Probe(telemetry=feed, directory=FlowDirectory(state_dir), cadence=cadence)
    identification = IdentificationProcess(broker_url, state_dir, threshold=threshold, forest_model=forest_model).start()
    try:
        _run(_adaptive_maker(hosted, "probe", switch_policy, identification, trace, identified=True,
                             match_rate=match_rate, hold_parity=hold_parity),
             ipc, verbose, state_dir, decisions_url or broker_url, pins, rt_priority)
    finally:
        identification.stop()
        cadence.stop()
        feed.stop()


@alg_group.command("list")
def list_algs():
    """The algorithms 'intcc alg run' knows (ccp_algs/registry.py)."""
    for name, cmd in sorted(run_group.commands.items()):
        click.echo(f"{name:12s} {cmd.get_short_help_str(70)}")


@click.group("datapath")
def datapath_group():
    """The CCP datapath for stock Linux: BPF struct_ops 'ccp' + Rust daemon (libccp)."""


@datapath_group.command("run", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def datapath_run(ctx):
    """Register 'ccp' and serve CCP agents until SIGINT/SIGTERM (root).

    Options are the daemon's own: see 'intcc datapath run --help-daemon'.
    """
    from .datapath import DatapathError, daemon_binary
    try:
        binary = daemon_binary()
    except DatapathError as e:
        raise click.ClickException(str(e))
    args = ["--help" if a == "--help-daemon" else a for a in ctx.args]
    os.execv(binary, [binary, *args])


@datapath_group.command("status")
@click.option("--state-dir", default=DEFAULT_STATE_DIR, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the daemon's stats.json as it is")
def datapath_status(state_dir, as_json):
    """Is the daemon running, is an agent connected, which flows are controlled."""
    from .datapath import ccp_registered
    path = os.path.join(state_dir, "stats.json")
    try:
        with open(path) as f:
            stats = json.load(f)
    except FileNotFoundError:
        raise click.ClickException(f"no daemon state in {state_dir} (is 'intcc datapath run' running?)")
    alive = os.path.exists(f"/proc/{stats.get('pid')}") and ccp_registered()
    if as_json:
        click.echo(json.dumps({**stats, "running": alive}, indent=2))
        return
    k, d = stats["kernel"], stats["daemon"]
    click.echo(f"daemon pid {stats['pid']}: {'running' if alive else 'NOT running (stale state)'}; "
               f"agent {'connected' if stats['agent_connected'] else 'absent'} (epoch {stats['epoch']}); "
               f"{stats['flows']} flows controlled, {stats.get('flows_folded_in_kernel', 0)} of them folded in the kernel")
    click.echo(f"kernel: {k['flows_created']} flows seen, ACKs {k['controlled_acks']} controlled / "
               f"{k['fallback_acks']} fallback, {k.get('folded_acks', 0)} folded into {k.get('kernel_reports', 0)} "
               f"reports ({k.get('reports_waited', 0)} waited for a wake-up), {k['events_lost']} events lost")
    click.echo(f"daemon: {d['measures']} per-ACK events, {d['cmds_written']} commands, "
               f"IPC {d['ipc_sent']} sent / {d['ipc_received']} received")
    if d.get("fold_mismatches"):
        click.echo(f"daemon: {d['fold_mismatches']} of {d['fold_checks']} kernel reports differ from the daemon's "
                   f"fold (--check-fold; the daemon's log shows the first)")
    if d.get("file_writes_dropped"):
        click.echo(f"daemon: {d['file_writes_dropped']} state-file writes dropped: the disk did not keep up "
                   f"(these figures may be old; the flows' control did not wait for it)")
    if d.get("contract_mismatches"):
        click.echo(f"daemon: {d['contract_mismatches']} agent messages of another contract version (the daemon's "
                   f"log names it): rebuild with 'make setup' and restart agent and daemon")
    try:
        with open(os.path.join(state_dir, "flows.json")) as f:
            for fl in json.load(f)["flows"]:
                click.echo(f"  flow {fl['sid']}: [{fl['src']}]:{fl['sport']} -> [{fl['dst']}]:{fl['dport']}")
    except FileNotFoundError:
        pass
