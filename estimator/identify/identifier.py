"""The identification of one flow's competitor from the sink's hop records at its
bottleneck: the stages' measurements over each stretch as it completes, added to a
sequential test (evidence.py), until one hypothesis passes its threshold.

How the competitor's slow start ended is read from its first packet on (slow_start.py:
Reno's at its loss, far past the queue the others keep; the others' before one). The
stretches start after that start-up (none of the other stages' models holds there): at
its first loss plus three RTTs, or one second and ten RTTs after its first packet,
whichever comes first. Each stretch (a second, or two probe periods of 8 RTTs where
longer) gives one measurement per stage: the port's use (spare.py), the competitor's
answer to the pulses (elasticity.py), the packets it keeps queued (queue_level.py) and,
without a competitor loss in it nor a slow start still doubling to its first, the trend of
its window (queue_trend.py); the competitor's dips on BBR's ProbeRTT clock since its start
(probe_rtt.py) are counted again at each. Where no TCP flow competes but UDP does, a
stretch gives the port's use and not_tcp.py's answer only. Each competitor loss after its
first (the slow-start exit, whose overshoot no cut model holds for) gives its cut
(loss_cut.py); whether it went on losing in the rounds after its first loss, once its
recovery is over, and how far its window fell by then, are read as they complete
(loss_repeat.py, exit_cut.py). The bottleneck is the node on
the flow's path with the slowest stamped port."""
from __future__ import annotations

import numpy as np

from . import elasticity, exit_cut, forest, loss_cut, loss_repeat, not_tcp, probe_rtt, queue_level, queue_trend, slow_start, spare, switch_share
from .bottleneck import BIN_S, NodeRecords, competing
from .evidence import COMMIT_POSTERIOR, Evidence, SequentialTest, aggregate

STARTUP_S, STARTUP_RTTS = 1.0, 10
STRETCH_S, STRETCH_RTTS = 1.0, 16
LOSS_SETTLE_RTTS = 3
TREND_RTTS = 4                # the window's trend is fit over at least this many RTTs (queue included)
MIN_PERIOD_S = 0.2            # the probe's shortest period (ccp_algs/probe.py)
MIN_COMPETITOR_PKTS = 20      # in competitors()' window: fewer is a handshake, not a competitor
#: beside UDP alone, a TCP flow with this many packets in the last second (Linux's initial
#: window) is starting: it is about to be the competitor, and UDP's "unknown" waits for it
NEW_TCP_PKTS = 10
#: a restart for a competitor that joined keeps this much of the records before its first
#: packet: the dips' history (probe_rtt.HISTORY_S) and its first bin not the series' first
RESTART_HISTORY_S = 2.0
#: a forest-stage model (forest.py; lab/estimator/forest_stage.py trains one): the passive
#: features' forest as one more stage; "" (the default): none. Set for ablation replays.
FOREST_MODEL = ""


