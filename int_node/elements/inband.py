"""In-band telemetry elements: INTSource, INTTransit, INTSink.

    INTSource(max_hops 2, egress out1)          adds the trace + E2E headers
    INTTransit(node_id 1, queue q, meter m, link wl, channel wl, egress out1)
                                                 fills this node's trace slot
    INTSink(exporter jsonl:/tmp/int.jsonl)       strips both, exports the data

Malformed IOAM never crashes a node: INTTransit forwards such packets untouched,
INTSink drops the ones it cannot restore; both count them.
"""
from __future__ import annotations

import logging
import time

from .. import ioam
from ..element import Arg, ConfigError, Element, register
from ..exporters import make_exporter
from ..packet import (IP6_HLIM_OFF, IP6_NH_OFF, IP6_PAYLOAD_OFF, NH_HOPOPTS, flow_key,
                      is_ipv6_frame)
from ..units import parse_nonneg_int, parse_pos_int
from .devices import STATS_EVERY_NS, FromDevice, ToDevice
from .queues import FlowMeter, Queue
from .rtt import FlowRTT

log = logging.getLogger("intcc.node")

_FLOWS_MAX = 1 << 16
_DEFAULT_TRACE_TYPE = ioam.INTCC_TRACE_TYPE.to_bytes(3, "big")   # as ioam.trace_is_default


def _check_namespace(ns: int, who: str) -> None:
    # RFC 9197 §7.3: 0x0000 is the default namespace, 0x0001-0x7FFF are IANA's to assign,
    # 0x8000-0xFFFF are for private use
    if ns != 0 and not 0x8000 <= ns <= 0xFFFF:
        raise ConfigError(f"{who}: namespace_id 0x{ns:04X} is not 0 (default) nor in the private-use range "
                          f"0x8000-0xFFFF (0x0001-0x7FFF are assigned by IANA)")


@register
class INTSource(Element):
    """Adds a pre-allocated IOAM trace for ``max_hops`` nodes and an E2E option
    with a per-flow 32-bit sequence number. Packets that already carry a
    Hop-by-Hop header, or would exceed the ``egress`` interface MTU with the
    headers, are forwarded without INT and counted."""
    ARGS = (Arg("max_hops", parse_pos_int, 2), Arg("namespace_id", parse_nonneg_int, ioam.DEFAULT_NAMESPACE),
            Arg("egress", str, None), Arg("mtu", parse_pos_int, None))
    counter_names = ("inserted", "skipped_has_hbh", "skipped_mtu", "skipped_not_ipv6", "flows_reset")

    def configured(self):
        if self.max_hops > ioam.MAX_HOPS:
            raise ConfigError(f"INTSource: max_hops is at most {ioam.MAX_HOPS} (IOAM option length is one byte)")
        _check_namespace(self.namespace_id, "INTSource")
        self._inserter = ioam.Inserter(self.max_hops, self.namespace_id)
        self.overhead_bytes = self._inserter.size
        self._seq = {}

    def initialize(self):
        # The egress MTU is read lazily: the ToDevice may initialize after us.
        self._egress = self.router.find(self.egress, ToDevice, self.name) if self.egress else None

    def _limit(self):
        if self.mtu:
            return self.mtu
        limit = getattr(self._egress, "mtu", None) if self._egress is not None else None
        if limit is not None:
            self._limit = lambda: limit     # known now: no lookup per packet
        return limit

    def push_batch(self, port, batch):
        self.apply_each(batch, self._insert)

    def _insert(self, pkt):
        """INT into the packet; without it (not IPv6, a Hop-by-Hop header already, too big
        for the egress MTU) it goes on as it is."""
        data = pkt.data
        if not is_ipv6_frame(data):
            self.skipped_not_ipv6 += 1
            return
        if data[IP6_NH_OFF] == NH_HOPOPTS:
            self.skipped_has_hbh += 1
            return
        limit = self._limit()
        if limit is not None and len(data) - 14 + self.overhead_bytes > limit:
            self.skipped_mtu += 1
            return
        key = pkt.flow_id
        if key is None:
            key = pkt.flow_id = flow_key(data)
        seq = self._seq.get(key, 0)
        if seq == 0 and len(self._seq) >= _FLOWS_MAX:
            self._seq.clear()
            self.flows_reset += 1
        self._seq[key] = (seq + 1) & 0xFFFFFFFF
        self._inserter.insert(data, seq, time.time_ns())
        self.inserted += 1


