"""The adaptive agent's estimator, in a child process (pyportus holds the agent's GIL).

The agent tells it of each flow (libccp's 4-tuple) and of every change of the flow's
local algorithm; the child finds the flow's full tuple in the datapath's flows.json and
its sending socket's namespace and interface (flows.locate_socket), captures the flow
there, and runs an OnlineEstimator (estimator/online.py) on it: one estimate every
``interval_s`` once the flow (or its new local algorithm) has run ``warmup_s`` (the
training rows skip a run's first tenth too) and, for INT models, a competitor has shared
its path that long (a flow alone gets none), a majority vote over ``window``, the verdict
published on the flow's estimate topic and sent to the agent, which never waits for it
(``poll()``).

A model trained with INT features also reads the sink's FlowRecords: a TelemetryView
in the child (on the flow topics of ``broker_url``) hands every record to the flows under
estimation, each keeping its own (OnlineEstimator.add_telemetry); such a flow makes no
estimate until its records arrive.

A flow whose estimation fails (no capture, no socket, a model without its local CCA)
gets one error message and is left alone: it stays on the algorithm it has.
"""
from __future__ import annotations

import ipaddress
import os
import tempfile
import time
from dataclasses import dataclass
from types import SimpleNamespace

from estimator.loop import EstimationLoop, WatchedFlow

from .child import GONE, ChildEnd, receive

from .datapath import ReportRequester
from .flows import FlowDirectory, LocateError, locate_socket, socket_min_rtt_s

SWEEP_S = 2.0          # how often the child drops flows the datapath no longer lists
#: Telemetry kept for flows whose capture has not started yet: a flow's estimator reads
#: its records from the first one on, as the training series start (a flow is found and
#: its capture started ~1 s after it began; the records of that second were lost, and with
#: them the empty queue of the start, which the 10 s and 30 s window features count).
REPLAY_S = 10.0


@dataclass
class Verdict:
    sid: int
    flow_id: str | None
    estimate: str | None
    confidence: float
    votes: dict
    t_s: float                   # since the flow's estimation (re)started
    sent_mono_ns: int = 0        # CLOCK_MONOTONIC when the child sent it (latency figures)
    competitor_rate_ratio: float | None = None    # estimator.online.Step's (INT models)
    row_estimate: str | None = None  # this step's own estimate, the vote's newest entry
    evidence: tuple = ()         # active identification: this step's (stage, measured) pairs
    reidentify: str | None = None    # ... the competitors changed after a commit: why (back to the probe)
    competitor_epoch: tuple | None = None   # ... their CUBIC epoch (Identifier.competitor_epoch: packets, s, s)
    competitor_rtts_ms: tuple = ()  # ... each competitor's base RTT as read, where the sink measured it


class _Located(WatchedFlow):
    """One of the agent's flows: found by its 4-tuple in the datapath's flows.json, its
    sending socket's namespace and interface located, captured there."""

    def __init__(self, sid, ccp_tuple, local_cca, model, window, directory: FlowDirectory, warmup_s: float = 0.0):
        from estimator.online import OnlineEstimator
        super().__init__(OnlineEstimator(model, local_cca, window), warmup_s)
        self.sid, self.ccp_tuple = sid, ccp_tuple
        self.directory = directory
        self.capture = None
        self.pcap = None

    def start(self):
        """Find the flow and start its capture (raises LocateError / TraceError)."""
        from estimator.capture import Capture, PcapTail
        src_ip, sport, dst_ip, dport = self.ccp_tuple
        entry = self.directory.lookup(SimpleNamespace(src_ip=src_ip, src_port=sport, dst_ip=dst_ip, dst_port=dport),
                                      wait_s=1.0)
        if entry is None:
            raise LocateError(f"flow {self.sid} is not in the datapath's flows.json")
        ns, iface = locate_socket(entry["src"], entry["sport"], entry["dst"], entry["dport"])
        self.est.expect_flow(entry["src"], entry["dst"], entry["sport"], entry["dport"])
        self.est.base_rtt_hint_s = socket_min_rtt_s(ns, entry["sport"], entry["dport"])
        self.est.observer.sender = ipaddress.ip_address(entry["src"]).packed
        fd, self.pcap = tempfile.mkstemp(prefix=f"intcc-adaptive-{self.sid}-", suffix=".pcap")
        os.close(fd)
        os.remove(self.pcap)
        self.capture = Capture(ns, iface, self.pcap, bpf_filter=f"tcp and port {entry['sport']} and port {entry['dport']}")
        self.capture.__enter__()
        self.tail = PcapTail(self.pcap)
        self.started = True

    def stop(self):
        if self.capture is not None:
            try:
                self.capture.__exit__(None, None, None)
            except Exception:
                pass
        if self.pcap and os.path.exists(self.pcap):
            os.remove(self.pcap)


