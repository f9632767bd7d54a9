"""Which part of a Click-style configuration the fast path can take, and how.

The fast path has a kernel form for the forwarding chain the testbed generates (and an
operator writes) for a port:

    FromDevice -> EtherFilter -> Classifier(ipv6, -) [-> Discard] -> [INTSource] -> IPv6Lookup
    IPv6Lookup[i] -> DecHopLimit -> FlowMeter -> Queue -> LinkShaper | Unqueue
        -> [INTTransit] -> [INTSink] -> EtherRewrite -> ToDevice

Queue and LinkShaper become the port's kernel qdisc (pfifo, under tbf for a rate). RTT
separation has one too (int_node/elements/separation.py, bpf/intcc_separation.bpf.h): an
RTTTap between a port's Classifier and its [INTSource] times its TCP flows in the ingress
program, and in a port's egress chain

    FlowMeter -> FlowSplit; FlowSplit[j] -> Queue -> [j]DRR; DRR -> LinkShaper -> ...

becomes the split in the ingress program and HTB under the shaper's rate, a leaf class per
queue; RTTSeparation stays the control loop, in the Python process, on the programs' maps.
Any other element (link emulation, a wireless channel, a reconfiguration, SlotTap, Tee) has
no kernel form; a configuration with one runs in the Python node as it is, and
:func:`plan_for` says which element kept it there and why.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .. import ioam
from ..elements.basic import Discard
from ..elements.classify import Classifier, EtherFilter
from ..elements.devices import FromDevice, ToDevice
from ..elements.inband import INTSink, INTSource, INTTransit
from ..elements.link import LinkShaper
from ..elements.queues import FlowMeter, Queue, Unqueue
from ..elements.routing import DecHopLimit, EtherRewrite, IPv6Lookup
from ..elements.rtt import FlowRTT, RTTTap
from ..elements.separation import DRR, FlowSplit, RTTSeparation

FAST = "fast path"
CONTROL = "Python node, on the fast path's maps"
#: the kernel's sketch and queue bounds (bpf/intcc_separation.bpf.h)
SKETCH_WIDTH, SKETCH_DEPTH, SEP_MAX_QUEUES = 2048, 4, 9


@dataclass
class PortPlan:
    index: int                      # the IPv6Lookup output
    devname: str
    from_dev: FromDevice
    to_dev: ToDevice
    ether_filter: EtherFilter
    rewrite: EtherRewrite
    dec_hop_limit: DecHopLimit
    meter: FlowMeter
    queue: Queue
    shaper: Optional[LinkShaper] = None
    unqueue: Optional[Unqueue] = None
    source: Optional[INTSource] = None
    transit: Optional[INTTransit] = None
    sink: Optional[INTSink] = None
    rtt_tap: Optional[RTTTap] = None          # on this port's ingress
    rtt: Optional[FlowRTT] = None             # ... its table
    split: Optional[FlowSplit] = None         # RTT separation at this port's egress: the split,
    queues: List[Queue] = field(default_factory=list)       # its queues (output j -> queues[j]),
    drr: Optional[DRR] = None                 # their scheduler
    separation: Optional[RTTSeparation] = None    # and the control loop

    @property
    def separated(self) -> bool:
        return self.split is not None


@dataclass
class Plan:
    ports: List[PortPlan] = field(default_factory=list)
    routes: List[Tuple[ipaddress.IPv6Network, int]] = field(default_factory=list)
    node_id: int = 0
    namespace_id: int = ioam.DEFAULT_NAMESPACE
    max_hops: int = 0
    #: element name -> where it runs ("fast path", or why it stays in the Python node)
    placement: Dict[str, str] = field(default_factory=dict)
    #: why the configuration cannot be compiled (empty: it can)
    reasons: List[str] = field(default_factory=list)

    @property
    def compiled(self) -> bool:
        return not self.reasons and bool(self.ports)


def _next(elem, port: int = 0):
    """The element downstream of ``elem``'s output ``port`` (push or pull)."""
    out = elem._out[port] if port < len(elem._out) and elem._out[port] is not None else None
    if out is not None:
        return out[0]
    down = elem.__dict__.get("_downstream", ())
    return down[0] if len(down) == 1 else None


