"""RTT separation (the RTT-separation paper, 001): flows grouped by their round-trip time into
queues served in turn, so that a short-RTT flow's faster window growth (CUBIC, Reno) or a
long-RTT flow's larger inflight (BBR) takes nothing from flows of another RTT.

    rtt :: FlowRTT;                      ... -> RTTTap(rtt) -> ...  on both directions' paths
    split :: FlowSplit(queues 4, udp true);
    sched :: DRR;
    ... -> split;
    split[0] -> q0 :: Queue(100) -> [0]sched;   ... split[3] -> q3 :: Queue(100) -> [3]sched;
    split[4] -> qu :: Queue(20) -> [4]sched;                (UDP above udp_rate, policed)
    sched -> LinkShaper(10Mbps) -> ...
    ctl :: RTTSeparation(split split, rtt rtt, sched sched, shaper ..., queues q0 q1 q2 q3 qu);

The data plane: FlowSplit sends each packet to its flow's queue (a table the control plane
writes) and counts bytes per flow in a Count-Min Sketch; a flow whose count passes
``long_bytes`` is tracked exactly from then on. DRR serves the queues by deficit round robin
(Shreedhar and Varghese 1995), each a quantum times its weight a round. The control plane,
RTTSeparation, every ``interval``: the tracked TCP flows' RTTs (FlowRTT: the whole round trip
from TCP timestamps, else the part beyond the node from ACK matching) into K classes by
Jenks natural breaks (int_node.jenks), a flow moved to a new class only after ``hold``
rounds agree (hysteresis); each queue's weight its number of flows (so that each flow, not
each queue, gets its share), and its buffer the Stanford rule's BDP/√N (the queue's share
of the port's rate among the queues with flows, times the longest RTT in it, over the square root of its flows); UDP
flows above ``udp_rate`` in the last queue, its weight one flow's.
"""
from __future__ import annotations

import math
import time

from ..element import PULL, Arg, ConfigError, Element, parse_bool, register
from ..jenks import classify, natural_breaks
from ..packet import flow_key, flow_tuple, key_hash
from ..sketch import CountMinSketch
from ..units import parse_nonneg_int, parse_pos_int, parse_rate_bps, parse_time_ns
from .queues import SLOT_BYTES, Queue

KEY_PROTO_BYTE = 32          # the protocol's byte in int_node.packet.flow_key's key
PROTO_TCP, PROTO_UDP = 6, 17


def _size_bytes(text: str) -> int:
    """1MB, 500kB, 1500 (bytes)."""
    t = text.strip()
    for suffix, mult in (("MB", 10**6), ("kB", 10**3), ("KB", 10**3), ("B", 1)):
        if t.endswith(suffix):
            return int(float(t[:-len(suffix)]) * mult)
    return int(t)


class _Tracked:
    __slots__ = ("bytes", "last_ns", "proto", "counted_bytes", "rate_bps")

    def __init__(self, nbytes: int, now_ns: int, proto: int):
        self.bytes, self.last_ns, self.proto = nbytes, now_ns, proto
        self.counted_bytes, self.rate_bps = nbytes, 0.0


