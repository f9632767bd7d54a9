"""Path reconfiguration (the reconfigurable-datacenter paper, 004): a set of flows
migrated periodically between two paths, with a downtime at each migration.

    rc :: Reconfigure(period 50ms, downtime 5ms, src 2001:db8:1::/64, mode drop);
    ... -> rc -> q :: Queue(100) -> ...         // output 0: the static path (shared)
    rc[1] -> qc :: Queue(100) -> ...            // output 1: the circuit (the migrated flows' own)

Packets whose IPv6 source is in ``src`` are the migrated flows'; every other packet takes
output 0. The schedule repeats every ``period``: a day of ``period - downtime`` on one
path, then a night of ``downtime`` in which the migrated flows' packets go nowhere (a
circuit being torn down and set up), then the next period on the other path. The first
period (from the start, or from a write of ``period``) is on the circuit, the second on the
static path, and so on, as in the paper's testbed, whose migrated flow starts on a path of
its own and is moved onto the main flow's. ``period 0`` is no reconfiguration: the
migrated flows stay on the circuit.

At night ``mode drop`` drops their packets (counted in ``night_drops``: the paper's
worst case, a rule that drops them), ``mode buffer`` holds up to ``buffer`` of them
(beyond: dropped, counted in ``night_drops``) and sends them on the new path as the next
day starts, in order; ``release_late_us_total`` (over ``releases``) and
``release_late_us_max`` say how long after the day's start that happened.

An INTTransit given ``reconfig`` (this element) stamps the schedule into each packet's hop
(schema v5: period, downtime, the time to the next night, the migrations so far, and whether
the packet's flow is migrated and took the circuit): the sink's hop records then announce a
reconfiguration to the senders through it.

Handlers: ``period``, ``downtime`` and ``mode`` writable (a write restarts the schedule);
``state`` the path now, whether it is night, and the migrations so far; ``events`` the last
``EVENT_LOG`` migrations as (monotonic ns of the night's start, downtime ns, the new path):
what an INT hop or a publisher says about them."""
from __future__ import annotations

import time
from collections import deque

from ..element import Arg, ConfigError, Element, register
from ..ioam import RECONFIG_MIGRATED, RECONFIG_NEXT_NONE, RECONFIG_ON_CIRCUIT
from ..packet import IP6_SRC_OFF
from ..units import parse_pos_int, parse_prefix, parse_time_ns

STATIC, CIRCUIT = 0, 1
PATH_NAMES = ("static", "circuit")
MODES = ("drop", "buffer")
EVENT_LOG = 64
MS = 1_000_000


def parse_setting(value) -> tuple[str, str]:
    """A reconfiguration setting as scenarios and records write it: "none", "PERIOD" or
    "PERIOD/DOWNTIME" ("50ms", "100ms/10ms") -> (period, downtime) as the handlers take them."""
    text = str(value).strip()
    if text in ("none", "0", ""):
        return "0", "0"
    period, _, downtime = text.partition("/")
    return period.strip(), (downtime.strip() or "0")


def setting_ms(value) -> tuple[float, float]:
    """(period, downtime) in ms of a reconfiguration setting (parse_setting)."""
    period, downtime = parse_setting(value)
    return parse_time_ns(period) / 1e6, parse_time_ns(downtime) / 1e6


def _mode(text: str) -> str:
    if text not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}")
    return text


