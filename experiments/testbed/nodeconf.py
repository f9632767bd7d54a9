"""Generate a node's Click-style configuration from the topology.

Per interface i of a node:
    in_i :: FromDevice -> EtherFilter(own MAC) -> Classifier(ipv6, -) [-> Discard]
        -> [host->node link emulation] -> [INTSource, if from a host] -> rt
    rt :: IPv6Lookup(prefix port ...)
    rt[i] -> DecHopLimit -> FlowMeter -> [SlotTap] -> Queue | RTT separation's queues
        -> LinkShaper | Unqueue -> [SlotTap]
        -> [INTTransit] -> [INTSink, if to a host] -> [WirelessChannel | RandomLoss]
        -> [Delay] -> EtherRewrite(own MAC, peer MAC) -> out_i :: ToDevice
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional

from int_node.ioam import MAX_HOPS

from experiments.testbed.topo import Link, Topo

INT_HEADROOM_BYTES = 288
MIRROR_IFNAME = "intcc-mon"
# INT headers: 2 hops 168-byte HbH + 24-byte DOH = 192; 3 hops (the most) 248 + 24 = 272


@dataclass
class Iface:
    link: Link
    ifname: str
    mac: str
    peer: str
    peer_mac: str
    addr: str           # this end's address, no prefix length
    prefix: str         # the link's /64
    mtu: int


def _emulation(tag: str, link: Link, direction_seed: int, with_int: Optional[str] = None,
               sink: Optional[str] = None, slots: bool = False,
               separation: Optional[List[str]] = None) -> List[str]:
    """Element chain (as config fragments) for one direction of a link.
    Returns fragments to be joined with ' -> '; declarations are inline. With ``slots``,
    SlotTaps around the queue and its port fill the table ``slots<tag>`` (declared by the
    caller: it has no ports). With a list for ``separation`` and the link's separation on,
    the queue is RTT separation's queues and scheduler, their wiring added to the list."""
    chain = [f"SlotTap(slots{tag}, in)"] if slots else []
    if separation is not None and link.separation:
        chain += _separation(tag, link, separation)
    else:
        chain.append(f"q{tag} :: Queue({link.buffer_pkts}{', flow_bytes true' if slots else ''})")
    if link.rate_mbps:
        chain.append(f"shape{tag} :: LinkShaper({link.rate_mbps}Mbps)")
    else:
        chain.append(f"unq{tag} :: Unqueue")
    if slots:
        chain.append(f"SlotTap(slots{tag}, out)")
    if with_int:
        chain.append(with_int)
    if sink:
        chain.append(sink)
    seed = f", seed {link.seed * 1000 + direction_seed}" if link.seed is not None else ""
    if link.wireless is not None:
        args = ", ".join(f"{k} {v}" for k, v in sorted(link.wireless.items()))
        args = (args + ", " if args else "") + f"loss {link.loss_pct}%"
        chain.append(f"wl{tag} :: WirelessChannel({args}{seed})")
    elif link.may_lose or link.loss_pct:
        chain.append(f"loss{tag} :: RandomLoss({link.loss_pct}%{seed})")
    if link.delay_ms:
        chain.append(f"delay{tag} :: Delay({link.delay_ms}ms)")
    return chain


#: a long flow at a separated link: its bytes past this many seconds of the link's rate, and
#: at least LONG_FLOW_MIN_BYTES (the sketch's error must stay well below it)
LONG_FLOW_LINK_S = 0.08
LONG_FLOW_MIN_BYTES = 64_000
#: ... or a flow that has kept sending this long (seconds), whatever its bytes: the flow
#: starved in the shared queue is the one to separate, and it is the last to reach any bytes
LONG_FLOW_AGE_S = 1.0


