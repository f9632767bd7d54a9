"""Dragonfly's dataframes from recorded captures: each flow's per-slot CBIQ and ingress
bytes over its whole run (``flow_series``), and random sub-intervals of them (``frames``:
the paper's protocol, one interval of a given length drawn at random per flow and draw).
Where the capture has the other direction's ACKs (captures since 2026-12-06), also the
flow's bytes in flight beyond the node (``flight``: a third input, beyond the paper).

A capture is what int_node's FlowSlots hands over (``take``) and experiments/runs/
slot_record.py keeps per run: per flow its 5-tuple and, per side, [slot, first sequence
number, exact bytes queued or -1] entries ("ack": [slot, first ACK number, -1])."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from telemetry.cbiq import flight_bytes, per_slot, slot_inputs

FEATURES = ("cbiq", "ingress")                 # the paper's inputs
FLIGHT_FEATURES = ("cbiq", "ingress", "flight")
KNOWN_FEATURES = FLIGHT_FEATURES               # every series a capture can give


@dataclass
class FlowSeries:
    flow: tuple                 # (src, dst, proto, sport, dport)
    first_slot: int
    cbiq_bytes: np.ndarray      # per slot, NaN where not known
    ingress_bytes: np.ndarray
    exact_bytes: np.ndarray     # the queue's own count as each slot's first packet arrived (NaN: not kept)
    flight_bytes: np.ndarray | None = None      # per slot; None: the capture has no ACKs

    @property
    def inputs(self) -> np.ndarray:
        """(slots, 2): CBIQ and ingress bytes, the paper's features."""
        return self.features(FEATURES)

    def features(self, names=FEATURES) -> np.ndarray:
        """(slots, len(names)) of ``cbiq``, ``ingress`` and ``flight``."""
        cols = {"cbiq": self.cbiq_bytes, "ingress": self.ingress_bytes, "flight": self.flight_bytes}
        unknown = [n for n in names if n not in cols]
        if unknown:
            raise ValueError(f"unknown Dragonfly feature(s) {unknown}: known are {', '.join(KNOWN_FEATURES)}")
        if "flight" in names and self.flight_bytes is None:
            raise ValueError(f"flow {self.flow}: its capture has no ACKs, so no bytes in flight (captured before "
                             f"the node's ack tap, or a link without it)")
        return np.stack([cols[n] for n in names], axis=1)


def flow_series(entry: dict, interpolate: bool = False) -> FlowSeries | None:
    """One flow's capture as per-slot series from its first to its last entry (lists or
    (k, 3) arrays of entries); None where it has no entry on one side."""
    if not len(entry.get("in", ())) or not len(entry.get("out", ())):
        return None
    first = int(min(entry["in"][0][0], entry["out"][0][0]))
    n = int(max(entry["in"][-1][0], entry["out"][-1][0])) - first + 1
    (inseq, exact), (outseq, _) = per_slot(entry["in"], first, n), per_slot(entry["out"], first, n)
    cbiq, thr = slot_inputs(inseq, outseq, interpolate)
    flight = None
    if len(entry.get("ack", ())):
        flight = flight_bytes(inseq, per_slot(entry["ack"], first, n)[0], interpolate)
    return FlowSeries(tuple(entry["flow"]), first, cbiq, thr, exact[1:], flight)


def frames(series: list[FlowSeries], labels: list, n_slots: int, per_flow: int = 1, seed: int = 0,
           min_known: float = 0.9, features=FEATURES) -> tuple[np.ndarray, np.ndarray]:
    """``per_flow`` random sub-intervals of ``n_slots`` slots from each flow (fewer known
    slots than ``min_known`` of them: drawn again, up to ten times, else skipped), as
    (N, n_slots, len(features)) dataframes and their labels."""
    rng = np.random.default_rng(seed)
    out, ys = [], []
    for s, y in zip(series, labels):
        x = s.features(features)
        if len(x) < n_slots:
            continue
        for _ in range(per_flow):
            for _ in range(10):
                start = int(rng.integers(0, len(x) - n_slots + 1))
                window = x[start:start + n_slots]
                if np.mean(~np.isnan(window).any(axis=1)) >= min_known:
                    out.append(window)
                    ys.append(y)
                    break
    return (np.array(out) if out else np.zeros((0, n_slots, len(features)))), np.array(ys)
