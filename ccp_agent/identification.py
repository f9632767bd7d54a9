"""The adaptive agent's active identification (``--identify active``), in a child process:
the sink's hop records at each flow's bottleneck read by an Identifier
(estimator/identify/identifier.py) while the flow runs the probe (ccp_algs/probe.py).

Same interface as the estimator process (estimation.py: observe, local_changed, publish,
poll, stop), so the agent takes either. Each step that adds evidence sends a Verdict:
``estimate`` is the committed hypothesis (None while undecided), ``confidence`` its
posterior, ``votes`` every hypothesis's posterior in percent; each is published on the
flow's estimate topic with the stages' measurements (an IdentifyRecord). After a commit the
competitors at the bottleneck are watched: when one joins, or those named leave, the
identification starts again (a Verdict with ``reidentify``: the agent puts the flow back on
the probe; an IdentifyRecord of the fresh test's state). So is the flow's own share once the
switch settled: one that left it clearly worse off than the probe (switch_share.py) is taken
back the same way, with evidence against the hypothesis committed.

Other intcc senders at the bottleneck are peers, not competitors: each flow announces itself
with an identify record once located, and every flow with identify records on the estimate
topics (this agent's others too) is read as a peer by the Identifier."""
from __future__ import annotations

import os
import time
from collections import deque
from types import SimpleNamespace

from .child import GONE, ChildEnd, receive
from .datapath import ReportRequester
from .estimation import Verdict
from .flows import FlowDirectory, LocateError, entry_flow_id, locate_socket, socket_min_rtt_s

SWEEP_S = 2.0
RECENT_RECORDS = 20_000    # hop records kept for flows not located yet (~10 s of 8 nodes' records)


#: after a commit, the competitors at the bottleneck must differ from those named for this
#: many steps in a row (0.25 s each) before the flow is identified again
CHANGE_STEPS = 4