@register
class FlowSplit(Element):
    """Sends each packet to its flow's output (``table``, written by RTTSeparation; a flow
    not in it to ``default``): ``FlowSplit(queues 4, udp true, long_bytes 1MB)``, K outputs
    and one more for UDP with ``udp``. Bytes per flow are counted in a Count-Min Sketch
    (``sketch_width`` x ``sketch_depth``, cleared every ``sketch_reset``); a flow past
    ``long_bytes`` is tracked exactly (``tracked``), up to ``max_flows`` at once (beyond:
    counted in ``track_full``, left untracked).

    ``long_age`` (0: off, the paper's rule alone) also tracks a flow that has kept sending
    for that long, whatever its bytes: a flow starved by RTT unfairness in the shared queue
    is exactly the one to separate, and bytes alone find it last (a 180 ms flow beside a
    12 ms one took 5 s to send 100 kB). Its first-packet times sit in a table of at most
    ``max_flows`` candidates, the oldest evicted first (``candidates_evicted``); a gap of
    ``long_age`` without packets restarts a candidate's clock."""
    n_outputs = (1, None)
    ARGS = (Arg("queues", parse_pos_int, 4), Arg("udp", parse_bool, False), Arg("long_bytes", _size_bytes, 1_000_000),
            Arg("default", parse_nonneg_int, 0), Arg("max_flows", parse_pos_int, 4096),
            Arg("sketch_width", parse_pos_int, 2048), Arg("sketch_depth", parse_pos_int, 4),
            Arg("sketch_reset", parse_time_ns, 10_000_000_000), Arg("long_age", parse_time_ns, 0))
    counter_names = ("packets", "tracked_flows", "track_full", "candidates_evicted")

    def configured(self):
        if self.default >= self.queues:
            raise ConfigError(f"FlowSplit: default {self.default} is not one of its {self.queues} queues")
        self.sketch = CountMinSketch(self.sketch_width, self.sketch_depth)
        self.table: dict = {}                 # flow key -> output (the control plane's)
        self.tracked: dict = {}               # flow key -> _Tracked
        self.sent = [0] * (self.queues + (1 if self.udp else 0))
        self._sketch_cleared_ns = 0
        self._candidates: dict = {}           # flow key -> [first_ns, last_ns] (long_age)

    def initialize(self):
        if self.n_out != len(self.sent):
            raise ConfigError(f"{self.name}: FlowSplit(queues {self.queues}{', udp' if self.udp else ''}) needs "
                              f"{len(self.sent)} outputs, has {self.n_out}")

    def counters(self):
        c = super().counters()
        c["tracked_flows"] = len(self.tracked)
        c["sent"] = list(self.sent)
        return c

    def push_batch(self, port, batch):
        by_out: dict = {}
        table, tracked, default = self.table, self.tracked, self.default
        for pkt in batch:
            try:
                key = pkt.flow_id
                if key is None:
                    key = pkt.flow_id = flow_key(pkt.data)
                t = tracked.get(key)
                if t is None:
                    self._count(key, len(pkt.data), pkt.rx_ns)
                    out = table.get(key, default)
                else:
                    t.bytes += len(pkt.data)
                    t.last_ns = pkt.rx_ns
                    out = table.get(key, default)
            except Exception as exc:
                self.packet_error(pkt, exc)
                continue
            by_out.setdefault(out, []).append(pkt)
        self.packets += len(batch)
        for out, pkts in by_out.items():
            self.sent[out] += len(pkts)
            self.output_batch(out, pkts)

    def _count(self, key: bytes, nbytes: int, now_ns: int) -> None:
        if now_ns - self._sketch_cleared_ns >= self.sketch_reset:
            self.sketch.clear()
            self._sketch_cleared_ns = now_ns
        est = self.sketch.add(key, nbytes)
        if est >= self.long_bytes or (self.long_age and self._aged(key, now_ns)):
            self._candidates.pop(key, None)
            if len(self.tracked) >= self.max_flows:
                self.track_full += 1
            else:
                self.tracked[key] = _Tracked(est, now_ns, key[KEY_PROTO_BYTE])

    def _aged(self, key: bytes, now_ns: int) -> bool:
        """True once the flow has sent for long_age without a gap of long_age."""
        seen = self._candidates.get(key)
        if seen is None or now_ns - seen[1] >= self.long_age:
            if seen is None and len(self._candidates) >= self.max_flows:
                del self._candidates[next(iter(self._candidates))]     # the oldest inserted
                self.candidates_evicted += 1
            self._candidates[key] = [now_ns, now_ns]
            return False
        seen[1] = now_ns
        return now_ns - seen[0] >= self.long_age


