"""Queue (drop-tail, push in / pull out) and FlowMeter (arrival rate, flow count)."""
from __future__ import annotations

from collections import deque

from ..element import AGNOSTIC, PULL, Arg, ConfigError, Element, parse_bool, register
from ..flow_tally import FlowTally
from ..packet import flow_key
from ..units import parse_nonneg_int, parse_pos_int, parse_time_ns

#: One buffer of a packet-bounded queue as INT advertises it (docs/wire-format.md).
SLOT_BYTES = 1500


@register
class Queue(Element):
    """Drop-tail FIFO: ``Queue(100)`` holds up to 100 packets;
    ``Queue(capacity 100, capacity_bytes 150000)`` also bounds bytes (0: no byte bound).

    Push input, pull output. Downstream pullers (ToDevice, LinkShaper) register a
    listener and are woken when the queue turns non-empty (Click's notifier).
    ``depth_pkts`` / ``depth_bytes`` (frame bytes) are the current occupancy,
    ``drops`` the cumulative tail drops (what INT reports as queue drops), and per flow
    in ``flow_drops`` (a bounded table: int_node.flow_tally).
    INT advertises ``advertised_depth_bytes`` against ``capacity_limit_bytes``.
    ``flow_bytes true`` keeps each flow's frame bytes in the queue (``flow_bytes``, a
    dict by flow key: the exact CBIQ FlowSlots compares its estimate with; off by default,
    it costs two dict updates a packet).
    """
    output_kind = PULL
    ARGS = (Arg("capacity", parse_pos_int, 1000), Arg("capacity_bytes", parse_nonneg_int, 0),
            Arg("flow_bytes", parse_bool, False, positional=False))
    write_handlers = {"capacity": parse_pos_int, "capacity_bytes": parse_nonneg_int}
    counter_names = ("enqueued", "dequeued", "drops", "highwater_pkts")

    def configured(self):
        self._q = deque()
        self.depth_bytes = 0
        self._listeners = []
        self.flow_drops = FlowTally()
        self.flow_bytes = {} if self.flow_bytes else None

    @property
    def depth_pkts(self) -> int:
        return len(self._q)

    @property
    def capacity_limit_bytes(self) -> int:
        """The capacity INT advertises: the byte bound, else packets x SLOT_BYTES."""
        return self.capacity_bytes or self.capacity * SLOT_BYTES

    @property
    def advertised_depth_bytes(self) -> int:
        """The depth INT advertises, in the unit of :attr:`capacity_limit_bytes` so that
        depth <= capacity always. A packet-bounded queue counts one SLOT_BYTES buffer
        per packet, whatever its size (frames with INT headers are ~1,666 B and would
        overfill a 1500 B x N capacity); with both bounds, the fuller one speaks."""
        n = len(self._q)
        if not self.capacity_bytes:
            return n * SLOT_BYTES
        return max(self.depth_bytes, n * self.capacity_bytes // self.capacity)

    def add_listener(self, callback) -> None:
        self._listeners.append(callback)

    def counters(self):
        c = super().counters()
        c["depth_pkts"] = len(self._q)
        c["depth_bytes"] = self.depth_bytes
        c["flow_drops"] = self.flow_drops.top()
        c["flows_evicted"] = self.flow_drops.evicted
        return c

    def push_batch(self, port, batch):
        q = self._q
        owed = False                # the queue went non-empty: the pullers are to be woken
        for pkt in batch:
            try:
                n = len(pkt.data)
                if self._full(n):
                    if owed:
                        # a frame at a time, a puller woken at the first one would have taken
                        # it already: wake it now, so a batch never drops what frames did not
                        owed = False
                        self._wake_pullers()
                    if self._full(n):
                        self.drops += 1
                        self.flow_drops.count(pkt)
                        continue
                # the drops as this packet joins: stamped at dequeue, a count taken then would
                # include drops of packets that arrived after it, and a sink differencing two
                # packets around a gap would put a drop in the wrong gap
                pkt.drops_seen = (self.drops, self.flow_drops.of(pkt))
                pkt.queue = self
            except Exception as exc:
                self.packet_error(pkt, exc)
                continue
            q.append(pkt)
            self.depth_bytes += n
            if self.flow_bytes is not None:
                self._flow_add(pkt, n)
            self.enqueued += 1
            if len(q) > self.highwater_pkts:
                self.highwater_pkts = len(q)
            if len(q) == 1:
                owed = True
        if owed:
            self._wake_pullers()

    def _flow_add(self, pkt, frame_bytes: int) -> None:
        key = pkt.flow_id
        if key is None:
            key = pkt.flow_id = flow_key(pkt.data)
        left = self.flow_bytes.get(key, 0) + frame_bytes
        if left:
            self.flow_bytes[key] = left
        else:
            del self.flow_bytes[key]          # bounded by the packets queued: no flow kept once gone

    def _full(self, frame_bytes: int) -> bool:
        return len(self._q) >= self.capacity or bool(
            self.capacity_bytes and self.depth_bytes + frame_bytes > self.capacity_bytes)

    def _wake_pullers(self):
        for cb in self._listeners:
            cb()

    def pull(self, port):
        q = self._q
        if not q:
            return None
        pkt = q.popleft()
        self.depth_bytes -= len(pkt.data)
        if self.flow_bytes is not None:
            self._flow_add(pkt, -len(pkt.data))
        self.dequeued += 1
        return pkt


def find_upstream_queues(elem):
    """Queues feeding a pull input, through agnostic pull elements (Counter...)."""
    found, todo, seen = [], list(getattr(elem, "_upstream", [])), set()
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, Queue):
            found.append(e)
        elif getattr(e, "resolved_out_kind", None) == PULL:
            todo.extend(getattr(e, "_upstream", []))
    return found


