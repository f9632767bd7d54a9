"""What every intcc CCP algorithm shares: the report as the agent reads it, per-flow
state with its MSS and trace, and the algorithm class that hands portus its programs
(the skeleton of a loss-reacting window algorithm is window.py)."""
from __future__ import annotations

import logging
import time

from .contract import (CONTRACT_VERSION, CONTROL_REGISTERS, FAMILY_OF_REGISTER, INTCC_DATAPATH, ContractError,
                       DatapathCapabilities, check_program)
from .registry import INIT_CWND
from .programs import NO_RTT_SAMPLE, REGISTER_MAX, REPORT_PER_RTT_AND_ON_LOSS, REPORT_PER_RTT_AND_ON_LOSS_FOLDED_SLOW_START
from .flowstate import FlowState
from .trace import Trace

log = logging.getLogger("intcc.alg")

try:   # DESIGN: an algorithm is a portus AlgBase (pyportus is built by 'make setup')
    from pyportus import AlgBase
except ImportError:   # unit tests of decisions do not need the portus runtime
    AlgBase = object


class Report:
    """The fields of REPORT_PER_RTT_AND_ON_LOSS, read once from portus's report object.
    ``minrtt_us`` is the smallest RTT sample since the last report (None: no sample);
    ``sacked`` the segments SACKed above the cumulative ACK at the report's last ACK
    (the kernel's sacked_out);
    ``undo_bytes`` the window the kernel restored when it undid a reduction (0: none);
    ``rto_acked`` the bytes acked by the ACK that reported a timeout (the first after the
    RTO; ``acked`` also holds earlier ACKs of the report, from before the RTO);
    ``delivered`` / ``rto_delivered`` the same in packets newly delivered, acked or SACKed
    (the kernel's acked_sacked; None where a report lacks them, as the unit tests' mock);
    ``grown_pkts`` the segments the kernel side has grown the window by since the flow
    began (intcc datapath; None: none told); ``datapath_grew`` whether the flow took that
    growth for these ACKs into its window (set by WindowFlow.on_report); ``reductions`` the
    window reductions (Recovery, CWR) the kernel has begun since the flow began (intcc
    datapath; None: not told); ``extra_acked`` the largest ACK aggregation (packets) the
    intcc datapath measured against the bw register (None: not told)."""
    __slots__ = ("acked", "sacked", "loss", "timeout", "rtt_us", "minrtt_us", "inflight", "extra_acked",
                 "undo_bytes", "rto_acked", "delivered", "rto_delivered", "grown_pkts", "datapath_grew",
                 "reductions")

    def __init__(self, r):
        self.acked = r.acked
        self.sacked = r.sacked
        self.loss = r.loss
        self.timeout = bool(r.timeout)
        self.rtt_us = r.rtt
        self.minrtt_us = r.minrtt if 0 < r.minrtt < NO_RTT_SAMPLE else None
        self.inflight = r.inflight
        self.extra_acked = getattr(r, "extra_acked", None)
        self.undo_bytes = r.undo
        self.rto_acked = r.rto_acked
        self.delivered = getattr(r, "delivered", None)
        self.rto_delivered = getattr(r, "rto_delivered", None)
        self.grown_pkts = getattr(r, "grown", None)
        self.reductions = getattr(r, "reductions", None)
        self.datapath_grew = False

    def growth_bytes(self, mss: int) -> float:
        """What window growth counts: a segment per packet delivered on ACKs that advance
        snd_una, as the kernel's slow start and tcp_cong_avoid_ai (acked_sacked, when
        tcp_may_raise_cwnd). Bytes acked differ from it for a short segment (iperf3's
        37-byte first one: the kernel still grows a segment) and for a cumulative ACK over
        data SACKed earlier (counted when it was SACKed)."""
        return float(self.acked if self.delivered is None else self.delivered * mss)