def _separation(tag: str, link: Link, lines: List[str]) -> List[str]:
    """RTT separation in place of the queue: FlowSplit -> K queues (+ UDP's) -> DRR, and its
    control loop (int_node/elements/separation.py); each queue as large as the one it
    replaces until the loop sizes it. Fragments ending the chain at the split and going on
    from the scheduler."""
    k, udp = link.separation, link.separation_udp_mbps > 0
    queues = [f"q{tag}_{j}" for j in range(k)] + ([f"q{tag}_udp"] if udp else [])
    # a flow is long (separated) past the bytes the paper's 10 MB is at 1 Gbit/s: 80 ms of the
    # link; at 10 Mbit/s 1 MB would take an RTT-starved flow seconds to reach, in the FIFO
    long_bytes = max(LONG_FLOW_MIN_BYTES, int((link.rate_mbps or 1000) * 1e6 * LONG_FLOW_LINK_S / 8))
    # a flow not yet classified waits in the longest RTTs' queue: the largest buffer, where its
    # slow start is not cut short (in the shortest RTTs' few packets a 170 ms flow left slow
    # start early and took long to recover)
    lines.append(f"sep{tag} :: FlowSplit(queues {k}{', udp true' if udp else ''}, default {k - 1}, "
                 f"long_bytes {long_bytes}, long_age {LONG_FLOW_AGE_S:g}s);")
    lines.append(f"drr{tag} :: DRR;")
    for j, q in enumerate(queues):
        lines.append(f"sep{tag}[{j}] -> {q} :: Queue({link.buffer_pkts}) -> [{j}]drr{tag};")
    shaper = f", shaper shape{tag}" if link.rate_mbps else ""
    udp_rate = f", udp_rate {link.separation_udp_mbps:g}Mbps" if udp else ""
    lines.append(f"sepctl{tag} :: RTTSeparation(split sep{tag}, rtt rtt, sched drr{tag}, queues {' '.join(queues)}"
                 f"{shaper}{udp_rate});   // read its 'assignments', 'breaks' and 'groups' handlers")
    return [f"sep{tag};\ndrr{tag}"]         # the chain goes into the split and on from the scheduler


def _reconfigure(topo: Topo, i: int, reconfig: dict) -> str:
    """The Reconfigure element of interface i: the source host's flows (its link's prefix)
    migrated between this link (output 0) and the circuit (output 1, _circuit)."""
    src_prefix = link_prefix(topo.links_of(reconfig["src"])[0])
    return (f"rc{i} :: Reconfigure(period {reconfig['period_ms']:g}ms, downtime {reconfig['downtime_ms']:g}ms, "
            f"src {src_prefix}, mode {reconfig['mode']})")


def _circuit(i: int, f: Iface, reconfig: dict, node_id: Optional[int], ns_arg: str) -> str:
    """The circuit beside interface i's link: a path of its own at the link's rate and buffer,
    with its own delay, stamped by INT as a queue and port of this node (the node's hop
    says which path a packet took by its queue), into the same device."""
    circuit = replace(f.link, delay_ms=reconfig["circuit_delay_ms"], loss_pct=0.0, may_lose=False, wireless=None)
    refs = [f"queue q{i}c", f"meter m{i}", f"egress out{i}", f"reconfig rc{i}"] + \
        ([f"shaper shape{i}c"] if circuit.rate_mbps else [])
    transit = f"tr{i}c :: INTTransit(node_id {node_id}, {', '.join(refs)}{ns_arg})" if node_id is not None else None
    return " -> ".join([f"rc{i}[1]"] + _emulation(f"{i}c", circuit, 2 * f.link.index, transit) + [f"ew{i}"]) + ";"


