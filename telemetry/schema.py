"""Telemetry records, version 1: what the sink publishes and subscribers accept.

Three record types, JSON objects with ``"v": 1`` and ``"type"``:

* ``flow`` on ``intcc/v1/flow/<flow-id>``: end-to-end losses of one flow with
  their attribution (congestion vs link), the path's queue state, one-way delay;
* ``hop``  on ``intcc/v1/hop/<node-id>``: one node's egress state;
* ``estimate`` on ``intcc/v1/estimate/<flow-id>``: the estimator's verdict on
  the CCA of the flow's competitor;
* ``cca`` on ``intcc/v1/cca/<flow-id>``: a node's classifier (Dragonfly) on the CCA of a
  flow through its queue.

``docs/telemetry.md`` documents every field and unit. :func:`decode` is the
only way bytes become records: anything malformed raises :class:`SchemaError`
naming the problem, so garbage never reaches an algorithm.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import List, Optional

from .ccas import CCA_LABELS     # the CCAs the estimator tells apart: the one list

from .flowid import FLOW_ID_RE

VERSION = 1
TOPIC_ROOT = f"intcc/v{VERSION}"
FLOW_TOPIC = TOPIC_ROOT + "/flow/{flow_id}"
HOP_TOPIC = TOPIC_ROOT + "/hop/{node_id}"
ESTIMATE_TOPIC = TOPIC_ROOT + "/estimate/{flow_id}"
DECISION_TOPIC = TOPIC_ROOT + "/decision/{flow_id}"
CCA_TOPIC = TOPIC_ROOT + "/cca/{flow_id}"
ALL_TOPICS = TOPIC_ROOT + "/#"
LOSS_CAUSES = ("congestion", "link", "reconfig")
REASONS = ("loss", "periodic")
MAX_PAYLOAD_BYTES = 64 * 1024


class SchemaError(ValueError):
    """A record that is not valid telemetry v1; the message says why."""


def flow_topic(flow_id: str) -> str:
    return FLOW_TOPIC.format(flow_id=flow_id)


def hop_topic(node_id: int) -> str:
    return HOP_TOPIC.format(node_id=node_id)


# -- field checks --------------------------------------------------------------------
def _int(lo=0, hi=None):
    def check(v):
        if not isinstance(v, int) or isinstance(v, bool):
            return "must be an integer"
        if v < lo or (hi is not None and v > hi):
            return f"must be in [{lo}, {hi if hi is not None else 'inf'}]"
    return check


def _num(lo=0.0, hi=None):
    def check(v):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v:
            return "must be a number"
        if v < lo or (hi is not None and v > hi):
            return f"must be in [{lo}, {hi if hi is not None else 'inf'}]"
    return check


def _one_of(choices):
    def check(v):
        if v not in choices:
            return f"must be one of {', '.join(map(str, choices))}"
    return check


def _str(v):
    if not isinstance(v, str) or not v:
        return "must be a non-empty string"


def _flow_id(v):
    if not isinstance(v, str) or not FLOW_ID_RE.match(v):
        return "must be 16 lowercase hex digits"


def _opt(check):
    def opt(v):
        return None if v is None else check(v)
    opt.optional = True
    return opt


U32 = _int(0, 0xFFFFFFFF)


def _validate(cls, d: dict, where: str):
    if not isinstance(d, dict):
        raise SchemaError(f"{where}: must be a JSON object, got {type(d).__name__}")
    for f in fields(cls):
        check = f.metadata.get("check")
        if check is None:
            continue
        if f.name not in d:
            if getattr(check, "optional", False):
                continue
            raise SchemaError(f"{where}: field '{f.name}' is missing")
        problem = check(d[f.name])
        if problem:
            raise SchemaError(f"{where}: field '{f.name}' {problem} (got {d[f.name]!r:.40})")


def _f(check, default=None):
    return field(default=default, metadata={"check": check})


# -- records -------------------------------------------------------------------------
@dataclass
class HopState:
    """One node's egress state as stamped into a packet (IOAM trace + intcc snapshot)."""
    node_id: int = _f(_int(0, 0xFFFFFF))
    ts_ns: int = _f(_int(0))                              # node clock when it stamped, ns since epoch
    queue_depth_bytes: int = _f(U32)
    queue_depth_pkts: int = _f(U32)
    queue_capacity_bytes: int = _f(U32)                   # 0: no byte limit known
    queue_drops: int = _f(U32)                            # cumulative, wraps at 2^32
    link_losses: int = _f(U32)                            # cumulative, wraps at 2^32
    data_rate_kbps: int = _f(U32)
    arrival_rate_pps: int = _f(U32)
    flow_count: int = _f(_int(0, 0xFFFF))
    queue_occupancy: Optional[float] = _f(_opt(_num(0.0, 1e6)))   # depth / capacity
    rssi_dbm: Optional[int] = _f(_opt(_int(-127, 127)))   # None: not a wireless link
    mcs: Optional[int] = _f(_opt(_int(0, 254)))
    transit_delay_ns: Optional[int] = _f(_opt(_int(0)))
    hop_limit: Optional[int] = _f(_opt(_int(0, 255)))
    rx_drops: Optional[int] = _f(_opt(U32))              # cumulative frames the node's receive rings dropped
    # the packet's queue among its egress port's (RTT separation: which of the K queues its flow
    # is in; the depth, capacity and drops above are that queue's), how many there are, and the
    # scheduler's weight of it; None from a node of an older wire schema
    queue_index: Optional[int] = _f(_opt(_int(0, 255)))
    queue_count: Optional[int] = _f(_opt(_int(0, 255)))
    queue_weight: Optional[int] = _f(_opt(_int(0, 0xFFFF)))
    # the egress port's path reconfiguration (wire schema v5): its period and downtime in ms
    # (0: none), the ms until its next night (None: none scheduled), the migrations so far
    # (mod 256) and the packet's flags (1: its flow is migrated, 2: it took the circuit);
    # None from a node of an older wire schema
    reconfig_period_ms: Optional[int] = _f(_opt(_int(0, 0xFFFF)))
    reconfig_downtime_ms: Optional[int] = _f(_opt(_int(0, 0xFFFF)))
    reconfig_next_ms: Optional[int] = _f(_opt(_int(0, 0xFFFF)))
    reconfig_epoch: Optional[int] = _f(_opt(_int(0, 255)))
    reconfig_flags: Optional[int] = _f(_opt(_int(0, 255)))

    @classmethod
    def from_dict(cls, d: dict, where: str = "hop") -> "HopState":
        _validate(cls, d, where)
        return cls(**{f.name: d.get(f.name) for f in fields(cls)})


