"""``intcc alg run adaptive``: every ``ccp`` flow starts on one algorithm and moves to
another when the estimator's verdict on its competitor says so (switching.py), live,
with its state carried over (ccp_algs/handover.py), and, where the estimator reads the
sink's telemetry, at the competitor's rate at the bottleneck (``match_rate``; and once
at its first verdict, before any switch, where the flow is ahead: ``match_at_start_below``).

The estimator runs in a child process (estimation.py); the agent reads its verdicts at
each report without waiting. Every switch goes to the trace (event ``switch``), to the
log, and to MQTT as a SwitchRecord on the flow's estimate topic.
"""
from __future__ import annotations

import logging
import time
import weakref

from ccp_algs.handover import Host, HostedFlow
from telemetry.schema import SwitchRecord, encode, estimate_topic

from .switching import SwitchPolicy

log = logging.getLogger("intcc.adaptive")


class AdaptiveFlow(HostedFlow):
    def __init__(self, host: "Adaptive", datapath, datapath_info):
        super().__init__(host, datapath, datapath_info)
        self.in_control_since = time.monotonic()
        self.verdict = None
        self.flow_id = None
        self.start_ratio_seen = False
        if host.estimation is not None:
            host.estimation.observe(self.sid, (datapath_info.src_ip, datapath_info.src_port, datapath_info.dst_ip,
                                               datapath_info.dst_port), self.current)

    def on_report(self, raw):
        super().on_report(raw)
        self.host.take_messages()

    def consider(self, v):
        """A new verdict on this flow's competitor: switch if the policy says so."""
        if v is self.verdict:
            return
        self.verdict, self.flow_id = v, v.flow_id or self.flow_id
        if self.host.identified:
            return self._identified(v)
        if self.host.match_at_start_below and not self.start_ratio_seen and not self.switches \
                and v.competitor_rate_ratio is not None:
            self.start_ratio_seen = True        # the first measured ratio decides, once
            if v.competitor_rate_ratio < self.host.match_at_start_below:
                self.match_competitor_rate(v.competitor_rate_ratio, why="the estimator's first verdict",
                                cause_mono_ns=v.sent_mono_ns or None)
        # every verdict in the trace: what the estimator said, not only what it moved (and
        # the step's own estimate: scored by time since a switch, experiments/runs/metrics.py)
        self.flow.trace.row(sid=self.flow.sid, event="verdict",
                            reason=f"{v.estimate} ({v.confidence:.0%} of {sum(v.votes.values())}); row {v.row_estimate}")
        target = self.host.policy.decide(self.current, time.monotonic() - self.in_control_since, v.estimate,
                                         v.confidence, sum(v.votes.values()), shares=v.votes)
        if target is None:
            return
        before = self.current
        why = f"verdict {v.estimate} ({v.confidence:.0%} of {sum(v.votes.values())}), {self.host.policy.policy}"
        ratio = v.competitor_rate_ratio if self.host.match_rate else None
        self.switch(target, why=why, cause_mono_ns=v.sent_mono_ns or None, rate_ratio=ratio)
        self.in_control_since = time.monotonic()
        log.info("flow %s: %s -> %s on %s", self.sid, before, target, why)
        self.host.announce_switch(self, before, target, v)


    def _identified(self, v):
        """Active identification: the probe runs until a hypothesis is committed, then the
        flow switches, to the policy's answer to it (to ``unknown_fallback`` for a
        competitor outside the four); back to the probe when the competitors change, and
        again on the next commit."""
        self.flow.trace.row(sid=self.flow.sid, event="verdict",
                            reason=f"identify: {v.estimate or 'undecided'}, best {v.row_estimate} "
                                   f"({v.confidence:.0%}); " + " ".join(f"{s}={m}" for s, m in v.evidence)
                                   + (f"; competitors' base RTT {'/'.join(f'{x:g}' for x in v.competitor_rtts_ms)} ms"
                                      if v.competitor_rtts_ms else ""))
        if v.reidentify is not None:
            if self.current != self.host.initial:      # the fair share again while it asks anew
                self._switch_on(v, self.host.initial, f"re-identify: {v.reidentify}")
            return
        if v.estimate is None or self.current != self.host.initial:
            return
        target = (self.host.unknown_fallback if v.estimate == "unknown"
                  else self.host.policy.target(v.estimate) or self.host.unknown_fallback)
        # onto the competitors' own CCA, from their rate (match_rate): the probe's fair share
        # counts every flow at the port, UDP's and an app-limited one's too, so beside them the
        # competitors ran faster; mirrored from its own rate, the flow stayed behind (AIMD in
        # a deep buffer closes such a gap over minutes) and the switch was taken back
        ratio = v.competitor_rate_ratio if self.host.match_rate and target == v.estimate else None
        # ... and onto their CUBIC along their epoch: begun afresh at the switch, its curve
        # grew far slower than theirs, seconds into it (ccp_algs/cubic.py _adopt_competitor_epoch)
        epoch = None
        if self.host.match_rate and target == v.estimate == "cubic" and v.competitor_epoch is not None:
            origin_pkts, k_s, age_s = v.competitor_epoch
            epoch = (origin_pkts * self.flow.mss, k_s, age_s)
        self._switch_on(v, target, f"identified {v.estimate} ({v.confidence:.0%} posterior), {self.host.policy.policy}",
                        rate_ratio=ratio, cubic_epoch=epoch)

    def _switch_on(self, v, target: str, why: str, rate_ratio: float | None = None, cubic_epoch: tuple | None = None):
        before = self.current
        self.switch(target, why=why, cause_mono_ns=v.sent_mono_ns or None, rate_ratio=rate_ratio,
                    cubic_epoch=cubic_epoch)
        log.info("flow %s: %s -> %s on %s", self.sid, before, target, why)
        self.host.announce_switch(self, before, target, v)


