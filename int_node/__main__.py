from .cli import node_group

node_group(prog_name="python -m int_node")