#: A hop record names at most this many flows (the busiest) with their packets.
TOP_FLOWS_MAX = 8


def _top_flows(v):
    if not isinstance(v, list) or len(v) > TOP_FLOWS_MAX:
        return f"must be a list of at most {TOP_FLOWS_MAX} [flow_id, packets, lost, proto(, rtt_us)] entries"
    for e in v:
        # [flow_id, packets] from a sink before the losses were added, [.., lost] before the protocol;
        # [.., rtt_us] (null: not measured yet) from a sink whose node measures round trips
        if not isinstance(e, list) or len(e) not in (2, 3, 4, 5) or _flow_id(e[0]) \
                or any(_int(0)(x) for x in e[1:4]) or (len(e) >= 4 and e[3] > 255) \
                or (len(e) == 5 and e[4] is not None and _int(0)(e[4])):
            return ("must hold [flow_id (16 hex digits), packets, lost (integers >= 0), proto (0-255)"
                    "[, rtt_us (integer >= 0 or null)]] entries")


@dataclass
class HopRecord(HopState):
    """A node's state (the latest packet's stamp) and, seen by this sink since the node's
    previous record (``interval_ms``), the busiest flows through it with their packets:
    a sender reads its competitors from their own packets there."""
    v: int = VERSION
    type: str = "hop"
    interval_ms: Optional[float] = _f(_opt(_num(0.0)))
    top_flows: Optional[list] = _f(_opt(_top_flows))

    @classmethod
    def from_dict(cls, d: dict, where: str = "hop record") -> "HopRecord":
        base = HopState.from_dict(d, where)
        for name in ("interval_ms", "top_flows"):
            problem = d.get(name) is not None and cls.__dataclass_fields__[name].metadata["check"](d[name])
            if problem:
                raise SchemaError(f"{where}: field '{name}' {problem} (got {d[name]!r:.40})")
        return cls(**vars(base), interval_ms=d.get("interval_ms"), top_flows=d.get("top_flows"))

    def to_dict(self) -> dict:
        return dict(self.__dict__)     # flat: much cheaper than dataclasses.asdict


