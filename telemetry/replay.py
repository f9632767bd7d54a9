"""A sink's per-packet log replayed through the sink itself.

INTSink's ``jsonl`` exporter writes every stripped packet's decoded telemetry and its
arrival time (``sink_ns``). :func:`replay` feeds those packets, in their order, to a
:class:`~telemetry.sink.SinkTelemetry` and yields the records it publishes, decoded as a
subscriber decodes them: what a live sender would have received, computed by the same
code (the estimator trains on them). Lines that are not packets (a torn last line of a
log still being written, another program's output) are counted in ``Replay.skipped``.
"""
from __future__ import annotations

import gzip
import ipaddress
import json
from typing import Iterator, Optional, Tuple

from int_node.ioam import IntccState
from int_node.ioam_decode import E2E, NodeData

from .schema import decode
from .sink import SinkTelemetry

_NODE_FIELDS = set(NodeData.__dataclass_fields__) - {"state", "opaque_raw"}
_STATE_FIELDS = set(IntccState.__dataclass_fields__)


def packet_key(flow: dict) -> bytes:
    """The sink's flow key (int_node.packet.flow_key) of a logged packet's 5-tuple."""
    return (ipaddress.IPv6Address(flow["src"]).packed + ipaddress.IPv6Address(flow["dst"]).packed
            + bytes((int(flow["proto"]),)) + int(flow["sport"]).to_bytes(2, "big")
            + int(flow["dport"]).to_bytes(2, "big"))


def node_from_dict(d: dict) -> NodeData:
    """The NodeData a logged hop was decoded to (NodeData.to_dict's inverse)."""
    n = NodeData(**{k: v for k, v in d.items() if k in _NODE_FIELDS})
    st = d.get("state")
    if st is not None:
        n.state = IntccState(**{k: v for k, v in st.items() if k in _STATE_FIELDS})
    n.opaque_raw = bytes.fromhex(d.get("opaque_raw") or "")
    return n


def e2e_from_dict(d: Optional[dict]) -> Optional[E2E]:
    if not d:
        return None
    return E2E(0, 0, seq=d.get("seq"), ts_sec=d.get("ts_sec"), ts_frac=d.get("ts_frac"))


class Replay:
    """Iterates the records a sink publishes for the packets of a JSON-lines log."""

    def __init__(self, path: str, telemetry: Optional[SinkTelemetry] = None):
        self.path = path
        self.telemetry = telemetry or SinkTelemetry()
        self.packets = 0
        self.skipped = 0

    def packets_of_log(self) -> Iterator[Tuple[bytes, list, Optional[E2E], int]]:
        """(flow key, nodes, E2E, sink_ns) of every logged packet, in log order."""
        with _open_text(self.path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                    item = (packet_key(rec["flow"]), [node_from_dict(h) for h in rec["trace"]["hops"]],
                            e2e_from_dict(rec.get("e2e")), int(rec["sink_ns"]))
                except (ValueError, KeyError, TypeError, AttributeError):
                    self.skipped += 1
                    continue
                self.packets += 1
                yield item

    def __iter__(self):
        """(topic, record) as a subscriber decodes each publication."""
        for key, nodes, e2e, now_ns in self.packets_of_log():
            for topic, payload in self.telemetry.on_decoded(key, nodes, e2e, now_ns):
                yield topic, decode(payload, topic)


def _open_text(path: str):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def capture_packets(path: str) -> Iterator[Tuple[bytes, bytes, bytes, int]]:
    """(flow key, raw trace, raw E2E, sink_ns) of every packet of a ``capture`` exporter's
    file (gzipped if it ends in .gz), in order: what SinkTelemetry.on_packet is given live."""
    with _open_text(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
                yield (bytes.fromhex(rec["key"]), bytes.fromhex(rec["trace"]), bytes.fromhex(rec["e2e"]),
                       int(rec["sink_ns"]))
            except (ValueError, KeyError, TypeError):
                continue


def replay(path: str, telemetry: Optional[SinkTelemetry] = None) -> Replay:
    """Replay(path, telemetry): ``for topic, rec in replay(log): ...``."""
    return Replay(path, telemetry)
