"""Topologies, in the spirit of Mininet's Topo: hosts, nodes (INT routers), links.

A topology is a TOML file:

    name = "wireless"
    [params]                       # overridable: intcc testbed up T.toml --set loss_pct=5
    loss_pct = 0.0
    [[hosts]]
    name = "sta1"
    [[nodes]]
    name = "ap1"
    node_id = 1
    int = ["source", "transit"]    # any of source, transit, sink
    flow_rtt = true                # per-flow RTT measured passively at every ingress (FlowRTT)
    fast_path = false              # forward with tc BPF where the node's configuration compiles
    [[links]]
    ends = ["ap1", "ap2"]
    rate_mbps = "${rate_mbps}"     # ${expr}: a parameter or an arithmetic expression of them
    delay_ms = 10
    loss_pct = 0
    buffer_pkts = 100
    wireless = { distance_m = 10 }
    flow_slots = true              # Dragonfly's per-flow 1 ms capture at this link's egress queues
                                   # (a share in (0, 1) instead: the capture samples packets so)
    separation = 4                 # RTT separation at this link's egress: its flows grouped by RTT
                                   # into 4 queues (int_node/elements/separation.py; 0: one FIFO)
    separation_udp_mbps = 2        # ... and UDP flows above 2 Mbit/s in a queue of their own
    reconfig = { src = "s1", period_ms = 50, downtime_ms = 5, mode = "drop", circuit_delay_ms = 2 }
                                   # path reconfiguration on the a -> b direction (a a node):
                                   # host s1's flows migrated every period between this link and
                                   # a circuit of its own beside it (int_node/elements/reconfig.py)

Link parameters apply to both directions. A node emulates the link on its
egress; on a host-facing link the host->node direction is emulated at the
node's ingress (hosts have plain kernel stacks).
"""
from __future__ import annotations

import ast
import math
import operator
import re
import tomllib
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional

from int_node.runtime import RT_WITH_BUSY_POLL

NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,8}$")
INT_ROLES = {"source", "transit", "sink"}
LINK_KEYS = {"ends", "rate_mbps", "delay_ms", "loss_pct", "buffer_pkts", "wireless", "seed", "flow_slots",
             "separation", "separation_udp_mbps", "reconfig"}
RECONFIG_KEYS = {"src", "period_ms", "downtime_ms", "mode", "circuit_delay_ms"}
MAX_SEPARATION_QUEUES = 8
WIRELESS_KEYS = {"distance_m", "tx_power_dbm", "path_loss_exponent", "ref_loss_db",
                 "shadowing_sigma_db", "noise_floor_dbm"}


class TopologyError(ValueError):
    pass


@dataclass
class Link:
    index: int
    a: str
    b: str
    rate_mbps: Optional[float] = None
    delay_ms: float = 0.0
    loss_pct: float = 0.0
    buffer_pkts: int = 1000
    wireless: Optional[Dict[str, float]] = None
    seed: Optional[int] = None
    #: The topology gives this link a loss_pct (even 0) or a wireless channel: its
    #: loss element always exists, so that a loss set at run time (a sweep) applies.
    may_lose: bool = False
    #: Dragonfly's capture at the nodes' egress queues of this link (FlowSlots, SlotTap)
    flow_slots: bool = False
    #: the share of packets the capture samples (FlowSlots' sample)
    flow_slots_sample: float = 1.0
    #: RTT separation's queues at the nodes' egress of this link (0: one FIFO)
    separation: int = 0
    #: ... and UDP flows above this rate isolated in one more queue (0: not)
    separation_udp_mbps: float = 0.0
    #: path reconfiguration of the a -> b direction (topo docstring): src, period_ms,
    #: downtime_ms, mode, circuit_delay_ms; None: a plain link
    reconfig: Optional[Dict[str, Any]] = None

    def other(self, name: str) -> str:
        return self.b if name == self.a else self.a

    @property
    def emulated(self) -> bool:
        return bool(self.rate_mbps or self.delay_ms or self.may_lose or self.loss_pct or self.wireless)


