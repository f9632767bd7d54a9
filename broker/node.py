"""An INT node whose sinks can publish over MQTT: ``int_node``'s own command line
with the MQTT exporters added first. The testbed starts nodes this way
(``python -m broker.node run CONFIG ...``); int_node itself knows no MQTT."""
from __future__ import annotations

from int_node.cli import node_group

from .publisher import register_exporters


def main() -> None:
    register_exporters()
    node_group(prog_name="python -m broker.node")


if __name__ == "__main__":
    main()
