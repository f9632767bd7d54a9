"""The emulated testbed: topologies (Mininet's Topo/Node/Link in TOML), the namespaces,
links and INT nodes they become, traffic, and the kernel's and agent's traces of a run."""
from .bed import Testbed, teardown  # noqa: F401