@register
class DRR(Element):
    """Deficit round robin over its inputs (Click's DRRSched): each input, at its turn,
    sends packets while their frame bytes fit in its deficit, which grows by ``quantum``
    times its weight a round and empties when its queue does. ``weights`` (written by
    RTTSeparation, or by hand: "1 1 2") default to 1 each. Pull inputs, pull output."""
    input_kind = output_kind = PULL
    n_inputs = (1, None)
    ARGS = (Arg("quantum", parse_pos_int, 2000),)
    counter_names = ("packets",)

    def configured(self):
        self._weights: list = []

    def initialize(self):
        n = self.n_in
        self._weights = self._weights or [1] * n
        self._head = [None] * n
        self._deficit = [0] * n
        self._fresh = True                    # the current input's turn has not been credited
        self._cur = 0
        self.sent_bytes = [0] * n
        # an input fed straight by a Queue is seen empty from the queue's deque, without a
        # pull: most turns at an idle class would otherwise cost a call each
        self._backlog = [up._q if isinstance(up, Queue) else None for up, _ in self._in]

    @property
    def weights(self) -> list:
        return list(self._weights)

    def set_weights(self, weights) -> None:
        w = [int(x) for x in weights]
        if len(w) != self.n_in or any(x < 1 for x in w):
            raise ConfigError(f"{self.name}: weights must be {self.n_in} integers of at least 1, not {weights!r}")
        self._weights = w

    def write_handler(self, handler: str, value: str) -> None:
        if handler == "weights":
            self.set_weights(value.split())
            return
        super().write_handler(handler, value)

    def counters(self):
        c = super().counters()
        c["weights"] = self.weights
        c["sent_bytes"] = list(self.sent_bytes)
        return c

    def pull(self, port):
        n = self.n_in
        head, deficit, ins, backlog, weights = self._head, self._deficit, self._in, self._backlog, self._weights
        cur, fresh = self._cur, self._fresh
        empty_run = 0
        pkt = None
        # a frame larger than a quantum needs several rounds: bounded by the largest weight's
        for _ in range(64 * n):
            pkt = head[cur]
            if pkt is None:
                q = backlog[cur]
                if q is None or q:
                    up, up_port = ins[cur]
                    pkt = up.pull(up_port)
            if pkt is None:                    # empty: its deficit goes, the turn passes
                deficit[cur] = 0
                empty_run += 1
                if empty_run >= n:
                    break
                cur = (cur + 1) % n
                fresh = True
                continue
            empty_run = 0
            if fresh:
                deficit[cur] += self.quantum * weights[cur]
                fresh = False
            size = len(pkt.data)
            if size <= deficit[cur]:
                deficit[cur] -= size
                head[cur] = None
                self.packets += 1
                self.sent_bytes[cur] += size
                break
            head[cur] = pkt                    # kept for its next turn
            pkt = None
            cur = (cur + 1) % n
            fresh = True
        self._cur, self._fresh = cur, fresh
        return pkt

    def queued_heads(self) -> int:
        return sum(p is not None for p in self._head)


def _names(text: str) -> list:
    return text.split()