def _label(elem) -> str:
    return f"{elem.name} ({type(elem).__name__})" if elem is not None else "nothing"


class _Walk:
    def __init__(self, plan: Plan):
        self.plan = plan

    def expect(self, elem, cls, where: str):
        if not isinstance(elem, cls):
            names = cls.__name__ if isinstance(cls, type) else " or ".join(c.__name__ for c in cls)
            self.plan.reasons.append(f"{_label(elem)} {where}: the fast path's chain has {names} there")
            return None
        self.plan.placement[elem.name] = FAST
        return elem


def _ingress(walk: _Walk, dev: FromDevice, rt: IPv6Lookup):
    """(EtherFilter, INTSource or None, RTTTap or None) of a port's ingress chain, None if it
    has no kernel form."""
    where = f"after {dev.name}"
    ef = walk.expect(_next(dev), EtherFilter, where)
    if ef is None:
        return None
    if ef.n_out > 1:
        walk.plan.reasons.append(f"{ef.name} (EtherFilter) sends other frames on: only dropping them has a kernel form")
        return None
    cls = walk.expect(_next(ef), Classifier, f"after {ef.name}")
    if cls is None:
        return None
    if cls.patterns[0] != "ipv6" or (len(cls.patterns) > 1 and not isinstance(_next(cls, 1), Discard)):
        walk.plan.reasons.append(f"{cls.name} (Classifier({', '.join(cls.patterns)})): the fast path takes "
                                 "Classifier(ipv6, -) with everything else discarded")
        return None
    if len(cls.patterns) > 1:
        walk.plan.placement[_next(cls, 1).name] = "Python node and kernel (what the fast path leaves)"
    nxt, source, tap = _next(cls), None, None
    if isinstance(nxt, RTTTap):
        tap = walk.expect(nxt, RTTTap, "")
        nxt = _next(nxt)
    if isinstance(nxt, INTSource):
        source = walk.expect(nxt, INTSource, "")
        nxt = _next(nxt)
    if nxt is not rt:
        walk.plan.reasons.append(f"{_label(nxt)} between {cls.name} and {rt.name}: no kernel form")
        return None
    return ef, source, tap


def _egress(walk: _Walk, rt: IPv6Lookup, index: int) -> Optional[dict]:
    chain = {}
    e = _next(rt, index)
    for key, cls in (("dec_hop_limit", DecHopLimit), ("meter", FlowMeter), ("queue", (Queue, FlowSplit))):
        chain[key] = walk.expect(e, cls, f"on {rt.name}[{index}]")
        if chain[key] is None:
            return None
        e = _next(e)
    if isinstance(chain["queue"], FlowSplit):
        e = _separation(walk, chain)
        if e is None:
            return None
    q = chain["queue"]
    for queue in chain.get("queues") or [q]:
        if queue.capacity_bytes or queue.flow_bytes:
            walk.plan.reasons.append(f"{queue.name} (Queue): a byte bound or per-flow bytes (flow_bytes) have no "
                                     "kernel form here (a BPF qdisc would give them; this kernel has none)")
            return None
    if chain.get("split") is not None and not isinstance(e, LinkShaper):
        walk.plan.reasons.append(f"{_label(e)} after {chain['drr'].name}: RTT separation's queues need a "
                                 "LinkShaper's rate on the fast path (HTB under it)")
        return None
    if isinstance(e, LinkShaper):
        chain["shaper"] = walk.expect(e, LinkShaper, "")
    elif walk.expect(e, (LinkShaper, Unqueue), f"after {q.name}") is not None:
        chain["unqueue"] = e
    else:
        return None
    e = _next(e)
    for key, cls in (("transit", INTTransit), ("sink", INTSink)):
        if isinstance(e, cls):
            chain[key] = walk.expect(e, cls, "")
            e = _next(e)
    for key, cls in (("rewrite", EtherRewrite), ("to_dev", ToDevice)):
        chain[key] = walk.expect(e, cls, f"on {rt.name}[{index}]'s chain")
        if chain[key] is None:
            return None
        e = _next(e) if key == "rewrite" else None
    tr = chain.get("transit")
    if tr is not None:
        for ref in ("link", "channel", "reconfig"):
            if getattr(tr, ref):
                walk.plan.reasons.append(f"{tr.name} (INTTransit) reads '{getattr(tr, ref)}' ({ref}): "
                                         "link emulation stays in the Python node")
                return None
        for ref, want in (("queue", chain.get("drr") or q), ("meter", chain["meter"]),
                          ("shaper", chain.get("shaper"))):
            if getattr(tr, ref) and (want is None or getattr(tr, ref) != want.name):
                walk.plan.reasons.append(f"{tr.name} (INTTransit) reads {ref} '{getattr(tr, ref)}', not its own "
                                         "port's: the fast path stamps the port's own")
                return None
    return chain