@dataclass
class Topo:
    name: str
    params: Dict[str, Any]
    hosts: List[str]
    nodes: Dict[str, dict]
    links: List[Link]
    description: str = ""
    path: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    def is_host(self, name: str) -> bool:
        return name in self.hosts

    def with_node_ids_shifted(self, offset: int) -> "Topo":
        """A copy whose nodes' ids are ``offset`` higher: testbeds alike that publish to one
        broker (intcc/v1/hop/<node-id>) then stay apart."""
        nodes = {n: dict(info, node_id=info["node_id"] + offset) for n, info in self.nodes.items()}
        return replace(self, nodes=nodes)

    def links_of(self, name: str) -> List[Link]:
        return [l for l in self.links if name in (l.a, l.b)]

    def next_link(self, src: str, dst_link: Link) -> Link:
        """Link out of ``src`` on a shortest path to ``dst_link`` (hosts do not forward)."""
        if src in (dst_link.a, dst_link.b):
            return dst_link
        goals = {dst_link.a, dst_link.b}
        first: Dict[str, Link] = {}
        seen, todo = {src}, deque([src])
        while todo:
            cur = todo.popleft()
            if cur != src and self.is_host(cur):
                continue
            for l in self.links_of(cur):
                nxt = l.other(cur)
                if nxt in seen:
                    continue
                seen.add(nxt)
                first[nxt] = first.get(cur, l)
                if nxt in goals:
                    return first[nxt]
                todo.append(nxt)
        raise TopologyError(f"no path from {src} to link {dst_link.a}-{dst_link.b}")

    def int_transit_count(self) -> int:
        return sum(1 for n in self.nodes.values() if "transit" in n["int"])


# -- parameter substitution ----------------------------------------------------------
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.USub: operator.neg, ast.Mod: operator.mod}
_FUNCS = {"min": min, "max": max, "round": round, "int": int, "float": float, "ceil": math.ceil}


def _eval(node, params, text):
    if isinstance(node, ast.Expression):
        return _eval(node.body, params, text)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in params:
            raise TopologyError(f"unknown parameter '{node.id}' in '${{{text}}}' "
                                f"(parameters: {', '.join(sorted(params))})")
        return params[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left, params, text), _eval(node.right, params, text))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand, params, text))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        return _FUNCS[node.func.id](*(_eval(a, params, text) for a in node.args))
    raise TopologyError(f"unsupported expression '${{{text}}}' (numbers, parameters, + - * / min max round ceil)")


