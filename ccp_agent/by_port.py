"""One agent, other algorithms for some flows: ``--port-algorithm 5202=vegas`` runs vegas
for every flow with TCP port 5202 (source or destination) and the agent's own algorithm
for the rest. The datapath serves one agent, so an experiment whose flow 1 runs the
adaptive agent and whose competitor runs a CCA only CCP has (vegas) needs both in one.

Each algorithm keeps its own datapath program: a pinned algorithm's programs are
installed under its name (``vegas.default``), and its flows ask for them there.
"""
from __future__ import annotations

from ccp_algs.base import Algorithm
from ccp_algs.registry import algorithm_class


class PinError(ValueError):
    pass


class _Renamed:
    """A flow's datapath handle whose programs live under a prefix."""

    def __init__(self, datapath, prefix: str):
        self._datapath, self._prefix = datapath, prefix

    def set_program(self, name, fields=None):
        return self._datapath.set_program(f"{self._prefix}{name}", fields)

    def __getattr__(self, attr):
        return getattr(self._datapath, attr)


def parse_pins(pins: tuple[str, ...]) -> dict[int, str]:
    """``("5202=vegas", ...)`` -> {5202: "vegas"}; a bad entry is a PinError that names it."""
    out = {}
    for pin in pins:
        port, sep, name = pin.partition("=")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not name:
            raise PinError(f"--port-algorithm {pin!r}: expected PORT=NAME, e.g. 5202=vegas")
        try:
            cls = algorithm_class(name)
        except KeyError as e:
            raise PinError(f"--port-algorithm {pin!r}: {e}") from None
        if cls.needs_telemetry:
            raise PinError(f"--port-algorithm {pin!r}: {name} needs the sink's telemetry, which a pinned "
                           f"algorithm does not get; run it as the agent's own algorithm")
        out[int(port)] = name
    return out


class ByPort(Algorithm):
    """``main`` for every flow, except those with a pinned port: their own algorithm, built
    with its defaults on the same datapath."""
    name = "by-port"

    def __init__(self, main: Algorithm, pins: dict[int, str]):
        self.main = main
        self.trace, self.capabilities = main.trace, main.capabilities
        self.name = f"{main.name} (+ {', '.join(f'{n} on port {p}' for p, n in sorted(pins.items()))})"
        self.pinned: dict[str, Algorithm] = {}
        for name in dict.fromkeys(pins.values()):
            # untraced: the trace (and what reads it: switches, slow-start exit) is the agent's flows'
            self.pinned[name] = algorithm_class(name)(capabilities=main.capabilities)
        self.pins = pins

    def datapath_programs(self):
        programs = dict(self.main.datapath_programs())
        for name, alg in self.pinned.items():
            programs.update({f"{name}.{p}": prog for p, prog in alg.datapath_programs().items()})
        return programs

    def new_flow(self, datapath, datapath_info):
        ports = (getattr(datapath_info, "src_port", None), getattr(datapath_info, "dst_port", None))
        name = next((self.pins[p] for p in ports if p in self.pins), None)
        if name is None:
            return self.main.new_flow(datapath, datapath_info)
        return self.pinned[name].new_flow(_Renamed(datapath, f"{name}."), datapath_info)
