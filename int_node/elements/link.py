"""Link emulation: LinkShaper (serialisation at a rate), Delay (propagation),
RandomLoss (Bernoulli loss). Together with Queue they make an emulated link:
``Queue(100) -> LinkShaper(10Mbps) -> RandomLoss(0.05) -> Delay(10ms) -> ToDevice(eth1)``.
"""
from __future__ import annotations

import time
from collections import deque

from ..element import PULL, PUSH, Arg, ConfigError, Element, register
from ..flow_tally import FlowTally
from ..loss_draws import PacketKeyedDraws
from ..units import parse_fraction, parse_nonneg_int, parse_rate_bps, parse_time_ns
from .queues import find_upstream_queues


#: a packet due in further ahead of the loop's clock than this (a wall clock stepped back
#: under its arrival stamp) is taken as due now
MAX_AHEAD_NS = 10_000_000


def due_in_ns(pkt, now_ns: int) -> int:
    """When the emulated link had ``pkt`` due at this element, monotonic ns: the link before
    it set that (Packet.due_ns), else it is the packet's arrival at the node (the kernel's
    timestamp, on the wall clock: read beside the monotonic one, a slewed clock moves it not).
    A node's loop that got round to the packet late does not make the link longer."""
    due = pkt.due_ns or pkt.rx_ns - (time.time_ns() - now_ns)
    return now_ns if due > now_ns + MAX_AHEAD_NS else due


def _positive_rate(text: str) -> float:
    rate = parse_rate_bps(text)
    if rate <= 0:
        raise ValueError("rate must be > 0")
    return rate


@register
class LinkShaper(Element):
    """Sends packets pulled from its input at ``rate`` (bit/s), one at a time,
    each released when its last bit would have left: ``LinkShaper(10Mbps)``.
    Counts the Ethernet frame (header + IPv6 packet) plus ``overhead_bytes``.

    Pull input, push output. A packet's serialisation starts when it was due in (due_in_ns)
    or the link was free; it leaves stamped with its last bit's time (Packet.due_ns), where
    the Delay after it starts. Timer lateness is absorbed up to ``catchup``
    (back-to-back packets keep the nominal rate); packets due within 50 us go
    out in the same wakeup, so high rates do not need a timer per packet.
    ``late_us_max``: the most a packet left after its last bit was due;
    ``behind_us_total``: link time given up because the node woke more than
    ``catchup`` late with a packet waiting (from when the link was due or the packet came,
    whichever was later: the link ran below ``rate`` by that much).
    """
    input_kind = PULL
    output_kind = PUSH
    ARGS = (Arg("rate", _positive_rate), Arg("overhead_bytes", parse_nonneg_int, 0),
            Arg("catchup", parse_time_ns, 2_000_000))
    write_handlers = {"rate": _positive_rate}
    counter_names = ("packets", "bytes", "late_us_max", "behind_us_total")
    _BATCH_NS = 50_000

    def initialize(self):
        self.busy_until_ns = 0
        self._inflight = None
        self._timer = self.router.loop.timer(self._on_timer)
        queues = find_upstream_queues(self)
        if not queues:
            raise ConfigError(f"{self.name}: LinkShaper needs a Queue upstream")
        for q in queues:
            q.add_listener(self._wake)
        self._wake()

    def _tx_ns(self, pkt) -> int:
        return int((len(pkt.data) + self.overhead_bytes) * 8e9 / self.rate)

    def _wake(self):
        if self._timer.scheduled or self._inflight is not None:
            return
        self._send(time.monotonic_ns())

    def _send(self, now: int):
        """Send what the queue holds from where the link is: each packet from when it was due
        in or the link was free, whichever is later, but link time more than ``catchup`` old
        is given up (counted in behind_us_total)."""
        up = self._in[0]
        out = self._out[0]
        oldest_ns = now - self.catchup
        while True:
            pkt = up[0].pull(up[1])
            if pkt is None:
                return
            due_ns = max(self.busy_until_ns, due_in_ns(pkt, now))
            if due_ns < oldest_ns:          # woken late: the link idled from when it was due
                self.behind_us_total += (oldest_ns - due_ns) // 1000
                due_ns = oldest_ns
            self.busy_until_ns = due_ns + self._tx_ns(pkt)
            pkt.due_ns = self.busy_until_ns      # its last bit leaves the link then
            self.packets += 1
            self.bytes += len(pkt.data)
            if self.busy_until_ns > now + self._BATCH_NS:
                self._inflight = pkt
                self._timer.schedule_at(self.busy_until_ns)
                return
            out[0].push(out[1], pkt)

    def _on_timer(self):
        now = time.monotonic_ns()
        pkt, self._inflight = self._inflight, None
        if pkt is not None:
            late_us = (now - self.busy_until_ns) // 1000
            if late_us > self.late_us_max:
                self.late_us_max = late_us
            out = self._out[0]
            out[0].push(out[1], pkt)
        self._send(now)


