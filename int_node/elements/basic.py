"""Small utility elements: Counter, Discard, Tee; NoteTap, the base of the taps that note
packets in a table element (SlotTap, RTTTap)."""
from __future__ import annotations

import operator
import struct
import time

from ..element import AGNOSTIC, Element, register
from ..packet import Packet

_RX_NS = operator.attrgetter("rx_ns")


class NoteTap(Element):
    """Hands each packet passing here to ``self._noter(pkt, now_ns)`` (the subclass sets it:
    its table's note) and passes it on, push or pull; a truncated header is counted
    (``errors``), the packet still forwarded."""
    input_kind = output_kind = AGNOSTIC
    counter_names = ("errors",)
    _noter = None
    #: a subclass's table may take pushed batches whole: ``_batch_noter(pairs)`` with
    #: (packet, ns) pairs, returning how many were truncated. Those packets are noted at
    #: their arrival (FromDevice's kernel timestamp), not at a clock read here: at a node's
    #: ingress that is closer to the wire, and no call per packet
    _batch_noter = None

    def configured(self):
        self.clock = time.time_ns

    def _note(self, pkt):
        try:
            self._noter(pkt, self.clock())
        except (IndexError, struct.error):
            self.errors += 1

    def push_batch(self, port, batch):
        if self._batch_noter is not None:
            self.errors += self._batch_noter(zip(batch, map(_RX_NS, batch)))
        else:
            note = self._note
            for pkt in batch:
                note(pkt)
        self.output_batch(0, batch)

    def pull(self, port):
        up = self._in[0]
        pkt = up[0].pull(up[1])
        if pkt is not None:
            self._note(pkt)
        return pkt


@register
class Counter(Element):
    """Counts packets and bytes passing through; push or pull."""
    input_kind = output_kind = AGNOSTIC
    counter_names = ("packets", "bytes")

    def push(self, port, pkt):
        self.packets += 1
        self.bytes += len(pkt.data)
        peer = self._out[0]
        peer[0].push(peer[1], pkt)

    def pull(self, port):
        up = self._in[0]
        pkt = up[0].pull(up[1])
        if pkt is not None:
            self.packets += 1
            self.bytes += len(pkt.data)
        return pkt


@register
class Discard(Element):
    """Drops every packet, counting them."""
    n_outputs = (0, 0)
    counter_names = ("dropped",)

    def push(self, port, pkt):
        self.dropped += 1

    def push_batch(self, port, batch):
        self.dropped += len(batch)


@register
class Tee(Element):
    """Copies each packet to every output (output 0 gets the original)."""
    n_outputs = (1, None)
    counter_names = ("packets",)

    def push(self, port, pkt):
        self.packets += 1
        copies = [Packet(bytearray(pkt.data), pkt.rx_ns, pkt.in_port) for _ in range(self.n_out - 1)]
        self._out[0][0].push(self._out[0][1], pkt)    # the original goes first (latency)
        for i, dup in enumerate(copies, 1):
            self._out[i][0].push(self._out[i][1], dup)


@register
class Idle(Element):
    """Never emits a packet (Click's Idle): feeds an input that tests or
    benchmarks drive directly, or keeps an unused port connected."""
    n_inputs = (0, 0)
    n_outputs = (0, None)