@dataclass
class FlowRecord:
    """A flow's end-to-end loss accounting at the sink (counts are cumulative
    since the sink first saw the flow; ``interval_*`` since the previous record)."""
    flow_id: str = _f(_flow_id)
    ts_ns: int = _f(_int(0))                              # sink clock at publication, ns since epoch
    reason: str = _f(_one_of(REASONS))
    src: str = _f(_str)
    dst: str = _f(_str)
    proto: int = _f(_int(0, 255))
    sport: int = _f(_int(0, 0xFFFF))
    dport: int = _f(_int(0, 0xFFFF))
    seq: int = _f(U32)                                    # highest IOAM E2E sequence number seen
    packets: int = _f(_int(0))                            # received at the sink
    lost: int = _f(_int(0))                               # confirmed e2e losses
    lost_congestion: int = _f(_int(0))
    lost_link: int = _f(_int(0))
    # lost in a path reconfiguration's announced night (schema v5 hops); absent before: 0
    lost_reconfig: int = _f(_opt(_int(0)), 0)
    reordered: int = _f(_int(0))
    loss_rate: float = _f(_num(0.0, 1.0))                 # lost / (packets + lost)
    interval_ms: float = _f(_num(0.0))
    interval_packets: int = _f(_int(0))
    interval_lost: int = _f(_int(0))
    interval_lost_congestion: int = _f(_int(0))
    interval_lost_link: int = _f(_int(0))
    interval_lost_reconfig: int = _f(_opt(_int(0)), 0)
    path: List[HopState] = field(default_factory=list)    # first hop first
    last_loss_cause: Optional[str] = _f(_opt(_one_of(LOSS_CAUSES)))
    last_loss_ns: Optional[int] = _f(_opt(_int(0)))
    one_way_delay_us: Optional[float] = _f(_opt(_num(-1e9)))
    sink_node_id: Optional[int] = _f(_opt(_int(0, 0xFFFFFF)))
    v: int = VERSION
    type: str = "flow"

    @classmethod
    def from_dict(cls, d: dict, where: str = "flow record") -> "FlowRecord":
        _validate(cls, d, where)
        path = d.get("path")
        if not isinstance(path, list):
            raise SchemaError(f"{where}: field 'path' must be a list of hops")
        hops = [HopState.from_dict(h, f"{where}: path[{i}]") for i, h in enumerate(path)]
        rec = cls(**{f.name: d.get(f.name) for f in fields(cls) if f.name != "path"})
        rec.path = hops
        rec.lost_reconfig = rec.lost_reconfig or 0
        rec.interval_lost_reconfig = rec.interval_lost_reconfig or 0
        if rec.lost_congestion + rec.lost_link + rec.lost_reconfig > rec.lost:
            raise SchemaError(f"{where}: lost_congestion + lost_link + lost_reconfig exceeds lost")
        return rec

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["path"] = [dict(h.__dict__) for h in self.path]
        return d

    @property
    def max_queue_occupancy(self) -> float:
        return max((h.queue_occupancy or 0.0 for h in self.path), default=0.0)


ESTIMATE_LABELS = CCA_LABELS
#: what active identification can conclude: a CCA of the four, or one outside them
IDENTIFY_HYPOTHESES = ESTIMATE_LABELS + ("unknown",)


def _votes(v):
    # counts of a vote, or active identification's posteriors in percent ("unknown" too)
    if not isinstance(v, dict) or any(k not in IDENTIFY_HYPOTHESES or not isinstance(n, int) or n < 0
                                      for k, n in v.items()):
        return f"must map CCA labels ({', '.join(IDENTIFY_HYPOTHESES)}) to counts"


