"""The sink's MQTT publisher: an int_node exporter (``INTSink(exporter "mqtt://...")``).

The packet path only decodes, attributes and appends to a bounded queue; a
sender thread hands records to paho, whose own thread does the network. While
the broker is away records are dropped and counted (telemetry is only useful
fresh; queueing it for later would hand algorithms stale data), and paho
reconnects by itself.

Exporter argument: ``mqtt://[user:pass@]host[:port][?credentials=FILE]`` plus
optional ``&period_ms=10&min_gap_ms=1&queue=1024`` (sink tuning).
"""
from __future__ import annotations

import collections
import logging
import threading
from typing import List
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from int_node.exporters import Exporter, register_exporter

from . import client as mqttc
from .auth import SINK_USER, parse_url, resolve_login
from telemetry.sink import Publication, SinkTelemetry

log = logging.getLogger("intcc.publisher")
_TUNING = {"period_ms": float, "min_gap_ms": float, "queue": int, "reorder_pkts": int}


def _split_tuning(url: str):
    """Separate sink tuning options from the broker URL's own query."""
    u = urlsplit(url)
    q = parse_qs(u.query)
    tuning = {}
    for k, conv in _TUNING.items():
        if k in q:
            raw = q.pop(k)[0]
            try:
                tuning[k] = conv(raw)
            except ValueError:
                raise ValueError(f"exporter option {k}={raw} is not a number") from None
    rest = urlencode({k: v[0] for k, v in q.items()})
    return urlunsplit((u.scheme, u.netloc, u.path, rest, "")), tuning


class MqttExporter(Exporter):
    def __init__(self, url: str, **tuning):
        super().__init__()
        broker_url, opts = _split_tuning(url)
        opts.update(tuning)
        self.url = resolve_login(parse_url(broker_url), SINK_USER)
        self.max_queue = int(opts.pop("queue", 1024))
        self.telemetry = SinkTelemetry(**opts)
        self.queue_drops = self.not_connected_drops = self.published = self.publish_errors = 0
        self._q: "collections.deque[Publication]" = collections.deque()
        self._cv = threading.Condition()
        self._running = True
        self._client = mqttc.make_client(self.url, "intcc-sink")
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self.connects = 0
        mqttc.start(self._client, self.url)
        self._thread = threading.Thread(target=self._sender, name="intcc-mqtt-sender", daemon=True)
        self._thread.start()

    def use_flow_rtt(self, rtt_us):
        self.telemetry.flow_rtt_us = rtt_us        # each top_flows entry gets its flow's round trip

    # -- packet path -------------------------------------------------------------------
    def export(self, flow_key, trace_raw, e2e_raw, sink_ns):
        pubs = self.telemetry.on_packet(flow_key, trace_raw, e2e_raw, sink_ns)
        self.exported += 1
        if not pubs:
            return
        with self._cv:
            room = self.max_queue - len(self._q)
            if room < len(pubs):
                self.queue_drops += len(pubs) - max(room, 0)
                pubs = pubs[:max(room, 0)]
            self._q.extend(pubs)
            self._cv.notify()

    # -- sender thread -----------------------------------------------------------------
    def _sender(self):
        while True:
            with self._cv:
                while not self._q and self._running:
                    self._cv.wait()
                if not self._running and not self._q:
                    return
                batch: List[Publication] = list(self._q)
                self._q.clear()
            if not self._client.is_connected():
                self.not_connected_drops += len(batch)
                continue
            for topic, payload in batch:
                info = self._client.publish(topic, payload, qos=0)
                if info.rc == 0:
                    self.published += 1
                else:
                    self.publish_errors += 1

    def _on_connect(self, client, userdata, flags, reason_code, properties=None):
        if reason_code.is_failure:
            log.warning("broker %s refused the sink: %s", self.url.display, reason_code)
            return
        self.connects += 1
        log.info("sink connected to %s", self.url.display)

    def _on_disconnect(self, client, userdata, flags, reason_code, properties=None):
        if self._running:
            log.warning("sink lost broker %s (%s); reconnecting", self.url.display, reason_code)

    def counters(self):
        c = super().counters()
        c.update({"published": self.published, "publish_errors": self.publish_errors,
                  "queue_drops": self.queue_drops, "not_connected_drops": self.not_connected_drops,
                  "broker_connects": self.connects, "connected": int(self._client.is_connected())})
        c.update({f"telemetry_{k}": v for k, v in self.telemetry.counters.items()})
        return c

    def close(self):
        with self._cv:
            self._running = False
            self._cv.notify()
        self._thread.join(timeout=2)
        mqttc.stop(self._client)


def _factory(arg: str) -> MqttExporter:
    return MqttExporter("mqtt:" + arg)


def _factory_tls(arg: str) -> MqttExporter:
    return MqttExporter("mqtts:" + arg)


def register_exporters() -> None:
    """Give INT sinks built from now on the ``mqtt:`` and ``mqtts:`` exporters."""
    register_exporter("mqtt", _factory)
    register_exporter("mqtts", _factory_tls)
