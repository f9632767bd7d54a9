"""The online estimation loop, one for ``intcc estimator run`` and for the adaptive agent's
estimator: the sink's records handed to every flow under estimation (and, for a flow whose
estimation starts late, the last ``replay_s`` of them, since its features read its records
from the first one on), one step per call for each flow once it is past its warm-up (the
training rows skip a run's first tenth too) and, for INT models, once a competitor has
shared its path that long, and each verdict published on the flow's estimate topic where it
is made.

    loop = EstimationLoop(publisher)
    view.on_record(lambda rec, topic: loop.add_record(rec))      # any thread
    loop.watch(key, WatchedFlow(OnlineEstimator(model, "cubic"), tail=pcap_tail))
    every interval:  for key, step, record in loop.step_all(): ...
"""
from __future__ import annotations

import time
from collections import deque
from typing import Callable, Optional

from .capture import PcapTail
from .features import TraceError
from .model import ModelError
from .online import OnlineEstimator, Publisher, Step

#: Bounds on what waits for the loop: a stalled loop loses old records, not memory.
RECORDS_MAX = 100_000


class WatchedFlow:
    """One flow under estimation: its estimator, the capture it reads, its warm-up.
    ``start`` (called by the loop before the first step) finds and captures the flow where
    that is a job of its own (the adaptive agent's flows: ccp_agent.estimation)."""

    def __init__(self, est: OnlineEstimator, warmup_s: float = 0.0, tail: Optional[PcapTail] = None):
        self.est = est
        self.tail = tail
        self.warmup_s = warmup_s
        self.started = tail is not None
        self.vote_from = time.monotonic() + warmup_s      # no estimates before

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        pass

    def local_changed(self, cca: str) -> None:
        """A new local algorithm: the model for it (the features go on over the whole flow,
        the time on the earlier algorithm included); a warm-up again. The vote goes on: its
        estimates were of the same competitor (a fresh vote after every switch let the
        first few estimates of the new local CCA, in the switch's transient, switch the flow
        back: flows flip-flopped every 10 s)."""
        self.est.model._model(cca)
        self.est.local_cca = cca
        self.est.t0 = time.monotonic()
        self.vote_from = time.monotonic() + self.warmup_s

    def step(self) -> Optional[Step]:
        if self.tail is not None:
            self.est.feed_pcap(self.tail)
        if time.monotonic() < self.vote_from:
            return None
        if self.est.uses_int:
            # the warm-up counts from the competitor's arrival too (one that came 10 s late
            # met a vote already full of a lone flow's estimates)
            age = self.est.competitor_age_s()
            if age is None or age < self.warmup_s:
                return None
        return self.est.step()

    def alone(self) -> bool:
        """An INT model's flow with telemetry but no competitor on its path: no estimate."""
        return self.est.uses_int and bool(self.est.telemetry.records) and self.est.competitor_age_s() is None


class EstimationLoop:
    def __init__(self, publisher: Optional[Publisher] = None, replay_s: float = 0.0):
        self.publisher = publisher
        self.replay_s = replay_s
        self.flows: dict = {}
        self._records: deque = deque(maxlen=RECORDS_MAX)      # from the subscriber's thread
        self._recent: deque = deque(maxlen=RECORDS_MAX)       # (arrival, record), for late starters

    def add_record(self, rec) -> None:
        """A FlowRecord or HopRecord from the sink; safe from any thread (deque appends)."""
        if rec.type in ("flow", "hop"):
            self._records.append(rec)

    def watch(self, key, flow: WatchedFlow) -> None:
        self.flows[key] = flow

    def forget(self, key) -> None:
        flow = self.flows.pop(key, None)
        if flow is not None:
            flow.stop()

    def step_all(self, on_error: Optional[Callable] = None, errors: tuple = ()) -> list:
        """Hand the waiting records on, start the flows not started, step every flow:
        [(key, Step, EstimateRecord)] for each verdict, published as it is made. A flow that
        fails (no capture, no socket, a model without its local CCA; ``errors``: what else a
        flow's ``start`` may raise) is forgotten after ``on_error(key, error)``."""
        now = time.monotonic()
        while self._records:
            rec = self._records.popleft()
            if self.replay_s:
                self._recent.append((now, rec))
            for flow in self.flows.values():
                if flow.started:
                    flow.est.add_record(rec)
        while self._recent and self._recent[0][0] < now - self.replay_s:
            self._recent.popleft()
        out = []
        for key, flow in list(self.flows.items()):
            try:
                if not flow.started:
                    flow.start()
                    for _, rec in self._recent:
                        flow.est.add_record(rec)
                step = flow.step()
            except (TraceError, ModelError, OSError, *errors) as e:
                if on_error is not None:
                    on_error(key, e)
                self.forget(key)
                continue
            if step is None or step.flow_id is None:
                continue
            record = flow.est.record(step)
            if self.publisher is not None:
                self.publisher.publish(record)
            out.append((key, step, record))
        return out

    def stop(self) -> None:
        for key in list(self.flows):
            self.forget(key)