class FlowBase:
    """One flow: the datapath handle, MSS, and the trace. Subclasses implement on_report."""

    program = "default"

    def __init__(self, alg, datapath, datapath_info):
        self.alg = alg
        self.datapath = datapath
        self.info = datapath_info
        self.sid = datapath_info.sock_id
        self.mss = datapath_info.mss or 1448
        self.ports = (getattr(datapath_info, "src_port", None), getattr(datapath_info, "dst_port", None))
        self.trace = alg.trace
        # the last update sent: (window, registers, the report's grown_pkts and reductions)
        self._sent: tuple | None = None

    def fresh_telemetry(self):
        """The flow's newest sink record at most the algorithm's ``max_age_ms`` old (an
        algorithm built with telemetry= and directory=: needs_telemetry), or None; the
        flow's id is looked up once it is listed."""
        alg = self.alg
        if getattr(alg, "telemetry", None) is None:
            return None
        if getattr(self, "flow_id", None) is None:
            self.flow_id = alg.directory.flow_id(self.info) if alg.directory else None
            if self.flow_id is None:
                return None
        return alg.telemetry.flow(self.flow_id, alg.max_age_ms / 1e3)

    def install(self, cwnd_bytes: int, registers: list[tuple[str, int]] = ()):
        """The program with the window, then the contract's handshake (contract.py: the
        version, the cut the kernel makes on a loss until the agent answers) with the
        first ``registers``."""
        self.datapath.set_program(self.program, [("Cwnd", int(cwnd_bytes))])
        self.datapath.update_fields([("contract_version", CONTRACT_VERSION),
                                     ("loss_beta", self.alg.loss_beta_1024), *registers])

    def export_state(self) -> FlowState:
        raise NotImplementedError(f"{self.alg.name} cannot hand its flows over")

    def adopt(self, state: FlowState):
        """Take a flow over from another algorithm (handover.py): its state, then the
        window and this algorithm's registers to the datapath (the program runs already)."""
        raise NotImplementedError(f"{self.alg.name} cannot take flows over")

    def resume(self, registers: list[tuple[str, int]], reason: str):
        """After adopt: the handshake registers this algorithm sets (its cut) with the window,
        and every other register the kernel acts on back at its default: the last algorithm's
        per-ACK growth (CUBIC's ca_target under Reno) or BBR's recoveries would go on in
        the kernel under the new one otherwise."""
        registers = [("contract_version", CONTRACT_VERSION), ("loss_beta", self.alg.loss_beta_1024), *registers]
        named = {name for name, _ in registers}
        # (rto_min goes back to the kernel's 200 ms: cubic-int's, set for a path's downtime, would stay in the socket)
        registers += [(r.name, r.switch_value) for r in CONTROL_REGISTERS if r.ctl_field and r.name not in named]
        self.set_cwnd(self.cwnd_bytes_now(), "switch", reason=reason, registers=registers)

    def cwnd_bytes_now(self) -> int:
        raise NotImplementedError

    def set_cwnd(self, cwnd_bytes: int, event: str, r: Report | None = None, reason: str = "",
                 ssthresh_bytes: int | None = None, registers: list[tuple[str, int]] | None = None,
                 cwnd_before_bytes: float | None = None):
        """Command the window, with ``registers`` (name, value) in the same update: the
        datapath's per-ACK growth (contract.GROWTH_REGISTER_NAMES). ``cwnd_before_bytes``, for the trace:
        the window the decision started from (the last command plus the datapath's growth)."""
        # 1 MSS only after a timeout, as the kernel; portus takes 31-bit values (a fast veth
        # gave BBR a pacing rate and a target past them, and portus panicked)
        cwnd_bytes = min(max(int(cwnd_bytes), self.mss), REGISTER_MAX)
        now_ns = time.monotonic_ns()    # before the call: the latency benchmark starts here
        registers = None if registers is None else [(name, min(max(int(v), 0), REGISTER_MAX)) for name, v in registers]
        if registers:
            self._check_families(registers)
        if self._changes_nothing(cwnd_bytes, event, r, registers):
            unsent = getattr(self.datapath, "unsent_update", None)    # the unit tests' mock keeps count
            if unsent:
                unsent(cwnd_bytes)
        else:
            if registers is None:
                self.datapath.update_field("Cwnd", cwnd_bytes)
            else:
                self.datapath.update_fields([("Cwnd", cwnd_bytes)] + registers)
            grown = r.grown_pkts if r is not None else None
            kept = self._sent[1] if self._sent is not None and registers is None else registers
            self._sent = None if grown is None else (cwnd_bytes, kept, grown, r.reductions)
        if event != "report" or log.isEnabledFor(logging.DEBUG):
            log.log(logging.DEBUG if event == "report" else logging.INFO, "flow %s %s: cwnd %d B (%s)",
                    self.sid, event, cwnd_bytes, reason)
        self.trace.row(mono_ns=now_ns, sid=self.sid, event=event, cwnd_bytes=cwnd_bytes, ssthresh_bytes=ssthresh_bytes,
                       rtt_us=r.rtt_us if r else None, acked_bytes=r.acked if r else None,
                       loss_pkts=r.loss if r else None, timeout=int(r.timeout) if r else None,
                       inflight_pkts=r.inflight if r else None, reason=reason,
                       cwnd_before_bytes=None if cwnd_before_bytes is None else int(cwnd_before_bytes))
        return cwnd_bytes

    def _check_families(self, registers) -> None:
        """A register of a family the algorithm does not declare (Algorithm.families) would
        drive kernel arithmetic no one reviewed for it: refused, naming the family. Setting
        one back to its default (a switch's reset, resume) is always allowed."""
        defaults = {r.name: r.default for r in CONTROL_REGISTERS}
        for name, value in registers:
            family = FAMILY_OF_REGISTER.get(name)
            if family is not None and family not in self.alg.families and value != defaults[name]:
                raise ContractError(f"{self.alg.name or type(self.alg).__name__} sets register {name} of family "
                                    f"{family} without declaring it (families = {self.alg.families})")

    def _changes_nothing(self, cwnd_bytes: int, event: str, r: Report | None, registers) -> bool:
        """An update the intcc datapath would take as no command (agent.rs, set_cwnd): on a
        report without a loss, a timeout, an undo or a new reduction (whose answers the
        kernel waits for), the window is the last one sent plus the kernel's growth since,
        and the registers are the same. Not sent: under Reno in congestion avoidance nearly
        every report's update was one, half the daemon's wakeups on a fast path."""
        if event != "report" or r is None or self._sent is None or r.grown_pkts is None:
            return False
        if r.loss or r.timeout or r.undo_bytes:
            return False
        sent_cwnd, sent_registers, sent_grown, sent_reductions = self._sent
        if r.reductions != sent_reductions or (registers is not None and registers != sent_registers):
            return False
        return cwnd_bytes == sent_cwnd + (r.grown_pkts - sent_grown) % 2 ** 32 * self.mss


