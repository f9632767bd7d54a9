"""What the dashboard knows: the sink's records folded into one point per second per hop
and per flow, kept for ``history_s``; the latest state of each; estimator verdicts and
algorithm switches as events; the nodes' verdicts on each flow's own CCA (Dragonfly) and
what each hop counts of them; worst-N lists and the feed's health.

Pure logic, fed record by record (``add``, from the subscriber's thread; a lock guards
it) and read by the web server (``snapshot``, ``since``). Points are per wall-clock
second of arrival here, so a page never gets more than one update per second per chart.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from telemetry.schema import (CcaRecord, DecisionRecord, EstimateRecord, FlowRecord, HopRecord, IdentifyRecord,
                              SwitchRecord)

WORST_N = 5
RATE_WINDOW_S = 10.0        # records/s per kind and worst-N look this far back
CCA_FRESH_S = 10.0          # a node's verdict on a flow counts at its hop this long
U32 = 2 ** 32


def _delta_u32(now: int, before: int | None) -> int:
    """Growth of a counter that wraps at 2^32 (0 for the first reading)."""
    return 0 if before is None else (now - before) % U32


@dataclass
class _Series:
    """One hop's or flow's points, a second each, and the second being filled."""
    points: deque = field(default_factory=deque)
    second: int | None = None
    acc: dict = field(default_factory=dict)
    latest: object = None
    counters: dict = field(default_factory=dict)      # cumulative counters at the last record
    heard: float = 0.0                                # arrival of the last record, s


class DashboardState:
    def __init__(self, history_s: float = 900.0, clock=time.time):
        self.history_s = history_s
        self.clock = clock
        self._lock = threading.Lock()
        self.hops: dict[int, _Series] = {}
        self.flows: dict[str, _Series] = {}
        self.decisions: dict[str, _Series] = {}       # the senders' decisions, by flow
        self.events: deque = deque(maxlen=1000)       # verdicts and identification (changes only), switches
        self._verdicts: dict[str, dict] = {}          # flow id -> its latest verdict
        self._ccas: dict[str, dict] = {}              # flow id -> a node's latest verdict on its own CCA
        self._arrivals: deque = deque()                # (arrival s, kind) for records/s
        self._sinks: dict[int, float] = {}             # sink node id -> newest record's arrival
        self.seq = 0                                   # bumped per closed second: pages ask since

    # -- feeding ----------------------------------------------------------------------
    def add(self, rec, topic: str = "") -> None:
        now = self.clock()
        with self._lock:
            self._arrivals.append((now, rec.type))
            if isinstance(rec, HopRecord):
                self._add_hop(rec, now)
            elif isinstance(rec, FlowRecord):
                self._add_flow(rec, now)
                if rec.sink_node_id is not None:
                    self._sinks[rec.sink_node_id] = now
            elif isinstance(rec, DecisionRecord):
                self._add_decision(rec, now)
            elif isinstance(rec, SwitchRecord):
                self.events.append({"t": now, "kind": "switch", "flow_id": rec.flow_id, "from": rec.from_cca,
                                    "to": rec.to_cca, "verdict": rec.verdict})
            elif isinstance(rec, IdentifyRecord):
                self._add_identify(rec, now)
            elif isinstance(rec, CcaRecord):
                self._ccas[rec.flow_id] = {"cca": rec.verdict, "confidence": rec.scores[rec.verdict],
                                           "node_id": rec.node_id, "t": now}
            elif isinstance(rec, EstimateRecord):
                before = self._verdicts.get(rec.flow_id, {}).get("estimate")
                self._verdicts[rec.flow_id] = {"estimate": rec.estimate, "confidence": rec.confidence, "t": now}
                if before != rec.estimate:
                    self.events.append({"t": now, "kind": "verdict", "flow_id": rec.flow_id,
                                        "estimate": rec.estimate, "confidence": rec.confidence})

    def _add_identify(self, rec: IdentifyRecord, now: float) -> None:
        """Active identification's steps: the flow's verdict is its best hypothesis (or the
        one committed); an event when that changes or commits, with the stages' measurements."""
        before = self._verdicts.get(rec.flow_id, {})
        named = rec.verdict or rec.best
        self._verdicts[rec.flow_id] = {"estimate": named, "confidence": rec.posterior, "t": now,
                                       "committed": rec.verdict is not None}
        if before.get("estimate") != named or before.get("committed", False) != (rec.verdict is not None):
            self.events.append({"t": now, "kind": "identify", "flow_id": rec.flow_id, "estimate": named,
                                "confidence": rec.posterior, "committed": rec.verdict is not None,
                                "evidence": [list(e) for e in rec.evidence]})

    def _roll(self, s: _Series, now: float, fold) -> None:
        """Close the second being filled when ``now`` is in a later one."""
        sec = int(now)
        if s.second is not None and sec != s.second and s.acc:
            s.points.append(fold(s.second, s.acc))
            self.seq += 1
            while s.points and s.points[0]["t"] < now - self.history_s:
                s.points.popleft()
            s.acc = {}
        s.second = sec

    def _add_hop(self, rec: HopRecord, now: float) -> None:
        s = self.hops.setdefault(rec.node_id, _Series())
        self._roll(s, now, _fold_hop)
        a = s.acc
        drops = _delta_u32(rec.queue_drops, s.counters.get("drops"))
        losses = _delta_u32(rec.link_losses, s.counters.get("losses"))
        s.counters.update(drops=rec.queue_drops, losses=rec.link_losses)
        occ = rec.queue_occupancy or 0.0
        a["n"] = a.get("n", 0) + 1
        a["occ_sum"] = a.get("occ_sum", 0.0) + occ
        a["occ_max"] = max(a.get("occ_max", 0.0), occ)
        a["depth_max"] = max(a.get("depth_max", 0), rec.queue_depth_bytes)
        a["drops"] = a.get("drops", 0) + drops
        a["losses"] = a.get("losses", 0) + losses
        a["arrival_pps"] = rec.arrival_rate_pps
        a["rssi_dbm"], a["mcs"], a["rate_kbps"] = rec.rssi_dbm, rec.mcs, rec.data_rate_kbps
        s.latest = rec

    def _add_flow(self, rec: FlowRecord, now: float) -> None:
        s = self.flows.setdefault(rec.flow_id, _Series())
        self._roll(s, now, _fold_flow)
        a = s.acc
        a["packets"] = a.get("packets", 0) + rec.interval_packets
        a["lost_congestion"] = a.get("lost_congestion", 0) + rec.interval_lost_congestion
        a["lost_link"] = a.get("lost_link", 0) + rec.interval_lost_link
        a["lost_reconfig"] = a.get("lost_reconfig", 0) + rec.interval_lost_reconfig
        if rec.one_way_delay_us is not None:
            a["owd_sum"] = a.get("owd_sum", 0.0) + rec.one_way_delay_us
            a["owd_n"] = a.get("owd_n", 0) + 1
        s.latest, s.heard = rec, now

    def _add_decision(self, rec: DecisionRecord, now: float) -> None:
        s = self.decisions.setdefault(rec.flow_id, _Series())
        self._roll(s, now, _fold_decision)
        a = s.acc
        a["cwnd_kb"] = rec.cwnd_bytes / 1e3
        a["algorithm"] = rec.algorithm
        response = loss_response(rec)
        if response:
            a[response] = a.get(response, 0) + 1
        s.latest = rec

    # -- reading ----------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Everything a page needs on load: each series' points, latest state, paths,
        events, worst-N and health."""
        now = self.clock()
        with self._lock:
            self._close_stale(now)
            return {"seq": self.seq, "t": now, "history_s": self.history_s,
                    "hops": {str(k): {"points": list(s.points), "latest": _hop_latest(s.latest)}
                             for k, s in self.hops.items()},
                    "flows": {k: {"points": list(s.points), "latest": _flow_latest(s.latest)}
                              for k, s in self.flows.items()},
                    "decisions": {k: {"points": list(s.points), "latest": _decision_latest(s.latest)}
                                  for k, s in self.decisions.items()},
                    "events": list(self.events), **self._summary(now)}

    def since(self, seq: int) -> dict:
        """What changed after ``seq``: per series its last few points and the second being
        filled (provisional: the same second's point replaces it later, so a record is on
        the page within one push), latest states, events, worst-N and health."""
        now = self.clock()
        with self._lock:
            self._close_stale(now)

            def recent(s, fold):
                pts = list(s.points)[-3:]
                return pts + [fold(s.second, s.acc)] if s.acc else pts
            return {"seq": self.seq, "t": now,
                    "hops": {str(k): {"points": recent(s, _fold_hop), "latest": _hop_latest(s.latest)}
                             for k, s in self.hops.items()},
                    "flows": {k: {"points": recent(s, _fold_flow), "latest": _flow_latest(s.latest)}
                              for k, s in self.flows.items()},
                    "decisions": {k: {"points": recent(s, _fold_decision), "latest": _decision_latest(s.latest)}
                                  for k, s in self.decisions.items()},
                    "events": [e for e in self.events if e["t"] > now - 5.0], **self._summary(now)}

    def latest(self) -> tuple[list, list]:
        """(node id, latest HopRecord) and (flow id, latest FlowRecord) pairs."""
        with self._lock:
            return ([(k, s.latest) for k, s in self.hops.items() if s.latest is not None],
                    [(k, s.latest) for k, s in self.flows.items() if s.latest is not None])

    def _close_stale(self, now: float) -> None:
        """A series that went quiet still shows its last second; one quiet for longer than
        the history is forgotten, so a dashboard left running for days over short flows
        keeps a bounded state."""
        for series, fold in ((self.hops, _fold_hop), (self.flows, _fold_flow), (self.decisions, _fold_decision)):
            for key in list(series):
                s = series[key]
                if s.second is not None and int(now) > s.second and s.acc:
                    self._roll(s, now, fold)
                if s.second is not None and s.second < now - self.history_s:
                    del series[key]
                    if series is self.flows:
                        self._verdicts.pop(key, None)
        for key in [k for k, c in self._ccas.items() if c["t"] < now - self.history_s]:
            del self._ccas[key]

    def _summary(self, now: float) -> dict:
        while self._arrivals and self._arrivals[0][0] < now - RATE_WINDOW_S:
            self._arrivals.popleft()
        per_kind: dict[str, int] = {}
        for _, kind in self._arrivals:
            per_kind[kind] = per_kind.get(kind, 0) + 1
        span = min(RATE_WINDOW_S, max(now - (self._arrivals[0][0] if self._arrivals else now), 1.0))
        paths = {fid: [h.node_id for h in s.latest.path] for fid, s in self.flows.items() if s.latest is not None}
        fresh = {fid: c for fid, c in self._ccas.items() if c["t"] >= now - CCA_FRESH_S}
        at_hops: dict[str, dict] = {}
        for c in fresh.values():
            named = at_hops.setdefault(str(c["node_id"]), {})
            named[c["cca"]] = named.get(c["cca"], 0) + 1
        return {"paths": paths, "worst": self._worst(now), "verdicts": dict(self._verdicts),
                "ccas": fresh, "hop_ccas": at_hops, "queues": self._queues(now),
                "health": {"records_per_s": {k: round(v / span, 1) for k, v in sorted(per_kind.items())},
                           "sink_age_s": {str(k): round(now - t, 2) for k, t in sorted(self._sinks.items())}}}

    def _queues(self, now: float) -> dict:
        """RTT separation's queues at each hop, from the flows' own records (a hop stamps the
        queue each packet went through): {node: {queue index: {"flows", "of", "weight",
        "depth_bytes", "capacity_bytes", "occupancy"}}}, the state as the newest packet
        through the queue saw it, flows heard from within the last RATE_WINDOW_S."""
        out: dict = {}
        for fid, s in self.flows.items():
            rec = s.latest
            if rec is None or s.heard < now - RATE_WINDOW_S:
                continue
            for h in rec.path:
                if h.queue_index is None or not h.queue_count or h.queue_count < 2:
                    continue                  # one FIFO (or a node of an older wire schema)
                q = out.setdefault(str(h.node_id), {}).setdefault(str(h.queue_index), {"flows": [], "ts_ns": -1})
                q["flows"].append(fid)
                if h.ts_ns > q["ts_ns"]:
                    q.update(ts_ns=h.ts_ns, of=h.queue_count, weight=h.queue_weight, depth_bytes=h.queue_depth_bytes,
                             capacity_bytes=h.queue_capacity_bytes, occupancy=h.queue_occupancy)
        for queues in out.values():
            for q in queues.values():
                del q["ts_ns"]
                q["flows"].sort()
        return out

    def _worst(self, now: float) -> dict:
        def recent(points):
            return [p for p in points if p["t"] >= now - RATE_WINDOW_S]
        flows = []
        for fid, s in self.flows.items():
            pts = recent(s.points)
            lost = sum(p["lost_congestion"] + p["lost_link"] + p["lost_reconfig"] for p in pts)
            sent = sum(p["packets"] for p in pts) + lost
            if sent:
                flows.append({"flow_id": fid, "loss": round(lost / sent, 4),
                              "link_share": round(sum(p["lost_link"] for p in pts) / lost, 3) if lost else None})
        hops = [{"node_id": k, "occupancy": round(s.latest.queue_occupancy or 0.0, 3)}
                for k, s in self.hops.items() if s.latest is not None]
        return {"flows_by_loss": sorted(flows, key=lambda f: -f["loss"])[:WORST_N],
                "hops_by_queue": sorted(hops, key=lambda h: -h["occupancy"])[:WORST_N]}


def _fold_hop(second: int, a: dict) -> dict:
    return {"t": second, "occupancy": round(a["occ_sum"] / a["n"], 4), "occupancy_max": round(a["occ_max"], 4),
            "depth_bytes": a["depth_max"], "drops": a["drops"], "link_losses": a["losses"],
            "arrival_pps": a["arrival_pps"], "rssi_dbm": a["rssi_dbm"], "mcs": a["mcs"], "rate_kbps": a["rate_kbps"]}


def _fold_flow(second: int, a: dict) -> dict:
    return {"t": second, "packets": a["packets"], "lost_congestion": a["lost_congestion"],
            "lost_link": a["lost_link"], "lost_reconfig": a.get("lost_reconfig", 0),
            "owd_ms": round(a["owd_sum"] / a["owd_n"] / 1e3, 3) if a.get("owd_n") else None}


RESPONSES = ("keep", "gentle", "cut", "timeout")


def loss_response(rec: DecisionRecord) -> str | None:
    """How a sender answered a loss, from its decision: kept the window (L1), backed off
    gently (L2, beta 0.95), cut (CUBIC's 0.7, Reno's half), or timed out."""
    if rec.event == "timeout":
        return "timeout"
    if rec.event != "loss" or rec.reason.startswith("in recovery"):
        return None                 # losses of a recovery already answered change nothing
    if "keeps" in rec.reason:
        return "keep"
    if "0.95" in rec.reason:
        return "gentle"
    return "cut"


def _fold_decision(second: int, a: dict) -> dict:
    return {"t": second, "cwnd_kb": round(a["cwnd_kb"], 1), "algorithm": a["algorithm"],
            **{r: a.get(r, 0) for r in RESPONSES}}


def _decision_latest(rec) -> dict | None:
    return None if rec is None else {"algorithm": rec.algorithm, "event": rec.event, "cwnd_bytes": rec.cwnd_bytes,
                                     "reason": rec.reason}


def _hop_latest(rec) -> dict | None:
    return None if rec is None else {k: getattr(rec, k) for k in (
        "node_id", "queue_depth_bytes", "queue_capacity_bytes", "queue_occupancy", "queue_drops", "link_losses",
        "arrival_rate_pps", "flow_count", "rssi_dbm", "mcs", "data_rate_kbps")}


def _flow_latest(rec) -> dict | None:
    return None if rec is None else {
        "flow_id": rec.flow_id, "src": rec.src, "dst": rec.dst, "sport": rec.sport, "dport": rec.dport,
        "packets": rec.packets, "lost": rec.lost, "lost_congestion": rec.lost_congestion,
        "lost_link": rec.lost_link, "lost_reconfig": rec.lost_reconfig, "loss_rate": rec.loss_rate, "one_way_delay_us": rec.one_way_delay_us,
        "path": [h.node_id for h in rec.path], "last_loss_cause": rec.last_loss_cause,
        # each hop's queue for the flow where the port has several (RTT separation), else None
        "queues": [h.queue_index if h.queue_count and h.queue_count > 1 else None for h in rec.path]}
