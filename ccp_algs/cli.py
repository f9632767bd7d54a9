"""``intcc alg`` (run a CCP algorithm) and ``intcc datapath`` (the BPF datapath daemon)."""
from __future__ import annotations

import importlib
import json
import logging
import os

import click

from .contract import CCP_KERNEL, INTCC_DATAPATH, ContractError, DatapathCapabilities, read_datapath_contract
from .datapath import DEFAULT_STATE_DIR
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
    f = click.option("--state-dir", default=DEFAULT_STATE_DIR, show_default=True,
                     help="the intcc datapath daemon's state: its contract.json (version, capabilities); "
                          "for cubic-int also flows.json (which flow is which)")(f)
    return f


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


def _run(make_alg, ipc: str, verbose: bool, state_dir: str):
    """Build the algorithm for the datapath under it (make_alg(capabilities)) and run it."""
    # -v: every decision to stderr (losses at INFO, reports at DEBUG); --trace keeps them all as CSV
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    alg = make_alg(_capabilities(ipc, state_dir))
    click.echo(f"intcc alg: {alg.name} on portus ({ipc} IPC); flows with TCP congestion control "
               f"'ccp' are controlled. Ctrl-C stops.", err=True)
    try:
        start(alg, ipc)
    except AlgorithmError as e:
        raise click.ClickException(str(e))


@alg_group.group("run")
def run_group():
    """Run algorithm NAME as the CCP agent (blocks until SIGINT/SIGTERM)."""


@run_group.command("const")
@click.option("--cwnd-pkts", type=click.IntRange(min=1), default=10, show_default=True,
              help="the fixed congestion window, in MSS-sized packets")
@click.option("--rate-mbps", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="also pace at this rate (0: no pacing)")
@click.option("--loss-beta", type=click.FloatRange(min=0, max=1, min_open=True), default=1.0, show_default=True,
              help="the kernel's cut on a loss until the agent answers (1: none, as const never cuts)")
@_common
def run_const(cwnd_pkts, rate_mbps, loss_beta, ipc, trace, verbose, state_dir):
    """Fixed cwnd (tests, calibration): goodput = cwnd / RTT."""
    from .const import Const
    _run(lambda caps: Const(cwnd_pkts=cwnd_pkts, rate_mbps=rate_mbps, trace=trace, loss_beta=loss_beta,
                            capabilities=caps), ipc, verbose, state_dir)


_HYSTART = click.option("--hystart/--no-hystart", default=True, show_default=True,
                        help="HyStart delay detection ends slow start before the first loss (as Linux)")


@run_group.command("cubic")
@_HYSTART
@click.option("--init-cwnd-pkts", type=click.IntRange(min=1), default=10, show_default=True)
@_common
def run_cubic(hystart, init_cwnd_pkts, ipc, trace, verbose, state_dir):
    """CUBIC (RFC 9438: beta 0.7, C 0.4, fast convergence, Reno-friendly region, HyStart)."""
    from .cubic import Cubic
    _run(lambda caps: Cubic(init_cwnd_pkts=init_cwnd_pkts, trace=trace, hystart=hystart, capabilities=caps),
         ipc, verbose, state_dir)


@run_group.command("cubic-int")
@click.option("--policy", type=click.Choice(["l1", "l2"]), default="l1", show_default=True,
              help="on a link (non-congestive) loss: l1 keeps cwnd, l2 multiplies it by 0.95")
@click.option("--increment", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="slow-start growth factor of paper Eq. (1) (paper: 1, 2, 3)")
@click.option("--broker", "broker_url", default="mqtt://127.0.0.1:1883", show_default=True,
              help="MQTT broker the INT sink publishes to")
@click.option("--max-age-ms", type=click.FloatRange(min=0), default=200.0, show_default=True,
              help="older telemetry is ignored: the flow is then plain CUBIC")
@_HYSTART
@click.option("--init-cwnd-pkts", type=click.IntRange(min=1), default=10, show_default=True)
@_common
def run_cubic_int(policy, increment, broker_url, max_age_ms, state_dir, hystart, init_cwnd_pkts, ipc, trace,
                  verbose):
    """INT-aware CUBIC: link losses do not cut cwnd like congestion (paper 003)."""
    from .cubic_int import CubicInt
    from .flows import FlowDirectory
    from .telemetry_feed import TelemetryFeed
    feed = TelemetryFeed(broker_url).start()
    try:
        _run(lambda caps: CubicInt(policy=policy, increment=increment, telemetry=feed,
                                   directory=FlowDirectory(state_dir), max_age_ms=max_age_ms,
                                   init_cwnd_pkts=init_cwnd_pkts, trace=trace, hystart=hystart, capabilities=caps),
             ipc, verbose, state_dir)
    finally:
        feed.stop()


# Algorithms whose only option is the initial window.
SIMPLE = {
    "reno": (".reno", "Reno", "Reno AIMD: slow start, +1 MSS per RTT, halve on loss, 1 MSS on timeout."),
    "vegas": (".vegas", "Vegas", "TCP Vegas: delay-based, alpha 2 / beta 4 / gamma 1 packets (estimator runs)."),
}


def _simple_command(name, module, cls, doc):
    @run_group.command(name, help=doc)
    @click.option("--init-cwnd-pkts", type=click.IntRange(min=1), default=10, show_default=True)
    @_common
    def command(init_cwnd_pkts, ipc, trace, verbose, state_dir):
        alg_class = getattr(importlib.import_module(module, __package__), cls)
        _run(lambda caps: alg_class(init_cwnd_pkts=init_cwnd_pkts, trace=trace, capabilities=caps), ipc, verbose,
             state_dir)
    return command


for _name, (_module, _cls, _doc) in SIMPLE.items():
    _simple_command(_name, _module, _cls, _doc)


@alg_group.command("list")
def list_algs():
    """The algorithms 'intcc alg run' knows."""
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
               f"{stats['flows']} flows controlled")
    click.echo(f"kernel: {k['flows_created']} flows seen, ACKs {k['controlled_acks']} controlled / "
               f"{k['fallback_acks']} fallback, {k['events_lost']} events lost")
    click.echo(f"daemon: {d['measures']} measurements, {d['cmds_written']} commands, "
               f"IPC {d['ipc_sent']} sent / {d['ipc_received']} received")
    if d.get("contract_mismatches"):
        click.echo(f"daemon: {d['contract_mismatches']} agent messages of another contract version (the daemon's "
                   f"log names it): rebuild with 'make setup' and restart agent and daemon")
    try:
        with open(os.path.join(state_dir, "flows.json")) as f:
            for fl in json.load(f)["flows"]:
                click.echo(f"  flow {fl['sid']}: [{fl['src']}]:{fl['sport']} -> [{fl['dst']}]:{fl['dport']}")
    except FileNotFoundError:
        pass
