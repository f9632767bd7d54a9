"""Putting a plan on the node's interfaces, keeping it fed, taking it off.

A :class:`FastPath` loads the programs (bpftool, pinned under /sys/fs/bpf/intcc-fp-<pid>),
fills the maps from the plan, replaces each port's root qdisc with the plan's queue (pfifo,
under tbf for a rate), attaches the programs on clsact, the drop tracer on kfree_skb, and
makes the mirror interface the Python sink exports from. Every 100 ms it gives the programs
the wall clock's offset and the node's receive drops. Its counters are added to the
elements' own, under the same names: a counter reads the same whichever path forwarded.
"""
from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
import time
from typing import Dict, List, Optional

from .. import ioam
from ..netns import NETNS_RUN_DIR, netns
from ..packet import NH_DSTOPTS
from . import bpfsys, build, layout
from .plan import Plan, PortPlan

log = logging.getLogger("intcc.node.fastpath")

PIN_ROOT = "/sys/fs/bpf"
PIN_PREFIX = "intcc-fp-"
REFRESH_NS = 100_000_000
RTT_SYNC_NS = 500_000_000        # the FlowRTT table's 'rtts' handler, between the control loop's rounds
_CONFIG = struct.Struct(f"<IIIIqII{(ioam.inserted_bytes(ioam.MAX_HOPS) + 7) & ~7}s")
_PORT = struct.Struct("<II6s6sIIII4xQQ51II")
_ROUTE_KEY = struct.Struct("<I16s")
_FLOW_KEY_BYTES = 4 + 40          # struct intcc_fp_meter_key: port, 5-tuple
_U32 = struct.Struct("<I")
_FLAGS = layout.PORT_FLAGS
METER_WINDOWS_MAX = 50

#: fast-path counter -> (plan attribute of the element, its counter name); every frame the
#: fast path takes passed its port's EtherFilter
COUNTER_OWNERS = {
    "rx_packets": ("from_dev", "packets"), "rx_bytes": ("from_dev", "bytes"),
    "src_inserted": ("source", "inserted"), "src_skipped_has_hbh": ("source", "skipped_has_hbh"),
    "src_skipped_mtu": ("source", "skipped_mtu"),
    "meter_packets": ("meter", "packets"),
    "tr_stamped": ("transit", "stamped"), "tr_overflow": ("transit", "overflow"), "tr_no_int": ("transit", "no_int"),
    "tr_foreign_namespace": ("transit", "foreign_namespace"),
    "tr_unsupported_trace": ("transit", "unsupported_trace"),
    "sink_no_int": ("sink", "no_int"), "sink_malformed": ("sink", "malformed"),
    "tx_packets": ("to_dev", "packets"), "tx_bytes": ("to_dev", "bytes"),
    "rtt_ack_samples": ("rtt", "ack_samples"), "rtt_ts_samples": ("rtt", "ts_samples"),
    "rtt_malformed": ("rtt_tap", "errors"), "rtt_pending_full": ("rtt", "pending_full"),
    "sep_packets": ("split", "packets"), "sep_track_full": ("split", "track_full"),
}


def pin_dir(ns: Optional[str], pid: int) -> str:
    """Where a node's programs and maps are pinned: its namespace in the name, so that a
    testbed's teardown finds what a node killed before its cleanup left (PIN_PREFIX)."""
    return os.path.join(PIN_ROOT, f"{PIN_PREFIX}{ns or 'root'}-{pid}")


class FastPathError(RuntimeError):
    """The fast path could not be put in place; the message says why (the node then runs as before)."""


def _run(argv: List[str], ns: Optional[str]) -> str:
    # nsenter --net only: `ip netns exec` and `tc -n` remount /sys, hiding /sys/fs/bpf
    full = (["nsenter", f"--net={os.path.join(NETNS_RUN_DIR, ns)}"] if ns else []) + argv
    res = subprocess.run(full, capture_output=True, text=True)
    if res.returncode:
        raise FastPathError(f"{' '.join(argv)}: {res.stderr.strip() or res.stdout.strip()}")
    return res.stdout