def estimate_topic(flow_id: str) -> str:
    return ESTIMATE_TOPIC.format(flow_id=flow_id)


class _FlatRecord:
    """A record of plain JSON values only, validated field by field."""

    @classmethod
    def from_dict(cls, d: dict, where: str | None = None):
        _validate(cls, d, where or f"{cls.type} record")
        return cls(**{f.name: d.get(f.name) for f in fields(cls)})

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class EstimateRecord(_FlatRecord):
    """The competitor's CCA as the estimator sees it from this flow's sender."""
    flow_id: str = _f(_flow_id)
    ts_ns: int = _f(_int(0))                      # estimator clock, ns since epoch
    local_cca: str = _f(_one_of(ESTIMATE_LABELS))
    estimate: str = _f(_one_of(ESTIMATE_LABELS))  # majority over the last `window` estimates
    confidence: float = _f(_num(0.0, 1.0))        # share of the window voting for it
    votes: dict = _f(_votes)
    window: int = _f(_int(1))
    estimates: int = _f(_int(0))                  # estimates made so far for this flow
    v: int = VERSION
    type: str = "estimate"


_ALGORITHM_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")


def _algorithm_name(v):
    if not isinstance(v, str) or not _ALGORITHM_NAME_RE.match(v):
        return "must be an algorithm name (lowercase letters, digits, '-'; at most 32)"


@dataclass
class SwitchRecord(_FlatRecord):
    """A flow of the adaptive agent changed its local algorithm on the estimator's verdict
    (published on the flow's estimate topic)."""
    flow_id: str = _f(_flow_id)
    ts_ns: int = _f(_int(0))                      # agent clock, ns since epoch
    from_cca: str = _f(_algorithm_name)           # the algorithm in control before
    to_cca: str = _f(_algorithm_name)             # ... and now
    # the competitor's CCA the switch answers (None: back to the probe, to identify anew)
    verdict: Optional[str] = _f(_opt(_one_of(IDENTIFY_HYPOTHESES)))
    confidence: float = _f(_num(0.0, 1.0))
    votes: dict = _f(_votes)
    policy: str = _f(_one_of(("mirror", "best-response")))
    v: int = VERSION
    type: str = "switch"


#: The stages of active identification (estimator/identify/)
IDENTIFY_STAGES = ("loss_cut", "queue_trend", "queue_level", "spare", "elasticity", "probe_rtt", "not_tcp", "slow_start",
                   "switch_share", "loss_repeat", "exit_cut", "forest")


def _stage_measurements(v):
    if not isinstance(v, list) or len(v) > 64 or any(
            not isinstance(e, list) or len(e) != 2 or e[0] not in IDENTIFY_STAGES
            or not (e[1] is None or (isinstance(e[1], (int, float)) and not isinstance(e[1], bool)
                                      and math.isfinite(e[1]))) for e in v):
        return f"must be a list of at most 64 [stage ({', '.join(IDENTIFY_STAGES)}), measured value or null]"


@dataclass
class IdentifyRecord(_FlatRecord):
    """Active identification's progress on a flow's competitor (published on the flow's
    estimate topic once the agent has located the flow, with no evidence, then at each
    step that adds evidence): the stages' new measurements and the sequential test's state
    after them. Other agents take a flow with identify records for a peer, not a competitor."""
    flow_id: str = _f(_flow_id)
    ts_ns: int = _f(_int(0))                          # agent clock, ns since epoch
    node_id: Optional[int] = _f(_opt(_int(0, 0xFFFFFF)))   # the bottleneck read
    verdict: Optional[str] = _f(_opt(_one_of(IDENTIFY_HYPOTHESES)))   # committed (None: undecided)
    best: str = _f(_one_of(IDENTIFY_HYPOTHESES))      # the most likely hypothesis now
    posterior: float = _f(_num(0.0, 1.0))             # ... and its posterior
    evidence: list = _f(_stage_measurements)          # this step's [stage, measured value]
    v: int = VERSION
    type: str = "identify"


#: What a sender's decision was, for the dashboard (a loss kept, backed off gently or cut).
DECISION_EVENTS = ("start", "report", "loss", "timeout", "switch")


