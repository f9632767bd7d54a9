"""The sink's records during a batch of runs, kept with each run (``record_telemetry`` in a
scenario, ``intcc exp run --record-telemetry``): every hop and estimate record the run's
broker carried, one JSON line each with the time it arrived (``rx_s``, wall clock), in
``runs/<run>/telemetry.jsonl.gz``. Replayed offline, they are what a sender read live
(estimator/identify/, lab studies). Testbed k's nodes carry ids NODE_ID_STRIDE * k higher:
a hop record goes to its testbed's run; estimate records to the run whose flows they name,
else to every run of the batch."""
from __future__ import annotations

import gzip
import json
import os
import threading
import time

RECORD_FILE = "telemetry.jsonl.gz"


class TelemetryRecorder:
    def __init__(self, broker_url: str, run_dirs: list[str], node_id_stride: int):
        self.broker_url, self.run_dirs, self.stride = broker_url, run_dirs, node_id_stride
        self._lines: list[list[str]] = [[] for _ in run_dirs]
        self._lock = threading.Lock()
        self._view = None
        self.rejected = 0

    def start(self) -> "TelemetryRecorder":
        from broker.subscriber import TelemetryView
        from telemetry.schema import ESTIMATE_TOPIC, HOP_TOPIC
        self._view = TelemetryView(self.broker_url, topics=(HOP_TOPIC.format(node_id="+"),
                                                            ESTIMATE_TOPIC.format(flow_id="+")))
        self._view.on_record(self._on_record)
        self._view.start()
        self._view.wait_connected()
        return self

    def _on_record(self, rec, topic: str) -> None:
        line = json.dumps({"rx_s": round(time.time(), 6), "topic": topic, **rec.to_dict()}, separators=(",", ":"))
        node = getattr(rec, "node_id", None) if getattr(rec, "type", "") == "hop" else None
        with self._lock:
            if node is not None and 0 <= node // self.stride < len(self._lines):
                self._lines[node // self.stride].append(line)
            else:
                for lines in self._lines:
                    lines.append(line)

    def stop(self) -> None:
        """Stop listening; write each run's file."""
        if self._view is not None:
            self.rejected = self._view.rejected
            self._view.stop()
            self._view = None
        with self._lock:
            for run_dir, lines in zip(self.run_dirs, self._lines):
                with gzip.open(os.path.join(run_dir, RECORD_FILE), "wt", encoding="utf-8") as f:
                    f.writelines(line + "\n" for line in lines)
            self._lines = [[] for _ in self.run_dirs]


def read_records(run_dir: str, types: tuple = ("hop",)):
    """A run's recorded records, decoded, in the order they arrived: (rx_s, record)."""
    from telemetry.schema import SchemaError, decode
    with gzip.open(os.path.join(run_dir, RECORD_FILE), "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("type") not in types:
                continue
            rx_s, topic = d.pop("rx_s"), d.pop("topic")
            try:
                yield rx_s, decode(json.dumps(d).encode(), topic=topic)
            except SchemaError:
                continue
