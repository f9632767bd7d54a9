"""A collection run's flow 1 kept for the estimator (estimator/dataset.py): its packets are
captured at its sender while the run's flows go; then its trace, the Table I features of
``samples`` evenly spaced ACKs after a warm-up, the INT series at the bottleneck, each
competing flow's packets and drops there, and what a live sender receives from the sink
are saved as OUT/runs/<run>.npz with the run's plan (so features can be recomputed without
re-running). The runner calls it for scenarios with a [collection] (collection_plans.py)."""
from __future__ import annotations

import json
import os

import numpy as np

from estimator.capture import Capture, sender_trace
from estimator.dataset import CCAS, DATA_FORMAT, save_run
from estimator.features import TraceError, features
from estimator.int_series import bottleneck_series, causal_pick_share, flow_counts_from_jsonl, hop_series_from_jsonl
from estimator.sink_view import replayed_view, view_arrays

from experiments.runs.collection_plans import HARD_RANGES, RANGES, UDP_CROSS_SHARE, Collection
from experiments.testbed.traffic import RunFailed


class CollectionError(RuntimeError):
    """A collection that cannot go on in its directory as asked (another seed, distribution,
    interpreter): said before anything runs."""


def _option(key: str, value) -> str:
    if key == "udp_cross":
        return "with --udp-cross" if value else "without --udp-cross"
    return f"with --{key} {value}"


def record_collection(out_dir: str, collection: Collection, seed: int, seconds: float, node_python: str | None,
                      node_rt_priority: int) -> None:
    """Check that a collection in ``out_dir`` goes on as it began (one dataset, one seed,
    distribution and node interpreter: None is $INTCC_NODE_PYTHON, else cpython) and record
    its settings in collection.json."""
    distribution, udp_cross = collection.distribution, collection.udp_cross
    samples, warmup_frac = collection.samples, collection.warmup_frac
    from int_node.runtime import ENV_VAR, InterpreterError, node_python as resolve_node_python
    node_python = (node_python or os.environ.get(ENV_VAR) or "cpython").strip()
    try:
        resolve_node_python(node_python)
    except InterpreterError as e:
        raise CollectionError(str(e)) from None
    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    record_path = os.path.join(out_dir, "collection.json")
    if os.path.exists(record_path):
        with open(record_path) as f:
            recorded = json.load(f)
        before = recorded.get("node_python", "cpython")     # older datasets: cpython
        if before != node_python and os.listdir(os.path.join(out_dir, "runs")):
            # the nodes' speed shapes the emulated links: one dataset, one interpreter
            raise CollectionError(f"{out_dir} was collected with node interpreter '{before}', not "
                                  f"'{node_python}': resume with --node-python {before}")
        defaults = {"distribution": "paper", "seed": None, "udp_cross": False}     # older datasets: the defaults
        for key, now in (("distribution", distribution), ("seed", seed), ("udp_cross", udp_cross)):
            was = recorded.get(key, defaults[key])
            if was != now and os.listdir(os.path.join(out_dir, "runs")):
                raise CollectionError(f"{out_dir} was collected {_option(key, was)}, not {_option(key, now)}: "
                                      f"resume with the same, or collect into another directory")
    with open(record_path, "w") as f:
        json.dump({"seed": seed, "seconds": seconds, "samples": samples, "warmup_frac": warmup_frac,
                   "ranges": RANGES, "distribution": distribution,
                   "hard_ranges": HARD_RANGES if distribution == "hard" else None, "ccas": CCAS,
                   "format": DATA_FORMAT, "node_python": node_python, "node_rt_priority": node_rt_priority,
                   "udp_cross": udp_cross, "udp_cross_share": UDP_CROSS_SHARE if udp_cross else None}, f, indent=1)


def npz_path(out_dir: str, plan: dict) -> str:
    """Where a collection in ``out_dir`` keeps the run of ``plan``: beside the run's directory."""
    return os.path.join(out_dir, "runs", plan["run"] + ".npz")