def _reason(v):
    if not isinstance(v, str) or len(v) > 200:
        return "must be a string of at most 200 characters"


@dataclass
class DecisionRecord(_FlatRecord):
    """One decision of the agent controlling a flow (its trace row, rate-limited by the
    agent: docs/telemetry.md), on ``intcc/v1/decision/<flow-id>``: why a sender did what it
    did."""
    flow_id: str = _f(_flow_id)
    ts_ns: int = _f(_int(0))                      # agent clock, ns since epoch
    algorithm: str = _f(_algorithm_name)
    event: str = _f(_one_of(DECISION_EVENTS))
    cwnd_bytes: int = _f(_int(0))
    reason: str = _f(_reason)
    rtt_us: Optional[int] = _f(_opt(_int(0)))
    ssthresh_bytes: Optional[int] = _f(_opt(_int(0)))
    v: int = VERSION
    type: str = "decision"


def decision_topic(flow_id: str) -> str:
    return DECISION_TOPIC.format(flow_id=flow_id)


def cca_topic(flow_id: str) -> str:
    return CCA_TOPIC.format(flow_id=flow_id)


def _scores(v):
    if not isinstance(v, dict) or not v or any(
            k not in ESTIMATE_LABELS or not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p <= 1
            for k, p in v.items()):
        return f"must map CCA labels ({', '.join(ESTIMATE_LABELS)}) to scores in [0, 1]"


@dataclass
class CcaRecord(_FlatRecord):
    """A node's classifier on the CCA of one flow through its queue (Dragonfly: the flow's
    per-slot bytes in the queue and ingress bytes over the last ``interval_ms``), on
    ``intcc/v1/cca/<flow-id>``."""
    flow_id: str = _f(_flow_id)
    ts_ns: int = _f(_int(0))                      # classifier clock, ns since epoch
    node_id: int = _f(_int(0, 0xFFFFFF))          # the node whose queue was read
    src: str = _f(_str)
    dst: str = _f(_str)
    sport: int = _f(_int(0, 0xFFFF))
    dport: int = _f(_int(0, 0xFFFF))
    interval_ms: float = _f(_num(0.0))            # the dataframe's length
    scores: dict = _f(_scores)                    # per class the model knows, summing to 1
    verdict: str = _f(_one_of(ESTIMATE_LABELS))   # the class of the highest score
    v: int = VERSION
    type: str = "cca"


_TYPES = {"flow": FlowRecord, "hop": HopRecord, "estimate": EstimateRecord, "switch": SwitchRecord,
          "decision": DecisionRecord, "identify": IdentifyRecord, "cca": CcaRecord}


def encode(record) -> bytes:
    return json.dumps(record.to_dict(), separators=(",", ":")).encode()


def decode(payload: bytes, topic: Optional[str] = None):
    """Bytes (and optionally the topic they came on) -> FlowRecord | HopRecord | EstimateRecord |
    SwitchRecord | DecisionRecord | IdentifyRecord | CcaRecord."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise SchemaError(f"record of {len(payload)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    try:
        d = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SchemaError(f"not JSON: {exc}") from None
    except RecursionError:
        raise SchemaError("not JSON this reader accepts: nested too deeply") from None
    if not isinstance(d, dict):
        raise SchemaError("a record must be a JSON object")
    v, kind = d.get("v"), d.get("type")
    if type(v) is not int or v != VERSION:
        raise SchemaError(f"unsupported version {v!r:.40} (this reader knows v{VERSION})")
    cls = _TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise SchemaError(f"unknown record type {kind!r:.40} (known: {', '.join(_TYPES)})")
    rec = cls.from_dict(d)
    if topic is not None:
        expected = (flow_topic(rec.flow_id) if cls is FlowRecord else hop_topic(rec.node_id) if cls is HopRecord
                    else decision_topic(rec.flow_id) if cls is DecisionRecord
                    else cca_topic(rec.flow_id) if cls is CcaRecord else estimate_topic(rec.flow_id))
        if topic != expected:
            raise SchemaError(f"a {d['type']} record for {expected} arrived on {topic}")
    return rec
