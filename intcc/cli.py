"""The ``intcc`` command: one click group per package."""
from __future__ import annotations

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="intcc")
def main():
    """intcc: sender-side congestion control driven by in-band network telemetry.

    INT nodes stamp per-hop telemetry into IPv6 headers (node), experiments run
    on an emulated testbed of network namespaces (testbed, exp), sinks publish
    it over MQTT (broker, telemetry), CCP algorithms (alg) control kernel TCP
    flows through the BPF datapath (datapath); a dashboard shows the sink's
    telemetry live (dashboard).
    """


@main.command("report")
@click.option("--check", is_flag=True,
              help="change nothing: list the docs' tables that differ from what the records give (exit 1 if any)")
@click.option("--no-figures", is_flag=True, help="tables only (the figures take a few seconds)")
def report_cmd(check, no_figures):
    """Rebuild every Results table in README.md and docs/ from the committed records in
    data/ (each table names its records, with their date, commit and command), and the
    figures in docs/img drawn from them."""
    from .report import ReportError, check as check_docs, update
    try:
        if check:
            stale = check_docs()
            for line in stale:
                click.echo(f"differs from its records: {line}")
            if stale:
                raise click.ClickException(f"{len(stale)} table(s) out of step: run 'intcc report'")
            click.echo("every table matches its records")
            return
        done = update(echo=click.echo)
    except ReportError as e:
        raise click.ClickException(str(e))
    click.echo(f"{len(done)} table(s) rewritten" if done else "every table already matched its records")
    if not no_figures:
        from .report_figures import draw_all
        for path in draw_all():
            click.echo(f"drew {path}")


def _add_groups():
    from broker.cli import broker_group, telemetry_group
    from broker.publisher import register_exporters
    register_exporters()        # 'intcc node run': sinks may publish over MQTT
    from ccp_agent.cli import alg_group, datapath_group
    from dashboard.cli import dashboard_cmd
    from estimator.cli import estimator_group
    from experiments.cli import exp_group, testbed_group
    from experiments.estimator_cli import collect_cmd, live_eval_cmd
    estimator_group.add_command(collect_cmd)      # the estimator's commands that run testbeds
    estimator_group.add_command(live_eval_cmd)
    from estimator.dragonfly.cli import dragonfly_group
    from experiments.dragonfly_cli import eval_cmd as dragonfly_eval_cmd, train_cmd as dragonfly_train_cmd
    dragonfly_group.add_command(dragonfly_train_cmd)
    dragonfly_group.add_command(dragonfly_eval_cmd)
    estimator_group.add_command(dragonfly_group)
    from estimator.reconfig.cli import reconfig_fct_group, reconfig_variant_group
    estimator_group.add_command(reconfig_fct_group)
    estimator_group.add_command(reconfig_variant_group)
    from int_node.cli import node_group
    main.add_command(node_group)
    main.add_command(testbed_group)
    main.add_command(exp_group)
    main.add_command(broker_group)
    main.add_command(telemetry_group)
    main.add_command(alg_group)
    main.add_command(datapath_group)
    main.add_command(estimator_group)
    main.add_command(dashboard_cmd)


_add_groups()