def _separation(walk: _Walk, chain: dict):
    """RTT separation in an egress chain: FlowSplit[j] -> Queue -> [j]DRR for every output, one
    DRR. Fills chain's split, queues, drr and (its default queue as) queue; the element after
    the DRR, or None where it has no kernel form."""
    split = chain.pop("queue")
    queues, drr = [], None
    for j in range(split.n_out):
        q = _next(split, j)
        if not isinstance(q, Queue):
            walk.plan.reasons.append(f"{_label(q)} on {split.name}[{j}]: the fast path's separation has a Queue there")
            return None
        d = _next(q)
        if not isinstance(d, DRR) or (drr is not None and d is not drr) or d._in[j] is None or d._in[j][0] is not q:
            walk.plan.reasons.append(f"{_label(d)} after {q.name}: the fast path's separation has {split.name}[{j}] "
                                     f"-> {q.name} -> [{j}] of one DRR")
            return None
        drr = d
        queues.append(q)
        walk.plan.placement[q.name] = FAST
    if drr.n_in != len(queues):
        walk.plan.reasons.append(f"{drr.name} (DRR) has {drr.n_in} inputs, {split.name} {len(queues)} outputs")
        return None
    if len(queues) > SEP_MAX_QUEUES:
        walk.plan.reasons.append(f"{split.name} (FlowSplit): {len(queues)} queues, the fast path takes at most "
                                 f"{SEP_MAX_QUEUES} (8 and UDP's)")
        return None
    if (split.sketch_width, split.sketch_depth) != (SKETCH_WIDTH, SKETCH_DEPTH):
        walk.plan.reasons.append(f"{split.name} (FlowSplit): the fast path's sketch is {SKETCH_WIDTH} x "
                                 f"{SKETCH_DEPTH}, not {split.sketch_width} x {split.sketch_depth}")
        return None
    walk.plan.placement[split.name] = walk.plan.placement[drr.name] = FAST
    chain.update(split=split, queues=queues, drr=drr, queue=queues[split.default])
    return _next(drr)