class Identifier:
    def __init__(self, own_flow_id: str, base_rtt_s: float | None = None, threshold: float = COMMIT_POSTERIOR,
                 keep_s: float = 60.0, probe_period_rtts: float = 8.0, competitor_base_rtt_s: float | None = None,
                 forest_model: str | None = None):
        self.own_flow_id = own_flow_id
        #: every competitor's base RTT where it is known otherwise (a replay's oracle, a test);
        #: None: each one's as the sink's node measured it, else this flow's
        self.competitor_base_rtt_s = competitor_base_rtt_s
        self.probe_period_rtts = probe_period_rtts      # the probe's (ccp_algs/probe.py period_rtts)
        self.base_rtt_s = base_rtt_s
        self.test = SequentialTest(threshold)
        self.keep_s = keep_s
        self.nodes: dict[int, NodeRecords] = {}
        #: other intcc senders identifying at the same time (their identify records name them):
        #: their pulses add to this flow's, and they are never competitors
        self.peers: frozenset = frozenset()
        self.node_id: int | None = None
        self.competitor_since_s: float | None = None   # the records' clock: its first packet at the bottleneck
        self._stretch_next_s: float | None = None       # where the next stretch starts (records' clock)
        self._stretch_first_s: float | None = None      # where the first one started
        self._stretched = False                         # a stretch has been read
        self._udp_only = False                          # competed by UDP alone so far
        self._tcp_starting = False                      # ... and a TCP flow is starting beside it
        # competitor -> the time of its last loss read (its first: the slow-start exit, skipped);
        # times, not bins: the series' first bin moves as old records go
        self._loss_read_s: dict = {}
        self._slow_start_outcomes: dict = {}   # competitor -> how its slow start ended (slow_start.py)
        self._slow_start_exit: dict = {}       # competitor -> (when, its window in packets) it left a "held" one
        self._loss_repeat_read: dict = {}      # competitor -> (lossy rounds, rounds read, window) after its first loss
        self._exit_cut_read: dict = {}         # competitor -> (its window's fall after its first loss, its peak)
        self.series = None                     # the bottleneck's series as the last step read it
        self.measured: dict = {}            # stage -> [(value, its standard error)]
        self._level_context = (0.0, 0.0, 0.0)    # (BDP, buffer) in packets and the port's packets/s, for queue_level
        # (competitor's window in packets, RTT s, its age s, its RTT s where measured) of each trend
        self._trend_context: list = []
        # the passive features' forest as one more stage: the model given, else FOREST_MODEL's
        forest_model = FOREST_MODEL if forest_model is None else forest_model
        self.forest = forest.ForestStage(forest_model) if forest_model else None
        self._forest_views: dict = {}          # node id -> forest.NodeView (with a forest only)

    def add(self, rec) -> None:
        """A telemetry.schema.HopRecord from any node."""
        self.nodes.setdefault(rec.node_id, NodeRecords(self.keep_s)).add(rec)
        if self.forest is not None:
            self._forest_views.setdefault(rec.node_id, forest.NodeView()).add(rec)

    def _bottleneck(self) -> NodeRecords | None:
        on_path = {nid: n for nid, n in self.nodes.items() if n.has_flow(self.own_flow_id)}
        if not on_path:
            return None
        rated = {nid: n for nid, n in on_path.items() if n.port_bps() > 0}
        pool = rated or on_path
        self.node_id = min(pool, key=lambda nid: (pool[nid].port_bps() if rated else 0,
                                                  -np.mean([r[2] for r in pool[nid].rows])))
        return pool[self.node_id]

    def step(self) -> list[Evidence]:
        """Read what completed since the last step; the evidence it added."""
        node = self._bottleneck()
        s = node.series(self.own_flow_id, self.peers) if node is not None else None
        if s is None or self.base_rtt_s is None:
            return []
        self.series = s
        first = s.comp_first_bin()
        if first is None:
            first = self._not_tcp_first_bin(s)      # none of TCP: UDP only, if any
            if first is None:
                return []
            self._udp_only = True
            # a TCP flow starting is not a competitor yet (too few packets to name), but
            # what UDP alone says is about to be forgotten: nothing is read or committed
            self._tcp_starting = s.tcp_rest is not None and s.tcp_rest[-int(round(1 / BIN_S)):].sum() >= NEW_TCP_PKTS
            if self._tcp_starting:
                return []
        elif self._udp_only:       # a TCP competitor after UDP alone: what was read is not about it
            self._forget()
        if self.competitor_since_s is None:
            self.competitor_since_s = s.t0_s + first * BIN_S
        rtt_s = self.base_rtt_s + float(np.median(s.queue_delay_s()[first:])) if s.port_bps else self.base_rtt_s
        added = self._loss_cuts(s, rtt_s) + self._slow_start(s) + self._loss_repeat(s) + self._exit_cut(s)
        if self._stretch_next_s is None:
            lost_any = np.flatnonzero(s.comp_lost.sum(axis=0) > 0)
            by_time = self.competitor_since_s + max(STARTUP_S, STARTUP_RTTS * rtt_s)
            by_loss = s.t0_s + lost_any[0] * BIN_S + LOSS_SETTLE_RTTS * rtt_s if lost_any.size else by_time
            start = min(by_time, by_loss)
            if s.t0_s + s.n * BIN_S < start:
                return added
            self._stretch_next_s = self._stretch_first_s = start
        length_s = max(STRETCH_S, STRETCH_RTTS * self.base_rtt_s)
        # the stages average over an RTT or a probe period centred on each bin, and count the
        # packets queued at a bin by those that leave within the queue's delay after it: a
        # stretch is read once the series runs that far past its end (before, the average's
        # edge reads as a falling rate, a false trend many segments per RTT down)
        margin_s = max(rtt_s, self._period_s()) / 2 + BIN_S + float(s.queue_delay_s()[-int(length_s / BIN_S):].max())
        while self._stretch_next_s + length_s + margin_s <= s.t0_s + s.n * BIN_S:
            lo = max(0, int(round((self._stretch_next_s - s.t0_s) / BIN_S)))
            hi = lo + int(round(length_s / BIN_S))
            self._stretch_next_s += length_s
            added += self._stretch(s, lo, hi, rtt_s)
            self._stretched = True
        if added and self._stretched and s.comp.shape[0]:
            added.append(self._probe_rtt(s))
            if self.forest is not None:
                added += self._forest(s)
        return added

    def _forest(self, s) -> list[Evidence]:
        """The passive features' forest at the series' end (forest.py), replacing its last."""
        view = self._forest_views.get(self.node_id)
        ev = self.forest.evidence(view, self.own_flow_id, s.t0_s + s.n * BIN_S, self.base_rtt_s) \
            if view is not None else None
        if ev is None:
            return []
        self.test.set("forest", ev)
        self.test.evidence.append(ev)
        return [ev]

    def comp_base_rtts(self, s) -> np.ndarray:
        """Each competitor's base RTT (F,), s: its least round trip the sink's node measured
        less the least queueing delay at the bottleneck since its first packet there (every
        sample of its waited at least that long), else this flow's base RTT. A competitor's
        round trips set when it learns of a loss and how far its window reaches beyond the
        queue (Series.comp_window); its access links may be longer than this flow's."""
        if self.competitor_base_rtt_s is not None:
            return np.full(s.comp.shape[0], float(self.competitor_base_rtt_s))
        out = np.full(s.comp.shape[0], float(self.base_rtt_s))
        if s.comp_rtt_s is None:
            return out
        delay = s.queue_delay_s()
        for f, rtt_s in enumerate(s.comp_rtt_s):
            sent = np.flatnonzero(s.comp[f] > 0)
            if np.isfinite(rtt_s) and sent.size:
                out[f] = max(BIN_S, float(rtt_s) - float(delay[sent[0]:].min()))
        return out

    def comp_rtts_known(self, s) -> bool:
        """Whether every competitor's base RTT is known (comp_base_rtts is not this flow's stand-in)."""
        return self.competitor_base_rtt_s is not None or (
            s.comp_rtt_s is not None and s.comp.shape[0] > 0 and bool(np.isfinite(s.comp_rtt_s).all()))

    def restart(self, new_competitors=()) -> None:
        """Identify anew: the test and what was read forgotten. The records of the last
        RESTART_HISTORY_S before the first packet of the first of ``new_competitors`` (flows
        that joined) are kept, so that their start is read as it came (their slow start: a
        fresh identifier sees them already running); with none (a competitor left), nothing is.
        Flows that were there before and still are, are read on from what is kept."""
        seen = [t for node in self.nodes.values() for f in new_competitors
                if (t := node.first_seen_s(f)) is not None]
        for nid in list(self.nodes):
            if seen:
                self.nodes[nid].drop_before(min(seen) - RESTART_HISTORY_S)
            else:
                self.nodes[nid] = NodeRecords(self.keep_s)
                self._forest_views.pop(nid, None)
        self._forget()
        self.series = None

    def _forget(self) -> None:
        """The test and the stretches anew (the hop records kept)."""
        self.test = SequentialTest(self.test.threshold)
        self.measured, self._loss_read_s, self._trend_context = {}, {}, []
        self._slow_start_outcomes, self._slow_start_exit, self._loss_repeat_read = {}, {}, {}
        self._exit_cut_read = {}
        if self.forest is not None:
            self.forest.reset()
        self.competitor_since_s = self._stretch_next_s = self._stretch_first_s = None
        self._udp_only = self._stretched = self._tcp_starting = False

    def _not_tcp_first_bin(self, s) -> int | None:
        """Where UDP began competing (at least MIN_COMPETITOR_PKTS in a second), with no TCP
        competitor; None if it has not."""
        if s.other is None:
            return None
        per_s = np.convolve(s.other, np.ones(int(1 / BIN_S)), mode="valid")
        hit = np.flatnonzero(per_s >= MIN_COMPETITOR_PKTS)
        return int(hit[0]) if hit.size else None

    def _stretch(self, s, lo: int, hi: int, rtt_s: float) -> list[Evidence]:
        out = []
        use = spare.port_use(s.own[lo:hi].sum() + s.others()[lo:hi].sum(), (hi - lo) * BIN_S, s.port_pps)
        if use is not None:
            out.append(self._measured("spare", use, 0.0))
        if s.comp.shape[0] == 0:                  # no TCP competitor: what competes is not TCP
            other = float(s.other[lo:hi].sum()) if s.other is not None else 0.0
            if other >= MIN_COMPETITOR_PKTS * (hi - lo) * BIN_S:
                out.append(self._measured("not_tcp", 1.0, 0.0))
            return out
        eta = elasticity.elasticity(s, lo, hi)
        if eta is not None:
            out.append(self._measured("elasticity", *eta))
        period_bins = int(round(self._period_s() / BIN_S))
        level = queue_level.level_pkts(s, lo, hi)
        if level is not None and s.port_bps:
            self._level_context = (s.port_pps * self.base_rtt_s, s.buffer_pkts, s.port_pps)
            out.append(self._measured("queue_level", *level))
        # the trend between losses: none in the stretch nor in the RTTs before it (a cut's
        # drain of a deep queue takes its time); fit over TREND_RTTS where the stretch is
        # shorter (a queue of seconds: one RTT's fit is no trend) and no loss is that close
        settle = int(round(LOSS_SETTLE_RTTS * rtt_s / BIN_S))
        # nor while a slow start read as still doubling (slow_start "deep") runs to its loss:
        # its doubling is no trend
        doubling = "deep" in self._slow_start_outcomes.values() and not s.comp_lost[:, :hi].any()
        if not doubling and not s.comp_lost[:, max(0, lo - settle):hi].any():
            lost = np.flatnonzero(s.comp_lost[:, :lo].any(axis=0))
            earliest = max(self._stretch_first_bin(s), lost[-1] + settle + 1 if lost.size else 0)
            lo = max(min(lo, hi - int(round(TREND_RTTS * rtt_s / BIN_S))), min(lo, earliest))
            window = queue_trend.window_pkts(s, lo, hi, self.comp_base_rtts(s), period_bins)
            g = queue_trend.slope_per_rtt(window, rtt_s, s.comp.shape[0])
            if g is not None:
                # CUBIC's curve from its start where no loss gave it an old maximum yet
                age_s = s.t0_s + hi * BIN_S - self.competitor_since_s if not s.comp_lost[:, :hi].any() else None
                comp_rtt_s = float(np.mean(self.comp_base_rtts(s))) + rtt_s - self.base_rtt_s \
                    if self.comp_rtts_known(s) else None
                self._trend_context.append((float(np.mean(window)) / s.comp.shape[0], rtt_s, age_s, comp_rtt_s))
                out.append(self._measured("queue_trend", *g))
        return out

    def _stretch_first_bin(self, s) -> int:
        """The bin where the first stretch began (before it: the competitor's start-up)."""
        return max(0, int(round((self._stretch_first_s - s.t0_s) / BIN_S)))

    def _probe_rtt(self, s) -> Evidence:
        """The competitors' dips in the windows where BBR would have to enter ProbeRTT
        (probe_rtt.py) since their start, as the stage's evidence: replaced at each stretch."""
        first = max(self.competitor_since_s, s.t0_s)
        since = int(round((first - s.t0_s) / BIN_S))
        bases = self.comp_base_rtts(s)
        windows = s.comp_window(bases)
        follow = eligible = count = 0
        spans = []
        for f in range(s.comp.shape[0]):
            sent = np.flatnonzero(s.comp[f][since:] > 0)
            if not sent.size:
                continue
            found = [d for d, _ in probe_rtt.dips(s.comp[f], since)]
            must = probe_rtt.must_dip_windows(s.queue_pkts, s.comp[f], windows[f], since + int(sent[0]),
                                              int(round(bases[f] / BIN_S)), found)
            follow, eligible, count = follow + sum(hit for *_, hit in must), eligible + len(must), count + len(found)
            spans += [hi - lo for lo, hi, _ in must]
        watched_s = max(0.0, s.t0_s + s.n * BIN_S - probe_rtt.RECOVER_S - first) * s.comp.shape[0]
        window_s = (float(np.mean(spans)) * 1.25 * BIN_S) if spans else probe_rtt.PERIOD_SLACK_S
        ev = probe_rtt.evidence(follow, eligible, count, watched_s, window_s)
        self.measured["probe_rtt"] = [(float(follow), 0.0)]
        self.test.set("probe_rtt", ev)
        self.test.evidence.append(ev)
        return ev

    def _slow_start(self, s) -> list[Evidence]:
        """How the competitors' slow starts ended (slow_start.py), once each is decided: the
        stage's evidence from those agreeing, replaced as more decide."""
        decided = False
        bases = self.comp_base_rtts(s)
        for f, fid in enumerate(s.comp_ids):
            if fid not in self._slow_start_outcomes:
                what, at = slow_start.outcome(s, f, float(bases[f]))
                if what is not None:
                    self._slow_start_outcomes[fid] = what
                    decided = True
                if what == "held":        # where it left slow start: FLAT_RTTS before it was read flat
                    rtt_bins = max(1, int(round((bases[f] + s.queue_delay_s()[at]) / BIN_S)))
                    exit_bin = max(0, at - int(slow_start.FLAT_RTTS * rtt_bins))
                    self._slow_start_exit[fid] = (s.t0_s + exit_bin * BIN_S, float(s.comp_window(bases)[f][exit_bin]))
        if not decided:
            return []
        what = slow_start.combined(self._slow_start_outcomes.values())
        if what is None:            # none that says anything, or they disagree: nothing (or no longer)
            if "slow_start" in self.test.stages:
                self.test.set("slow_start", Evidence("slow_start", {h: 0.0 for h in self.test.hypotheses}))
            return []
        return self._stage_read("slow_start", slow_start.evidence(what))

    def _loss_repeat(self, s) -> list[Evidence]:
        """Whether the competitors went on losing after their first loss (loss_repeat.py),
        as its rounds complete: the stage's evidence replaced while any competitor's count
        grows, up to loss_repeat.READ_ROUNDS each. Only a loss since its first packet at the
        bottleneck counts: one of a competitor already running is not its first."""
        changed = False
        for f, fid, base, window in self._lost_since_their_start(s):
            done = self._loss_repeat_read.get(fid)
            if done is not None and done[1] >= loss_repeat.READ_ROUNDS:
                continue
            read = loss_repeat.lossy_rounds(s, f, base, window())
            if read is not None and read[1] and (done is None or read[:2] != done[:2]):
                self._loss_repeat_read[fid] = read
                changed = True
        return self._stage_read("loss_repeat", loss_repeat.evidence(self._loss_repeat_read.values()) if changed else None)

    def _exit_cut(self, s) -> list[Evidence]:
        """How far the competitors' windows fell after their first loss (exit_cut.py), once
        each one's rounds are read: the stage's evidence from all read so far. As in
        _loss_repeat, only a loss since its first packet at the bottleneck counts."""
        changed = False
        for f, fid, base, window in self._lost_since_their_start(s):
            if fid in self._exit_cut_read:
                continue
            read = exit_cut.exit_ratio(s, f, base, window())
            if read is not None:
                self._exit_cut_read[fid] = read
                changed = True
        return self._stage_read("exit_cut", exit_cut.evidence(self._exit_cut_read.values()) if changed else None)

    def _lost_since_their_start(self, s):
        """(row, id, base RTT s, its window row on demand) of each competitor that lost since
        its first packet at the bottleneck (one already running when the series begins: not
        its first loss)."""
        bases = self.comp_base_rtts(s)
        windows = []
        for f, fid in enumerate(s.comp_ids):
            sent = np.flatnonzero(s.comp[f] > 0)
            if not sent.size or sent[0] == 0 or not s.comp_lost[f].any():
                continue

            def window(f=f):        # Series.comp_window, computed at most once per call
                if not windows:
                    windows.append(s.comp_window(bases))
                return windows[0][f]
            yield f, fid, float(bases[f]), window

    def _stage_read(self, stage: str, ev: Evidence | None) -> list[Evidence]:
        """A stage's evidence from all it read so far, where it changed: set in the test."""
        if ev is None:
            return []
        self.measured[stage] = [(float(ev.measured), 0.0)]
        self.test.set(stage, ev)
        self.test.evidence.append(ev)
        return [ev]

    def _period_s(self) -> float:
        """The probe's pulse period."""
        return max(self.probe_period_rtts * self.base_rtt_s, MIN_PERIOD_S)

    def _measured(self, stage: str, value: float, stderr: float) -> Evidence:
        """A stage's new measurement: its own evidence (for the record), and the stage's
        evidence in the test from all of its measurements so far."""
        self.measured.setdefault(stage, []).append((float(value), float(stderr)))
        if stage == "queue_trend":
            self.test.set(stage, queue_trend.combined(self.measured[stage], self._trend_context, self.base_rtt_s))
        else:
            self.test.set(stage, self._stage_evidence(stage, *aggregate(self.measured[stage])))
        ev = self._stage_evidence(stage, value, stderr)
        self.test.evidence.append(ev)
        return ev

    def _stage_evidence(self, stage: str, value: float, stderr: float) -> Evidence:
        if stage == "queue_level":
            bdp_pkts, buffer_pkts, port_pps = self._level_context
            return queue_level.evidence(value, bdp_pkts, buffer_pkts, stderr=stderr, port_pps=port_pps)
        if stage == "queue_trend":      # this measurement's own: its stretch's window and RTT
            window_pkts, rtt_s, age_s, comp_rtt_s = self._trend_context[-1]
            return queue_trend.evidence(value, stderr, window_pkts, rtt_s, self.base_rtt_s, age_s, comp_rtt_s)
        return {"spare": spare.evidence, "elasticity": elasticity.evidence, "queue_trend": queue_trend.evidence,
                "loss_cut": loss_cut.evidence, "not_tcp": not_tcp.evidence}[stage](value, stderr)

    def _loss_cuts(self, s, rtt_s: float) -> list[Evidence]:
        out = []
        bases = self.comp_base_rtts(s)
        windows = s.comp_window(bases)
        for f, fid in enumerate(s.comp_ids):
            lost_bins = np.flatnonzero(s.comp_lost[f] > 0)
            if lost_bins.size and fid not in self._loss_read_s:
                self._loss_read_s[fid] = s.t0_s + lost_bins[0] * BIN_S
            rtt_bins = np.round((bases[f] + s.queue_delay_s()) / BIN_S).astype(int)     # its RTT: when it learns
            for k, cut, err in loss_cut.loss_cut_events(s.comp[f], s.comp_lost[f], rtt_bins, windows[f]):
                t = s.t0_s + k * BIN_S
                if t <= self._loss_read_s.get(fid, float("inf")) + BIN_S:
                    continue
                self._loss_read_s[fid] = t
                out.append(self._measured("loss_cut", cut, err))
        return out

    def verdict(self) -> str | None:
        """The committed hypothesis, None while undecided (and while UDP alone competed so far
        and a TCP flow is starting beside it)."""
        return None if self._tcp_starting else self.test.verdict()

    def share(self, window_s: float) -> tuple[float | None, int, bool]:
        """This flow's share of the TCP packets through its bottleneck over the last
        ``window_s`` (beside the competitors competitors() names), their number, and
        whether it sent nothing there for switch_share.STARVED_S."""
        node = self.nodes.get(self.node_id) if self.node_id is not None else None
        if node is None or node.last_s() is None:
            return None, 0, False
        last = node.last_s()
        others, not_tcp = node.flows_since(last - window_s, self.own_flow_id, self.peers)
        named = competing(others, not_tcp, MIN_COMPETITOR_PKTS)
        own = node.own_packets_since(last - window_s, self.own_flow_id)
        total = own + sum(others[f] for f in named)
        starved = node.own_packets_since(last - switch_share.STARVED_S, self.own_flow_id) == 0
        return (own / total if total else None), len(named), starved

    def competitor_rate_ratio(self, window_s: float) -> float | None:
        """The competitors' mean rate over this flow's at the bottleneck over the last
        ``window_s`` (their packets and its own there), None before both are seen: what a
        switch to their CCA scales this flow's window by, so that it goes on beside them
        from an equal window (ccp_algs/flowstate.FlowState.at_rate_ratio)."""
        node = self.nodes.get(self.node_id) if self.node_id is not None else None
        if node is None or node.last_s() is None:
            return None
        last = node.last_s()
        others, not_tcp = node.flows_since(last - window_s, self.own_flow_id, self.peers)
        named = competing(others, not_tcp, MIN_COMPETITOR_PKTS)
        own = node.own_packets_since(last - window_s, self.own_flow_id)
        if not named or not own:
            return None
        return sum(others[f] for f in named) / len(named) / own

    def competitor_epoch(self) -> tuple[float, float, float] | None:
        """The CUBIC epoch of the competitor with the most packets at the bottleneck over the
        last second, as tcp_cubic runs it before its first loss, read off its packets: (the
        curve's origin, packets; K, s; the epoch's age, s): the curve starts where its slow
        start ended (slow_start.py "held": HyStart's exit, its window there), K 0. None before
        that is read, and after its first loss: there a fresh curve from its window now
        predicted its growth over the next seconds better than its epoch's curve read from
        its last loss (which gave twice the growth it had; lab/estimator/epoch_read.py)."""
        s = self.series
        if s is None or not s.comp.shape[0] or self.base_rtt_s is None:
            return None
        f = int(np.argmax(s.comp[:, -int(round(1 / BIN_S)):].sum(axis=1)))
        if s.comp_lost[f].any() or s.comp_ids[f] not in self._slow_start_exit:
            return None
        start_s, origin = self._slow_start_exit[s.comp_ids[f]]
        age_s = s.t0_s + s.n * BIN_S - start_s
        if age_s <= 0 or not np.isfinite(origin) or origin <= 0:
            return None
        return float(origin), 0.0, float(age_s)

    def take_back(self, hypothesis: str, share: float | None) -> Evidence:
        """The switch its commit made is taken back: evidence against ``hypothesis``."""
        ev = switch_share.evidence(hypothesis, share)
        self.test.add(ev)
        return ev

    def competitors(self, window_s: float = 2.0) -> frozenset:
        """The TCP flows competing at the bottleneck now: bottleneck.competing over the last
        ``window_s``, with at least MIN_COMPETITOR_PKTS."""
        node = self.nodes.get(self.node_id) if self.node_id is not None else None
        if node is None or node.last_s() is None:
            return frozenset()
        return frozenset(competing(*node.flows_since(node.last_s() - window_s, self.own_flow_id, self.peers),
                                   MIN_COMPETITOR_PKTS))
