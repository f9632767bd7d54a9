"""One flow, several algorithms: a flow's algorithm can hand it to another at any report,
with its state carried over (window, ssthresh, the recovery in progress, RTT and
bandwidth estimates, the datapath signals already taken), so the window neither resets
nor jumps: the new algorithm starts from where the old one left the flow.

``Host`` is an Algorithm that runs several (every one on the same datapath program:
the switch changes the decision logic, not what the datapath measures); its flows are
``HostedFlow``s, whose ``switch(name)`` hands the flow over. Who decides when to switch
(the adaptive agent, on the estimator's verdict) is not here (ccp_agent/adaptive.py).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import replace

from .base import Algorithm, Report
from .flowstate import FlowState

BW_WINDOW_REPORTS = 10        # the host's bandwidth estimate: max delivery rate of the last reports


class _Quiet:
    """The datapath as a flow taking over sees it while it is built: its constructor's
    install (program, initial window) must not reach the datapath, where the program
    runs already and the window is the old algorithm's."""

    def set_program(self, name, fields=None):
        pass

    def update_field(self, name, value):
        pass

    def update_fields(self, fields):
        pass


class HandoverError(ValueError):
    pass


class HostedFlow:
    """A flow under a Host: the algorithm in control and what every algorithm learns."""

    def __init__(self, host: "Host", datapath, datapath_info):
        self.host = host
        self.datapath = datapath
        self.info = datapath_info
        self.current = host.initial
        self.flow = host.algorithms[self.current].new_flow(datapath, datapath_info)
        self.min_rtt_us: float | None = None
        self.rtt_us: float | None = None
        self.bw_samples: deque[float] = deque(maxlen=BW_WINDOW_REPORTS)
        self.loss_seen = False
        self.switches: list[dict] = []

    @property
    def sid(self):
        return self.flow.sid

    def on_report(self, raw):
        r = Report(raw)
        if r.minrtt_us is not None:
            self.min_rtt_us = r.minrtt_us if self.min_rtt_us is None else min(self.min_rtt_us, r.minrtt_us)
        self.rtt_us = r.rtt_us or self.rtt_us
        bw = getattr(raw, "bw_max", 0) or 0
        if bw > 0:
            self.bw_samples.append(float(bw))
        self.loss_seen = self.loss_seen or r.loss > 0 or bool(r.timeout)
        self.flow.on_report(raw)

    def state(self) -> FlowState:
        s = self.flow.export_state()
        s.min_rtt_us, s.rtt_us = self.min_rtt_us, self.rtt_us
        s.bw_bytes_per_s = max(self.bw_samples, default=0.0)
        s.loss_seen = self.loss_seen
        return s

    def switch(self, name: str, why: str = "", cause_mono_ns: int | None = None,
               rate_ratio: float | None = None, cubic_epoch: tuple | None = None) -> FlowState:
        """Hand the flow to algorithm ``name`` (one of the host's); returns the state carried.
        ``rate_ratio``: the new algorithm starts at that times the flow's rate (a competitor's
        over this flow's: FlowState.at_rate_ratio). ``cubic_epoch``: the competitors' CUBIC
        epoch (FlowState.cubic_epoch), which a CUBIC taking over goes on along."""
        if name not in self.host.algorithms:
            raise HandoverError(f"no algorithm {name!r} in this agent: {', '.join(self.host.algorithms)}")
        if name == self.current:
            return self.state()
        state = self.state()
        if rate_ratio is not None:
            state = state.at_rate_ratio(rate_ratio, min_cwnd_bytes=2 * self.flow.mss)
            why = (why + ", " if why else "") + f"the competitor's rate: x{rate_ratio:.3g}"
        if cubic_epoch is not None:
            state = replace(state, cubic_epoch=tuple(cubic_epoch))
            why = (why + ", " if why else "") + f"the competitor's epoch: {cubic_epoch[2]:.1f} s old"
        self.switches.append({"mono_ns": time.monotonic_ns(), "from": self.current, "to": name, "why": why,
                              "cwnd_bytes": int(state.cwnd_bytes)})
        self._hand_to(name, state, "switch", f"{self.current} -> {name}" + (f": {why}" if why else ""),
                      cause_mono_ns)
        return state

    def match_competitor_rate(self, rate_ratio: float, why: str = "", cause_mono_ns: int | None = None) -> FlowState:
        """The flow's algorithm goes on at ``rate_ratio`` times the flow's rate, keeping its
        CCA (a "match" row in the trace, not a switch: FlowState.at_rate_ratio)."""
        state = self.state().at_rate_ratio(rate_ratio, min_cwnd_bytes=2 * self.flow.mss)
        self._hand_to(self.current, state, "match", f"{self.current} at the competitor's rate: x{rate_ratio:.3g}"
                      + (f": {why}" if why else ""), cause_mono_ns)
        return state

    def _hand_to(self, name: str, state: FlowState, event: str, reason: str, cause_mono_ns: int | None):
        """A new instance of ``name`` takes the flow from ``state``; the trace row after its
        start and command, in the order they were made."""
        new = self.host.algorithms[name].new_flow(_Quiet(), self.info)
        new.datapath = self.datapath
        new.adopt(state)
        self.flow.trace.row(sid=self.flow.sid, event=event, cwnd_bytes=int(state.cwnd_bytes), reason=reason,
                            cause_mono_ns=cause_mono_ns)
        self.current, self.flow = name, new


class Host(Algorithm):
    """Several algorithms in one agent, one of them in control of each flow."""
    name = "host"
    summary = "Several algorithms in one agent; a flow can move from one to another."
    flow_class = HostedFlow

    def __init__(self, algorithms: dict[str, Algorithm], initial: str, trace: str | None = None, **kwargs):
        super().__init__(trace=trace, **kwargs)
        if initial not in algorithms:
            raise HandoverError(f"the initial algorithm {initial!r} is not one of {', '.join(algorithms)}")
        programs = {name: alg.datapath_programs() for name, alg in algorithms.items()}
        first = programs[initial]
        odd = [name for name, p in programs.items() if p != first]
        if odd:
            raise HandoverError(f"{', '.join(odd)}: another datapath program than {initial}'s, a flow cannot "
                                f"move between them")
        for alg in algorithms.values():      # one trace, one datapath for all of them
            alg.trace, alg.capabilities = self.trace, self.capabilities
        self.algorithms = algorithms
        self.initial = initial
        self._programs = first

    def datapath_programs(self):
        return self._programs

    def new_flow(self, datapath, datapath_info):
        return HostedFlow(self, datapath, datapath_info)
