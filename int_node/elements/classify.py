"""Classification: Classifier (by protocol) and EtherFilter (by destination MAC)."""
from __future__ import annotations

from ..element import Arg, ConfigError, Element, register
from ..packet import IP6_NH_OFF, NH_ICMPV6, NH_TCP, NH_UDP, is_ipv6_frame, upper_layer
from ..units import parse_mac

_PATTERNS = ("ipv6", "tcp", "udp", "icmpv6", "-")
_ANY_IPV6 = -1
_WANTED = {"ipv6": _ANY_IPV6, "tcp": NH_TCP, "udp": NH_UDP, "icmpv6": NH_ICMPV6}
_UPPER = frozenset((NH_TCP, NH_UDP, NH_ICMPV6))


@register
class Classifier(Element):
    """Sends each packet to the output of the first pattern it matches.

    Patterns: ``ipv6`` (a well-formed IPv6 frame), ``tcp``, ``udp``, ``icmpv6``
    (IPv6 with that upper layer after any extension headers) and ``-`` (anything).
    ``Classifier(tcp, udp, -)`` has three outputs. A packet that matches no
    pattern is dropped and counted in ``unmatched``.
    """
    n_outputs = (1, None)
    counter_names = ("unmatched", "malformed")

    def configure(self, raw_args):
        if not raw_args:
            raise ConfigError("Classifier needs at least one pattern")
        for p in raw_args:
            if p not in _PATTERNS:
                raise ConfigError(f"Classifier: unknown pattern {p!r} (use {', '.join(_PATTERNS)})")
        self.patterns = list(raw_args)
        # per pattern: None matches anything, _ANY_IPV6 any well-formed IPv6, else the protocol
        self._wanted = [None if p == "-" else _WANTED[p] for p in raw_args]
        self.n_outputs = (len(raw_args), len(raw_args))
        self.matched = [0] * len(raw_args)

    def counters(self):
        c = super().counters()
        for i, p in enumerate(self.patterns):
            c[f"out{i}_{p}"] = self.matched[i]
        return c

    def push_batch(self, port, batch):
        wanted, matched = self._wanted, self.matched
        outs = [[] for _ in wanted]
        for pkt in batch:
            try:
                data = pkt.data
                proto = None
                if is_ipv6_frame(data):
                    nh = data[IP6_NH_OFF]
                    # no extension header (the common case): no chain to walk
                    proto = nh if nh in _UPPER else upper_layer(data)[0]
                    if proto is None:
                        self.malformed += 1
                for i, want in enumerate(wanted):
                    if want is None or (proto is not None and (want == _ANY_IPV6 or want == proto)):
                        matched[i] += 1
                        outs[i].append(pkt)
                        break
                else:
                    self.unmatched += 1
            except Exception as exc:
                self.packet_error(pkt, exc)
        for i, out in enumerate(outs):
            if out:
                self.output_batch(i, out)


@register
class EtherFilter(Element):
    """Passes frames addressed to ``mac`` on output 0; others go to output 1 if
    connected, else are dropped and counted (``other_dst``). A router's kernel
    sees the same frames; multicast (neighbour discovery) is left to it."""
    n_outputs = (1, 2)
    ARGS = (Arg("mac", parse_mac),)
    counter_names = ("passed", "other_dst")

    def push_batch(self, port, batch):
        mac = self.mac
        mine = [pkt for pkt in batch if pkt.data[:6] == mac]
        self.passed += len(mine)
        if len(mine) < len(batch):
            self.other_dst += len(batch) - len(mine)
            if self.n_out > 1:
                # both lists in arrival order; ours first (the node's traffic)
                others = [pkt for pkt in batch if pkt.data[:6] != mac]
                if mine:
                    self.output_batch(0, mine)
                self.output_batch(1, others)
                return
        if mine:
            self.output_batch(0, mine)
