"""RTT separation on the fast path: the kernel's queues for a separated port, and the control
loop's round on the programs' maps (bpf/intcc_separation.bpf.h).

The data plane is in the kernel: the ingress programs time TCP flows (RTTTap) and split each
separated port's packets (FlowSplit: the sketch, the long flows, each packet's queue); the
queues are tbf at the port's rate over HTB, a leaf class and a pfifo per queue. The control
loop is the Python node's own RTTSeparation, unchanged: before each round the long flows and
their RTTs are read from the maps into its FlowSplit and FlowRTT, after it what the round
decided is written back (the flows' queues, the leaves' quanta from the queues' weights, the
pfifos' limits from their buffers, and what the stamp says of each queue)."""
from __future__ import annotations

import struct
import time
from typing import Dict, List, Optional

from ..elements.rtt import _Direction, reverse_key
from ..elements.separation import _Tracked
from .plan import SEP_MAX_QUEUES, SKETCH_DEPTH, SKETCH_WIDTH, PortPlan

HTB_MAJOR = 2               # bpf: SEP_HTB_MAJOR
CLASS_BASE = 0x10           # bpf: SEP_CLASS_BASE
LEAF_QDISC_BASE = 0x30      # a queue's pfifo: handle (0x30 + queue):
_U32 = struct.Struct("<I")
_SEP = struct.Struct(f"<QQIIII{SEP_MAX_QUEUES}I{SEP_MAX_QUEUES}I")
_TRACKED = struct.Struct("<QQII")
RTT_PENDING = 64            # bpf: RTT_PENDING
_RTT_DIR = struct.Struct(f"<IIIIII{RTT_PENDING}I{RTT_PENDING}Q{RTT_PENDING}I{RTT_PENDING}QQQQIIII")
_METER_KEY_BYTES = 44
_FLOW_BYTES = 40



def flow_key_of(bpf_flow: bytes) -> bytes:
    """int_node.packet.flow_key's key of a struct intcc_fp_flow (src, dst, proto, 3 pad, ports)."""
    return bpf_flow[0:33] + bpf_flow[36:40]


def bpf_flow_of(key: bytes) -> bytes:
    return key[0:33] + b"\0\0\0" + key[33:37]


def leaf_class(queue: int) -> str:
    return f"{HTB_MAJOR}:{CLASS_BASE + queue:x}"