def _only_link(tb, host: str, role: str):
    links = tb.topo.links_of(host)
    if len(links) != 1:
        raise RunFailed(f"collection: {role} {host} has {len(links)} links, not one")
    return links[0]


class DatasetRun:
    """Flow 1 (``flow``: sender, receiver; to ``port``) of one collection run on testbed
    ``tb``, beside the competitors sent by ``competitor_host``; kept as ``run_dir``.npz."""

    def __init__(self, tb, flow: list, competitor_host: str, port: int, plan: dict, collection: Collection,
                 run_dir: str):
        (self.host, receiver), self.competitor_host = flow, competitor_host
        self.tb, self.port, self.plan, self.collection = tb, port, plan, collection
        self.path = run_dir.rstrip("/") + ".npz"
        self.pcap = os.path.join(run_dir, "flow1.pcap")
        self.interface = tb.ifname(_only_link(tb, self.host, "flow 1's sender"), self.host)
        # the sink on flow 1's data path: the node before its receiver
        self.sink = _only_link(tb, receiver, "flow 1's receiver").other(receiver)

    def capture(self) -> Capture:
        """Flow 1's packets at its sender while the flows run."""
        return Capture(self.tb.ns(self.host), self.interface, self.pcap)

    def save(self, outs: list, udp_received_mbps: float | None, extra: dict) -> str:
        """The run as a dataset run. ``outs``: iperf3's outputs, flow 1's first, then the
        competitors'; ``extra``: the run's emulation fields (how far its links fell behind).
        A run whose trace cannot be read fails (RunFailed): it is not kept."""
        try:
            return self._save(outs, udp_received_mbps, extra)
        except (TraceError, OSError, ValueError, IndexError, KeyError) as e:
            raise RunFailed(f"collection: flow 1's data could not be kept ({e})") from None
        finally:
            if os.path.exists(self.pcap):
                os.remove(self.pcap)

    def _save(self, outs: list, udp_received_mbps: float | None, extra: dict) -> str:
        tb, plan = self.tb, self.plan
        tr = sender_trace(self.pcap, sender=tb.addr(self.host))
        int_log = tb.node_info(self.sink)["int_log"]
        per_hop = hop_series_from_jsonl(int_log, tb.addr(self.host), dport=self.port)
        int_series = bottleneck_series(per_hop)     # the whole run's choice; the meta says how often the live one agreed
        # each competing flow's packets at the bottleneck per 10 ms (features that do not
        # assume two flows read each competitor from its own packets), and those it lost
        comp_counts, comp_lost = flow_counts_from_jsonl(int_log, tb.addr(self.competitor_host),
                                                        t0_s=float(int_series[0, 0]))
        # what a live sender receives: the sink's own records, replayed from its log
        sink_raw = view_arrays(replayed_view(int_log, tb.addr(self.host), dport=self.port))
        F = features(tr)
        start = int(len(F) * self.collection.warmup_frac)
        idx = np.unique(np.linspace(start, len(F) - 1, self.collection.samples).astype(int))
        raw = {"ack_t": tr.ack_t, "rtt_s": tr.rtt_s.astype(np.float32), "acked_bytes": tr.acked_bytes.astype(np.int32),
               "send_t": tr.send_t, "retrans": tr.retrans.astype(bool), "sample_idx": idx, "int_series": int_series,
               "comp_packets_10ms": comp_counts, "comp_lost_10ms": comp_lost, **sink_raw}
        goodput = {"goodput_mbps": [o["end"]["sum_received"]["bits_per_second"] / 1e6 for o in outs]}
        if udp_received_mbps is not None:
            goodput["udp_received_mbps"] = udp_received_mbps
        meta = {"acks": int(len(F)), **goodput, **extra, "bottleneck_causal_share": causal_pick_share(per_hop)}
        save_run(self.path, plan, F[idx], tr.ack_t[idx] - tr.ack_t[0], meta, raw)
        return self.path
