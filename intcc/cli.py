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


def _add_groups():
    from broker.cli import broker_group, telemetry_group
    from broker.publisher import register_exporters
    register_exporters()        # 'intcc node run': sinks may publish over MQTT
    from ccp_agent.cli import alg_group, datapath_group
    from dashboard.cli import dashboard_cmd
    from estimator.cli import estimator_group
    from experiments.cli import exp_group, testbed_group
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
