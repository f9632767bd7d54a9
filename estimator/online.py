"""Online estimation for a live flow: capture at the sender's interface, Table I
features on everything seen so far, one Random Forest estimate every
``interval_s`` (the spacing the training rows have), a majority vote over the
last ``window`` estimates, and the verdict published on
``intcc/v1/estimate/<flow-id>`` (as the intcc-agent user: the ACL lets agents
publish estimates). A model trained with INT features (``--features
table1+int``) also needs the sink's FlowRecords of the flow (``add_telemetry``,
fed from a TelemetryView); until there are two, it makes no estimate. One trained with
the competitors' flow features (``table1+int+flows``) also reads the sink's HopRecords
(``add_hop``: the busiest flows through each node)."""
from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from telemetry.flowid import PROTO_TCP, flow_id
from telemetry.schema import EstimateRecord, encode, estimate_topic

from .capture import PcapTail, SenderObserver, parse_tcp
from .features import TraceError, last_features
from .hop_flows import HopFlows
from .int_features import select_features, uses_flows, uses_int
from .int_series import IntSeries
from .model import CCAEstimator
from .sink_view import SinkView
from .vote import MajorityVote, Verdict, first_stable_correct

log = logging.getLogger("intcc.estimator")


#: The capture's busiest flow is taken as the observed one once it has sent this much
#: payload: ten full segments, more than iperf3's control connection ever carries.
OBSERVED_FLOW_MIN_BYTES = 14_480
EARLY_RECORDS_MAX = 20_000


@dataclass
class Step:
    t_s: float                 # since observation started
    flow_id: str | None
    estimate: str | None       # this step's raw estimate
    verdict: Verdict
    # the mean competitor's packet rate over this flow's at the bottleneck, last 2 s (INT
    # models, from the sink's hop records; None otherwise): what a switch can match
    competitor_rate_ratio: float | None = None


