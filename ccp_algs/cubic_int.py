"""cubic-int: CUBIC that reads in-band network telemetry (the INT-eBPF paper, section VI).

On a loss episode the flow's latest telemetry record from the sink (fresh: at
most ``max_age_ms`` old) says what the loss was:

- non-congestive only on proof: the sink attributed new losses of this flow to the
  link since the last look, and none to congestion (loss_classifier.classify). Policy
  L1 keeps cwnd, L2 multiplies it by 0.95. Neither touches what CUBIC learned about
  congestion (ssthresh, W_max, the curve): slow start and the curve go on. But the
  window is only held near the pipe: when the bottleneck queue in the record is above
  a small target (``queue_target_pct`` of its buffer), the link loss is a CUBIC cut by
  the excess, ``beta = 1 - (queue - target) / window``, between CUBIC's 0.7 and the
  policy's. Kept through every link loss, a window with the buffer full on top raised
  everyone's RTT, and a loss-limited competitor's rate goes as 1/RTT. A timeout
  the sink puts on the link restarts at 1 MSS (the ACK clock is gone); ssthresh is the
  policy's fraction of the window, but never above the last congestion cut's, and never
  below CUBIC's 0.7 of the window;
- a path reconfiguration's night (paper 004): the sink put new losses of this flow in a
  night its path announced (and none in a queue), or, not attributed yet, a hop that
  migrates this flow with a downtime announced a night that ended within the look-back
  (two RTTs and 10 ms for a loss; a second for a timeout, which fires at least the RTT
  plus the minimum RTO after the night's packets left). The night took the packets, not
  congestion: cwnd kept (either policy), unless the night moved the flow onto a path it
  shares (the record stamped after the night by a hop whose queue counts other flows): then
  the window of the path it had to itself would fill the new path's queue on top of the
  flows there, and it takes CUBIC's cut, never below its share of the new path's BDP. A
  timeout of the night keeps ssthresh and W_max, and the window restarts at what the path
  can take (the migrating hop's rate over its flows times the minimum RTT, capped by the
  window before), not from 1 MSS. While a hop announces
  a downtime for this flow, the flow's minimum RTO is that downtime (register rto_min,
  10 ms to the kernel's 200 ms): the kernel's timer, the smoothed RTT plus at least it,
  then fires once just after a night instead of at 200 ms (and 400, 800 if those fell in
  nights); the kernel's 200 ms again when no hop announces one;
- anything else (new congestion losses, both kinds, no new attributed loss, no fresh
  telemetry): exactly CUBIC.

Slow-start growth follows paper Eq. (1),
``cwnd += free_queue_capacity * increment / (arrival_rate * flow_count)`` per ACK,
read at the bottleneck hop (the hop with the least free buffer) and made
dimensionless with the RTT: ``room = free_bytes / (arrival_rate_pps * MSS * RTT /
flow_count)`` is how many RTTs of this flow's share of the arrivals the free
buffer still holds. Per acked segment cwnd grows by ``increment * min(1, room)``
segments: while the buffer has room, increment 1 is Reno slow start (doubling
per RTT), 2 triples and 3 quadruples per RTT; as the queue fills, growth fades
to nothing. The window never grows past what is in flight plus this flow's share of
the free buffer (free / flow_count), so flows in slow start together cannot overshoot
the buffer the telemetry advertised between them. HyStart is not used
while hop telemetry is fresh (the queue is seen, not guessed from delay); without
it, slow start is CUBIC's, HyStart included.

Every decision is traced with its reason and the telemetry's age.
"""
from __future__ import annotations

import time

from telemetry.reconfig import migrating_hop

from .base import Report
from .cubic import BETA, HYSTART, Cubic, CubicFlow
from .registry import INIT_CWND, Param
from .loss_classifier import LINK, RECONFIG, UNKNOWN, announced_night, classify

POLICIES = ("l1", "l2")
L2_BETA = 0.95
RECONFIG_MODES = ("ride", "off")
NIGHT_SLACK_NS = 10_000_000          # a hop's schedule is in whole ms, its stamp a queue away
TIMEOUT_LOOKBACK_NS = 1_000_000_000
KERNEL_RTO_MIN_US = 200_000          # TCP_RTO_MIN: the most TCP_BPF_RTO_MIN takes
NIGHT_RTO_MIN_FLOOR_US = 10_000      # the least it takes is 2 jiffies (8 ms at HZ 250)


def bottleneck(rec):
    """The hop with the least free buffer (bytes), or None."""
    hops = [h for h in rec.path if h.queue_capacity_bytes]
    if not hops:
        return None
    return min(hops, key=lambda h: h.queue_capacity_bytes - h.queue_depth_bytes)


_UNREAD = object()