class _Flow:
    def __init__(self, sid, ccp_tuple, threshold, forest_model=None):
        self.sid, self.ccp_tuple, self.threshold = sid, ccp_tuple, threshold
        self.forest_model = forest_model
        self.flow_id = None
        self.base_rtt_s = None
        self.identifier = None
        self.since = time.monotonic()
        self.sent_verdict = None
        self.named = None            # the competitors at the commit (None: not committed)
        self.watching = None         # undecided: the competitors first seen since it began asking
        self.changed_steps = 0
        self.committed_at = None     # when the commit came (monotonic s): its switch is watched
        self.committed = None        # ... and to what

    def competitors_changed(self) -> str | None:
        """Why the competitors now differ from those the evidence is about (a new one, or
        those gone), once it has lasted CHANGE_STEPS steps; else None. Committed: those
        named at the commit. Undecided: those first seen since the identification began
        (a competitor replaced while the flow was still asking, or after a switch was taken
        back, would otherwise be named from its predecessor's evidence); before any is
        seen, nothing (the first one's arrival is what is identified)."""
        now = self.identifier.competitors()
        if self.named is None:
            if self.identifier.verdict() is not None:
                self.named, self.committed_at = now, time.monotonic()
                self.committed = self.identifier.verdict()
                self.changed_steps = 0
                return None
            if not self.watching:
                self.watching, self.changed_steps = (now or None), 0
                return None
            baseline = self.watching
        else:
            baseline = self.named
        self.changed_steps = self.changed_steps + 1 if now != baseline else 0
        if self.changed_steps < CHANGE_STEPS:
            return None
        return "a new competitor" if now - baseline else "the competitor left"

    def switch_worse(self, now: float) -> tuple[str, float | None] | None:
        """Once committed: (why, the share) where the switch made the flow's share clearly
        worse (switch_share.py: starving since STARVED_S after the commit, or under half its
        fair share once the switch settled); else None."""
        from estimator.identify import switch_share
        if self.committed_at is None or now - self.committed_at < switch_share.STARVED_S:
            return None
        window_s = switch_share.window_s(self.base_rtt_s)
        share, n, starved = self.identifier.share(window_s)
        if not starved and now - self.committed_at < switch_share.settle_s(self.base_rtt_s) + window_s:
            return None
        why = switch_share.clearly_worse(share, n, starved)
        return (why, share) if why else None

    def rate_ratio(self) -> float | None:
        """The competitors' mean rate over this flow's at the bottleneck, over the window the
        share after a switch is measured on (switch_share.window_s)."""
        from estimator.identify import switch_share
        if self.base_rtt_s is None:
            return None
        return self.identifier.competitor_rate_ratio(switch_share.window_s(self.base_rtt_s))

    def competitor_rtts_ms(self) -> tuple:
        """Each competitor's base RTT as the identification reads it, ms, where the sink measured it."""
        s = self.identifier.series
        if s is None or not self.identifier.comp_rtts_known(s):
            return ()
        return tuple(round(float(x) * 1e3, 1) for x in self.identifier.comp_base_rtts(s))

    def take_back(self, share: float | None):
        """The switch is taken back: evidence against the hypothesis, and its watch ends
        (the next commit is watched anew)."""
        self.identifier.take_back(self.committed, share)
        self.watching = self.named        # undecided again, about the competitors it named
        self.named = self.committed_at = self.committed = None
        self.changed_steps = 0

    def record(self, measured):
        """The IdentifyRecord of the test's state now, with this step's (stage, measured) pairs."""
        from telemetry.schema import IdentifyRecord
        best, p = self.identifier.test.best()
        return IdentifyRecord(flow_id=self.flow_id, ts_ns=time.time_ns(), node_id=self.identifier.node_id,
                              verdict=self.identifier.verdict(), best=best, posterior=round(p, 4),
                              evidence=[list(m) for m in measured])

    def restart(self):
        """Identify anew: where a competitor joined, from the records since just before its
        first packet (its start read as it came: the slow start of a flow that a fresh
        identifier would see already running), else from the records to come."""
        baseline = self.named if self.named is not None else self.watching
        joined = self.identifier.competitors() - baseline if baseline is not None else frozenset()
        self.identifier.restart(joined)
        self.named, self.changed_steps, self.since, self.committed_at = None, 0, time.monotonic(), None
        self.watching = None

    def locate(self, directory: FlowDirectory) -> bool:
        """The flow's id and base RTT, once the datapath lists it and its socket is found."""
        from estimator.identify.identifier import Identifier
        src_ip, sport, dst_ip, dport = self.ccp_tuple
        entry = directory.lookup(SimpleNamespace(src_ip=src_ip, src_port=sport, dst_ip=dst_ip, dst_port=dport),
                                 wait_s=0.0)
        if entry is None:
            return False
        ns, _ = locate_socket(entry["src"], entry["sport"], entry["dst"], entry["dport"])
        rtt = socket_min_rtt_s(ns, entry["sport"], entry["dport"])
        if rtt is None:
            return False
        self.flow_id, self.base_rtt_s = entry_flow_id(entry), rtt
        self.identifier = Identifier(self.flow_id, base_rtt_s=rtt, threshold=self.threshold,
                                     forest_model=self.forest_model)
        return True


