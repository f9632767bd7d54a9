"""``intcc node ...``: run, check and inspect INT nodes."""
from __future__ import annotations

import inspect
import json
import logging
import sys

import click

from .config import ConfigSyntaxError
from .runtime import RT_WITH_BUSY_POLL


def _read_config(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise click.ClickException(f"cannot read configuration {path}: {exc.strerror}")
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"{path}: not a text configuration (byte 0x{exc.object[exc.start]:02x} "
                                   f"at offset {exc.start} is not UTF-8)")


@click.group("node")
def node_group():
    """Click-style INT nodes: run a configuration, check it, list elements."""


@node_group.command("run")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--netns", help="Open the node's interfaces inside this network namespace.")
@click.option("--control", "control_path", help="Unix socket for counters and run-time writes.")
@click.option("--counters-out", help="Write final counters here (JSON) on exit.")
@click.option("--cpu", type=int, help="Pin the node to this CPU.")
@click.option("--poll-idle", is_flag=True,
              help="Keep the node's CPU (--cpu) polling instead of halting when idle: lower latency at low "
                   "load, a core that always looks busy.")
@click.option("--busy-poll-us", type=click.IntRange(min=0), default=0, show_default=True, metavar="US",
              help="After each packet or timer, keep polling this many microseconds before sleeping: no "
                   "wake-up for a packet that comes within it (added latency at 1,000 pps about halves), "
                   "up to a whole core while traffic flows. 0: off.")
@click.option("--rt-priority", type=click.IntRange(0, 99), default=0, show_default=True, metavar="0-99",
              help="Run the node under SCHED_FIFO at this priority: on a host whose CPUs are busy (several "
                   "testbeds, the agent's estimator) its links' timers then wait for no host process. Root or "
                   "CAP_SYS_NICE; not with --busy-poll-us. 0: the normal scheduler.")
@click.option("--fast-path", is_flag=True,
              help="Forward in the kernel: compile the configuration's forwarding chain (routing, INT source, "
                   "transit and sink, queues and rates) to tc BPF programs over the ports' qdiscs; the "
                   "telemetry, counters and handlers stay the node's. A configuration that does not compile "
                   "(link emulation, wireless, reconfiguration, RTT separation) runs in Python, with one line "
                   "saying why; 'intcc node check --fast-path' tells beforehand.")
@click.option("--log-level", default="INFO", show_default=True)
def run_cmd(config, netns, control_path, counters_out, cpu, poll_idle, busy_poll_us, rt_priority, fast_path,
            log_level):
    """Run the node described by CONFIG until SIGTERM."""
    from .node import run_node
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    text = _read_config(config)
    if poll_idle and cpu is None:
        raise click.UsageError("--poll-idle needs --cpu (the core that is kept polling)")
    if rt_priority and busy_poll_us:
        raise click.UsageError(f"--rt-priority with --busy-poll-us: {RT_WITH_BUSY_POLL}")
    try:
        sys.exit(run_node(text, netns=netns, control_path=control_path,
                          counters_path=counters_out, cpu=cpu, poll_idle=poll_idle,
                          busy_poll_us=busy_poll_us, rt_priority=rt_priority, fast_path=fast_path))
    except ConfigSyntaxError as exc:
        raise click.ClickException(f"{config}: {exc}")
    except PermissionError as exc:
        raise click.ClickException(f"--rt-priority {rt_priority}: {exc.strerror} (needs root or CAP_SYS_NICE)")


@node_group.command("check")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--fast-path", is_flag=True, help="Also say which elements the fast path (--fast-path) would run "
                                                 "in the kernel, and what keeps the rest in Python.")
def check_cmd(config, fast_path):
    """Parse CONFIG and check its graph without opening any device."""
    from .router import Router
    try:
        router = Router(_read_config(config))
    except ConfigSyntaxError as exc:
        raise click.ClickException(f"{config}: {exc}")
    click.echo(f"{config}: OK, {len(router.elements)} elements, {len(router.ast.connections)} connections")
    if fast_path:
        from .fastpath.plan import plan_for
        plan = plan_for(router)
        width = max(len(n) for n in plan.placement)
        for name, where in plan.placement.items():
            click.echo(f"  {name:<{width}}  {type(router.elements[name]).__name__:<12}  {where}")
        if plan.compiled:
            click.echo(f"fast path: compiles ({len(plan.ports)} ports: "
                       f"{', '.join(p.devname for p in plan.ports)})")
        else:
            click.echo("fast path: does not compile, the node would forward in Python:")
            for r in plan.reasons:
                click.echo(f"  - {r}")


@node_group.command("elements")
@click.argument("name", required=False)
def elements_cmd(name):
    """List element classes, or describe NAME."""
    from . import elements  # noqa: F401
    from .element import REGISTRY
    if name:
        cls = REGISTRY.get(name)
        if cls is None:
            raise click.ClickException(f"no element class {name!r}; known: {', '.join(sorted(REGISTRY))}")
        click.echo(f"{name}\n\n{inspect.cleandoc(cls.__doc__ or '')}\n")
        for a in cls.ARGS:
            dflt = "required" if a.required else f"default {a.default!r}"
            click.echo(f"  {a.name:<22} {dflt}")
        if cls.write_handlers:
            click.echo(f"\nwritable at run time: {', '.join(sorted(cls.write_handlers))}")
        return
    for n in sorted(REGISTRY):
        doc = (REGISTRY[n].__doc__ or "").strip().splitlines()
        click.echo(f"{n:<16} {doc[0] if doc else ''}")


@node_group.command("counters")
@click.option("--control", "control_path", required=True, help="The node's control socket.")
def counters_cmd(control_path):
    """Print a running node's counters as JSON."""
    from .control import request
    click.echo(json.dumps(_ask(request, control_path, {"cmd": "counters"}), indent=1))


@node_group.command("read")
@click.option("--control", "control_path", required=True, help="The node's control socket.")
@click.argument("target", metavar="ELEMENT.HANDLER")
def read_cmd(control_path, target):
    """Print what a running node's read handler gives, as JSON, e.g. ``rtt.rtts``."""
    from .control import request
    elem, _, handler = target.partition(".")
    if not handler:
        raise click.BadParameter("expected ELEMENT.HANDLER, e.g. rtt.rtts", param_hint="TARGET")
    reply = _ask(request, control_path, {"cmd": "read", "element": elem, "handler": handler})
    click.echo(json.dumps(reply["value"], indent=1))


@node_group.command("write")
@click.option("--control", "control_path", required=True, help="The node's control socket.")
@click.argument("target", metavar="ELEMENT.HANDLER")
@click.argument("value")
def write_cmd(control_path, target, value):
    """Change a parameter of a running node, e.g. ``wl.distance_m 40``."""
    from .control import request
    elem, _, handler = target.partition(".")
    if not handler:
        raise click.BadParameter("expected ELEMENT.HANDLER, e.g. wl.loss", param_hint="TARGET")
    reply = _ask(request, control_path, {"cmd": "write", "element": elem, "handler": handler, "value": value})
    click.echo(f"{target} = {reply['value']}")


def _ask(request, path, req):
    try:
        reply = request(path, req)
    except OSError as exc:
        raise click.ClickException(f"cannot reach node at {path}: {exc.strerror or exc}")
    if not reply.get("ok"):
        raise click.ClickException(reply.get("error", "request failed"))
    return reply