def _serve(conn, model_path, window, interval_s, broker_url, state_dir, warmup_s, parent_pid, parent_end):
    # The parent's end, inherited through fork, closed here: else, once the agent is gone,
    # this process would hold the pipe's read end itself and block forever on a full pipe.
    parent_end.close()
    from estimator.features import TraceError
    from estimator.model import CCAEstimator, ModelError
    try:
        model = CCAEstimator.load(model_path)
    except ModelError as e:
        conn.send(("error", None, str(e)))
        return
    publisher = view = None
    if broker_url:
        from estimator.online import Publisher
        publisher = Publisher(broker_url)
    elif _uses_int(model):
        conn.send(("error", None, f"{model_path} uses INT features: the estimator needs the sink's telemetry "
                                  f"(--broker)"))
        return
    loop = EstimationLoop(publisher, replay_s=REPLAY_S)
    if broker_url and _uses_int(model):
        from broker.subscriber import TelemetryView
        from telemetry.schema import FLOW_TOPIC, HOP_TOPIC
        # hop records for every INT model: the competitors' rates a switch matches
        view = TelemetryView(broker_url, topics=(FLOW_TOPIC.format(flow_id="+"), HOP_TOPIC.format(node_id="+")))
        view.on_record(lambda rec, topic: loop.add_record(rec))      # paho's thread; the loop's deque
        view.start()
    directory = FlowDirectory(state_dir)
    requester = ReportRequester()
    next_step = time.monotonic() + interval_s
    next_sweep = time.monotonic() + SWEEP_S

    def failed(sid, e):
        conn.send(("error", sid, f"flow {sid}: {e}"))
    try:
        while os.getppid() == parent_pid:
            msg = receive(conn, next_step - time.monotonic())
            if msg is GONE:
                break                                # the agent is gone
            if msg is not None:
                kind, sid = msg[0], msg[1]
                try:
                    if kind == "observe":
                        loop.watch(sid, _Located(sid, msg[2], msg[3], model, window, directory, warmup_s))
                    elif kind == "local" and sid in loop.flows:
                        loop.flows[sid].local_changed(msg[2])
                    elif kind == "publish" and publisher is not None:
                        publisher.client.publish(msg[2], msg[3], qos=0)
                except (ModelError, LocateError, TraceError, OSError) as e:
                    conn.send(("error", sid, str(e)))
                    loop.forget(sid)
                continue
            next_step += interval_s
            if time.monotonic() >= next_sweep:      # flows that ended: their captures stop
                next_sweep = time.monotonic() + SWEEP_S
                live = directory.live_tuples()
                for sid, w in list(loop.flows.items()):
                    if w.started and live is not None and w.ccp_tuple not in live:
                        loop.forget(sid)
            for sid, step, _record in loop.step_all(failed, errors=(LocateError,)):   # published by the loop
                v = step.verdict
                conn.send(("verdict", sid, Verdict(sid, step.flow_id, v.estimate, v.confidence, v.votes, step.t_s,
                                                    time.monotonic_ns(), step.competitor_rate_ratio, step.estimate)))
                requester.request(sid)              # the agent reads it at the report this brings
    except BrokenPipeError:
        pass                                         # the agent is gone: so are we
    finally:
        loop.stop()
        if view is not None:
            view.stop()
        if publisher is not None:
            publisher.close()


def _uses_int(model) -> bool:
    from estimator.int_features import uses_int
    return uses_int(model.feature_names)


class EstimatorProcess(ChildEnd):
    """The parent's end: tell it of flows, poll it for verdicts and errors."""

    NAME = "intcc-adaptive-estimator"
    serve = staticmethod(_serve)

    def __init__(self, model_path: str, window: int = 50, interval_s: float = 0.5, broker_url: str | None = None,
                 state_dir: str | None = None, warmup_s: float = 5.0):
        super().__init__(model_path, window, interval_s, broker_url,
                         state_dir or FlowDirectory().path.rsplit("/", 1)[0], warmup_s)