def _serve(conn, broker_url, state_dir, interval_s, threshold, forest_model, parent_pid, parent_end):
    parent_end.close()                      # see estimation._serve
    from broker.subscriber import TelemetryView
    from estimator.online import Publisher
    from telemetry.schema import ESTIMATE_TOPIC, HOP_TOPIC, HopRecord, IdentifyRecord, encode, estimate_topic
    publisher = Publisher(broker_url)
    flows: dict[int, _Flow] = {}
    pending: deque = deque()                # hop records from paho's thread
    recent: deque = deque(maxlen=RECENT_RECORDS)   # for a flow located later: its first seconds
    identifying: set = set()                # flows any intcc sender identifies (their identify records)
    announced: deque = deque()              # ... their ids from paho's thread (a deque: safe to append there)

    def on_record(rec, topic):
        if isinstance(rec, HopRecord):
            pending.append(rec)
        elif isinstance(rec, IdentifyRecord):
            announced.append(rec.flow_id)

    view = TelemetryView(broker_url, topics=(HOP_TOPIC.format(node_id="+"), ESTIMATE_TOPIC.format(flow_id="+")))
    view.on_record(on_record)
    view.start()
    directory = FlowDirectory(state_dir)
    requester = ReportRequester()
    next_step = time.monotonic() + interval_s
    next_sweep = time.monotonic() + SWEEP_S
    try:
        while os.getppid() == parent_pid:
            msg = receive(conn, next_step - time.monotonic())
            if msg is GONE:
                break                                # the agent is gone
            if msg is not None:
                kind, sid = msg[0], msg[1]
                if kind == "observe":
                    flows[sid] = _Flow(sid, msg[2], threshold, forest_model)
                elif kind == "publish":
                    publisher.client.publish(msg[2], msg[3], qos=0)
                continue
            next_step += interval_s
            records = []
            while pending:
                records.append(pending.popleft())
            recent.extend(records)
            while announced:
                identifying.add(announced.popleft())
            peers = frozenset(identifying | {f.flow_id for f in flows.values() if f.flow_id})
            for f in flows.values():
                if f.identifier:
                    f.identifier.peers = peers - {f.flow_id}
                    for rec in records:
                        f.identifier.add(rec)
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + SWEEP_S
                live = directory.live_tuples()
                for sid in [s for s, f in flows.items() if f.identifier and live is not None
                            and f.ccp_tuple not in live]:
                    del flows[sid]
            for f in flows.values():
                if f.identifier is None:
                    try:
                        if not f.locate(directory):
                            continue
                    except (LocateError, OSError) as e:
                        conn.send(("error", f.sid, f"flow {f.sid}: {e}"))
                        f.identifier = False
                        continue
                    for rec in recent:           # the records from before it was found count too
                        f.identifier.add(rec)
                    # say at once that this flow identifies: another intcc sender at its bottleneck
                    # then reads it as a peer, not as a competitor to name
                    publisher.client.publish(estimate_topic(f.flow_id), encode(f.record(())), qos=0)
                if f.identifier is False:
                    continue
                why = f.competitors_changed()
                if why is not None:
                    f.restart()
                    conn.send(("verdict", f.sid, Verdict(f.sid, f.flow_id, None, 0.0, {}, 0.0, time.monotonic_ns(),
                                                         reidentify=why)))
                    requester.request(f.sid)
                    publisher.client.publish(estimate_topic(f.flow_id), encode(f.record(())), qos=0)
                    continue
                worse = f.switch_worse(time.monotonic())
                if worse is not None:       # back to the probe, the hypothesis weakened
                    f.take_back(worse[1])
                    conn.send(("verdict", f.sid, Verdict(f.sid, f.flow_id, None, 0.0, {}, 0.0, time.monotonic_ns(),
                                                         reidentify=f"the switch made it worse: {worse[0]}")))
                    requester.request(f.sid)
                    share = None if worse[1] is None else round(float(worse[1]), 3)
                    publisher.client.publish(estimate_topic(f.flow_id), encode(f.record((("switch_share", share),))),
                                             qos=0)
                    continue
                added = f.identifier.step()
                if not added:
                    continue
                test = f.identifier.test
                best, p = test.best()
                measured = tuple((e.stage, None if e.measured is None else round(float(e.measured), 3))
                                 for e in added)
                v = Verdict(f.sid, f.flow_id, test.verdict(), p, {h: round(100 * x) for h, x in test.posterior().items()},
                            time.monotonic() - f.since, time.monotonic_ns(), f.rate_ratio(), best, measured,
                            competitor_epoch=f.identifier.competitor_epoch() if test.verdict() == "cubic" else None,
                            competitor_rtts_ms=f.competitor_rtts_ms())
                conn.send(("verdict", f.sid, v))
                requester.request(f.sid)
                publisher.client.publish(estimate_topic(f.flow_id), encode(f.record(measured)), qos=0)
    except BrokenPipeError:
        pass
    finally:
        view.stop()
        publisher.close()


class IdentificationProcess(ChildEnd):
    """The parent's end (the interface of estimation.EstimatorProcess)."""

    NAME = "intcc-adaptive-identify"
    serve = staticmethod(_serve)

    def __init__(self, broker_url: str, state_dir: str | None = None, interval_s: float = 0.25,
                 threshold: float | None = None, forest_model: str | None = None):
        """``forest_model``: the passive features' forest as one more stage (estimator/identify/
        forest.py), loaded in the child; None: none."""
        from estimator.identify.evidence import COMMIT_POSTERIOR
        threshold = COMMIT_POSTERIOR if threshold is None else threshold
        super().__init__(broker_url, state_dir or FlowDirectory().path.rsplit("/", 1)[0], interval_s, threshold,
                         forest_model)

    def local_changed(self, sid: int, cca: str):
        pass                     # what the competitor runs does not depend on this flow's algorithm