class Adaptive(Host):
    name = "adaptive"
    summary = "Switch each flow's algorithm on the estimator's verdict of its competitor (the ML-fairness paper)."

    def __init__(self, algorithms, initial: str, policy: SwitchPolicy, estimation=None, match_rate: bool = False,
                 match_at_start_below: float = 0.0, trace=None, identified: bool = False,
                 unknown_fallback: str = "cubic", **kwargs):
        super().__init__(algorithms, initial, trace=trace, **kwargs)
        self.policy = policy
        self.match_rate = match_rate            # a switch takes the verdict's competitor rate (INT)
        # the first verdict's competitor rate (competitor / flow), taken once before any switch
        # where below this (0: never), CCA kept: the gap the start opens (a Vegas competitor
        # squeezed) does not wait ~10 s for a verdict. Measured (docs/results/): a match
        # at ~1 restarts CUBIC's epoch and it fell behind; one up followed a slow start's burst
        self.match_at_start_below = match_at_start_below
        self.estimation = estimation            # EstimatorProcess (None: no verdicts, no switches)
        # IdentificationProcess verdicts (--identify active): one switch, on a committed hypothesis
        self.identified = identified
        self.unknown_fallback = unknown_fallback
        self.flows = weakref.WeakValueDictionary()   # sid -> AdaptiveFlow, while portus keeps it
        self.failed: set = set()                # flows whose estimation failed (logged once each)

    def new_flow(self, datapath, datapath_info):
        flow = AdaptiveFlow(self, datapath, datapath_info)
        self.flows[flow.sid] = flow
        return flow

    def take_messages(self):
        """The estimator's news, at any flow's report (pyportus runs the agent only in its
        callbacks): a verdict is acted on at once, whichever flow reported, not at its own
        flow's next report, which a small window or an RTO can hold back for many RTTs."""
        if self.estimation is None:
            return
        with self.trace.held():      # the switches' commands first, their rows after
            for kind, sid, body in self.estimation.poll():
                self._take(kind, sid, body)

    def _take(self, kind, sid, body):
        if kind == "verdict":
            flow = self.flows.get(sid)
            if flow is not None:
                flow.consider(body)
            log.debug("flow %s: verdict %s (%.0f%% of %d), competitor's rate x%s", sid, body.estimate,
                      100 * body.confidence, sum(body.votes.values()),
                      "?" if body.competitor_rate_ratio is None else f"{body.competitor_rate_ratio:.3g}")
        elif sid not in self.failed:
            self.failed.add(sid)
            who = f"flow {sid}" if sid is not None else "every flow"
            log.warning("estimation failed, %s stays on its algorithm: %s", who, body)

    def announce_switch(self, flow: AdaptiveFlow, before: str, after: str, verdict):
        if self.estimation is None:
            return
        self.estimation.local_changed(flow.sid, after)       # the model for the new local CCA; the vote goes on
        if flow.flow_id is None:
            return
        rec = SwitchRecord(flow_id=flow.flow_id, ts_ns=time.time_ns(), from_cca=before, to_cca=after,
                           verdict=verdict.estimate, confidence=round(verdict.confidence, 4), votes=verdict.votes,
                           policy=self.policy.policy)
        self.estimation.publish(estimate_topic(flow.flow_id), encode(rec))
