"""Dragonfly live: every flow through a node's monitored queue named each period, from its
newest interval of per-slot CBIQ and ingress bytes, as ``cca`` records (telemetry.schema
CcaRecord, on ``intcc/v1/cca/<flow-id>``).

``LiveClassifier`` is the logic (feed it what a FlowSlots table hands over, ask it for
records); ``watch`` drains a node's FlowSlots tables through its control socket and
publishes. Inference runs here, beside the node, never in its packet loop: the node only
keeps one packet per flow and slot on each side.

A flow is classified once it has a model's interval of slots known on both sides (its
egress lags its ingress by the queue's delay) and again each time new slots came; a flow
with no new slot for ``idle_s`` is forgotten, and at most ``max_flows`` are kept (the
least recently fed go first, counted)."""
from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np

from telemetry.schema import CcaRecord

from .dataset import FEATURES, flow_series

MIN_KNOWN = 0.9          # of an interval's slots known on both sides, as in training
SIDES = ("in", "out", "ack")
PERIOD_S = 0.5


def softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class LiveClassifier:
    """Per flow, its recent entries; ``classify`` names every flow with a new full
    interval. ``model``: an OnnxClassifier (or anything with n_slots, classes_ and
    decision_function over (N, n_slots, features) dataframes)."""

    def __init__(self, model, node_id: int, slot_ns: int = 1_000_000, idle_s: float = 5.0, max_flows: int = 256,
                 min_known: float = MIN_KNOWN, clock=time.time_ns):
        self.model, self.node_id, self.slot_ns = model, node_id, slot_ns
        self.n_slots = model.n_slots
        self.idle_s, self.max_flows, self.min_known, self.clock = idle_s, max_flows, min_known, clock
        # flow id -> {"flow", "in", "out", "ack", "fed_ns", "last_slot": newest slot classified}
        self.flows: OrderedDict = OrderedDict()
        self.counters = {"records": 0, "evicted": 0, "forgotten": 0, "bad_entries": 0}

    def feed(self, taken: dict) -> None:
        """Entries a FlowSlots ``take`` handed over: {flow id: {"flow", "in", "out", "ack"}}. Each
        flow keeps two intervals of slots (its egress may lag by up to an interval)."""
        now = self.clock()
        for fid, got in taken.items():
            try:        # as arrays once here: classify reads them every period
                # in and out are required; ack only comes from nodes with the ACK side
                got_sides = {side: np.asarray(got[side] if side in ("in", "out") else got.get(side, ()),
                                             dtype=float).reshape(-1, 3) for side in SIDES}
                flow = list(got["flow"])
            except (KeyError, TypeError, ValueError):
                self.counters["bad_entries"] += 1
                continue
            mine = self.flows.pop(fid, None) or {"flow": flow, **{side: np.zeros((0, 3)) for side in SIDES},
                                                 "last_slot": None}
            for side in SIDES:
                mine[side] = np.concatenate((mine[side], got_sides[side]))
            mine["fed_ns"] = now
            ends = [mine[side][-1, 0] for side in ("in", "out") if len(mine[side])]
            if ends:
                oldest = max(ends) - 2 * self.n_slots
                for side in SIDES:
                    mine[side] = mine[side][mine[side][:, 0] >= oldest]
            self.flows[fid] = mine
            while len(self.flows) > self.max_flows:
                self.flows.popitem(last=False)
                self.counters["evicted"] += 1
        for fid in [f for f, m in self.flows.items() if now - m["fed_ns"] > self.idle_s * 1e9]:
            del self.flows[fid]
            self.counters["forgotten"] += 1

    def _window(self, mine: dict):
        """(the newest interval of known slots as a (n_slots, the model's inputs) dataframe, its last slot),
        or None: not an interval yet, or nothing new since the last record."""
        series = flow_series(mine)
        if series is None:
            return None
        try:
            x = series.features(getattr(self.model, "inputs", FEATURES))
        except ValueError:
            return None                  # a model that reads the ACK side, a flow whose ACKs were not seen (yet)
        known = ~np.isnan(x).any(axis=1)
        if not known.any():
            return None
        end = int(np.flatnonzero(known)[-1])
        last_slot = series.first_slot + end
        if end + 1 < self.n_slots or (mine["last_slot"] is not None and last_slot <= mine["last_slot"]):
            return None
        window = x[end + 1 - self.n_slots:end + 1]
        if np.mean(known[end + 1 - self.n_slots:end + 1]) < self.min_known:
            return None
        return window, last_slot

    def classify(self) -> list[CcaRecord]:
        """A record for every flow with a new full interval since its last one."""
        todo = []
        for fid, mine in self.flows.items():
            got = self._window(mine)
            if got is not None:
                todo.append((fid, mine, *got))
        if not todo:
            return []
        scores = softmax(np.asarray(self.model.decision_function(np.stack([w for _, _, w, _ in todo])), dtype=float))
        now = self.clock()
        out = []
        for (fid, mine, _, last_slot), p in zip(todo, scores):
            mine["last_slot"] = last_slot
            src, dst, _, sport, dport = mine["flow"]
            best = int(np.argmax(p))
            out.append(CcaRecord(flow_id=fid, ts_ns=now, node_id=self.node_id, src=src, dst=dst, sport=sport,
                                 dport=dport, interval_ms=self.n_slots * self.slot_ns / 1e6,
                                 scores={c: round(float(v), 4) for c, v in zip(self.model.classes_, p)},
                                 verdict=self.model.classes_[best]))
        self.counters["records"] += len(out)
        return out
