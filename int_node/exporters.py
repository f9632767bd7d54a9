"""Where INTSink hands the telemetry it strips: exporters.

An exporter receives raw IOAM data per packet and must never block the packet
path for long. ``jsonl:PATH`` decodes and appends one JSON object per packet
(buffered, flushed at least every 200 ms); ``capture:PATH`` the same with the raw bytes,
undecoded; ``none`` discards. Whoever builds
the node adds others through :func:`register_exporter` before the configuration
is read: the MQTT publisher (``broker.publisher.register_exporters``) is added by
``intcc node run`` and ``python -m broker.node``; this package knows nothing of MQTT.
"""
from __future__ import annotations

import json
import time
from typing import Callable, Dict

from . import ioam, ioam_decode, packet


def flow_tuple(key: bytes) -> dict:
    """The 5-tuple of a flow key built by packet.flow_key(), as a JSON object."""
    return dict(zip(("src", "dst", "proto", "sport", "dport"), packet.flow_tuple(key)))


def decode_record(flow_key: bytes, trace_raw: bytes, e2e_raw: bytes, sink_ns: int) -> dict:
    """A JSON-able record of one packet's telemetry. Raises ioam.IOAMError."""
    trace = ioam_decode.decode_trace(trace_raw)
    rec = {"sink_ns": sink_ns, "flow": flow_tuple(flow_key),
           "trace": {"namespace_id": trace.namespace_id, "overflow": trace.overflow,
                     "trace_type": trace.trace_type, "hops": [n.to_dict() for n in trace.nodes]}}
    if e2e_raw:
        e = ioam_decode.decode_e2e(e2e_raw, 0, len(e2e_raw))
        rec["e2e"] = {"seq": e.seq, "ts_sec": e.ts_sec, "ts_frac": e.ts_frac}
    return rec


class Exporter:
    def __init__(self):
        self.exported = 0
        self.export_errors = 0

    def export(self, flow_key: bytes, trace_raw: bytes, e2e_raw: bytes, sink_ns: int) -> None:
        self.exported += 1

    def close(self) -> None:
        pass

    def use_flow_rtt(self, rtt_us: Callable[[bytes], "float | None"]) -> None:
        """The node's per-flow round trips (FlowRTT.rtt_us), for exporters that publish them."""

    def counters(self) -> Dict[str, int]:
        return {"exported": self.exported, "export_errors": self.export_errors}


class JsonLinesExporter(Exporter):
    FLUSH_NS = 200_000_000

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self._f = open(path, "a", buffering=1 << 16)
        self._flushed_ns = time.monotonic_ns()

    def export(self, flow_key, trace_raw, e2e_raw, sink_ns):
        try:
            rec = decode_record(flow_key, trace_raw, e2e_raw, sink_ns)
        except ioam.IOAMError:
            self.export_errors += 1
            return
        self._f.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self.exported += 1
        now = time.monotonic_ns()
        if now - self._flushed_ns > self.FLUSH_NS:
            self._f.flush()
            self._flushed_ns = now

    def close(self):
        self._f.close()


class CaptureExporter(JsonLinesExporter):
    """The packets as the sink received them: per packet, its arrival (``sink_ns``), its
    flow key and its raw trace and E2E option in hex, undecoded. What a replay of the sink
    needs byte for byte (tests/data ships one; telemetry.replay.capture_packets reads it)."""

    def export(self, flow_key, trace_raw, e2e_raw, sink_ns):
        self._f.write(json.dumps({"sink_ns": sink_ns, "key": bytes(flow_key).hex(), "trace": bytes(trace_raw).hex(),
                                  "e2e": bytes(e2e_raw or b"").hex()}, separators=(",", ":")) + "\n")
        self.exported += 1
        now = time.monotonic_ns()
        if now - self._flushed_ns > self.FLUSH_NS:
            self._f.flush()
            self._flushed_ns = now


_FACTORIES: Dict[str, Callable[[str], Exporter]] = {
    "none": lambda arg: Exporter(),
    "jsonl": JsonLinesExporter,
    "capture": CaptureExporter,
}


def register_exporter(scheme: str, factory: Callable[[str], Exporter]) -> None:
    _FACTORIES[scheme] = factory


def make_exporter(spec: str) -> Exporter:
    """'none', 'jsonl:/path/file.jsonl', 'mqtt://host:port', or a registered 'scheme:argument'."""
    scheme, _, arg = spec.partition(":")
    factory = _FACTORIES.get(scheme)
    if factory is None:
        raise ValueError(f"unknown exporter '{scheme}' (known: {', '.join(sorted(_FACTORIES))})")
    if scheme != "none" and not arg:
        raise ValueError(f"exporter '{scheme}' needs an argument, e.g. {scheme}:/tmp/int.jsonl")
    return factory(arg)