@register
class FlowMeter(Element):
    """Measures what arrives here: packet and bit rate (EWMA over ``interval``
    windows) and the number of flows (5-tuples) seen within ``flow_timeout``.
    INTTransit reads ``arrival_rate_pps`` and ``flow_count`` from it."""
    input_kind = output_kind = AGNOSTIC
    ARGS = (Arg("interval", parse_time_ns, 10_000_000), Arg("flow_timeout", parse_time_ns, 1_000_000_000),
            Arg("alpha", float, 0.25))
    counter_names = ("packets",)

    def configured(self):
        if not 0 < self.alpha <= 1:
            raise ConfigError("FlowMeter: alpha must be in (0, 1]")
        self.arrival_rate_pps = 0.0
        self.arrival_rate_bps = 0.0
        self._win_start = 0
        self._win_pkts = 0
        self._win_bytes = 0
        self._flows = {}
        self._flow_purge_at = 0
        self.flow_count = 0

    def counters(self):
        c = super().counters()
        c.update(arrival_rate_pps=int(self.arrival_rate_pps), flow_count=self.flow_count)
        return c

    def _account(self, pkt):
        now = pkt.rx_ns
        self.packets += 1
        elapsed = now - self._win_start
        if elapsed >= self.interval:
            if self._win_start:
                a = self.alpha
                # Idle windows decay the estimate as if they had been measured.
                windows = min(elapsed // self.interval, 50)
                pps = self._win_pkts * 1e9 / elapsed
                bps = self._win_bytes * 8e9 / elapsed
                keep = (1 - a) ** windows
                self.arrival_rate_pps = self.arrival_rate_pps * keep + pps * (1 - keep)
                self.arrival_rate_bps = self.arrival_rate_bps * keep + bps * (1 - keep)
            self._win_start, self._win_pkts, self._win_bytes = now, 0, 0
        self._win_pkts += 1
        self._win_bytes += len(pkt.data)
        key = pkt.flow_id
        if key is None:
            key = pkt.flow_id = flow_key(pkt.data)
        self._flows[key] = now
        if now >= self._flow_purge_at:
            cutoff = now - self.flow_timeout
            self._flows = {k: t for k, t in self._flows.items() if t >= cutoff}
            self.flow_count = len(self._flows)
            self._flow_purge_at = now + self.flow_timeout // 10
        elif len(self._flows) > self.flow_count:
            self.flow_count = len(self._flows)

    def push_batch(self, port, batch):
        self.apply_each(batch, self._account)

    def pull(self, port):
        up = self._in[0]
        pkt = up[0].pull(up[1])
        if pkt is not None:
            self._account(pkt)
        return pkt


@register
class Unqueue(Element):
    """Pulls packets from a Queue as soon as they arrive and pushes them on
    (Click's Unqueue): the link-emulation chain without a rate limit."""
    input_kind = PULL
    output_kind = "push"
    ARGS = (Arg("burst", parse_pos_int, 64),)
    counter_names = ("packets",)

    def initialize(self):
        queues = find_upstream_queues(self)
        if not queues:
            raise ConfigError(f"{self.name}: Unqueue needs a Queue upstream")
        for q in queues:
            q.add_listener(self._wake)
        self._task = self.router.loop.timer(self._drain)

    def _wake(self):
        if not self._task.scheduled:
            self._drain()

    def _drain(self):
        pull, port = self._in[0]
        batch = []
        for _ in range(self.burst):
            pkt = pull.pull(port)
            if pkt is None:
                break
            batch.append(pkt)
        else:
            self._task.schedule_at(0)
        if batch:
            self.packets += len(batch)
            self.output_batch(0, batch)
