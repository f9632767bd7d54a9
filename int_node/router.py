"""A router: elements instantiated from a configuration, connected and checked.

The checks follow Click: every port in use is connected, push outputs and pull
inputs are connected exactly once, push never meets pull without a Queue in
between, port numbers are within each class's range. Errors name the line.
"""
from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional

from . import elements as _elements  # noqa: F401  (registers the element classes)
from .config import ConfigAST, ConfigSyntaxError, parse_config
from .element import AGNOSTIC, PULL, PUSH, REGISTRY, ConfigError, Element
from .eventloop import EventLoop

log = logging.getLogger("intcc.node")


class Router:
    def __init__(self, text: str, netns: Optional[str] = None, loop: Optional[EventLoop] = None):
        self.netns = netns
        self.loop = loop
        #: callables giving counters to add to the elements' own (the fast path's)
        self.counter_sources: List[Callable[[], Dict[str, Dict[str, int]]]] = []
        #: callables (element, handler) told of each run-time write; a ConfigError undoes it
        self.write_listeners: List[Callable] = []
        self.ast: ConfigAST = parse_config(text, REGISTRY.keys())
        self.elements: Dict[str, Element] = {}
        for decl in self.ast.elements.values():
            elem = REGISTRY[decl.cls](decl.name)
            elem.router = self
            elem.decl_line = decl.line
            try:
                elem.configure(decl.args)
            except ConfigError as exc:
                raise ConfigSyntaxError(decl.line, f"{decl.name}: {exc}") from None
            self.elements[decl.name] = elem
        self._connect()

    # -- graph ------------------------------------------------------------
    def _connect(self) -> None:
        ins: Dict[str, Dict[int, list]] = {n: {} for n in self.elements}
        outs: Dict[str, Dict[int, list]] = {n: {} for n in self.elements}
        for c in self.ast.connections:
            outs[c.src].setdefault(c.src_port, []).append(c)
            ins[c.dst].setdefault(c.dst_port, []).append(c)
        for name, elem in self.elements.items():
            line = elem.decl_line
            cls = type(elem).__name__
            for direction, ports, (lo, hi) in (("input", ins[name], elem.n_inputs),
                                               ("output", outs[name], elem.n_outputs)):
                n = max(ports) + 1 if ports else 0
                if hi is not None and n > hi:
                    raise ConfigSyntaxError(line, f"'{name}' ({cls}) has {hi} {direction} port(s), "
                                                  f"port {n - 1} used")
                n = max(n, lo)
                missing = [p for p in range(n) if p not in ports]
                if missing:
                    raise ConfigSyntaxError(line, f"'{name}' ({cls}) {direction} port {missing[0]} "
                                                  f"is not connected")
                if direction == "input":
                    elem.n_in = n
                else:
                    elem.n_out = n
        kinds = self._resolve_kinds()
        for name, elem in self.elements.items():
            elem._out = [None] * elem.n_out
            elem._in = [None] * elem.n_in
        for c in self.ast.connections:
            src, dst = self.elements[c.src], self.elements[c.dst]
            kind = kinds[c.src]["out"]
            if kind != kinds[c.dst]["in"]:
                raise ConfigSyntaxError(c.line, f"{kind} output of '{c.src}' connected to "
                                                f"{kinds[c.dst]['in']} input of '{c.dst}'"
                                                + ("; put a Queue between them" if kind == PUSH else ""))
            if kind == PUSH:
                if src._out[c.src_port] is not None:
                    raise ConfigSyntaxError(c.line, f"push output {c.src_port} of '{c.src}' "
                                                    f"connected twice (use Tee to copy packets)")
                src._out[c.src_port] = (dst, c.dst_port)
            else:
                if dst._in[c.dst_port] is not None:
                    raise ConfigSyntaxError(c.line, f"pull input {c.dst_port} of '{c.dst}' "
                                                    f"connected twice")
                dst._in[c.dst_port] = (src, c.src_port)
            # Keep both directions for graph walks (notifications, status).
            src.__dict__.setdefault("_downstream", []).append(dst)
            dst.__dict__.setdefault("_upstream", []).append(src)
        for name, elem in self.elements.items():
            elem.resolved_in_kind = kinds[name]["in"]
            elem.resolved_out_kind = kinds[name]["out"]

    def _resolve_kinds(self) -> Dict[str, Dict[str, str]]:
        kinds = {n: {"in": e.input_kind, "out": e.output_kind} for n, e in self.elements.items()}
        changed = True
        while changed:
            changed = False
            for c in self.ast.connections:
                a, b = kinds[c.src], kinds[c.dst]
                if a["out"] == AGNOSTIC and b["in"] != AGNOSTIC:
                    a["out"] = b["in"]
                    changed = True
                if b["in"] == AGNOSTIC and a["out"] != AGNOSTIC:
                    b["in"] = a["out"]
                    changed = True
            for n, e in self.elements.items():
                # An agnostic element is push or pull as a whole (Click's "a/a").
                if e.input_kind == AGNOSTIC and e.output_kind == AGNOSTIC:
                    k = kinds[n]
                    concrete = {k["in"], k["out"]} - {AGNOSTIC}
                    if len(concrete) == 1:
                        v = concrete.pop()
                        if k["in"] != v or k["out"] != v:
                            k["in"] = k["out"] = v
                            changed = True
        for k in kinds.values():
            for side in ("in", "out"):
                if k[side] == AGNOSTIC:
                    k[side] = PUSH
        return kinds

    # -- lookup -----------------------------------------------------------
    def find(self, name: str, cls=None, user: str = "") -> Element:
        """Element by name, for elements that refer to others (``queue q``)."""
        elem = self.elements.get(name)
        who = f"{user}: " if user else ""
        if elem is None:
            raise ConfigError(f"{who}no element named '{name}'")
        if cls is not None and not isinstance(elem, cls):
            raise ConfigError(f"{who}'{name}' is a {type(elem).__name__}, expected {cls.__name__}")
        return elem

    # -- life cycle -------------------------------------------------------
    def initialize(self) -> None:
        if self.loop is None:
            self.loop = EventLoop()
        for elem in self.elements.values():
            try:
                elem.initialize()
            except ConfigError as exc:
                raise ConfigSyntaxError(elem.decl_line, str(exc)) from None
        # where a packet an element raises on is counted: the device it came in on
        self._devices_by_port = {e.port_id: e for e in self.elements.values()
                                 if isinstance(e, _elements.devices.FromDevice)}

    def run(self) -> None:
        self.loop.run()

    #: packets an element raised on (Element.packet_error); each is also counted in the
    #: ``element_errors`` of the FromDevice it came in on
    element_errors = 0
    _ERRORS_LOGGED_MAX = 5

    def packet_error(self, elem: Element, pkt, exc: BaseException) -> None:
        self.element_errors += 1
        dev = self._devices_by_port.get(pkt.in_port)
        if dev is not None:
            dev.element_errors += 1
        if self.element_errors <= self._ERRORS_LOGGED_MAX:
            log.error("%s: element error on a %d-byte packet (counted%s): %s: %s", elem.name, len(pkt.data),
                      f" at {dev.name}" if dev is not None else "", type(exc).__name__, exc,
                      exc_info=exc)

    def cleanup(self) -> None:
        for elem in self.elements.values():
            try:
                elem.cleanup()
            except Exception:  # cleanup must reach every element
                log.exception("cleanup of %s failed", elem.name)

    def counters(self) -> Dict[str, Dict[str, int]]:
        out = {n: e.counters() for n, e in self.elements.items() if e.counter_names}
        for source in self.counter_sources:     # the fast path's counts, under the same names
            for name, extra in source().items():
                row = out.setdefault(name, {})
                for k, v in extra.items():
                    mine = row.get(k)
                    if isinstance(v, list) and isinstance(mine, list) and len(v) == len(mine):
                        row[k] = [a + b for a, b in zip(mine, v)]       # per output, e.g. a split's
                    else:
                        row[k] = (mine or 0) + v
        return out

    def element_list(self) -> List[dict]:
        return [{"name": n, "class": type(e).__name__} for n, e in self.elements.items()]
