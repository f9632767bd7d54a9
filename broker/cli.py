"""``intcc broker run`` and ``intcc telemetry watch``."""
from __future__ import annotations

import json
import signal
import time

import click

from int_node.runtime import run_path

from .auth import DEFAULT_CREDENTIALS, BrokerURLError


@click.group("broker")
def broker_group():
    """MQTT broker for INT telemetry (embedded amqtt or mosquitto)."""


@broker_group.command("run")
@click.option("--mosquitto", "use_mosquitto", is_flag=True, help="Run mosquitto with a generated config "
              "instead of the embedded amqtt broker.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=1883, show_default=True, type=int)
@click.option("--credentials", default=DEFAULT_CREDENTIALS, show_default=True, type=click.Path(dir_okay=False),
              help="Users and passwords (JSON); created with random passwords if missing.")
@click.option("--no-anonymous", is_flag=True, help="Refuse clients without a login (default: they may read).")
@click.option("--state-dir", default=run_path("broker"), show_default=True,
              help="Where mosquitto's generated config, password file and ACL go.")
def run_cmd(use_mosquitto, host, port, credentials, no_anonymous, state_dir):
    """Run a broker in the foreground until Ctrl-C / SIGTERM.

    Only the sink user may publish flow and hop records, only the agent user
    estimates; anyone may subscribe to intcc/v1/#. For an external or clustered
    broker, apply the same rules (docs/telemetry.md) and point sinks and agents
    at it with an mqtt:// URL instead.
    """
    from .launch import BrokerError, BrokerProcess
    b = BrokerProcess("mosquitto" if use_mosquitto else "embedded", host, port, credentials, state_dir,
                      allow_anonymous=not no_anonymous)
    try:
        b.start()
    except BrokerError as exc:
        raise click.ClickException(str(exc))
    click.echo(f"{b.kind} broker on {b.url} (credentials {credentials}; log {b.log_path}); Ctrl-C stops it")
    stop = []
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.append(1))
    try:
        while not stop and b.proc.poll() is None:
            time.sleep(0.2)
    finally:
        b.stop()
    if not stop:
        raise click.ClickException(f"broker exited with code {b.proc.returncode}; see {b.log_path}")


@click.group("telemetry")
def telemetry_group():
    """Read INT telemetry published by sinks."""


def _line(rec) -> str:
    if rec.type == "estimate":
        votes = " ".join(f"{k}={v}" for k, v in sorted(rec.votes.items()))
        return (f"est  {rec.flow_id} competitor of a {rec.local_cca} flow: {rec.estimate} "
                f"({rec.confidence:.0%} of the last {rec.window}; {votes}; {rec.estimates} estimates)")
    if rec.type == "flow":
        hops = " ".join(f"[{h.node_id} q={h.queue_depth_pkts}p drops={h.queue_drops} loss={h.link_losses}"
                        + (f" rssi={h.rssi_dbm}" if h.rssi_dbm is not None else "") + "]" for h in rec.path)
        owd = f"{rec.one_way_delay_us / 1000:.2f}ms" if rec.one_way_delay_us is not None else "-"
        return (f"flow {rec.flow_id} {rec.src}.{rec.sport}>{rec.dst}.{rec.dport} {rec.reason:8} "
                f"pkts={rec.packets} lost={rec.lost} (cong {rec.lost_congestion}, link {rec.lost_link}, reconfig {rec.lost_reconfig}) "
                f"owd={owd} {hops}")
    return (f"hop  {rec.node_id} q={rec.queue_depth_bytes}B/{rec.queue_capacity_bytes}B drops={rec.queue_drops} "
            f"link_losses={rec.link_losses} rate={rec.data_rate_kbps}kbps arrival={rec.arrival_rate_pps}pps "
            f"flows={rec.flow_count}" + (f" rssi={rec.rssi_dbm}dBm mcs={rec.mcs}" if rec.rssi_dbm is not None else ""))


@telemetry_group.command("watch")
@click.option("--url", default="mqtt://127.0.0.1:1883", show_default=True, help="Broker URL.")
@click.option("--flow", "flow_id", help="Only this flow id (16 hex digits).")
@click.option("--hops/--no-hops", default=True, show_default=True, help="Show hop records too.")
@click.option("--json", "as_json", is_flag=True, help="Print each record as JSON.")
@click.option("--count", type=int, help="Stop after this many records.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds to wait for the broker before giving up with an error.")
def watch_cmd(url, flow_id, hops, as_json, count, timeout_s):
    """Print live, validated telemetry records (invalid ones are counted on exit)."""
    from telemetry.schema import ALL_TOPICS, flow_topic
    from .subscriber import TelemetryView
    topics = [flow_topic(flow_id)] if flow_id else [ALL_TOPICS]
    try:
        view = TelemetryView(url, topics)
    except BrokerURLError as exc:
        raise click.ClickException(str(exc))
    seen = []

    def show(rec, topic):
        if (rec.type == "hop" and not hops) or (count is not None and len(seen) >= count):
            return
        click.echo(json.dumps(rec.to_dict()) if as_json else _line(rec))
        seen.append(1)
    view.on_record(show)
    view.start()
    if not view.wait_connected(min(2.0, timeout_s)):
        click.echo(f"waiting for broker {view.url.display} ...", err=True)
        if not view.wait_connected(max(0.0, timeout_s - 2.0)):
            view.stop()
            raise click.ClickException(
                f"no broker at {view.url.display} after {timeout_s:g} s"
                + (f" ({view.last_error})" if view.last_error else "")
                + "; start one with 'intcc broker run' or pass --url")
    try:
        while count is None or len(seen) < count:
            time.sleep(0.1)
    except KeyboardInterrupt:
        pass
    finally:
        view.stop()
        c = view.counters()
        click.echo(f"{c['accepted']} records, {c['rejected']} rejected"
                   + (f" ({c['rejected_reasons']})" if c["rejected"] else ""), err=True)