class SeparatedPort:
    """One separated port's queues in the kernel, and its control loop's round on the maps."""

    def __init__(self, fast, port: PortPlan):
        self.fast, self.p = fast, port
        self._weights: List[int] = []
        self._limits: List[int] = []
        self._table: Dict[bytes, int] = {}       # what the map has: flow key -> queue
        self._synced: set = set()                # tracked flows read into the split before the round
        self._sketch_cleared_ns = time.monotonic_ns()

    # -- the kernel's queues -----------------------------------------------------------------
    def qdiscs(self, run, burst: int, limit_bytes: int, stab: list) -> None:
        """tbf at the rate, HTB under it (unclassified frames to the default queue), a leaf per queue."""
        p, dev = self.p, self.p.devname
        rate = int(p.shaper.rate)
        run(["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", *stab, "tbf", "rate", f"{rate}bit",
             "burst", str(burst), "limit", str(limit_bytes)])
        run(["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", f"{HTB_MAJOR}:", "htb", "default",
             f"{CLASS_BASE + p.split.default:x}"])
        weights = p.drr.weights
        for j, q in enumerate(p.queues):
            run(self.class_argv("add", j, weights[j]))
            run(["tc", "qdisc", "add", "dev", dev, "parent", leaf_class(j), "handle", f"{LEAF_QDISC_BASE + j:x}:",
                 "pfifo", "limit", str(q.capacity)])
        self._weights, self._limits = list(weights), [q.capacity for q in p.queues]

    def class_argv(self, verb: str, queue: int, weight: int) -> list:
        # every leaf at the port's rate: under tbf none is ever over it, and HTB serves them by
        # deficit round robin, its quantum a turn (bpf/intcc_separation.bpf.h)
        rate = int(self.p.shaper.rate)
        return ["tc", "class", verb, "dev", self.p.devname, "parent", f"{HTB_MAJOR}:", "classid", leaf_class(queue),
                "htb", "rate", f"{rate}bit", "ceil", f"{rate}bit", "quantum", str(self.p.drr.quantum * weight)]

    # -- the maps --------------------------------------------------------------------------
    def write_port(self) -> None:
        p, split = self.p, self.p.split
        weights = p.drr.weights
        # before the loop's first round every queue counts: a share no queue can exceed
        total = p.separation.active_weight or sum(weights)
        pad = [0] * (SEP_MAX_QUEUES - len(p.queues))
        value = _SEP.pack(split.long_bytes, split.long_age, len(p.queues), split.default, total, 0,
                          *weights, *pad, *[q.capacity for q in p.queues], *pad)
        self.fast.map_update("intcc_fp_sep", _U32.pack(p.index), value)

    def before_round(self, now_ns: int) -> None:
        """The long flows the programs track (bytes, last packet) into the split, their RTTs into
        the loop's FlowRTT."""
        split, index = self.p.split, self.p.index
        wall_minus_mono = time.time_ns() - time.monotonic_ns()
        seen = set()
        for raw_key, raw in self.fast.map_items("intcc_fp_tracked", _METER_KEY_BYTES, _TRACKED.size):
            if _U32.unpack_from(raw_key)[0] != index:
                continue
            key = flow_key_of(raw_key[4:])
            nbytes, last_ns, proto, _ = _TRACKED.unpack(raw)
            t = split.tracked.get(key)
            if t is None:
                t = split.tracked[key] = _Tracked(nbytes, last_ns + wall_minus_mono, proto)
            t.bytes, t.last_ns = nbytes, last_ns + wall_minus_mono
            seen.add(key)
        for key in [k for k in split.tracked if k not in seen]:
            del split.tracked[key]                 # gone from the map (its last round's expiry)
        self._synced = seen
        self.fast.sync_rtts()

    def after_round(self, now_ns: int) -> None:
        """The round's decisions to the kernel: expired flows out of the maps, each flow's queue,
        the leaves' quanta and limits, the stamp's view of the queues."""
        p, split, index = self.p, self.p.split, self.p.index
        for key in self._synced - set(split.tracked):
            mk = _U32.pack(index) + bpf_flow_of(key)
            self.fast.map_delete("intcc_fp_tracked", mk)
            self.fast.map_delete("intcc_fp_sep_table", mk)
            self._table.pop(key, None)
        for key in [k for k in self._table if k not in split.table]:
            self.fast.map_delete("intcc_fp_sep_table", _U32.pack(index) + bpf_flow_of(key))
            del self._table[key]
        for key, q in split.table.items():
            if self._table.get(key) != q:
                self.fast.map_update("intcc_fp_sep_table", _U32.pack(index) + bpf_flow_of(key), _U32.pack(q))
                self._table[key] = q
        weights = p.drr.weights
        for j, w in enumerate(weights):
            if j < len(self._weights) and self._weights[j] != w:
                self.fast.tc(self.class_argv("change", j, w))
        self._weights = list(weights)
        for j, q in enumerate(p.queues):
            if self._limits[j] != q.capacity:
                self.fast.tc(["tc", "qdisc", "change", "dev", p.devname, "parent", leaf_class(j), "handle",
                              f"{LEAF_QDISC_BASE + j:x}:", "pfifo", "limit", str(q.capacity)])
                self._limits[j] = q.capacity
        self.write_port()
        if time.monotonic_ns() - self._sketch_cleared_ns >= split.sketch_reset:
            self.fast.clear_sketch()
            self._sketch_cleared_ns = time.monotonic_ns()

    def queue_stats(self) -> List[tuple]:
        """(depth in packets, drops) of each queue, for the control loop's 'groups' handler."""
        return [(leaf.get("qlen", 0), leaf.get("drops", 0)) for leaf in self.leaf_stats()]

    def leaf_stats(self) -> List[dict]:
        """Each queue's pfifo in the kernel: packets queued, drops, sent (tc has no JSON of classes)."""
        import json
        out: Dict[int, dict] = {}
        for q in json.loads(self.fast.tc(["tc", "-s", "-j", "qdisc", "show", "dev", self.p.devname]) or "[]"):
            if q.get("kind") != "pfifo" or not q.get("handle", "").endswith(":"):
                continue
            j = int(q["handle"][:-1], 16) - LEAF_QDISC_BASE
            if 0 <= j < len(self.p.queues):
                out[j] = {"drops": q.get("drops", 0), "qlen": q.get("qlen", 0), "sent_packets": q.get("packets", 0)}
        return [out.get(j, {}) for j in range(len(self.p.queues))]


def rtt_directions(items, max_flows: int) -> Dict[bytes, _Direction]:
    """FlowRTT's table from the programs' (struct intcc_fp_flow, struct intcc_fp_rtt_dir)
    pairs: the samples and minima of each direction, the most recently seen ``max_flows``."""
    rows = []
    for raw_key, raw in items:
        (ack_min_ns, ts_min_ns, last_ns, ack_n, ts_n, _retransmits, _flags) = _RTT_DIR.unpack(raw)[-7:]
        rows.append((last_ns, flow_key_of(raw_key), ack_min_ns, ack_n, ts_min_ns, ts_n))
    rows.sort()
    out: Dict[bytes, _Direction] = {}
    for _, key, ack_min_ns, ack_n, ts_min_ns, ts_n in rows[-max_flows:]:
        d = _Direction(reverse_key(key))
        for stats, min_ns, n in ((d.ack, ack_min_ns, ack_n), (d.ts, ts_min_ns, ts_n)):
            if n and min_ns:
                stats.samples, stats.min_us = n, min_ns / 1e3
        out[key] = d
    return out


#: the sketch's rows as the program has them (struct intcc_fp_sketch_row), cleared by the loop
SKETCH_ROWS, SKETCH_ROW_BYTES = SKETCH_DEPTH, 4 * SKETCH_WIDTH