class Algorithm(AlgBase):
    """An algorithm: its datapath program and the flow class it makes."""
    name = ""
    summary = ""                 # one line for 'intcc alg list' and --help
    flow_class = FlowBase
    program = REPORT_PER_RTT_AND_ON_LOSS
    params = (INIT_CWND,)        # the constructor's options (registry.Param), for the command line
    needs_telemetry = False      # built with telemetry= and directory= (the sink's MQTT feed)
    needs_cadence = False        # built with cadence= (reports at its own pace: ccp_agent/cadence.py)
    # The datapath families whose kernel half it drives (contract.FAMILIES): their registers
    families: tuple[str, ...] = ("slow_start",)

    # The window kept after a congestive loss, /1024: the kernel's ssthresh on the intcc
    # datapath until the agent answers the loss (contract register loss_beta).
    loss_beta_1024 = 512

    def __init__(self, init_cwnd_pkts: int = 10, trace: str | None = None,
                 capabilities: DatapathCapabilities = INTCC_DATAPATH):
        if init_cwnd_pkts < 1:
            raise ValueError(f"init_cwnd_pkts must be >= 1, not {init_cwnd_pkts}")
        self.init_cwnd_pkts = init_cwnd_pkts
        self.trace = Trace(trace)
        self.capabilities = capabilities     # what the datapath under the agent tells and does

    def datapath_programs(self):
        program = self.program
        if program == REPORT_PER_RTT_AND_ON_LOSS and not self.capabilities.growth:
            program = REPORT_PER_RTT_AND_ON_LOSS_FOLDED_SLOW_START
        check_program(program)
        return {"default": program}

    def new_flow(self, datapath, datapath_info):
        return self.flow_class(self, datapath, datapath_info)
