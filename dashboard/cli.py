"""``intcc dashboard``: the sink's telemetry live in a browser, and /metrics for Prometheus."""
from __future__ import annotations

import ipaddress

import click

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


def parse_listen(listen: str) -> tuple[str, int]:
    """'HOST:PORT' ('[v6]:PORT' for IPv6) -> (host, port); a clear error otherwise."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"'{listen}': give HOST:PORT, e.g. 127.0.0.1:8080")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(token: str | None, token_file: str | None) -> str | None:
    if token_file:
        try:
            with open(token_file) as f:
                token = f.read().strip()
        except OSError as e:
            raise click.BadParameter(f"{token_file}: {e.strerror}", param_hint="--token-file")
        if not token:
            raise click.BadParameter(f"{token_file} is empty", param_hint="--token-file")
    return token


@click.command("dashboard")
@click.option("--broker", "broker_url", default="mqtt://127.0.0.1:1883", show_default=True,
              help="the MQTT broker the sinks publish to (read anonymously: the read-only access)")
@click.option("--listen", default="127.0.0.1:8080", show_default=True,
              help="HOST:PORT to serve on; any address but loopback needs --token or --token-file")
@click.option("--history-min", type=click.FloatRange(min=1), default=15.0, show_default=True,
              help="minutes of one-point-a-second history kept per hop and flow")
@click.option("--token", envvar="INTCC_DASHBOARD_TOKEN", help="the token a browser must give (?token=...)")
@click.option("--token-file", type=click.Path(dir_okay=False), help="read the token from this file")
def dashboard_cmd(broker_url, listen, history_min, token, token_file):
    """Serve the INT sink dashboard: paths, per-hop and per-flow charts, worst-N, health
    (updated every second), and /metrics in Prometheus format. Read-only."""
    import uvicorn
    from broker.subscriber import TelemetryView
    from .server import make_app
    from .state import DashboardState
    host, port = parse_listen(listen)
    token = read_token(token, token_file)
    if not is_loopback(host) and not token:
        raise click.UsageError(f"--listen {listen} is not loopback: give --token or --token-file (the page "
                               f"shows the network's telemetry to whoever reaches it)")
    state = DashboardState(history_s=history_min * 60)
    view = TelemetryView(broker_url)
    view.on_record(lambda rec, topic: state.add(rec, topic))
    view.start()
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"intcc dashboard on http://{shown}:{port}/{'?token=...' if token else ''} "
               f"(broker {view.url.display}); Ctrl-C stops", err=True)
    try:
        # open event streams never end by themselves: SIGTERM closes them after 1 s
        uvicorn.run(make_app(state, view, token), host=host, port=port, log_level="warning",
                    timeout_graceful_shutdown=1)
    finally:
        view.stop()

