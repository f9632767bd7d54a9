"""Loss detection and attribution at the sink.

End-to-end losses come from gaps in the IOAM E2E sequence numbers the source
writes per flow (32-bit, serial-number arithmetic as in RFC 1982 so they wrap).
A gap is only *pending* at first: if the missing packet turns up within
``reorder_pkts`` later packets it was reordered, not lost (TCP's dupthresh
idea). Each gap is labelled when it is seen, from the per-hop counters the
packets on either side of it carry:

* a queue on the path counted drops in between -> congestion;
* a link counted losses in between and no queue dropped -> link;
* both moved -> split in proportion of the two deltas, the link's share rounded
  down: a tie, or a single packet between equal evidence, is congestion;
* nothing moved (the packet died where nothing counts) -> congestion, unless a hop
  that announces a path reconfiguration with a downtime (schema v5) counted a
  migration between the two packets: then the network says where they died, in the
  night between two paths -> reconfig.

A sender may only be lenient on a loss the network positively puts on the link;
everything unexplained or mixed counts as congestion (docs/telemetry.md states
the rules once). Queue occupancy plays no part: a full queue that dropped
nothing in the gap did not lose the packet.

Nodes that write IOAM opaque schema v3 also carry the packet's own flow's drops
and link losses at each hop (int_node.flow_tally): then a gap is put on this flow's
own counts, exactly: the link gets the losses the links counted of this flow (never
more than the gap, never what its drops already explain), the rest is congestion.
Without them (older nodes, or a flow the node's table evicted) the node totals
decide, which every flow through the hop shares: with many flows a delta may include
other flows' drops, and the proportion is only an estimate.

A hop's counters belong to one queue: a node with several queues on a port (RTT
separation's, a reconfigured port's path and circuit) stamps the one the packet took.
Counters are compared per (node, queue, path), with the flow's last packet through that
same queue (the sink remembers them): the drops a queue counted of this flow since the
flow last left it.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

SEQ_MOD = 1 << 32
SEQ_HALF = 1 << 31
U32_MASK = SEQ_MOD - 1
U16_MASK = 0xFFFF            # per-flow counters at a hop (IOAM opaque schema v3)


def u32_delta(new: int, old: int) -> int:
    """Increase of a wrapping 32-bit counter."""
    return (new - old) & U32_MASK


@dataclass
class HopCounters:
    node_id: int
    queue_drops: int
    link_losses: int
    occupancy: float          # 0..1, 0 if unknown
    # this flow's own drops and link losses at the hop (16 bits, wrap); None: the node
    # reports only its totals (IOAM opaque schema v1/v2)
    flow_queue_drops: Optional[int] = None
    flow_link_losses: Optional[int] = None
    queue_index: int = 0                 # which of the port's queues stamped (schema v4)
    on_circuit: bool = False             # the packet took a reconfigured port's circuit (v5)
    # the port's reconfiguration (v5): migrations so far (8 bits, wraps) and its downtime;
    # None where the hop announces none
    reconfig_epoch: Optional[int] = None
    reconfig_downtime_ms: Optional[int] = None

    @property
    def key(self) -> tuple:
        """The queue these counters are of."""
        return self.node_id, self.queue_index, self.on_circuit


@dataclass
class GapLabel:
    congestion: int
    link: int
    reconfig: int = 0


def crossed_a_night(previous: Sequence[HopCounters], after: Sequence[HopCounters]) -> bool:
    """Whether a hop with a downtime migrated the flow between its previous packet and this
    one (its migration count moved): the packets between may have died in the night."""
    epochs = {h.node_id: h.reconfig_epoch for h in previous}
    return any(h.reconfig_downtime_ms and h.reconfig_epoch is not None
               and epochs.get(h.node_id) is not None and epochs[h.node_id] != h.reconfig_epoch
               for h in after)


def _own_deltas(h: HopCounters, p: HopCounters, lost: int) -> Optional[Tuple[int, int]]:
    """This flow's own (drops, link losses) at a hop between two of its packets, or None
    when the hop does not count per flow or its counts went backwards (the node's flow
    table evicted the flow and counts it from zero again)."""
    if None in (h.flow_queue_drops, p.flow_queue_drops, h.flow_link_losses, p.flow_link_losses):
        return None
    d = (h.flow_queue_drops - p.flow_queue_drops) & U16_MASK
    k = (h.flow_link_losses - p.flow_link_losses) & U16_MASK
    # a gap cannot hold more of its own losses than packets (plus a few of the same
    # flow's reordered ones): a counter that jumped is a reset
    if d > lost + 64 or k > lost + 64:
        return None
    return d, k


def label_gap(lost: int, before: Sequence[HopCounters], after: Sequence[HopCounters],
              previous: Optional[Sequence[HopCounters]] = None) -> GapLabel:
    """Split ``lost`` packets between congestion, link and reconfiguration from the counters
    of the packets just before and just after the gap: this flow's own counts where every
    hop keeps them, else the hops' totals (shared by every flow through them). ``before``
    holds the flow's last counters of each queue it took; ``previous`` the packet just
    before the gap's (default: ``before``), whose migration counts say whether a night
    lies between."""
    prev = {h.key: h for h in before}
    pairs = [(h, prev[h.key]) for h in after if h.key in prev]   # queues with an earlier snapshot
    night = crossed_a_night(before if previous is None else previous, after)
    own = [_own_deltas(h, p, lost) for h, p in pairs]
    if pairs and None not in own:
        drops = sum(d for d, _ in own)
        link = sum(k for _, k in own)
        # exact: the link gets the losses it counted of this flow, never more than it
        # proves; the drops are congestion; the rest, counted nowhere, died in a night
        # the path announced, or else is congestion too
        link_share = max(0, min(link, lost - drops))
        uncounted = max(0, lost - drops - link_share) if night else 0
        return GapLabel(lost - link_share - uncounted, link_share, uncounted)
    drops = link = 0
    for h, p in pairs:
        drops += u32_delta(h.queue_drops, p.queue_drops)
        link += u32_delta(h.link_losses, p.link_losses)
    if drops and link:
        # mixed evidence: the link gets only the share its losses prove, rounded down;
        # the rest (ties included) is congestion
        link_share = lost * link // (drops + link)
        return GapLabel(lost - link_share, link_share)
    if drops:
        return GapLabel(lost, 0)
    if link:
        return GapLabel(0, lost)
    if night:
        # nothing counted them, and the path announced a night between: the night's
        return GapLabel(0, 0, lost)
    # No counter moved: the packet died where nothing counts (a receive ring, a
    # host), which is no evidence of a lossy link. A sender must only be lenient
    # on a loss the network positively attributes to the link: congestion.
    return GapLabel(lost, 0)


@dataclass
class SeqResult:
    """What one sequence number told the tracker."""
    gap: int = 0                 # packets newly missing (pending) because of this one
    confirmed: Tuple[int, int, int] = (0, 0, 0)   # (congestion, link, reconfig) losses confirmed now
    reordered: bool = False      # it filled a pending gap
    late: bool = False           # it arrived after its loss had been confirmed (corrected)
    duplicate: bool = False
    resync: bool = False


class SeqTracker:
    """Gap bookkeeping for one flow's E2E sequence numbers.

    ``pending`` maps a missing sequence number to the label share it will
    count as once confirmed; ``recent_lost`` remembers confirmed ones so a very
    late packet corrects the count instead of being called a duplicate.
    """
    def __init__(self, reorder_pkts: int = 3, resync_gap: int = 1 << 16, max_pending: int = 4096):
        self.reorder_pkts = reorder_pkts
        self.resync_gap = resync_gap
        self.max_pending = max_pending
        self.expected: Optional[int] = None
        self.pending: "OrderedDict[int, str]" = OrderedDict()
        self.recent_lost: "OrderedDict[int, str]" = OrderedDict()
        self.lost = {"congestion": 0, "link": 0, "reconfig": 0}
        self.reordered = self.duplicates = self.resyncs = self.late = 0

    @property
    def highest(self) -> Optional[int]:
        return None if self.expected is None else (self.expected - 1) & U32_MASK

    def observe(self, seq: int, label_gap_cb=None) -> SeqResult:
        """Feed one sequence number. ``label_gap_cb(n)`` -> GapLabel is called
        when a gap of n packets opens (it reads the hop counters)."""
        r = SeqResult()
        seq &= U32_MASK
        if self.expected is None:
            self.expected = (seq + 1) & U32_MASK
            return r
        d = (seq - self.expected) & U32_MASK
        if d == 0:
            self.expected = (seq + 1) & U32_MASK
        elif d < SEQ_HALF:
            if d >= self.resync_gap:      # the source restarted or reset its flow table
                self.resyncs += 1
                r.resync = True
                self.pending.clear()
            else:
                r.gap = d
                lab = label_gap_cb(d) if label_gap_cb else GapLabel(0, d)
                causes = ["congestion"] * lab.congestion + ["link"] * lab.link + ["reconfig"] * lab.reconfig
                for i in range(d):
                    self.pending[(self.expected + i) & U32_MASK] = causes[i]
            self.expected = (seq + 1) & U32_MASK
        else:
            cause = self.pending.pop(seq, None)
            if cause is not None:
                self.reordered += 1
                r.reordered = True
            else:
                cause = self.recent_lost.pop(seq, None)
                if cause is not None:
                    self.lost[cause] -= 1
                    self.late += 1
                    self.reordered += 1
                    r.late = r.reordered = True
                else:
                    self.duplicates += 1
                    r.duplicate = True
        r.confirmed = self._confirm()
        return r

    def _confirm(self) -> Tuple[int, int, int]:
        confirmed = dict.fromkeys(self.lost, 0)
        highest = self.highest
        while self.pending:
            s, cause = next(iter(self.pending.items()))
            if ((highest - s) & U32_MASK) < self.reorder_pkts and len(self.pending) <= self.max_pending:
                break
            self.pending.popitem(last=False)
            self.lost[cause] += 1
            self.recent_lost[s] = cause
            if len(self.recent_lost) > self.max_pending:
                self.recent_lost.popitem(last=False)
            confirmed[cause] += 1
        return confirmed["congestion"], confirmed["link"], confirmed["reconfig"]

    @property
    def total_lost(self) -> int:
        return sum(self.lost.values())