@register
class Reconfigure(Element):
    """``Reconfigure(period 50ms, downtime 5ms, src 2001:db8:1::/64, mode drop|buffer)``
    migrates the flows from ``src`` every period between output 1 (a circuit of their own)
    and output 0 (the path every other packet takes); at the end of each period a night of
    ``downtime`` drops (or holds) their packets. Handlers ``period``, ``downtime``, ``mode``
    (writable), ``state``, ``events``; an INTTransit with ``reconfig`` stamps the schedule."""
    n_outputs = (2, 2)
    ARGS = (Arg("period", parse_time_ns, 0), Arg("downtime", parse_time_ns, 0),
            Arg("src", parse_prefix, None), Arg("mode", _mode, "drop"), Arg("buffer", parse_pos_int, 1000))
    write_handlers = {"period": parse_time_ns, "downtime": parse_time_ns, "mode": _mode}
    counter_names = ("packets", "migrated_packets", "to_static", "to_circuit", "night_drops",
                     "night_held", "migrations", "releases", "release_late_us_total", "release_late_us_max")

    def configured(self):
        if self.src is None:
            raise ConfigError("Reconfigure: missing 'src', the migrated flows' source prefix (2001:db8:1::/64)")
        self._check(self.period, self.downtime)
        net = self.src
        self._prefix_bytes, self._prefix_bits = net.network_address.packed, net.prefixlen
        self._now = time.monotonic_ns       # a test's clock in its place
        self._held: deque = deque()
        self.events: deque = deque(maxlen=EVENT_LOG)
        self._epoch_ns = None
        self._cycle = 0

    @staticmethod
    def _check(period_ns: int, downtime_ns: int) -> None:
        if period_ns < 0 or downtime_ns < 0:
            raise ConfigError("Reconfigure: period and downtime must be >= 0")
        if period_ns and downtime_ns >= period_ns:
            raise ConfigError(f"Reconfigure: downtime {downtime_ns / 1e6:g} ms must be shorter than the "
                              f"period {period_ns / 1e6:g} ms (a day of period - downtime on each path)")
        if downtime_ns and not period_ns:
            raise ConfigError("Reconfigure: a downtime needs a period (none: no reconfiguration)")

    def initialize(self):
        self._timer = self.router.loop.timer(self._day_starts)
        self._restart()

    def write_handler(self, handler, value):
        before = (self.period, self.downtime, self.mode)
        super().write_handler(handler, value)
        try:
            self._check(self.period, self.downtime)
        except ConfigError:
            self.period, self.downtime, self.mode = before
            raise
        self._restart()
        self._release()         # what the old schedule held goes on, on the new one's path

    def _restart(self):
        self._epoch_ns = self._now()
        self._cycle = 0

    # -- the schedule ----------------------------------------------------
    def _at(self, now_ns: int) -> tuple[int, bool]:
        """(the path of the period now, whether it is night), counting migrations."""
        if not self.period:
            return CIRCUIT, False
        since = max(0, now_ns - self._epoch_ns)     # a packet due before a restart: its first moment
        cycle, phase = divmod(since, self.period)
        if cycle > self._cycle:       # (a packet due a moment before the last one's cycle: no migration back)
            self._migrated(cycle, now_ns - phase)
        night = phase >= self.period - self.downtime
        return (CIRCUIT if cycle % 2 == 0 else STATIC), night

    def _migrated(self, cycle: int, start_ns: int) -> None:
        """Periods ended since the last packet: each a migration (logged with the night that
        preceded the new path)."""
        for c in range(max(self._cycle + 1, cycle - EVENT_LOG + 1), cycle + 1):
            path = CIRCUIT if c % 2 == 0 else STATIC
            day_ns = start_ns - (cycle - c) * self.period
            self.events.append((day_ns - self.downtime, self.downtime, PATH_NAMES[path]))
        self.migrations += cycle - self._cycle
        self._cycle = cycle

    def _is_migrated(self, data) -> bool:
        bits = self._prefix_bits
        whole, rest = divmod(bits, 8)
        src = data[IP6_SRC_OFF:IP6_SRC_OFF + 16]
        if src[:whole] != self._prefix_bytes[:whole]:
            return False
        return not rest or (src[whole] ^ self._prefix_bytes[whole]) >> (8 - rest) == 0

    def push(self, port, pkt):
        self.packets += 1
        if not self._is_migrated(pkt.data):
            self.to_static += 1
            out = self._out[STATIC]
            out[0].push(out[1], pkt)
            return
        self.migrated_packets += 1
        # the schedule meets a packet when the link upstream had it due here (Packet.due_ns):
        # the loop running late would otherwise move the night's start onto packets of the day
        now = pkt.due_ns or self._now()
        path, night = self._at(now)
        if night:
            if self.mode == "buffer" and len(self._held) < self.buffer:
                self._held.append(pkt)
                self.night_held += 1
                if len(self._held) == 1:
                    since = now - self._epoch_ns
                    self._timer.schedule_at(now + self.period - since % self.period)
            else:
                self.night_drops += 1
            return
        if self._held:          # a day began before the timer: what was held goes first
            self._release_at_day_start(now)
        self._send(path, pkt)

    def _send(self, path: int, pkt) -> None:
        if path == CIRCUIT:
            self.to_circuit += 1
        else:
            self.to_static += 1
        out = self._out[path]
        out[0].push(out[1], pkt)

    def _day_starts(self):
        # the event loop runs a timer up to its learnt wake-up lead early: still night, wait on
        now = self._now()
        _, night = self._at(now)
        if night and self._held:
            self._timer.schedule_at(now + self.period - (now - self._epoch_ns) % self.period)
            return
        self._release_at_day_start(now)

    def _release_at_day_start(self, now_ns: int) -> None:
        """Release what the night held, counting how late after the day's start (the event
        loop's timer, or the first packet of the day, came that much after it)."""
        if not self._held:
            return
        late_ns = (now_ns - self._epoch_ns) % self.period if self.period else 0
        late_us = late_ns // 1000
        self.releases += 1
        self.release_late_us_total += late_us
        self.release_late_us_max = max(self.release_late_us_max, late_us)
        self._release(now_ns - late_ns)

    def _release(self, day_ns: int = 0):
        if not self._held:
            return
        day_ns = day_ns or self._now()
        path, _ = self._at(day_ns)
        held, self._held = self._held, deque()
        for pkt in held:
            pkt.due_ns = day_ns     # the link after this one carries it from the day's start on
            self._send(path, pkt)

    def announce(self, data, on_circuit: bool) -> tuple:
        """What an INT hop stamps of this port's reconfiguration for a packet (ioam.pack_node's
        ``reconfig``): (period ms, downtime ms, ms until the next night starts (0 at night),
        migrations so far, RECONFIG_* flags)."""
        if not self.period:
            return 0, 0, RECONFIG_NEXT_NONE, self.migrations & 0xFF, RECONFIG_MIGRATED if self._is_migrated(data) else 0
        now = self._now()
        _, night = self._at(now)
        day_left_ns = self.period - self.downtime - (now - self._epoch_ns) % self.period
        flags = (RECONFIG_MIGRATED | (RECONFIG_ON_CIRCUIT if on_circuit else 0)) if self._is_migrated(data) else 0
        return (min(self.period // MS, 0xFFFF), min(self.downtime // MS, 0xFFFF),
                0 if night else min(day_left_ns // MS, 0xFFFE), self.migrations & 0xFF, flags)

    def circuit_queue(self):
        """The first element of the circuit (output 1): its queue, where the transit stamping
        a packet says it took the circuit."""
        return self._out[CIRCUIT][0] if self._out and self._out[CIRCUIT] else None

    def counters(self):
        c = super().counters()
        c["held"] = len(self._held)
        return c

    def read_handler(self, handler):
        if handler == "state":
            path, night = self._at(self._now())
            return {"path": PATH_NAMES[path], "night": night, "migrations": self.migrations,
                    "period_ns": self.period, "downtime_ns": self.downtime, "mode": self.mode}
        if handler == "events":
            return [list(e) for e in self.events]
        return super().read_handler(handler)
