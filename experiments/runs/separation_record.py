"""What RTT separation did during a run (a testbed link with ``separation = K``): every
RTTSeparation element of the run's testbed read each PERIOD_S through its node's control
socket, kept in ``runs/<run>/separation.json``:

    {"period_s": 1.0, "missed_reads": 0, "elements": {"<node>/<element>": {
        "samples": [{"t_s": 1.0, "breaks_us": [...], "flows": {"<dport>": [queue, rtt_us]}}],
        "groups": [...], "counters": {...}}}}

and summarised in the run's record (``separation_state``): each of the run's flows' last
queue and passive RTT, when it reached that queue, and whether flow 1 and its competitors
ended apart. Given each port's sending host (``senders``), each period also reads the
sender's own minimum RTT of the flow (``ss``: the kernel's tcpi_min_rtt, what the node's
passive RTT must match) into ``sender_min_rtt_us``.
The recorder starts itself only where there is something to read: on a testbed with no
separated link it costs one ``elements`` request per node. A node that does not answer a
read is counted (``missed_reads``), never fatal."""
from __future__ import annotations

import json
import logging
import os
import re
import threading
import time

SEPARATION_FILE = "separation.json"
PERIOD_S = 1.0

log = logging.getLogger(__name__)


_SS_CONN = re.compile(r"bytes_acked:(\d+).*?minrtt:([\d.]+)", re.S)


def sender_min_rtt_us(tb, host: str, port: int) -> float | None:
    """The sender's minimum RTT (µs) of its data connection to ``port`` on ``host``: of the
    connections there to that port (iperf3's control one too) the one that sent most; None
    when there is none."""
    try:
        out = tb.run(host, ["ss", "-tin", f"dport = :{port}"]).stdout
    except OSError:
        return None
    conns = _SS_CONN.findall(out or "")
    return float(max(conns, key=lambda c: int(c[0]))[1]) * 1e3 if conns else None


class SeparationRecorder:
    def __init__(self, tb, run_dir: str, ports: list[int], period_s: float = PERIOD_S,
                 senders: dict | None = None):
        self.tb, self.run_dir, self.ports, self.period_s = tb, run_dir, [int(p) for p in ports], period_s
        self.senders = {int(p): h for p, h in (senders or {}).items()}     # port -> sending host
        self.sender_min_rtt_us: dict = {}                                  # port -> the last seen
        self.elements: dict = {}        # "<node>/<element>" -> {"samples", "groups", "counters"}
        self.missed_reads = 0
        self._where: list = []
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = None

    def _find(self) -> list[tuple[str, str]]:
        found = []
        for node in self.tb.state["nodes"]:
            try:
                reply = self.tb.node_request(node, {"cmd": "elements"})
            except OSError:
                continue
            found += [(node, e["name"]) for e in reply.get("elements", []) if e["class"] == "RTTSeparation"]
        return found

    def _read(self, node: str, element: str, handler: str):
        try:
            reply = self.tb.node_request(node, {"cmd": "read", "element": element, "handler": handler})
        except OSError:
            reply = {"ok": False}
        if not reply.get("ok"):
            self.missed_reads += 1
            return None
        return reply["value"]

    def _sample(self) -> None:
        t_s = round(time.monotonic() - self._t0, 2)
        for node, element in self._where:
            assignments = self._read(node, element, "assignments")
            if assignments is None:
                continue
            # the run's own flows by destination port (iperf3's server port): other flows
            # on the link (an earlier run's, ACKs of the reverse direction) are not the run's
            flows = {str(a["flow"][4]): [a["queue"], a["rtt_us"]] for a in assignments.values()
                     if a["flow"][4] in self.ports}
            self.elements.setdefault(f"{node}/{element}", {"samples": []})["samples"].append(
                {"t_s": t_s, "breaks_us": self._read(node, element, "breaks"), "flows": flows})
        for port, host in self.senders.items():     # while the flows live: closed, ss shows nothing
            got = sender_min_rtt_us(self.tb, host, port)
            if got is not None:
                self.sender_min_rtt_us[port] = got

    def __enter__(self) -> "SeparationRecorder":
        self._where = self._find()
        if self._where:
            self._t0 = time.monotonic()
            self._thread = threading.Thread(target=self._loop, name="separation-recorder", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def __exit__(self, *exc) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._sample()
        for node, element in self._where:
            mine = self.elements.setdefault(f"{node}/{element}", {"samples": []})
            mine["groups"] = self._read(node, element, "groups")
            mine["counters"] = self._read(node, element, "counters")
        with open(os.path.join(self.run_dir, SEPARATION_FILE), "w", encoding="utf-8") as f:
            json.dump({"period_s": self.period_s, "missed_reads": self.missed_reads, "elements": self.elements,
                       "sender_min_rtt_us": {str(p): v for p, v in self.sender_min_rtt_us.items()}},
                      f, separators=(",", ":"))

    def summary(self) -> dict | None:
        """The record's ``separation``: per element that saw the run's flows, each flow's
        (by port) last queue, RTT (µs) and the first sample from which it stayed there
        (``settled_s``, seconds from the start of the flows), and the sender's own minimum
        RTT (``sender_min_rtt_us``) where read; ``apart``: flow 1 (the first port) is in a
        queue none of the others is in."""
        out = {}
        for where, got in self.elements.items():
            samples = [s for s in got["samples"] if s["flows"]]
            if not samples:
                continue
            flows = {}
            for port in map(str, self.ports):
                seen = [(s["t_s"], *s["flows"][port]) for s in samples if port in s["flows"]]
                if not seen:
                    continue
                queue = seen[-1][1]
                settled = seen[-1][0]
                for t_s, q, _ in reversed(seen):
                    if q != queue:
                        break
                    settled = t_s
                flows[port] = {"queue": queue, "rtt_us": seen[-1][2], "settled_s": settled}
                if int(port) in self.sender_min_rtt_us:
                    flows[port]["sender_min_rtt_us"] = self.sender_min_rtt_us[int(port)]
            main = flows.get(str(self.ports[0]))
            others = [f["queue"] for p, f in flows.items() if p != str(self.ports[0])]
            out[where] = {"flows": flows, "breaks_us": samples[-1]["breaks_us"],
                          "moves": (got.get("counters") or {}).get("moves"),
                          "apart": None if main is None or not others else main["queue"] not in others}
        return out or None
