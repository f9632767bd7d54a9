"""Element base class, modelled on the Click modular router.

An element does one packet operation. It has numbered input and output ports;
each port is *push* (the upstream element calls ``push``) or *pull* (the
downstream element calls ``pull``). ``agnostic`` ports take the kind of the port
they are connected to. Configuration comes from a Click-style argument string,
parsed into positional and keyword arguments (``Queue(100)``,
``INTTransit(node_id 2, queue q)``).

Every element exposes its counters (``counters()``) and named handlers that can
be read and written at run time (``read_handler`` / ``write_handler``), which is
how the control socket and the testbed change link parameters live.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

PUSH = "push"
PULL = "pull"
AGNOSTIC = "agnostic"

#: name -> Element subclass, filled by :func:`register`.
REGISTRY: Dict[str, type] = {}


def register(cls):
    """Class decorator: make an element class usable from configurations."""
    REGISTRY[cls.__name__] = cls
    return cls


class ConfigError(ValueError):
    """A configuration problem; the message names the element and the problem."""


_REQUIRED = object()
_KEYWORD_RE = re.compile(r"^[a-z_][a-z0-9_]*$")


class Arg:
    """One declared element argument: name, converter, default."""

    def __init__(self, name: str, conv: Callable[[str], Any] = str,
                 default: Any = _REQUIRED, positional: bool = True, doc: str = ""):
        self.name, self.conv, self.default = name, conv, default
        self.positional, self.doc = positional, doc

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


def parse_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


class Element:
    #: (min, max) number of ports; max None means unbounded.
    n_inputs: Tuple[int, Optional[int]] = (1, 1)
    n_outputs: Tuple[int, Optional[int]] = (1, 1)
    input_kind = PUSH
    output_kind = PUSH
    #: Names of counters reported by counters(); each is an int attribute.
    counter_names: Tuple[str, ...] = ()
    #: Writable run-time parameters: handler name -> converter from string.
    write_handlers: Dict[str, Callable[[str], Any]] = {}

    def __init__(self, name: str):
        self.name = name
        self.router = None
        # Filled by the router: output port -> (element, input port)
        self._out: List[Optional[Tuple["Element", int]]] = []
        self._in: List[Optional[Tuple["Element", int]]] = []
        self.n_in = 0
        self.n_out = 0
        for c in self.counter_names:
            setattr(self, c, 0)

    #: Declared arguments, in positional order (see :class:`Arg`).
    ARGS: Tuple["Arg", ...] = ()

    # -- configuration -------------------------------------------------
    def configure(self, raw_args: List[str]) -> None:
        """Bind the comma-separated argument strings to ``ARGS``.

        An argument ``name value`` whose first word names a declared argument is
        a keyword argument; anything else fills the next positional slot. Every
        value is converted by its Arg's converter; errors name the argument.
        """
        cls = type(self).__name__
        by_name = {a.name: a for a in self.ARGS}
        values: Dict[str, Any] = {}
        positional = [a for a in self.ARGS if a.positional]
        pos_i = 0
        known = ", ".join(a.name for a in self.ARGS) or "none"
        for raw in raw_args:
            words = raw.split(None, 1)
            # "nodeid 1" is most likely a misspelt keyword, not a positional value
            unknown_kw = words[0] if len(words) == 2 and _KEYWORD_RE.match(words[0]) \
                and words[0] not in by_name else None
            if len(words) == 2 and words[0] in by_name:
                arg, text = by_name[words[0]], words[1]
                if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
                    text = text[1:-1]   # a quoted value: name "mqtt://host:1883"
            elif len(words) == 1 and words[0] in by_name and by_name[words[0]].conv is parse_bool:
                arg, text = by_name[words[0]], "true"
            else:
                while pos_i < len(positional) and positional[pos_i].name in values:
                    pos_i += 1
                if pos_i >= len(positional):
                    what = f"unknown argument '{unknown_kw}'" if unknown_kw else f"unexpected argument {raw!r}"
                    raise ConfigError(f"{cls}: {what} (arguments: {known})")
                arg, text = positional[pos_i], raw
            if arg.name in values:
                raise ConfigError(f"{cls}: argument '{arg.name}' given twice")
            try:
                values[arg.name] = arg.conv(text.strip())
            except (TypeError, ValueError) as exc:
                if unknown_kw:
                    raise ConfigError(f"{cls}: unknown argument '{unknown_kw}' (arguments: {known})") from None
                raise ConfigError(f"{cls}: bad value {text!r} for '{arg.name}': {exc}") from None
        for arg in self.ARGS:
            if arg.name not in values:
                if arg.required:
                    raise ConfigError(f"{cls}: missing required argument '{arg.name}'")
                values[arg.name] = arg.default
            setattr(self, arg.name, values[arg.name])
        self.configured()

    def configured(self) -> None:
        """Hook after arguments are bound: validate and derive state here."""

    def initialize(self) -> None:
        """Called once the graph is connected, before the loop runs."""

    def cleanup(self) -> None:
        """Called on shutdown; close sockets and files here."""

    # -- packet flow ---------------------------------------------------
    # An element implements push (one packet) or push_batch (a list of them, FastClick's
    # batching: one call per element per batch, not per packet), and gets the other from
    # here. A device reads a batch and pushes it whole; elements on the hot path take it
    # whole and pass their outputs on as batches (output_batch).
    def push(self, port: int, pkt) -> None:
        if type(self).push_batch is Element.push_batch:
            raise NotImplementedError(f"{type(self).__name__} has no push input")
        self.push_batch(port, [pkt])

    def push_batch(self, port: int, batch: list) -> None:
        """Each packet of ``batch`` in order. A packet that raises is counted
        (packet_error) and the others go on; a push_batch of an element's own does the
        same for its packets."""
        push = self.push
        for pkt in batch:
            try:
                push(port, pkt)
            except Exception as exc:    # one bad packet must never take the others down
                self.packet_error(pkt, exc)

    def apply_each(self, batch: list, action, port: int = 0) -> None:
        """``action(pkt)`` on each packet of ``batch`` (Click's simple action), then the batch
        on to output ``port``, less the packets that raised (counted: packet_error)."""
        passed = []
        for pkt in batch:
            try:
                action(pkt)
            except Exception as exc:
                self.packet_error(pkt, exc)
                continue
            passed.append(pkt)
        if passed:
            self.output_batch(port, passed)

    def output_batch(self, port: int, batch: list) -> None:
        peer = self._out[port]
        peer[0].push_batch(peer[1], batch)

    def packet_error(self, pkt, exc: BaseException) -> None:
        """A packet this element (or one after it) raised on: counted at the device it came
        in on, and logged (Router.packet_error); the packet goes no further."""
        self.router.packet_error(self, pkt, exc)

    def pull(self, port: int):
        raise NotImplementedError(f"{type(self).__name__} has no pull output")

    def output(self, port: int) -> Tuple["Element", int]:
        return self._out[port]

    # -- introspection -------------------------------------------------
    def counters(self) -> Dict[str, int]:
        return {c: getattr(self, c) for c in self.counter_names}

    def read_handler(self, handler: str) -> Any:
        if handler == "counters":
            return self.counters()
        if handler in self.write_handlers or hasattr(self, handler):
            return getattr(self, handler)
        raise ConfigError(f"{self.name}: no handler '{handler}'")

    def write_handler(self, handler: str, value: str) -> None:
        conv = self.write_handlers.get(handler)
        if conv is None:
            raise ConfigError(
                f"{self.name}: '{handler}' is not writable "
                f"(writable: {', '.join(sorted(self.write_handlers)) or 'none'})")
        before = getattr(self, handler, None)
        try:
            setattr(self, handler, conv(value))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{self.name}.{handler}: bad value {value!r}: {exc}") from exc
        try:       # what else runs this element (the fast path) takes the value, or refuses it
            for listener in getattr(getattr(self, "router", None), "write_listeners", ()):
                listener(self, handler)
        except ConfigError:
            setattr(self, handler, before)
            raise
        self.handler_changed(handler)

    def handler_changed(self, handler: str) -> None:
        """Hook for elements that derive state from a writable parameter."""

    def __repr__(self):
        return f"{self.name} :: {type(self).__name__}"