def _control_loops(router, plan: Plan) -> None:
    """Each separated port's RTTSeparation (by the names it was given), and the tables the
    ingress taps fill; a loop or tap the fast path would not feed keeps the node in Python."""
    loops = [e for e in router.elements.values() if isinstance(e, RTTSeparation)]
    for p in plan.ports:
        if not p.separated:
            continue
        mine = [c for c in loops if c.split == p.split.name]
        if len(mine) != 1 or mine[0].sched != p.drr.name or mine[0].queues != [q.name for q in p.queues]:
            plan.reasons.append(f"{p.split.name} (FlowSplit): the fast path needs one RTTSeparation naming it, "
                                f"{p.drr.name} and its queues in order")
            continue
        p.separation = mine[0]
        plan.placement[mine[0].name] = CONTROL
    for c in loops:
        if c.name not in plan.placement:
            plan.reasons.append(f"{c.name} (RTTSeparation) controls no separated port of the fast path")
    taps = {p.rtt_tap.rtt for p in plan.ports if p.rtt_tap is not None}
    tables = {e.name: e for e in router.elements.values() if isinstance(e, FlowRTT)}
    for name, table in tables.items():
        if name not in taps:
            continue
        plan.placement[name] = CONTROL
        for p in plan.ports:
            if p.rtt_tap is not None and p.rtt_tap.rtt == name:
                p.rtt = table
    for p in plan.ports:
        if p.separation is not None:
            if p.separation.rtt not in taps:
                plan.reasons.append(f"{p.separation.name} (RTTSeparation) reads {p.separation.rtt}, which no "
                                    "RTTTap of the fast path's ports fills")
            elif len(taps) > 1:
                plan.reasons.append("RTTTaps filling different FlowRTT tables: the fast path keeps one")


def plan_for(router) -> Plan:
    """The fast path's plan for an (initialized or parsed) router's configuration."""
    plan = Plan()
    walk = _Walk(plan)
    lookups = [e for e in router.elements.values() if isinstance(e, IPv6Lookup)]
    if len(lookups) != 1:
        plan.reasons.append(f"{len(lookups)} IPv6Lookup elements: the fast path takes one routing table")
        return plan
    rt = lookups[0]
    plan.placement[rt.name] = FAST
    plan.routes = [(net, port) for net, port in rt.routes] if hasattr(rt, "routes") else []
    from_devs = {e.devname: e for e in router.elements.values() if isinstance(e, FromDevice)}
    for index in range(rt.n_out):
        chain = _egress(walk, rt, index)
        if chain is None:
            continue
        dev = chain["to_dev"].devname
        if dev not in from_devs:
            plan.reasons.append(f"{chain['to_dev'].name} sends out of {dev}, which no FromDevice reads")
            continue
        ingress = _ingress(walk, from_devs[dev], rt)
        if ingress is None:
            continue
        plan.placement[from_devs[dev].name] = FAST
        ef, source, tap = ingress
        if ef.mac != chain["rewrite"].src:
            plan.reasons.append(f"{ef.name} filters {ef.mac.hex(':')} but {chain['rewrite'].name} sends from "
                                f"{chain['rewrite'].src.hex(':')}: one MAC per port")
            continue
        plan.ports.append(PortPlan(index=index, devname=dev, from_dev=from_devs[dev], ether_filter=ef,
                                   source=source, rtt_tap=tap, **chain))
    _control_loops(router, plan)
    if len(plan.ports) > 16:
        plan.reasons.append(f"{len(plan.ports)} ports: the fast path takes at most 16")
    transits = [p.transit for p in plan.ports if p.transit is not None]
    if len({t.node_id for t in transits}) > 1:
        plan.reasons.append("INTTransit elements with different node_id: one node, one id")
    sources = [p.source for p in plan.ports if p.source is not None]
    namespaces = {e.namespace_id for e in transits + sources}
    if len(namespaces) > 1:
        plan.reasons.append("INT elements in different IOAM namespaces: the fast path serves one")
    if len({s.max_hops for s in sources}) > 1:
        plan.reasons.append("INTSource elements with different max_hops: the fast path inserts one template")
    plan.node_id = transits[0].node_id if transits else 0
    plan.namespace_id = namespaces.pop() if namespaces else ioam.DEFAULT_NAMESPACE
    plan.max_hops = sources[0].max_hops if sources else 0
    for name, elem in router.elements.items():
        if name not in plan.placement:
            plan.placement[name] = "Python node"
            if not plan.reasons:
                plan.reasons.append(f"{_label(elem)} has no kernel form, and the fast path would pass it by")
    return plan