class OnlineEstimator:
    def __init__(self, model: CCAEstimator, local_cca: str, window: int = 50, sender: str | None = None):
        self.uses_int = uses_int(model.feature_names)
        self.uses_flows = uses_flows(model.feature_names)
        model._model(local_cca)                       # fails early, naming the CCAs it has
        self.model, self.local_cca = model, local_cca
        self.vote = MajorityVote(window)
        self.observer = SenderObserver(sender)
        self.estimates = 0
        self.t0 = time.monotonic()
        self.view = SinkView()
        # FlowRecords that came before the capture showed which flow is observed (iperf3's
        # control connection carries the first payload; latching onto it kept a flow's
        # records out for the whole run); more than this are counted and left out
        self._early_records: deque = deque()
        self.early_records_dropped = 0
        # the flow's min RTT from before the capture began (the kernel's, for a flow found
        # running): the base RTT the INT features scale by is the smaller of it and the capture's
        self.base_rtt_hint_s: float | None = None

    def expect_flow(self, src: str, dst: str, sport: int, dport: int):
        """The observed flow's tuple, known before its capture has seen a packet (the
        agent's datapath lists it): its records are kept from the first one on."""
        self.telemetry.flow_id = flow_id(src, dst, PROTO_TCP, int(sport), int(dport))

    def add_telemetry(self, rec) -> bool:
        """A FlowRecord from the sink; kept if it is the observed flow's. Without
        ``expect_flow`` the observed flow is the capture's busiest once it has sent
        OBSERVED_FLOW_MIN_BYTES; records before then wait, and are sorted then."""
        if self.telemetry.flow_id is None and not self._resolve_flow():
            if len(self._early_records) < EARLY_RECORDS_MAX:
                self._early_records.append(rec)
            else:
                self.early_records_dropped += 1
            return False
        return self._keep(rec)

    def _resolve_flow(self) -> bool:
        """Name the observed flow from the capture, if it can yet, and replay the records
        that waited for it."""
        key, f = self.observer.busiest()
        if key is None or f.payload < OBSERVED_FLOW_MIN_BYTES:
            return False
        tup = self.observer.flow_tuple()
        self.telemetry.flow_id = flow_id(tup[0], tup[1], PROTO_TCP, tup[2], tup[3])
        while self._early_records:
            self._keep(self._early_records.popleft())
        return True

    @property
    def telemetry(self) -> IntSeries:
        """The observed flow's FlowRecords."""
        return self.view.series

    @property
    def hop_flows(self) -> HopFlows:
        """The hop records: the competitors at each node."""
        return self.view.hops

    def _keep(self, rec) -> bool:
        return self.view.add_flow_record(rec)

    def add_record(self, rec) -> bool:
        """A FlowRecord or HopRecord from the sink, to add_telemetry or add_hop."""
        return (self.add_hop if rec.type == "hop" else self.add_telemetry)(rec)

    def add_hop(self, rec) -> bool:
        """A telemetry.schema.HopRecord (its top flows: the competitors at each node);
        none from before the flow's first FlowRecord (the training series start there)."""
        return self.view.add_hop(rec)

    def feed_pcap(self, tail: PcapTail) -> int:
        n = 0
        for t, fr in tail.read_new():
            p = parse_tcp(fr)
            if p is not None:
                self.observer.add(t, p)
                n += 1
        return n

    def step(self) -> Step | None:
        """One estimate from the latest ACK's features; None until the flow has enough ACKs
        (and, for INT models, its telemetry and a competitor on its path)."""
        try:
            trace = self.observer.trace()
            x = last_features(trace)
            if self.uses_int:
                if self.telemetry.flow_id is None:
                    self._resolve_flow()
                if self.competitor_age_s() is None:
                    return None
                F = self.view.features(trace.ack_t[-1:], self.base_rtt_s(trace), self.uses_flows)
                if F is None:
                    return None
                x = select_features(np.hstack([x, F]), self.model.feature_names)
        except TraceError:
            return None
        est = str(self.model.predict(x, self.local_cca)[0])
        self.estimates += 1
        tup = self.observer.flow_tuple()
        fid = flow_id(tup[0], tup[1], PROTO_TCP, tup[2], tup[3]) if tup else None
        ratio = self.hop_flows.competitor_rate_ratio(self.telemetry.bottleneck_node(), self.telemetry.flow_id,
                                                     rtt_s=float(trace.rtt_s[-1])) if self.uses_int else None
        return Step(time.monotonic() - self.t0, fid, est, self.vote.update(est), ratio)

    def competitor_age_s(self) -> float | None:
        """How long a competing data flow has shared the path (s; INT models, from the
        sink's hop records): None while there is none, and no estimate is made then."""
        return self.hop_flows.competitor_age_s(self.telemetry.flow_id)

    def base_rtt_s(self, trace) -> float:
        """The flow's base RTT: the capture's smallest sample, or the hint if smaller."""
        seen = float(np.min(trace.rtt_s))
        return min(seen, self.base_rtt_hint_s) if self.base_rtt_hint_s else seen

    def record(self, step: Step) -> EstimateRecord:
        v = step.verdict
        return EstimateRecord(flow_id=step.flow_id, ts_ns=time.time_ns(), local_cca=self.local_cca,
                              estimate=v.estimate, confidence=round(v.confidence, 4), votes=v.votes,
                              window=self.vote.w, estimates=self.estimates)


class Publisher:
    def __init__(self, url: str):
        from broker import client as mqttc
        from broker.auth import AGENT_USER
        self._mqttc = mqttc
        self.client, self.url = mqttc.logged_in(url, AGENT_USER, "intcc-estimator")

    def publish(self, rec: EstimateRecord):
        self.client.publish(estimate_topic(rec.flow_id), encode(rec), qos=0)

    def close(self):
        self._mqttc.stop(self.client)


def first_stable_correct_s(steps: list, truth: str) -> float | None:
    """Time of the first verdict from which every later verdict is ``truth`` (None: never)."""
    return first_stable_correct(np.array([s.t_s for s in steps]),
                                np.array([s.verdict.estimate == truth for s in steps], dtype=bool))
