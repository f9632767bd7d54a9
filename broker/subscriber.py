"""TelemetryView: the latest valid record per flow and per hop, with its age.

Algorithms read it from memory on every report and never wait on the network:
records arrive on paho's background thread, are validated by
``schema.decode`` (invalid ones are counted and dropped, never stored), and
replace the previous record for their key. Reconnection and resubscription are
automatic (subscriptions are made in ``on_connect``).

    view = TelemetryView("mqtt://127.0.0.1:1883").start()
    fresh = view.flow(flow_id, max_age_s=0.1)     # None if absent or older
    if fresh: use(fresh.record, fresh.age_s)
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Union

from . import client as mqttc
from .auth import parse_url, resolve_login
from telemetry.schema import ALL_TOPICS, CcaRecord, EstimateRecord, FlowRecord, HopRecord, SchemaError, decode

log = logging.getLogger("intcc.telemetry")
Record = Union[FlowRecord, HopRecord, EstimateRecord, CcaRecord]


@dataclass
class Fresh:
    record: Record
    age_s: float            # since it arrived here
    received_ns: int        # time.monotonic_ns() at arrival


def fresh(entry: Optional[tuple], max_age_s: Optional[float]) -> Optional[Fresh]:
    """(record, received monotonic ns) -> Fresh, or None when absent or older than max_age_s."""
    if entry is None:
        return None
    rec, rx_ns = entry
    age = (time.monotonic_ns() - rx_ns) / 1e9
    if max_age_s is not None and age > max_age_s:
        return None
    return Fresh(rec, age, rx_ns)


class TelemetryView:
    def __init__(self, url: str = "mqtt://127.0.0.1:1883", topics: Sequence[str] = (ALL_TOPICS,),
                 login_as: Optional[str] = None):
        self.url = resolve_login(parse_url(url), login_as)
        self.topics = list(topics)
        self._lock = threading.Lock()
        self._flows: Dict[str, tuple] = {}
        self._hops: Dict[int, tuple] = {}
        self._estimates: Dict[str, tuple] = {}
        self._ccas: Dict[str, tuple] = {}          # a node's classifier on the flow itself
        self._callbacks: List[Callable[[Record, str], None]] = []
        self.received = self.accepted = self.rejected = self.callback_errors = self.connects = 0
        self.rejected_reasons: "collections.Counter[str]" = collections.Counter()
        self.last_error: Optional[str] = None
        self._client = mqttc.make_client(self.url, "intcc-view")
        self._client.on_connect = self._on_connect
        self._client.on_message = self._on_message
        self._started = False

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> "TelemetryView":
        if not self._started:
            mqttc.start(self._client, self.url)
            self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            mqttc.stop(self._client)
            self._started = False

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def connected(self) -> bool:
        return self._client.is_connected()

    def wait_connected(self, timeout_s: float = 5.0) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.connected and self.connects:
                return True
            time.sleep(0.02)
        return False

    # -- reading -----------------------------------------------------------------------
    def on_record(self, callback: Callable[[Record, str], None]) -> None:
        """``callback(record, topic)`` on paho's thread for every valid record: keep it short."""
        with self._lock:
            self._callbacks.append(callback)

    def flow(self, flow_id: str, max_age_s: Optional[float] = None) -> Optional[Fresh]:
        return self._get(self._flows, flow_id, max_age_s)

    def estimate(self, flow_id: str, max_age_s: Optional[float] = None) -> Optional[Fresh]:
        """The latest CCA estimate for the competitor of ``flow_id``."""
        return self._get(self._estimates, flow_id, max_age_s)

    def cca(self, flow_id: str, max_age_s: Optional[float] = None) -> Optional[Fresh]:
        """The latest verdict of a node's classifier (Dragonfly) on ``flow_id``'s own CCA."""
        return self._get(self._ccas, flow_id, max_age_s)

    def hop(self, node_id: int, max_age_s: Optional[float] = None) -> Optional[Fresh]:
        return self._get(self._hops, node_id, max_age_s)

    def flows(self) -> Dict[str, Fresh]:
        with self._lock:
            keys = list(self._flows)
        return {k: f for k in keys if (f := self.flow(k)) is not None}

    def hops(self) -> Dict[int, Fresh]:
        with self._lock:
            keys = list(self._hops)
        return {k: h for k in keys if (h := self.hop(k)) is not None}

    def _get(self, table, key, max_age_s):
        with self._lock:
            entry = table.get(key)
        return fresh(entry, max_age_s)

    @property
    def loop_alive(self) -> bool:
        """Whether paho's network thread runs: records arrive only while it does."""
        thread = getattr(self._client, "_thread", None)
        return bool(thread is not None and thread.is_alive())

    def health(self) -> dict:
        """Counters plus whether the view can still receive (connected, loop alive)."""
        return dict(self.counters(), connected=self.connected, loop_alive=self.loop_alive,
                    last_error=self.last_error)

    def counters(self) -> dict:
        return {"received": self.received, "accepted": self.accepted, "rejected": self.rejected,
                "callback_errors": self.callback_errors, "connects": self.connects,
                "rejected_reasons": dict(self.rejected_reasons)}

    # -- paho callbacks ----------------------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties=None):
        if reason_code.is_failure:
            self.last_error = f"broker refused the connection: {reason_code}"
            log.warning("%s: %s", self.url.display, self.last_error)
            return
        self.connects += 1
        for t in self.topics:
            client.subscribe(t, qos=0)

    def _on_message(self, client, userdata, msg):
        rx_ns = time.monotonic_ns()
        self.received += 1
        try:
            rec = decode(msg.payload, msg.topic)
        except Exception as exc:  # SchemaError, or a decoder bug: either way paho's thread must live on
            self.rejected += 1
            reason = str(exc) if isinstance(exc, SchemaError) else f"decoder error {type(exc).__name__}: {exc}"
            self.rejected_reasons[reason.split(":")[0][:60]] += 1
            self.last_error = f"{msg.topic}: {reason}"
            return
        self.accepted += 1
        with self._lock:
            if isinstance(rec, FlowRecord):
                self._flows[rec.flow_id] = (rec, rx_ns)
            elif isinstance(rec, HopRecord):
                self._hops[rec.node_id] = (rec, rx_ns)
            elif isinstance(rec, CcaRecord):
                self._ccas[rec.flow_id] = (rec, rx_ns)
            else:
                self._estimates[rec.flow_id] = (rec, rx_ns)
            callbacks = list(self._callbacks)
        for cb in callbacks:
            try:
                cb(rec, msg.topic)
            except Exception:   # a subscriber's bug must not stop telemetry for the others
                self.callback_errors += 1
                log.exception("telemetry callback failed")
