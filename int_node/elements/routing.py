"""Forwarding: IPv6Lookup (longest prefix match), DecHopLimit, EtherRewrite."""
from __future__ import annotations

import ipaddress

from ..element import Arg, ConfigError, Element, register
from ..packet import IP6_DST_OFF, IP6_HLIM_OFF
from ..units import parse_mac


@register
class IPv6Lookup(Element):
    """Longest-prefix match on the destination address: ``IPv6Lookup(2001:db8:1::/64 0,
    2001:db8:2::/64 1, ::/0 1)`` - one ``prefix port`` per route. Packets with
    no route are dropped and counted (``no_route``). Results are cached per
    destination, so the per-packet cost is one dict lookup."""
    n_outputs = (1, None)
    counter_names = ("no_route",)
    _CACHE_MAX = 65536

    def configure(self, raw_args):
        routes = []
        for raw in raw_args:
            words = raw.split()
            if len(words) != 2:
                raise ConfigError(f"IPv6Lookup: route {raw!r} must be 'PREFIX PORT'")
            try:
                net = ipaddress.IPv6Network(words[0], strict=False)
                port = int(words[1])
            except ValueError as exc:
                raise ConfigError(f"IPv6Lookup: bad route {raw!r}: {exc}") from None
            if port < 0:
                raise ConfigError(f"IPv6Lookup: bad port in {raw!r}")
            routes.append((net, port))
        if not routes:
            raise ConfigError("IPv6Lookup needs at least one route")
        routes.sort(key=lambda r: -r[0].prefixlen)
        self.routes = routes
        n = max(p for _, p in routes) + 1
        self.n_outputs = (n, n)
        self._cache = {}

    def lookup(self, dst: bytes):
        addr = ipaddress.IPv6Address(dst)
        for net, port in self.routes:
            if addr in net:
                return port
        return None

    def push_batch(self, port, batch):
        cache = self._cache
        outs = {}
        for pkt in batch:
            try:
                dst = bytes(pkt.data[IP6_DST_OFF:IP6_DST_OFF + 16])
                out = cache.get(dst, -1)
                if out == -1:
                    out = self.lookup(dst)
                    if len(cache) >= self._CACHE_MAX:
                        cache.clear()
                    cache[dst] = out
                if out is None:
                    self.no_route += 1
                    continue
            except Exception as exc:
                self.packet_error(pkt, exc)
                continue
            outs.setdefault(out, []).append(pkt)
        for out, pkts in outs.items():
            self.output_batch(out, pkts)


@register
class DecHopLimit(Element):
    """Decrements the IPv6 hop limit; packets whose limit would reach 0 are
    dropped and counted (``expired``)."""
    counter_names = ("expired",)

    def push_batch(self, port, batch):
        keep = []
        for pkt in batch:
            data = pkt.data
            try:
                hl = data[IP6_HLIM_OFF]
            except IndexError as exc:
                self.packet_error(pkt, exc)
                continue
            if hl <= 1:
                self.expired += 1
                continue
            data[IP6_HLIM_OFF] = hl - 1
            keep.append(pkt)
        if keep:
            self.output_batch(0, keep)


@register
class EtherRewrite(Element):
    """Sets source and destination MAC: ``EtherRewrite(src MAC, dst MAC)``."""
    ARGS = (Arg("src", parse_mac), Arg("dst", parse_mac))

    def configured(self):
        self._hdr = self.dst + self.src

    def push_batch(self, port, batch):
        hdr = self._hdr
        for pkt in batch:
            pkt.data[0:12] = hdr       # a frame shorter than 12 bytes grows: never raises
        self.output_batch(0, batch)