@register
class Delay(Element):
    """Holds every packet for ``delay`` before pushing it on: ``Delay(10ms)``.
    The delay runs from when the packet was due in (Packet.due_ns: the last bit out of the
    LinkShaper before it, or the link before that), else from its arrival at the node (the
    kernel's timestamp), so a node's loop getting round to it late does not lengthen the link.
    FIFO: a delay lowered at run time never reorders packets.
    ``late_us_total`` (over ``packets``) / ``late_us_max``: how much later than
    due packets left (wake-up latency the event loop's lead did not absorb), so an emulated
    delay's accuracy can be read off a running node."""
    ARGS = (Arg("delay", parse_time_ns),)
    write_handlers = {"delay": parse_time_ns}
    counter_names = ("packets", "late_us_total", "late_us_max")

    def configured(self):
        if self.delay < 0:
            raise ConfigError("Delay: delay must be >= 0")

    #: a packet due in further back than this (a wall clock stepped forward under its arrival
    #: stamp, a stalled loop) starts its delay when the loop got it instead
    MAX_BEHIND_NS = 1_000_000_000

    def initialize(self):
        self._held = deque()
        self._timer = self.router.loop.timer(self._release)

    def counters(self):
        c = super().counters()
        c["held"] = len(self._held)
        return c

    def push(self, port, pkt):
        self.packets += 1
        if self.delay <= 0 and not self._held:
            out = self._out[0]
            out[0].push(out[1], pkt)
            return
        now = time.monotonic_ns()
        start = due_in_ns(pkt, now)
        if start < now - self.MAX_BEHIND_NS:
            start = now
        release = start + self.delay
        if self._held and release < self._held[-1][0]:
            release = self._held[-1][0]        # FIFO: due no earlier than the packet before it
        elif not self._held and release <= now:
            self._out_now(release, now, pkt)   # the node got it late: due out already
            return
        self._held.append((release, pkt))
        if len(self._held) == 1:
            self._timer.schedule_at(release)

    def _out_now(self, due_ns: int, now: int, pkt) -> None:
        pkt.due_ns = due_ns
        late_us = (now - due_ns) // 1000
        self.late_us_total += late_us
        if late_us > self.late_us_max:
            self.late_us_max = late_us
        out = self._out[0]
        out[0].push(out[1], pkt)

    def _release(self):
        held = self._held
        now = time.monotonic_ns()
        while held and held[0][0] <= now:
            due_ns, pkt = held.popleft()
            self._out_now(due_ns, now, pkt)
        if held:
            self._timer.schedule_at(held[0][0])


@register
class RandomLoss(Element):
    """Drops each packet independently with probability ``p``:
    ``RandomLoss(5%)`` or ``RandomLoss(p 0.05, seed 7)``. ``dropped`` is the
    ground truth a loss classifier is checked against. Draws are keyed by the packet's
    identity in its flow (int_node.loss_draws): given a seed, the same transmission (a
    segment's n-th sending, the n-th duplicate ACK) meets the same fate in every run.
    Writing ``seed`` starts over, as for a fresh run."""
    ARGS = (Arg("p", parse_fraction), Arg("seed", int, None))
    write_handlers = {"p": parse_fraction, "seed": int}
    counter_names = ("passed", "dropped")

    def configured(self):
        self._draws = PacketKeyedDraws(self.seed)
        self.flow_losses = FlowTally()       # per flow, INTTransit stamps the packet's

    def counters(self):
        c = super().counters()
        c["flow_losses"] = self.flow_losses.top()
        return c

    def handler_changed(self, handler):
        if handler == "seed":
            self._draws = PacketKeyedDraws(self.seed)

    @property
    def link_losses(self) -> int:
        """What INTTransit reports as link losses when this emulates the link."""
        return self.dropped

    def push(self, port, pkt):
        if self.p and self._draws.draw(pkt.data) < self.p:
            self.dropped += 1
            self.flow_losses.count(pkt)
            return
        self.passed += 1
        out = self._out[0]
        out[0].push(out[1], pkt)