def _keep_table(alpha: float) -> List[int]:
    return [round(65536 * (1 - alpha) ** w) for w in range(METER_WINDOWS_MAX + 1)]


class FastPath:
    def __init__(self, router, plan: Plan):
        if not plan.compiled:
            raise FastPathError("; ".join(plan.reasons) or "nothing to compile")
        self.router, self.plan, self.ns = router, plan, router.netns
        self.pin_dir = pin_dir(self.ns, os.getpid())
        self.mirror_tx = self.mirror_rx = None
        self._attached: List[str] = []      # devices with our clsact
        self._qdiscs: List[str] = []        # devices whose root qdisc is ours
        self._fds: Dict[str, int] = {}
        self._ifindexes: Dict[int, int] = {}
        self._mirror_ifindex = 0
        self._link_fd = None
        self._ncpu = bpfsys.possible_cpus()
        self._mirror = None
        self._timer = self._purge_timer = self._rtt_timer = None
        self.separated: list = []          # separation.SeparatedPort of each separated port

    # -- putting it in place --------------------------------------------------------------
    def attach(self) -> "FastPath":
        from .separation import SeparatedPort
        obj = build.build()
        self.separated = [SeparatedPort(self, p) for p in self.plan.ports if p.separated]
        try:
            self._load(obj)
            self._fill_maps()
            for p in self.plan.ports:
                self._queue(p)
            for sp in self.separated:
                sp.write_port()
            for p in self.plan.ports:
                self._attach_port(p)
            self._link_fd = bpfsys.raw_tracepoint_open(bpfsys.obj_get(self._prog("intcc_fp_qdisc_drop")))
        except Exception:
            self.detach()
            raise
        self._timer = self.router.loop.timer(self._refresh)
        self._refresh()
        self._purge_every_ns = min(p.meter.flow_timeout for p in self.plan.ports) // 10
        self._flows_removed: Dict[int, int] = {}        # per port, since the program was loaded
        self._purge_timer = self.router.loop.timer(self._purge_flows)
        self._purge_timer.schedule_after(self._purge_every_ns)
        for sp in self.separated:
            # the control loop's rounds run on the maps: read before, written back after
            sp.p.separation.before_round.append(self._guarded(sp.before_round))
            sp.p.separation.after_round.append(self._guarded(sp.after_round))
            sp.p.separation.queue_stats = sp.queue_stats
        if self._rtt_table() is not None:
            self._rtt_timer = self.router.loop.timer(self._sync_rtts_timer)
            self._rtt_timer.schedule_after(RTT_SYNC_NS)
        log.info("fast path on %d ports (%s): forwarding, INT and queues in the kernel; %s",
                 len(self.plan.ports), ", ".join(p.devname for p in self.plan.ports), queue_note())
        return self

    def _prog(self, name: str) -> str:
        return os.path.join(self.pin_dir, "progs", name)

    def _load(self, obj: str) -> None:
        if not os.path.ismount(PIN_ROOT):
            subprocess.run(["mount", "-t", "bpf", "bpf", PIN_ROOT], capture_output=True)
        shutil.rmtree(self.pin_dir, ignore_errors=True)
        os.makedirs(self.pin_dir)
        res = subprocess.run(["bpftool", "prog", "loadall", obj, os.path.join(self.pin_dir, "progs"),
                              "pinmaps", os.path.join(self.pin_dir, "maps")], capture_output=True, text=True)
        if res.returncode:
            tail = "\n".join(res.stderr.strip().splitlines()[-15:])
            raise FastPathError(f"the kernel refused the fast path's programs:\n{tail}")
        for name in os.listdir(os.path.join(self.pin_dir, "maps")):
            self._fds[name] = bpfsys.obj_get(os.path.join(self.pin_dir, "maps", name))

    def _ifindex(self, dev: str) -> int:
        with netns(self.ns):
            return socket_if_nametoindex(dev)

    def _fill_maps(self) -> None:
        plan = self.plan
        if self.mirror_needed():
            self._make_mirror()
        template, hbh_bytes = b"", 0
        if plan.max_hops:
            hbh = ioam.build_hbh(NH_DSTOPTS, plan.max_hops, plan.namespace_id)
            template, hbh_bytes = hbh + ioam.build_doh(0, 0, 0, plan.namespace_id), len(hbh)
        self._config = dict(node_id=plan.node_id, namespace_id=plan.namespace_id, insert_bytes=len(template),
                            hbh_bytes=hbh_bytes, template=template, netns_inum=self._netns_inum())
        self._write_config(0)
        self._mirror_ifindex = self._ifindex(self.mirror_tx) if self.mirror_tx else 0
        for p in plan.ports:
            ifindex = self._ifindex(p.devname)
            self._write_port(p, ifindex)
            bpfsys.update(self._fds["intcc_fp_ifport"], _U32.pack(ifindex), _U32.pack(p.index))
        fast = {p.index for p in plan.ports}
        for net, port in plan.routes:
            if port in fast:
                bpfsys.update(self._fds["intcc_fp_routes"], _ROUTE_KEY.pack(net.prefixlen, net.network_address.packed),
                              _U32.pack(port))

    def _write_port(self, p: PortPlan, ifindex: int) -> None:
        flags = _FLAGS["ENABLED"] | _FLAGS["FAST_EGRESS"] | _FLAGS["METER"]
        flags |= (_FLAGS["SOURCE"] if p.source else 0) | (_FLAGS["TRANSIT"] if p.transit else 0)
        flags |= _FLAGS["SINK"] if p.sink else 0
        flags |= (_FLAGS["RTT_TAP"] if p.rtt_tap else 0) | (_FLAGS["SEPARATED"] if p.separated else 0)
        mtu = p.source.mtu or p.to_dev.mtu if p.source else 0
        value = _PORT.pack(ifindex, flags, p.ether_filter.mac, p.rewrite.dst, mtu or 0,
                           int(p.shaper.rate // 1000) if p.shaper else 0, p.queue.capacity_limit_bytes,
                           self._mirror_ifindex if p.sink else 0, p.meter.interval, p.meter.flow_timeout,
                           *_keep_table(p.meter.alpha), 0)
        bpfsys.update(self._fds["intcc_fp_ports"], _U32.pack(p.index), value)
        self._ifindexes[p.index] = ifindex

    def on_write(self, elem, handler: str) -> None:
        """A run-time write to an element the fast path runs: the kernel's queue and the
        programs' port take it (a rate, a queue's size), or the write is refused."""
        from ..element import ConfigError
        for p in self.plan.ports:
            if elem is p.queue and handler == "capacity_bytes" and elem.capacity_bytes:
                raise ConfigError(f"{elem.name}: the fast path's queue is packet-bounded (a pfifo); a byte "
                                  "bound needs the Python node (run without --fast-path)")
            if p.separated and elem in p.queues and handler == "capacity":
                sp = next(sp for sp in self.separated if sp.p is p)
                sp.after_round(time.time_ns())          # its pfifo's limit, as a round writes it
                return
            if elem not in (p.queue, p.shaper):
                continue
            try:
                if p.shaper is not None:
                    self._queue(p, change=True)
                self._write_port(p, self._ifindexes[p.index])
            except (FastPathError, OSError) as exc:
                raise ConfigError(f"{elem.name}.{handler}: the fast path could not take it: {exc}") from None
            log.info("fast path: %s.%s = %s on %s", elem.name, handler, getattr(elem, handler), p.devname)

    def _netns_inum(self) -> int:
        path = os.path.join(NETNS_RUN_DIR, self.ns) if self.ns else "/proc/self/ns/net"
        return os.stat(path).st_ino

    def _write_config(self, rx_drops: int) -> None:
        c = self._config
        offset = time.time_ns() - time.monotonic_ns()
        bpfsys.update(self._fds["intcc_fp_cfg"], _U32.pack(0), _CONFIG.pack(
            c["node_id"], c["namespace_id"], c["insert_bytes"], c["hbh_bytes"], offset, rx_drops & 0xFFFFFFFF,
            c["netns_inum"], c["template"]))

    def _queue(self, p: PortPlan, change: bool = False) -> None:
        """The port's Queue and LinkShaper as its root qdisc: tbf over a pfifo of the Queue's size
        (over HTB and a pfifo per queue where the port is separated: separation.py)."""
        dev, limit = p.devname, p.queue.capacity
        if p.shaper is None:
            # Queue -> Unqueue: a buffer without a rate, the device's own queue in the kernel (a
            # veth's is none). A pfifo here would move packets between CPUs and reorder them.
            return
        if not change:
            self._qdiscs.append(dev)
        rate_bps = int(p.shaper.rate)
        frame = p.to_dev.mtu + 14
        # a burst of two frames, or 1 ms of the rate: the LinkShaper sends back-to-back frames at
        # the rate and catches up after a late timer the same way
        burst = max(2 * frame, rate_bps // 8 // 1000)
        stab = ["stab", "overhead", str(p.shaper.overhead_bytes)] if p.shaper.overhead_bytes else []
        if p.separated:
            sp = next(sp for sp in self.separated if sp.p is p)
            if change:
                _run(["tc", "qdisc", "change", "dev", dev, "root", "handle", "1:", *stab, "tbf", "rate",
                      f"{rate_bps}bit", "burst", str(burst), "limit", str(limit * frame)], self.ns)
                for j, w in enumerate(p.drr.weights):
                    _run(sp.class_argv("change", j, w), self.ns)
            else:
                sp.qdiscs(lambda argv: _run(argv, self.ns), burst, limit * frame, stab)
            return
        _run(["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", *stab, "tbf", "rate", f"{rate_bps}bit",
              "burst", str(burst), "limit", str(limit * frame)], self.ns)
        _run(["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo", "limit", str(limit)],
             self.ns)

    def _attach_port(self, p: PortPlan) -> None:
        dev = p.devname
        _run(["tc", "qdisc", "replace", "dev", dev, "clsact"], self.ns)
        self._attached.append(dev)
        _run(["tc", "filter", "replace", "dev", dev, "ingress", "pref", "1", "handle", "1", "bpf", "da", "pinned",
              self._prog("intcc_fp_ingress")], self.ns)
        if p.transit or p.sink or p.separated:
            _run(["tc", "filter", "replace", "dev", dev, "egress", "pref", "1", "handle", "1", "bpf", "da", "pinned",
                  self._prog("intcc_fp_egress")], self.ns)

    # -- the maps, for the control loop (separation.py) ------------------------------------------
    def map_update(self, name: str, key: bytes, value: bytes) -> None:
        bpfsys.update(self._fds[name], key, value)

    def map_delete(self, name: str, key: bytes) -> None:
        bpfsys.delete(self._fds[name], key)

    def map_items(self, name: str, key_size: int, value_size: int):
        fd = self._fds[name]
        for key in list(bpfsys.keys(fd, key_size)):
            raw = bpfsys.lookup(fd, key, value_size)
            if raw is not None:
                yield key, raw

    @staticmethod
    def _guarded(hook):
        """A control round's hook whose kernel call failed says so and the round goes on (the
        maps keep what they had; the next round writes them again)."""
        def run(now_ns: int) -> None:
            try:
                hook(now_ns)
            except (OSError, FastPathError) as exc:
                log.error("fast path: RTT separation's round could not reach the kernel: %s", exc)
        return run

    def tc(self, argv: List[str]) -> str:
        return _run(argv, self.ns)

    def clear_sketch(self) -> None:
        from .separation import SKETCH_ROW_BYTES, SKETCH_ROWS
        for row in range(SKETCH_ROWS):
            bpfsys.update(self._fds["intcc_fp_sketch"], _U32.pack(row), bytes(SKETCH_ROW_BYTES))

    def _rtt_table(self):
        return next((p.rtt for p in self.plan.ports if p.rtt is not None), None)

    def sync_rtts(self) -> None:
        """The FlowRTT table from the programs' per-direction RTTs (its handler and the loop read it)."""
        from .separation import _RTT_DIR, rtt_directions
        table = self._rtt_table()
        if table is not None:
            table.flows.clear()
            table.flows.update(rtt_directions(self.map_items("intcc_fp_rtt", 40, _RTT_DIR.size), table.max_flows))

    def _sync_rtts_timer(self) -> None:
        try:
            self.sync_rtts()
        except OSError as exc:
            log.error("fast path: cannot read the RTTs: %s", exc)
        self._rtt_timer.schedule_after(RTT_SYNC_NS)

    # -- the sink's mirror --------------------------------------------------------------------
    def mirror_needed(self) -> bool:
        return any(p.sink for p in self.plan.ports)

    def _make_mirror(self) -> None:
        from .mirror import MirrorReader
        tag = os.getpid() % 100000
        self.mirror_tx, self.mirror_rx = f"intcc-fpm{tag}", f"intcc-fpr{tag}"
        _run(["ip", "link", "add", self.mirror_tx, "mtu", "9000", "type", "veth", "peer", "name", self.mirror_rx,
              "mtu", "9000"], self.ns)
        for dev in (self.mirror_tx, self.mirror_rx):
            _run(["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"], self.ns)
            _run(["ip", "link", "set", dev, "up"], self.ns)
        sinks = {p.rewrite.src: p.sink for p in self.plan.ports if p.sink}
        self._mirror = MirrorReader(self.router, self.mirror_rx, sinks)

    # -- running --------------------------------------------------------------------------------
    def _refresh(self) -> None:
        rx_drops = 0
        transit = next((p.transit for p in self.plan.ports if p.transit), None)
        if transit is not None:
            rx_drops = transit._node_rx_drops(time.time_ns())
        try:
            self._write_config(rx_drops)
        except OSError as exc:
            log.error("fast path: cannot update its configuration: %s", exc)
        self._timer.schedule_after(REFRESH_NS)

    def _purge_flows(self) -> None:
        """FlowMeter's purge, off the packet path: flows not seen within a port's timeout leave
        its table, and the port's removals so far are written for the program (its flow count:
        its inserts less these)."""
        timeouts = {p.index: p.meter.flow_timeout for p in self.plan.ports}
        fd, now = self._fds["intcc_fp_flows"], time.monotonic_ns()
        removed = self._flows_removed
        try:
            for key in list(bpfsys.keys(fd, _FLOW_KEY_BYTES)):
                port = _U32.unpack_from(key)[0]
                raw = bpfsys.lookup(fd, key, 8)
                if raw is None or (port in timeouts and struct.unpack("<Q", raw)[0] >= now - timeouts[port]):
                    continue
                if bpfsys.delete(fd, key) and port in timeouts:
                    removed[port] = removed.get(port, 0) + 1
            # the program counts the flows it inserts and this the flows it removed, each in its
            # own map: writing one count over the other lost the flows inserted meanwhile
            for port, n in removed.items():
                bpfsys.update(self._fds["intcc_fp_flows_removed"], _U32.pack(port), struct.pack("<Q", n))
        except OSError as exc:
            log.error("fast path: cannot purge the flow table: %s", exc)
        self._purge_timer.schedule_after(self._purge_every_ns)

    def raw_counters(self) -> Dict[int, Dict[str, int]]:
        """Per port index, each fast-path counter summed over the CPUs."""
        fd, n = self._fds["intcc_fp_counters"], len(layout.COUNTERS)
        out = {}
        for p in self.plan.ports:
            row = {}
            for i, name in enumerate(layout.COUNTERS):
                raw = bpfsys.lookup(fd, _U32.pack(p.index * n + i), 8 * self._ncpu)
                row[name] = sum(struct.unpack(f"<{self._ncpu}Q", raw)) if raw else 0
            out[p.index] = row
        return out

    def qdisc_stats(self, dev: str) -> Dict[str, int]:
        """The port's root qdisc: drops, backlog (packets, bytes), packets sent."""
        import json
        for q in json.loads(_run(["tc", "-s", "-j", "qdisc", "show", "dev", dev, "root"], self.ns) or "[]"):
            return {"qdisc_drops": q.get("drops", 0), "qdisc_overlimits": q.get("overlimits", 0),
                    "qdisc_backlog_packets": q.get("qlen", 0), "qdisc_backlog_bytes": q.get("backlog", 0),
                    "qdisc_sent_packets": q.get("packets", 0)}
        return {}

    def counters(self) -> Dict[str, Dict[str, int]]:
        """Fast-path counts under the plan's element names, to add to the elements' own; each
        port's whole set (and its qdisc's) under ``fastpath.<device>``."""
        rows = self.raw_counters()
        out: Dict[str, Dict[str, int]] = {}
        for p in self.plan.ports:
            row = rows[p.index]
            for counter, (attr, name) in COUNTER_OWNERS.items():
                elem = getattr(p, attr)
                if elem is not None:
                    d = out.setdefault(elem.name, {})
                    d[name] = d.get(name, 0) + row[counter]
            out.setdefault(p.ether_filter.name, {})["passed"] = row["rx_packets"]
            try:
                row.update(self.qdisc_stats(p.devname))
            except FastPathError as exc:
                log.debug("qdisc stats: %s", exc)
            if p.separated:
                sp = next(sp for sp in self.separated if sp.p is p)
                try:
                    leaves = sp.leaf_stats()
                    for q, leaf in zip(p.queues, leaves):
                        if leaf:
                            out.setdefault(q.name, {})["drops"] = leaf["drops"]
                    out.setdefault(p.split.name, {})["sent"] = [leaf.get("sent_packets", 0) for leaf in leaves]
                except FastPathError as exc:
                    log.debug("class stats: %s", exc)
            elif "qdisc_drops" in row:
                out.setdefault(p.queue.name, {})["drops"] = row["qdisc_drops"]
            out[f"fastpath.{p.devname}"] = row
        return out

    # -- taking it off --------------------------------------------------------------------------
    def detach(self) -> None:
        for sp in self.separated:
            sp.p.separation.before_round.clear()
            sp.p.separation.after_round.clear()
            sp.p.separation.queue_stats = None
        for timer in (self._timer, self._purge_timer, self._rtt_timer):
            if timer is not None:
                timer.cancel()
        if self._mirror is not None:
            self._mirror.close()
        for argv in ([["tc", "qdisc", "del", "dev", dev, "clsact"] for dev in self._attached]
                     + [["tc", "qdisc", "del", "dev", dev, "root"] for dev in self._qdiscs]):
            try:
                _run(argv, self.ns)
            except FastPathError as exc:
                log.debug("fast path cleanup: %s", exc)
        self._attached, self._qdiscs = [], []
        if self.mirror_tx:
            try:
                _run(["ip", "link", "del", self.mirror_tx], self.ns)
            except FastPathError as exc:
                log.warning("fast path cleanup: %s", exc)
        for fd in list(self._fds.values()) + ([self._link_fd] if self._link_fd is not None else []):
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds, self._link_fd = {}, None
        shutil.rmtree(self.pin_dir, ignore_errors=True)


def bpf_qdisc_available() -> bool:
    """Whether this kernel can load a queue written in BPF (struct_ops Qdisc_ops, Linux >= 6.16
    with CONFIG_NET_SCH_BPF): its kfuncs are in the kernel's BTF."""
    try:
        with open(build.BTF, "rb") as f:
            return b"bpf_qdisc_skb_drop" in f.read()
    except OSError:
        return False


def queue_note() -> str:
    if bpf_qdisc_available():
        return ("queues: the kernel's qdiscs (tbf, pfifo); this kernel could run a BPF qdisc, which the "
                "fast path does not have yet")
    return "queues: the kernel's qdiscs (tbf, pfifo); this kernel has no BPF qdisc (CONFIG_NET_SCH_BPF)"


def socket_if_nametoindex(dev: str) -> int:
    import socket
    try:
        return socket.if_nametoindex(dev)
    except OSError:
        raise FastPathError(f"no interface {dev}") from None
