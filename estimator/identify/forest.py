"""The passive features' Random Forest as one stage of the sequential test: on in the agent
(`--identify-forest`, the release by default), off in an Identifier given no model
(identifier.FOREST_MODEL, set for ablation replays).

The shipped passive model reads the local flow's sender-side capture (Table I) with its own
CCA as an input; on the probe that CCA is none it was trained beside. This stage keeps the
rest of its input, what the hop records at the bottleneck tell: the queue (int_features, from
the node's own records in place of the flow's per-packet ones) and the competitors' packets,
losses, response and dips (competitor_features), computed by the same code as the passive
estimator's, and a forest trained on probe runs (lab/estimator/forest_stage.py).

At each stretch its evidence is the forest's class probabilities, the mean over the last
MEAN_OVER readings, as likelihoods (floored: the test's cap holds it to 20:1 anyway);
"unknown" gets the uniform 1/4 (the forest knows the four alone): it never argues for a flow
outside them, and argues against one as far as it is sure of one of the four (3.6:1 at 0.9).
Giving "unknown" its favourite's likelihood instead was measured and not kept (docs). Replaced at each reading, never added: successive readings
share most of their 30 s window."""
from __future__ import annotations

import functools
import math
from collections import deque

import numpy as np

from estimator.features import FEATURES as TABLE1_FEATURES
from estimator.int_features import ALL_FEATURES

from .evidence import UNKNOWN, Evidence

#: the forest's columns: the passive model's full row but Table I (the local flow's capture)
FEATURES = ALL_FEATURES[len(TABLE1_FEATURES):]
MEAN_OVER = 3
FLOOR = 0.02
#: the node's rows kept for the features (their longest window is 30 s)
KEEP_S = 35.0


@functools.lru_cache(maxsize=4)
def load(path: str) -> dict:
    """{"forest": a fitted classifier, "features": names, "classes": its labels} (joblib)."""
    import joblib
    model = joblib.load(path)
    if not isinstance(model, dict) or "forest" not in model:
        raise ValueError(f"{path}: not a forest-stage model (lab/estimator/forest_stage.py train)")
    if list(model.get("features", ())) != list(FEATURES):
        raise ValueError(f"{path}: trained on other features than this intcc computes ({len(model.get('features', ()))} "
                         f"columns, not the {len(FEATURES)} of estimator/identify/forest.py): train it again")
    return model


class NodeView:
    """One node's hop records as the passive features read them: the queue per record (the
    INT series' columns, this flow's packets in it) and the competitors (HopFlows)."""

    def __init__(self, keep_s: float | None = KEEP_S):
        from estimator.hop_flows import HopFlows
        self.keep_s = keep_s
        self.rows: deque = deque()          # (t_s, qdepth B, capacity B, arrivals/s, flows, drops, {flow: packets})
        self.flows = HopFlows(keep_s=keep_s)
        self.node_id: int | None = None

    def add(self, rec) -> None:
        self.node_id = rec.node_id
        t = rec.ts_ns * 1e-9
        top = {e[0]: e[1] for e in (rec.top_flows or ())}
        self.rows.append((t, rec.queue_depth_bytes, rec.queue_capacity_bytes, rec.arrival_rate_pps or 0.0,
                          rec.flow_count or 0, rec.queue_drops or 0, top))
        while self.keep_s is not None and self.rows and self.rows[0][0] < t - self.keep_s:
            self.rows.popleft()
        self.flows.add(rec)

    def features(self, own_flow_id: str, at_s, base_rtt_s: float) -> np.ndarray | None:
        """The passive features but Table I (FEATURES' columns) at each time of ``at_s``
        (n, F), from the records before it; None before two records."""
        from estimator.sink_view import telemetry_features
        at_s = np.atleast_1d(np.asarray(at_s, dtype=float))
        rows = [r for r in self.rows if r[0] <= at_s.max()]
        if len(rows) < 2:
            return None
        series = np.asarray([r[:6] + (r[6].get(own_flow_id, 0),) for r in rows], dtype=float)
        comp = self.flows.competitors(self.node_id, own_flow_id)
        return telemetry_features(series, comp, at_s, base_rtt_s, flows=True)


class ForestStage:
    def __init__(self, path: str):
        self.model = load(path)
        self.readings: deque = deque(maxlen=MEAN_OVER)

    def reset(self) -> None:
        self.readings.clear()

    def evidence(self, view: NodeView, own_flow_id: str, at_s: float, base_rtt_s: float) -> Evidence | None:
        x = view.features(own_flow_id, at_s, base_rtt_s)
        if x is None:
            return None
        forest = self.model["forest"]
        p = forest.predict_proba(np.nan_to_num(x))[0]
        self.readings.append(dict(zip((str(c) for c in forest.classes_), p)))
        mean = {c: float(np.mean([r.get(c, 0.0) for r in self.readings])) for c in self.model["classes"]}
        loglik = {c: math.log(max(v, FLOOR)) for c, v in mean.items()}
        loglik[UNKNOWN] = math.log(1.0 / len(self.model["classes"]))
        best = max(mean, key=mean.get)
        return Evidence("forest", loglik, measured=round(mean[best], 3), note=best)