def _trace_offset(d):
    """Offset of the trace header; None without INT. Raises IOAMError if malformed.
    The fast path recognises the layout INTSource writes at fixed offsets."""
    if len(d) > 70 and d[IP6_NH_OFF] == NH_HOPOPTS and d[58] == ioam.OPT_IOAM_HBH \
            and d[56] == ioam.OPT_PADN and d[57] == 0 and d[61] == ioam.IOAM_PREALLOC_TRACE:
        hbh_end = IP6_PAYLOAD_OFF + (d[55] + 1) * 8
        opt_len = d[59]
        if hbh_end <= len(d) and 60 + opt_len <= hbh_end and opt_len >= 10 \
                and not (opt_len - 10) & 3 and (d[65] & 0x7F) * 4 <= opt_len - 10:
            return 62
    return ioam.find_trace(d)


@register
class INTTransit(Element):
    """Stamps this node's slot. Place it after the egress Queue/LinkShaper so the
    queue depth and transit delay are those the packet saw on the way out.
    References: ``queue`` (a Queue, or a DRR over several: then each packet's own
    queue), ``meter`` (a FlowMeter), ``link`` (any element with a ``link_losses``
    counter), ``channel`` (a WirelessChannel),
    ``shaper`` (a LinkShaper: a wired port's rate goes in the data-rate field, as a
    switch knows its port speed; a channel's rate wins), ``egress`` (the ToDevice, for
    the egress interface id), ``reconfig`` (a Reconfigure before the port: its schedule in
    the hop, and whether the packet took the circuit, i.e. came through ``queue`` where that
    is the circuit's)."""
    ARGS = (Arg("node_id", parse_nonneg_int), Arg("queue", str, None), Arg("meter", str, None),
            Arg("link", str, None), Arg("channel", str, None), Arg("egress", str, None),
            Arg("shaper", str, None), Arg("namespace_id", parse_nonneg_int, ioam.DEFAULT_NAMESPACE),
            Arg("reconfig", str, None))
    counter_names = ("stamped", "overflow", "no_int", "malformed", "unsupported_trace", "foreign_namespace")

    def configured(self):
        if self.node_id >= 1 << 24:
            raise ConfigError("INTTransit: node_id must fit in 24 bits")
        _check_namespace(self.namespace_id, "INTTransit")
        self._ns_bytes = self.namespace_id.to_bytes(2, "big")

    def initialize(self):
        r, me = self.router, self.name
        self._queue = r.find(self.queue, None, me) if self.queue else None
        # a scheduler over several queues (DRR): each packet's own queue is reported
        self._per_packet_queue = self._queue is not None and not isinstance(self._queue, Queue)
        if self._per_packet_queue and not hasattr(self._queue, "n_in"):
            raise ConfigError(f"{me}: '{self.queue}' is a {type(self._queue).__name__}, expected a Queue or a "
                              "scheduler over queues (DRR)")
        # each queue's index among the scheduler's inputs, stamped with their count and its weight
        self._queue_index = ({up: j for j, (up, _) in enumerate(self._queue._in)} if self._per_packet_queue
                             else {self._queue: 0} if self._queue is not None else {})
        self._queue_count = len(self._queue_index)
        self._meter = r.find(self.meter, FlowMeter, me) if self.meter else None
        self._link = r.find(self.link, None, me) if self.link else None
        if self._link is not None and not hasattr(self._link, "link_losses"):
            raise ConfigError(f"{me}: '{self.link}' has no link_losses counter")
        # its losses per flow, when it keeps them (RandomLoss, WirelessChannel)
        self._flow_losses = getattr(self._link, "flow_losses", None)
        self._channel = r.find(self.channel, None, me) if self.channel else None
        if self._channel is not None and not hasattr(self._channel, "rssi_dbm"):
            raise ConfigError(f"{me}: '{self.channel}' is not a WirelessChannel")
        self._reconfig = r.find(self.reconfig, None, me) if self.reconfig else None
        if self._reconfig is not None and not hasattr(self._reconfig, "announce"):
            raise ConfigError(f"{me}: '{self.reconfig}' is not a Reconfigure")
        self._on_circuit = self._reconfig is not None and self._reconfig.circuit_queue() is self._queue
        self._shaper = r.find(self.shaper, None, me) if self.shaper else None
        if self._shaper is not None and not hasattr(self._shaper, "rate"):
            raise ConfigError(f"{me}: '{self.shaper}' is not a LinkShaper")
        self._egress_if = 0
        if self.egress:
            self._egress_dev = r.find(self.egress, ToDevice, me)
        # the node's receive drops: every device's kernel ring, whichever way the flow came in
        self._rx_devices = tuple(e for e in r.elements.values() if isinstance(e, FromDevice))
        self._rx_drops, self._rx_drops_until_ns = 0, 0

    def push_batch(self, port, batch):
        # every packet goes on, stamped or not (malformed INT untouched), but one that raised
        self.apply_each(batch, self._stamp)

    def _stamp(self, pkt):
        d = pkt.data
        try:
            off = _trace_offset(d)
        except ioam.IOAMError:
            self.malformed += 1
            return
        if off is None:
            self.no_int += 1
        elif d[off:off + 2] != self._ns_bytes:   # another IOAM domain's trace: not ours to fill
            self.foreign_namespace += 1
        elif d[off + 2] >> 3 != ioam.NODE_LEN_WORDS or d[off + 4:off + 7] != _DEFAULT_TRACE_TYPE:
            self.unsupported_trace += 1
        else:
            now = time.time_ns()
            q, m, ch = (pkt.queue if self._per_packet_queue else self._queue), self._meter, self._channel
            link = self._link
            rate_kbps = ch.data_rate_kbps if ch else (int(self._shaper.rate // 1000) if self._shaper else 0)
            flow_losses = self._flow_losses
            if q is None:
                drops = flow_drops = q_index = q_weight = 0
            else:   # as the packet entered the queue (Queue.push), else as it is now
                drops, flow_drops = pkt.drops_seen or (q.drops, q.flow_drops.of(pkt))
                q_index = self._queue_index.get(q, 0xFF)        # 0xFF: a queue not in the scheduler
                q_weight = self._queue._weights[q_index] if self._per_packet_queue and q_index != 0xFF else 1
            if self.egress and not self._egress_if:
                self._egress_if = getattr(self._egress_dev, "ifindex", 0) or 0
            # RFC 9197: the timestamp is when the node received the packet; the time it
            # spent here (queue included) is the transit delay, measured at egress.
            ok = ioam.stamp_default(
                d, off, d[IP6_HLIM_OFF], self.node_id, pkt.in_port, self._egress_if, pkt.rx_ns,
                now - pkt.rx_ns,
                q.advertised_depth_bytes if q else 0, len(q._q) if q else 0,
                ch.rssi_int if ch else -128, ch.mcs if ch else 0xFF, m.flow_count if m else 0,
                rate_kbps, drops,
                link.link_losses if link else 0, int(m.arrival_rate_pps) if m else 0,
                q.capacity_limit_bytes if q else 0, self._node_rx_drops(now),
                flow_drops, flow_losses.of(pkt) if flow_losses else 0, q_index, self._queue_count, q_weight,
                self._reconfig.announce(d, self._on_circuit) if self._reconfig is not None else None)
            if ok:
                self.stamped += 1
            else:
                self.overflow += 1

    def _node_rx_drops(self, now_ns: int) -> int:
        # the devices refresh their kernel counts every 100 ms: sum them as often, not per packet
        if now_ns >= self._rx_drops_until_ns:
            self._rx_drops = sum(dev.kernel_drops for dev in self._rx_devices)
            self._rx_drops_until_ns = now_ns + STATS_EVERY_NS
        return self._rx_drops


@register
class INTSink(Element):
    """Removes the INT headers, restoring the original packet exactly, and hands
    the telemetry to an exporter (``exporter jsonl:PATH``; default ``none``).
    Packets without INT pass untouched (``no_int``); packets whose headers are
    inconsistent are dropped (``malformed``). ``rtt NAME``: the node's FlowRTT table,
    whose per-flow round trips the exporter publishes with each flow (the MQTT sink's
    hop records: a sender reads its competitors' RTTs, which its own ACKs cannot tell)."""
    ARGS = (Arg("exporter", str, "none"), Arg("rtt", str, ""))
    counter_names = ("stripped", "no_int", "malformed")

    def initialize(self):
        try:
            self._exporter = make_exporter(self.exporter)
        except (ValueError, OSError) as exc:
            raise ConfigError(f"{self.name}: {exc}") from None
        if self.rtt:
            self._exporter.use_flow_rtt(self.router.find(self.rtt, FlowRTT, user=f"INTSink {self.name}").rtt_us)

    def counters(self):
        c = super().counters()
        if hasattr(self, "_exporter"):
            c.update(self._exporter.counters())
        return c

    def push(self, port, pkt):
        d = pkt.data
        if len(d) <= IP6_PAYLOAD_OFF or d[IP6_NH_OFF] != NH_HOPOPTS:
            self.no_int += 1
            out = self._out[0]
            out[0].push(out[1], pkt)
            return
        try:
            s = ioam.strip_int(d) if ioam.find_trace(d) is not None else None
        except ioam.IOAMError:
            self.malformed += 1
            return
        if s is None:   # a Hop-by-Hop header without an IOAM trace: not ours
            self.no_int += 1
            out = self._out[0]
            out[0].push(out[1], pkt)
            return
        pkt.data = s.frame
        self.stripped += 1
        key = pkt.flow_id
        if key is None:
            key = pkt.flow_id = flow_key(s.frame)
        now = time.time_ns()
        out = self._out[0]
        out[0].push(out[1], pkt)    # forward first: exporting is off the latency path
        self._exporter.export(key, s.trace_raw, s.e2e_raw, now)

    def cleanup(self):
        if hasattr(self, "_exporter"):
            self._exporter.close()