class CubicIntFlow(CubicFlow):
    def __init__(self, alg, datapath, datapath_info):
        self.flow_id = None
        self.seen_congestion = self.seen_link = self.seen_reconfig = 0
        self.last_cause = None              # what loss_backoff found the last episode was
        self.night_rto_min = False          # rto_min set for an announced downtime: restore it after
        self._snapshot = _UNREAD
        super().__init__(alg, datapath, datapath_info)

    def on_report(self, r):
        # one telemetry snapshot per report: HyStart's check, the datapath's slow start,
        # Eq. (1) and the loss backoff all read the record its first use fetched
        self._snapshot = _UNREAD
        try:
            return super().on_report(r)
        finally:
            self._snapshot = _UNREAD        # between reports (a switch, an install) read afresh

    def _telemetry(self):
        if self._snapshot is _UNREAD:
            self._snapshot = self.fresh_telemetry()
        return self._snapshot

    def loss_backoff(self, r: Report, timeout: bool = False):
        fresh = self._telemetry()
        if fresh is None:
            self.last_cause = None
            return BETA, "loss: no fresh telemetry, CUBIC beta 0.7", True
        rec = fresh.record
        cause = self.last_cause = classify(rec, self.seen_congestion, self.seen_link, self.seen_reconfig)
        self.seen_congestion, self.seen_link = rec.lost_congestion, rec.lost_link
        self.seen_reconfig = rec.lost_reconfig or 0
        age = f"telemetry {fresh.age_s * 1e3:.1f} ms old"
        if self.alg.reconfig == "ride":
            night = self._night(rec, r, timeout) if cause == UNKNOWN else None
            if cause == RECONFIG or night is not None:
                self.last_cause = RECONFIG
                how = ("the sink put it in a night" if night is None else
                       f"hop {night[0].node_id} announced a night that ended {night[1] / 1e6:.0f} ms ago")
                shared = None if timeout else self._onto_shared_path(rec)
                if shared is not None:
                    beta, why = shared
                    return beta, f"loss: a path reconfiguration ({how}) {why}; {age}", beta < 1.0
                return 1.0, f"loss: a path reconfiguration ({how}), cwnd kept; {age}", False
        elif cause == RECONFIG:
            cause = self.last_cause = UNKNOWN
        if cause == LINK:
            excess_beta = self._queue_excess_beta(rec)
            if excess_beta is not None:
                beta, why = excess_beta
                return beta, f"loss: link (sink), but {why}; {age}", True
            if self.alg.policy == "l1":
                return 1.0, f"loss: link (sink), L1 keeps cwnd; {age}", False
            return L2_BETA, f"loss: link (sink), L2 beta 0.95; {age}", False
        if cause == "congestion":
            return BETA, f"loss: congestion (sink), CUBIC beta 0.7; {age}", True
        return BETA, f"loss: the sink attributed no new loss of this flow, CUBIC beta 0.7; {age}", True

    def _shared_after_night(self, rec):
        """The migrating hop when the record's packet crossed it after the path's latest night
        and other flows share the queue that packet took (the night moved this flow onto a
        path it shares), else None."""
        now_ns = time.time_ns()
        night = announced_night(rec, now_ns, TIMEOUT_LOOKBACK_NS)
        if night is None:
            return None
        hop, since_ns = night
        return hop if hop.ts_ns >= now_ns - since_ns and hop.flow_count > 1 else None

    def _onto_shared_path(self, rec):
        """(beta, why) of a night that moved this flow onto a path it shares: the window the
        flow carried off the path it had to itself would fill the new path's queue on top of
        the flows already there, so it takes CUBIC's cut (0.7), but not below its share of
        the new path's BDP (_path_share_bytes). None when the flow is not on a shared path
        after the night (or the record is from before it): the window is kept."""
        if self._shared_after_night(rec) is None:
            return None
        w = self._sent_window()
        share, how = self._path_share_bytes()
        floor = max(share or 0.0, 2 * self.mss)
        if floor >= w:
            return 1.0, f"onto a shared path: cwnd kept, at most its share there ({how})"
        beta = max(BETA, floor / w)
        return beta, f"onto a shared path: CUBIC's cut, beta {beta:.2f} (its share there: {how})"

    def _night(self, rec, r: Report, timeout: bool):
        """(hop, ns since its night ended) of a night the path announced that ended while
        this episode's packets were on their way (announced_night), or None."""
        if timeout:
            lookback = TIMEOUT_LOOKBACK_NS
        else:
            lookback = 2 * max(r.rtt_us or 0, r.minrtt_us or 0) * 1000 + NIGHT_SLACK_NS
        return announced_night(rec, time.time_ns(), lookback)

    def _queue_excess_beta(self, rec):
        """(beta, why) of a cut that drains the bottleneck queue's excess over the target,
        or None when the queue is at or below it (or the hop's buffer is unknown)."""
        hop = bottleneck(rec)
        if hop is None:
            return None
        target = hop.queue_capacity_bytes * self.alg.queue_target_pct / 100
        excess = hop.queue_depth_bytes - target
        w = self._sent_window()
        if excess <= 0 or w <= 0:
            return None
        policy_beta = 1.0 if self.alg.policy == "l1" else L2_BETA
        beta = max(BETA, min(policy_beta, 1 - excess / w))
        return beta, (f"the queue {hop.queue_depth_bytes} B is {excess:.0f} B over its target "
                      f"{target:.0f} B: cut by the excess, beta {beta:.2f}")

    def on_timeout(self, r: Report, new_episode: bool) -> str:
        """A timeout is a loss too: when the sink says it was the link, ssthresh is the
        policy's fraction of the window (L1 all, L2 0.95) and W_max kept, instead of CUBIC's
        0.7 and a fresh curve; but ssthresh never goes above the last congestion cut's (a
        link timeout must not undo what congestion taught) nor below CUBIC's 0.7. cwnd
        still restarts at 1 MSS: the ACK clock is gone and the kernel retransmits
        everything unacked; slow start returns to the window in log2(window) RTTs. (With
        CUBIC's cut every RTO took 30 % off, and L2 was ground down to windows where every
        loss is an RTO; docs/datapath.md, A9.)"""
        if not new_episode:
            if self.last_cause == RECONFIG and self.alg.reconfig == "ride":
                # again within a night's episode (its retransmissions met the next night, or
                # the timer backed off): the window restarts at the path's share again
                resume, how = self._resume_bytes(self._sent_window())
                self.cwnd = max(min(resume, self.ssthresh), self.mss)
                return f"timeout again in a reconfiguration's episode: cwnd {self.cwnd / self.mss:.0f} segments ({how})"
            return super().on_timeout(r, new_episode)
        beta, why, congestive = self.loss_backoff(r, timeout=True)
        if congestive:
            return f"{super().on_timeout(r, new_episode)} ({why})"
        w = self._sent_window()
        if self.last_cause == RECONFIG:
            return self._night_timeout(r, w, why)
        cubic = (w // self.mss * BETA) // 1 * self.mss
        self.ssthresh = max(cubic, min(w * beta, self.congestion_ssthresh), 2 * self.mss)
        self.cwnd = self.mss
        self._end_epoch()
        capped = " (the last congestion cut's)" if w * beta > self.congestion_ssthresh else ""
        return (f"timeout, {why}: cwnd 1 MSS, ssthresh {self.ssthresh / self.mss:.0f} segments{capped}, "
                f"W_max kept")

    def _night_timeout(self, r: Report, w: float, why: str) -> str:
        """A timeout of a reconfiguration's night: ssthresh and W_max kept, the window at
        what the path can take (resume_bytes), the curve from there."""
        self.ssthresh = max(min(w, self.congestion_ssthresh), 2 * self.mss)
        resume, how = self._resume_bytes(w)
        fresh = self._telemetry()
        if fresh is not None and self._shared_after_night(fresh.record) is not None:
            # onto a path it shares: slow start back to CUBIC's cut at most (_onto_shared_path)
            self.ssthresh = max(min(self.ssthresh, max(w * BETA, resume)), 2 * self.mss)
            how += ", a shared path: ssthresh CUBIC's 0.7 of the window"
        self.cwnd = max(min(resume, self.ssthresh), self.mss)
        self._end_epoch()
        self.ca_target = float(max(self.ssthresh // self.mss, 1) * self.mss)
        return (f"timeout, {why.replace('cwnd kept', 'W_max and ssthresh kept')}: cwnd "
                f"{self.cwnd / self.mss:.0f} segments ({how}), not 1 MSS")

    def _path_share_bytes(self):
        """(bytes, why) of this flow's share of its path's BDP: the migrating hop's port rate
        over its flows times the flow's minimum RTT; (None, why) when either is unknown."""
        fresh = self._telemetry()
        hop = None
        if fresh is not None:
            hop = migrating_hop(fresh.record)
        rtt_s = (self.delay_min_us or 0) / 1e6
        if hop is None or not hop.data_rate_kbps or not rtt_s:
            return None, "no rate or RTT known"
        share_bytes = hop.data_rate_kbps * 1000 / 8 / max(hop.flow_count, 1) * rtt_s
        return share_bytes, f"{hop.data_rate_kbps} kbit/s over {max(hop.flow_count, 1)} flows x {rtt_s * 1e3:.1f} ms"

    def _resume_bytes(self, w: float):
        """(bytes, why) the path takes after a night: the flow's share of its BDP
        (_path_share_bytes), at most the window before; half of that when the share is unknown."""
        share, how = self._path_share_bytes()
        if share is None:
            return w / 2, f"half the window: {how}"
        return min(w, share), how

    def growth_registers(self) -> list[tuple[str, int]]:
        return super().growth_registers() + [("rto_min", self.rto_min_us())]

    def rto_min_us(self) -> int:
        """The flow's minimum RTO (register rto_min): the downtime a hop announces for this
        flow, 10 ms to 200 ms; the kernel's 200 ms once none does (0 before any did: left
        as it is)."""
        if self.alg.reconfig == "ride":
            fresh = self._telemetry()
            hop = migrating_hop(fresh.record) if fresh is not None else None
            if hop is not None:
                self.night_rto_min = True
                return min(max(hop.reconfig_downtime_ms * 1000, NIGHT_RTO_MIN_FLOOR_US), KERNEL_RTO_MIN_US)
        return KERNEL_RTO_MIN_US if self.night_rto_min else 0

    def _bottleneck_hop(self):
        fresh = self._telemetry()
        hop = bottleneck(fresh.record) if fresh else None
        return (hop, fresh) if hop is not None and hop.arrival_rate_pps else (None, None)

    def hystart_applies(self) -> bool:
        return self.alg.hystart and self._bottleneck_hop()[0] is None

    def slow_start_in_datapath(self) -> int:
        # With fresh hop telemetry slow start grows by Eq. (1), decided per report here.
        limit = super().slow_start_in_datapath()
        return 0 if limit and self._bottleneck_hop()[0] is not None else limit

    def slow_start_growth(self, r: Report):
        hop, fresh = self._bottleneck_hop()
        if hop is None or r.rtt_us <= 0:
            return r.growth_bytes(self.mss), "slow start (no fresh hop telemetry)"
        free = max(0, hop.queue_capacity_bytes - hop.queue_depth_bytes)
        share_per_rtt = hop.arrival_rate_pps * self.mss * r.rtt_us / 1e6 / max(hop.flow_count, 1)
        room = free / max(share_per_rtt, self.mss)
        growth = self.alg.increment * r.growth_bytes(self.mss) * min(1.0, room)
        ceiling = r.inflight * self.mss + free / max(hop.flow_count, 1)   # in flight + our share of the free buffer
        growth = max(0.0, min(growth, ceiling - self.cwnd))
        return growth, (f"slow start Eq.1: free {free} B ({room:.2f} RTTs of our arrivals at "
                        f"{hop.arrival_rate_pps} pps, {hop.flow_count} flows), increment {self.alg.increment}; "
                        f"telemetry {fresh.age_s * 1e3:.1f} ms old")


class CubicInt(Cubic):
    name = "cubic-int"
    summary = "INT-aware CUBIC: link losses do not cut cwnd like congestion (the INT-eBPF paper)."
    flow_class = CubicIntFlow
    params = (Param("policy", str, "l1", "on a link (non-congestive) loss: l1 keeps cwnd, l2 multiplies it by 0.95",
                    choices=tuple(POLICIES)),
              Param("increment", float, 1.0, "slow-start growth factor of paper Eq. (1) (paper: 1, 2, 3)",
                    min=0, min_open=True),
              Param("max_age_ms", float, 200.0, "older telemetry is ignored: the flow is then plain CUBIC", min=0),
              Param("queue_target_pct", float, 10.0, "a link loss keeps the window only while the bottleneck "
                    "queue is below this share of its buffer; above, it cuts by the excess", min=0, max=100),
              Param("reconfig", str, "ride", "a path reconfiguration's night (announced in INT): ride keeps "
                    "the window through its losses (CUBIC's cut when it moved the flow onto a shared path) "
                    "and restarts a timeout at the path's share; off: CUBIC",
                    choices=RECONFIG_MODES),
              HYSTART, INIT_CWND)
    needs_telemetry = True

    def __init__(self, policy: str = "l1", increment: float = 1.0, telemetry=None, directory=None,
                 max_age_ms: float = 200.0, queue_target_pct: float = 10.0, init_cwnd_pkts: int = 10, trace: str | None = None,
                 hystart: bool = True, reconfig: str = "ride", **kwargs):
        by_name = {p.name: p for p in self.params}
        by_name["policy"].check(policy)
        by_name["increment"].check(increment)
        by_name["queue_target_pct"].check(queue_target_pct)
        by_name["reconfig"].check(reconfig)
        super().__init__(init_cwnd_pkts=init_cwnd_pkts, trace=trace, hystart=hystart, **kwargs)
        self.policy = policy
        self.increment = increment
        self.telemetry = telemetry      # .flow(flow_id, max_age_s) -> Fresh | None
        self.directory = directory      # .flow_id(datapath_info) -> str | None
        self.max_age_ms = max_age_ms
        self.queue_target_pct = queue_target_pct
        self.reconfig = reconfig