def node_config(topo: Topo, node: str, ifaces: List[Iface], exporter: str = "none") -> str:
    info = topo.nodes[node]
    roles = set(info["int"])
    max_hops = max(1, min(MAX_HOPS, topo.int_transit_count()))
    ns = topo.extra.get("int_namespace_id")     # IOAM namespace of the INT domain (default: int_node's)
    ns_arg = f", namespace_id {int(ns)}" if ns is not None else ""
    node_mtu = min(i.mtu for i in ifaces)
    lines = [f"// node {node} (id {info['node_id']}, INT roles: {', '.join(sorted(roles)) or 'none'})",
             f"// generated from {topo.path} by experiments/testbed/nodeconf.py", ""]
    routes = []
    for link in topo.links:
        out = topo.next_link(node, link)
        port = next(i for i, f in enumerate(ifaces) if f.link is out)
        routes.append(f"{link_prefix(link)} {port}")
    lines.append(f"rt :: IPv6Lookup({', '.join(routes)});")
    mirror = bool(topo.extra.get("int_mirror")) and "sink" in roles
    if mirror:
        lines.append(f"mon :: ToDevice({MIRROR_IFNAME});   // INT mirror: capture here with tcpdump")
    # RTT separation on a link this node sends on needs the flows' RTTs measured here
    flow_rtt = info.get("flow_rtt") or any(f.link.separation for f in ifaces)
    if flow_rtt:
        lines.append("rtt :: FlowRTT;   // per-flow RTT from the packets of both directions: read its 'rtts' handler")
    for i, f in enumerate(ifaces):
        from_host = topo.is_host(f.peer)
        lines += ["", f"// interface {i}: {f.ifname} <-> {f.peer}"]
        batch = f", batch {info['rx_batch']}" if info.get("rx_batch") else ""
        lines.append(f"in{i} :: FromDevice({f.ifname}{batch});")
        lines.append(f"out{i} :: ToDevice({f.ifname}{'' if info.get('tx_ring', True) else ', tx_ring false'});")
        lines.append(f"in{i} -> EtherFilter({f.mac}) -> cls{i} :: Classifier(ipv6, -);")
        lines.append(f"cls{i}[1] -> Discard;")
        ingress = [f"cls{i}"]
        if from_host and f.link.emulated:
            ingress += _emulation(f"i{i}", f.link, 2 * f.link.index + 1)
        if flow_rtt:
            ingress.append(f"rtap{i} :: RTTTap(rtt)")       # as packets reach the node, before INT headers
        if f.link.flow_slots:
            # the ACKs of the flows this link's queue carries come back over the same link
            ingress.append(f"SlotTap(slots{i}, ack)")
        if from_host and "source" in roles:
            ingress.append(f"src{i} :: INTSource(max_hops {max_hops}, mtu {node_mtu}{ns_arg})")
        ingress.append("rt")
        lines.append(" -> ".join(ingress) + ";")
        transit = None
        if "transit" in roles:
            refs = [f"queue {'drr' if f.link.separation else 'q'}{i}", f"meter m{i}", f"egress out{i}"]
            if f.link.reconfig and node == f.link.a:
                refs.append(f"reconfig rc{i}")      # the schedule in the hop, announced to the senders
            if f.link.rate_mbps:
                refs.append(f"shaper shape{i}")      # the port's rate in the data-rate field
            if f.link.wireless is not None:
                refs += [f"link wl{i}", f"channel wl{i}"]
            elif f.link.may_lose or f.link.loss_pct:
                refs.append(f"link loss{i}")
            transit = f"tr{i} :: INTTransit(node_id {info['node_id']}, {', '.join(refs)}{ns_arg})"
        sink = None
        if topo.is_host(f.peer) and "sink" in roles:
            # the node's per-flow RTTs go out with the hop records: senders read their competitors'
            sink = f'sink{i} :: INTSink(exporter "{exporter}"{", rtt rtt" if flow_rtt else ""})'
            if mirror:
                # A copy of each packet as it reached the sink, stamped by every hop.
                sink = f"mir{i} :: Tee -> {sink}"
                lines.append(f"mir{i}[1] -> mon;")
        egress = [f"rt[{i}]", "DecHopLimit", f"m{i} :: FlowMeter"]
        reconfig = f.link.reconfig if f.link.reconfig and node == f.link.a else None
        if reconfig:
            egress.append(_reconfigure(topo, i, reconfig))
        if f.link.flow_slots:
            sample = f", sample {f.link.flow_slots_sample:g}" if f.link.flow_slots_sample < 1 else ""
            lines.append(f"slots{i} :: FlowSlots(queue q{i}{sample});   // Dragonfly's capture: read its 'take' handler")
        separated: List[str] = []
        egress += _emulation(str(i), f.link, 2 * f.link.index, transit, sink, slots=f.link.flow_slots,
                             separation=separated)
        lines += separated
        egress += [f"{f'ew{i} :: ' if reconfig else ''}EtherRewrite({f.mac}, {f.peer_mac})", f"out{i}"]
        lines.append(" -> ".join(egress) + ";")
        if reconfig:
            lines.append(_circuit(i, f, reconfig, info["node_id"] if "transit" in roles else None, ns_arg))
    return "\n".join(lines) + "\n"


def link_prefix(link) -> str:
    return f"2001:db8:{link.index + 1:x}::/64"