def _reconfig(raw, ends, hosts, nodes, where) -> Optional[Dict[str, Any]]:
    """A link's reconfig table, checked, with its defaults; None without one."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TopologyError(f"{where}: reconfig must be a table (keys {sorted(RECONFIG_KEYS)})")
    unknown = set(raw) - RECONFIG_KEYS
    if unknown:
        raise TopologyError(f"{where}: unknown reconfig key(s) {sorted(unknown)} (known: {sorted(RECONFIG_KEYS)})")
    if ends[0] not in nodes:
        raise TopologyError(f"{where}: reconfig needs a node at the link's first end (its a -> b direction "
                            f"is reconfigured), not {ends[0]}")
    if raw.get("src") not in hosts:
        raise TopologyError(f"{where}: reconfig.src must name the host whose flows are migrated, not {raw.get('src')!r}")
    out = {"src": raw["src"], "mode": raw.get("mode", "drop")}
    if out["mode"] not in ("drop", "buffer"):
        raise TopologyError(f"{where}: reconfig.mode must be drop or buffer, not {out['mode']!r}")
    for key in ("period_ms", "downtime_ms", "circuit_delay_ms"):
        value = raw.get(key, 0.0)
        if not isinstance(value, (int, float)) or value < 0:
            raise TopologyError(f"{where}: reconfig.{key} must be a number >= 0, not {value!r}")
        out[key] = float(value)
    if out["downtime_ms"] and out["downtime_ms"] >= (out["period_ms"] or 0):
        raise TopologyError(f"{where}: reconfig.downtime_ms must be shorter than period_ms")
    return out


def substitute(value, params):
    """Replace "${expr}" strings (recursively) with their value."""
    if isinstance(value, str):
        m = re.fullmatch(r"\$\{(.+)\}", value.strip())
        if m:
            try:
                tree = ast.parse(m.group(1), mode="eval")
            except SyntaxError:
                raise TopologyError(f"bad expression '{value}'") from None
            return _eval(tree, params, m.group(1))
        return value
    if isinstance(value, dict):
        return {k: substitute(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, params) for v in value]
    return value


def parse_set(items) -> Dict[str, Any]:
    """['loss_pct=5', 'name=x'] -> {'loss_pct': 5.0, 'name': 'x'}."""
    out = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise TopologyError(f"--set expects key=value, got {item!r}")
        try:
            out[key.strip()] = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            out[key.strip()] = raw.strip()
    return out


def _num(link: dict, key: str, where: str, cast=float):
    v = link.get(key)
    if v is None:
        return None
    try:
        v = cast(v)
    except (TypeError, ValueError):
        raise TopologyError(f"{where}: {key} must be a number, got {v!r}") from None
    if v < 0:
        raise TopologyError(f"{where}: {key} must be >= 0")
    return v


def load_topo(path: str, overrides: Optional[Dict[str, Any]] = None) -> Topo:
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except OSError as exc:
        raise TopologyError(f"cannot read topology {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{path}: {exc}") from None
    return build_topo(raw, overrides, path)


def build_topo(raw: dict, overrides=None, path: str = "<topology>") -> Topo:
    params = dict(raw.get("params", {}))
    for k, v in (overrides or {}).items():
        if k not in params:
            raise TopologyError(f"{path}: --set {k}: no such parameter "
                                f"(parameters: {', '.join(sorted(params)) or 'none'})")
        params[k] = v
    name = raw.get("name") or "topo"
    if not re.fullmatch(r"[a-z][a-z0-9]{0,11}", str(name)):
        raise TopologyError(f"{path}: name {name!r} must be 1-12 lowercase letters/digits")
    hosts = [h["name"] for h in raw.get("hosts", [])]
    nodes = {}
    for i, n in enumerate(raw.get("nodes", [])):
        n = {**n, "flow_rtt": substitute(n["flow_rtt"], params)} if "flow_rtt" in n else n
        n = {**n, "fast_path": substitute(n["fast_path"], params)} if "fast_path" in n else n
        roles = set(n.get("int", []))
        if roles - INT_ROLES:
            raise TopologyError(f"{path}: node {n.get('name')}: unknown INT role(s) {sorted(roles - INT_ROLES)}")
        python = n.get("python")
        if python is not None and not isinstance(python, str):
            raise TopologyError(f"{path}: node {n.get('name')}: python must be a string "
                                f"(cpython, pypy or a path), not {python!r}")
        if n.get("poll_idle") and n.get("cpu") is None:
            raise TopologyError(f"{path}: node {n.get('name')}: poll_idle needs cpu (the core kept polling)")
        if not isinstance(n.get("tx_ring", True), bool):
            raise TopologyError(f"{path}: node {n.get('name')}: tx_ring must be true or false")
        rx_batch = n.get("rx_batch")
        if rx_batch is not None and (isinstance(rx_batch, bool) or not isinstance(rx_batch, int) or rx_batch < 1):
            raise TopologyError(f"{path}: node {n.get('name')}: rx_batch must be a whole number >= 1 (frames a "
                                f"FromDevice pushes on together), not {rx_batch!r}")
        busy_poll_us = n.get("busy_poll_us", 0)
        if isinstance(busy_poll_us, bool) or not isinstance(busy_poll_us, int) or busy_poll_us < 0:
            raise TopologyError(f"{path}: node {n.get('name')}: busy_poll_us must be a whole number of "
                                f"microseconds >= 0 (0: off), not {busy_poll_us!r}")
        rt_priority = n.get("rt_priority", 0)
        if isinstance(rt_priority, bool) or not isinstance(rt_priority, int) or not 0 <= rt_priority <= 99:
            raise TopologyError(f"{path}: node {n.get('name')}: rt_priority must be a SCHED_FIFO priority 1-99 "
                                f"(0: the normal scheduler), not {rt_priority!r}")
        if rt_priority and busy_poll_us:
            raise TopologyError(f"{path}: node {n.get('name')}: rt_priority with busy_poll_us: {RT_WITH_BUSY_POLL}")
        fast_path = n.get("fast_path", False)
        if not isinstance(fast_path, bool):
            raise TopologyError(f"{path}: node {n.get('name')}: fast_path must be true or false (forward in the "
                                f"kernel's tc BPF fast path where the configuration compiles), not {fast_path!r}")
        flow_rtt = n.get("flow_rtt", False)
        if not isinstance(flow_rtt, bool):
            raise TopologyError(f"{path}: node {n.get('name')}: flow_rtt must be true or false, not {flow_rtt!r}")
        nodes[n["name"]] = {"node_id": int(n.get("node_id", i + 1)), "int": sorted(roles), "flow_rtt": flow_rtt,
                            "cpu": n.get("cpu"), "python": python, "poll_idle": bool(n.get("poll_idle", False)),
                            "busy_poll_us": busy_poll_us, "rt_priority": rt_priority,
                            "tx_ring": n.get("tx_ring", True), "rx_batch": rx_batch, "fast_path": fast_path}
    for nm in hosts + list(nodes):
        if not NAME_RE.match(nm):
            raise TopologyError(f"{path}: name {nm!r} must be 1-9 lowercase letters/digits, starting with a letter")
    if len(set(hosts) | set(nodes)) != len(hosts) + len(nodes):
        raise TopologyError(f"{path}: host and node names must be unique")
    links = []
    for i, l in enumerate(raw.get("links", [])):
        l = substitute(l, params)
        where = f"{path}: link {i}"
        unknown = set(l) - LINK_KEYS
        if unknown:
            raise TopologyError(f"{where}: unknown key(s) {sorted(unknown)} (known: {sorted(LINK_KEYS)})")
        ends = l.get("ends", [])
        if len(ends) != 2 or any(e not in hosts and e not in nodes for e in ends):
            raise TopologyError(f"{where}: ends must name two hosts/nodes, got {ends}")
        if all(e in hosts for e in ends):
            raise TopologyError(f"{where}: a link needs at least one node")
        wl = l.get("wireless")
        if wl is not None:
            bad = set(wl) - WIRELESS_KEYS
            if bad:
                raise TopologyError(f"{where}: unknown wireless key(s) {sorted(bad)}")
        slots = l.get("flow_slots", False)
        if not isinstance(slots, bool) and not (isinstance(slots, (int, float)) and 0 < slots <= 1):
            raise TopologyError(f"{where}: flow_slots must be true, false or the share of packets the capture "
                                f"samples (0 < share <= 1), got {slots!r}")
        separation = _num(l, "separation", where, lambda x: int(round(float(x)))) or 0
        if separation > MAX_SEPARATION_QUEUES:
            raise TopologyError(f"{where}: separation is a number of queues, at most {MAX_SEPARATION_QUEUES}, "
                                f"got {separation}")
        if separation and slots:
            raise TopologyError(f"{where}: flow_slots and separation cannot both be on (the capture reads one queue)")
        reconfig = _reconfig(l.get("reconfig"), ends, hosts, nodes, where)
        if reconfig and (separation or slots):
            raise TopologyError(f"{where}: reconfig with separation or flow_slots is not supported")
        rate = _num(l, "rate_mbps", where)
        links.append(Link(i, ends[0], ends[1], rate_mbps=rate or None,
                          delay_ms=_num(l, "delay_ms", where) or 0.0,
                          loss_pct=_num(l, "loss_pct", where) or 0.0,
                          buffer_pkts=max(1, _num(l, "buffer_pkts", where, lambda x: int(round(float(x)))) or 1000),
                          wireless=wl, seed=l.get("seed", params.get("seed")),
                          may_lose="loss_pct" in l or wl is not None,
                          flow_slots=bool(slots), flow_slots_sample=1.0 if isinstance(slots, bool) else float(slots),
                          separation=separation, separation_udp_mbps=_num(l, "separation_udp_mbps", where) or 0.0,
                          reconfig=reconfig))
        if links[-1].loss_pct > 100:
            raise TopologyError(f"{where}: loss_pct must be <= 100")
    for h in hosts:
        if not any(h in (l.a, l.b) for l in links):
            raise TopologyError(f"{path}: host {h} has no link")
    return Topo(name=name, params=params, hosts=hosts, nodes=nodes, links=links,
                description=raw.get("description", ""), path=path,
                extra={k: v for k, v in raw.items() if k not in ("name", "params", "hosts", "nodes", "links")})