@register
class RTTSeparation(Element):
    """The control loop of RTT separation (no ports): ``RTTSeparation(split S, rtt R, sched D,
    queues "q0 q1 q2 q3 [qudp]", shaper SH, interval 1s, hold 2, flow_timeout 2s,
    udp_rate 0, udp_weight 1, buffers stanford, min_buffer 8)``. ``buffers fixed`` leaves the
    queues' capacities as configured. Handlers: ``assignments`` (flow id -> queue, RTT,
    rate), ``breaks`` (the last Jenks boundaries, microseconds), ``groups`` (per queue: its
    flows, weight, capacity)."""
    n_inputs = n_outputs = (0, 0)
    ARGS = (Arg("split", str), Arg("rtt", str), Arg("sched", str), Arg("queues", _names),
            Arg("shaper", str, None), Arg("interval", parse_time_ns, 1_000_000_000), Arg("hold", parse_pos_int, 2),
            Arg("flow_timeout", parse_time_ns, 2_000_000_000), Arg("udp_rate", parse_rate_bps, 0.0),
            Arg("udp_weight", parse_pos_int, 1), Arg("buffers", str, "stanford"), Arg("min_buffer", parse_pos_int, 8),
            Arg("rtt_resolution", parse_time_ns, 100_000))
    counter_names = ("rounds", "moves", "expired", "udp_isolated", "jenks_us_last")

    def configured(self):
        if self.buffers not in ("stanford", "fixed"):
            raise ConfigError(f"RTTSeparation: buffers must be stanford or fixed, not {self.buffers!r}")
        self.breaks_us: list = []
        # called with the round's now_ns before and after it: the fast path fills the split and
        # the RTT table from its maps before, and writes the round's decisions back after
        self.before_round: list = []
        self.after_round: list = []
        #: where the queues are not these Queue elements (the fast path's kernel queues): a
        #: callable giving each queue's (depth in packets, drops)
        self.queue_stats = None
        #: the weights of the queues with flows at the last round (a queue's share of the port
        #: is its weight over this); None before the first round
        self.active_weight = None
        self._pending: dict = {}            # flow key -> (class proposed, rounds in a row)
        self._rtt_us: dict = {}             # flow key -> its RTT at the last round

    def initialize(self):
        from .rtt import FlowRTT
        r, me = self.router, self.name
        self._split = r.find(self.split, FlowSplit, me)
        self._rtt = r.find(self.rtt, FlowRTT, me)
        self._sched = r.find(self.sched, DRR, me)
        self._shaper = r.find(self.shaper, None, me) if self.shaper else None
        self._queues = [r.find(q, Queue, me) for q in self.queues]
        outs = len(self._split.sent)
        if len(self._queues) != outs or self._sched.n_in != outs:
            raise ConfigError(f"{me}: {self.split} has {outs} outputs, {self.sched} {self._sched.n_in} inputs, "
                              f"and {len(self._queues)} queues are named: they must be equal")
        self.k = self._split.queues
        self._configured_capacity = [q.capacity for q in self._queues]
        self._timer = self.router.loop.timer(self._round)
        self._timer.schedule_after(self.interval)

    # -- the round ----------------------------------------------------------------------
    def _round(self):
        try:
            self.run_round(time.time_ns())
        finally:
            self._timer.schedule_after(self.interval)

    def run_round(self, now_ns: int) -> None:
        """One pass of the control loop at wall-clock ``now_ns`` (the packets' clock)."""
        for hook in self.before_round:
            hook(now_ns)
        self._run_round(now_ns)
        for hook in self.after_round:
            hook(now_ns)

    def _run_round(self, now_ns: int) -> None:
        self.rounds += 1
        split = self._split
        for key in [k for k, t in split.tracked.items() if now_ns - t.last_ns > self.flow_timeout]:
            del split.tracked[key]
            split.table.pop(key, None)
            self._pending.pop(key, None)
            self._rtt_us.pop(key, None)
            self.expired += 1
        interval_s = self.interval / 1e9
        tcp = {}
        udp_port = self.k if split.udp else None
        for key, t in split.tracked.items():
            t.rate_bps = (t.bytes - t.counted_bytes) * 8 / interval_s
            t.counted_bytes = t.bytes
            if t.proto == PROTO_UDP and udp_port is not None and self.udp_rate and t.rate_bps > self.udp_rate:
                if split.table.get(key) != udp_port:
                    self.udp_isolated += 1
                split.table[key] = udp_port
            elif t.proto == PROTO_TCP:
                rtt = self._rtt.rtt_us(key)
                if rtt is not None:
                    tcp[key] = rtt
        self._rtt_us = tcp
        if tcp:
            t0 = time.perf_counter()
            resolution_us = self.rtt_resolution / 1e3
            self.breaks_us = natural_breaks(list(tcp.values()), self.k, resolution=resolution_us)
            self.jenks_us_last = int((time.perf_counter() - t0) * 1e6)
            classes = {key: classify(rtt, self.breaks_us, resolution_us) for key, rtt in tcp.items()}
            queue_of = self._queues_for(classes)
            for key, cls in classes.items():
                self._assign(key, queue_of[cls])
        self._weights_and_buffers()

    def _queues_for(self, classes: dict) -> dict:
        """Each Jenks class's queue: the one most of its flows are in already, classes with
        more flows staying first, then a free queue (its own index if free). Classes are
        ranks, and a flow arriving or leaving renumbers them: queue j for class j would move
        flows whose RTT did not change, and a move can reorder a flow's packets."""
        table = self._split.table
        held = {}                             # (class, queue) -> flows of the class in it now
        for key, cls in classes.items():
            q = table.get(key)
            if q is not None and q < self.k:
                held[(cls, q)] = held.get((cls, q), 0) + 1
        out, taken = {}, set()
        for (cls, q), n in sorted(held.items(), key=lambda item: (-item[1], abs(item[0][0] - item[0][1]))):
            if cls not in out and q not in taken:
                out[cls] = q
                taken.add(q)
        free = [q for q in range(self.k) if q not in taken]
        for cls in sorted(set(classes.values()) - set(out)):
            q = cls if cls in free else free[0]
            out[cls] = q
            free.remove(q)
        return out

    def _assign(self, key: bytes, cls: int) -> None:
        table = self._split.table
        now = table.get(key)
        if now is None:
            table[key] = cls                  # a new long flow: its class at once
            return
        if now == cls:
            self._pending.pop(key, None)
            return
        proposed, rounds = self._pending.get(key, (cls, 0))
        rounds = rounds + 1 if proposed == cls else 1
        if rounds >= self.hold:
            table[key] = cls
            self._pending.pop(key, None)
            self.moves += 1
        else:
            self._pending[key] = (cls, rounds)

    def _weights_and_buffers(self) -> None:
        split = self._split
        members = [[] for _ in self._queues]
        for key, port in split.table.items():
            if key in split.tracked:
                members[port].append(key)
        udp_port = self.k if split.udp else None
        weights = [max(1, len(m)) for m in members]
        if udp_port is not None:
            weights[udp_port] = self.udp_weight
        self._sched.set_weights(weights)
        # DRR gives an empty queue's turn away: a queue's share of the port is its weight over
        # the weights of the queues that have flows, not over all K
        total = self.active_weight = sum(w for w, m in zip(weights, members) if m) or 1
        if self.buffers != "stanford" or self._shaper is None:
            return
        for j, (q, m) in enumerate(zip(self._queues, members)):
            rtts = [self._rtt_us[k] for k in m if k in self._rtt_us]
            if j == udp_port or not rtts:
                q.capacity = self._configured_capacity[j]
                continue
            rate_bps = self._shaper.rate * weights[j] / total
            bdp_pkts = rate_bps * max(rtts) / 1e6 / 8 / SLOT_BYTES
            q.capacity = max(self.min_buffer, int(round(bdp_pkts / math.sqrt(len(m)))))

    # -- handlers -----------------------------------------------------------------------
    def read_handler(self, handler: str):
        split = self._split
        if handler == "assignments":
            out = {}
            for key, t in split.tracked.items():
                rtt = self._rtt_us.get(key)
                out[key_hash(key)] = {"flow": list(flow_tuple(key)), "queue": split.table.get(key, split.default),
                                      "rtt_us": None if rtt is None else round(rtt, 1),
                                      "rate_bps": round(t.rate_bps), "bytes": t.bytes}
            return out
        if handler == "breaks":
            return [round(b, 1) for b in self.breaks_us]
        if handler == "groups":
            weights = self._sched.weights
            stats = self.queue_stats() if self.queue_stats else [(q.depth_pkts, q.drops) for q in self._queues]
            return [{"queue": q.name, "weight": weights[j], "capacity_pkts": q.capacity, "depth_pkts": stats[j][0],
                     "drops": stats[j][1],
                     "flows": sum(1 for k, p in split.table.items() if p == j and k in split.tracked)}
                    for j, q in enumerate(self._queues)]
        return super().read_handler(handler)
