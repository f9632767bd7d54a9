"""What every intcc CCP algorithm shares: the report as the agent reads it, per-flow
state with its MSS and trace, the skeleton of a loss-reacting window algorithm, and the
algorithm class that hands portus its programs."""
from __future__ import annotations

import copy
import logging
import time

from .contract import CONTRACT_VERSION, CONTROL_REGISTERS, INTCC_DATAPATH, DatapathCapabilities, check_program
from .registry import INIT_CWND
from .programs import (NO_RTT_SAMPLE, REGISTER_MAX, REPORT_PER_RTT_AND_ON_LOSS, REPORT_PER_RTT_AND_ON_LOSS_FOLDED_SLOW_START,
                       SS_UNTIL_MAX_BYTES)
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
        registers += [(r.name, r.default) for r in CONTROL_REGISTERS if r.ctl_field and r.name not in named]
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


class WindowFlow(FlowBase):
    """The skeleton of a loss-reacting window algorithm, per report:

    timeout -> ``on_timeout`` (``new_episode`` False when the data of the last cut
    or RTO is not all acked yet: the kernel then keeps that episode's ssthresh);
    the first loss of an episode -> ``on_loss``; later losses of data sent before
    the cut (the same episode, as NewReno's recovery point) -> nothing; losses of
    data sent before a timeout -> ``on_ack`` (slow start goes on, as in the
    kernel's Loss state); otherwise ``on_ack``. An undo by the kernel -> ``on_undo``,
    before the report's losses, or after the timeout it undoes. Each returns the
    decision's reason.
    """

    # Slow start grows per ACK in the datapath, from the contract's growth registers.
    # False where an algorithm's slow start is its own (Vegas).
    datapath_slow_start = True
    # Slow start lasts until the first loss (or a delay-based exit of the algorithm's
    # own): a flow taken over before any loss goes on slow-starting. False: Vegas, whose
    # slow start ends on its own delay rule (vegas.py adopt).
    slow_starts_until_loss = True

    def __init__(self, alg, datapath, datapath_info):
        super().__init__(alg, datapath, datapath_info)
        self.cwnd = float(alg.init_cwnd_pkts * self.mss)    # bytes
        self.ssthresh = float("inf")
        self.recovery_bytes_left = 0.0                       # data in flight at the last cut, not yet acked
        self.rto_bytes_left = 0.0                            # data in flight at the last RTO, not yet acked
        self.prior_ssthresh = None                           # what an undo restores (kernel prior_ssthresh)
        self.matched_cwnd = 0.0                              # a switch's matched window, not reached yet (cut_base)
        self.grown_seen = 0                                  # Report.grown_pkts taken into cwnd
        self.reductions_seen = 0                             # Report.reductions answered
        self.sent_registers: dict[str, int] = {}             # growth registers in force (last sent)
        registers = self.growth_registers() if self.datapath_slow_start else []
        self.install(self.cwnd, [("seg_bytes", int(self.mss))] + registers)
        self.sent_registers = dict(registers)
        self.trace.row(sid=self.sid, event="start", cwnd_bytes=int(self.cwnd), reason="init",
                       src_port=self.ports[0], dst_port=self.ports[1])

    def parse(self, r) -> Report:
        return Report(r)

    def cwnd_bytes_now(self) -> int:
        return int(self.cwnd)

    def export_state(self) -> FlowState:
        return FlowState(cwnd_bytes=self.cwnd, ssthresh_bytes=self.ssthresh,
                         recovery_bytes_left=self.recovery_bytes_left, rto_bytes_left=self.rto_bytes_left,
                         grown_seen=self.grown_seen, reductions_seen=self.reductions_seen,
                         matched_cwnd_bytes=self.matched_cwnd if self.matched_cwnd > self.cwnd else 0.0)

    def adopt(self, state: FlowState):
        self.cwnd = float(state.cwnd_bytes)
        self.ssthresh = float(state.ssthresh_or_window)
        if not state.loss_seen and self.slow_starts_until_loss:
            # as the algorithm would be had it run from the start: a flow that never lost
            # is still in slow start (Reno beside kernel Reno in a deep buffer: CUBIC's
            # HyStart had left it at 1 s, and the ssthresh it set kept Reno in congestion
            # avoidance while the competitor slow-started to thousands of packets)
            self.ssthresh = float("inf")
        self.recovery_bytes_left, self.rto_bytes_left = state.recovery_bytes_left, state.rto_bytes_left
        self.grown_seen, self.reductions_seen = state.grown_seen, state.reductions_seen
        self.prior_ssthresh = None
        self.matched_cwnd = state.matched_cwnd_bytes
        registers = self.growth_registers() if self.datapath_slow_start else []
        # Rate 0: no pacing of its own (the datapath drops a pacing rate the last one set)
        self.resume([("Rate", 0)] + registers, reason="took the flow over")
        self.sent_registers = dict(registers)

    def cut_base(self, window_bytes: float, beta: float) -> tuple[float, float]:
        """(the window a congestion cut by ``beta`` applies to, the ssthresh after it). The
        flow's own, unless a switch matched it to a competitor's larger window it has not
        reached yet: then the cut applies to that one, and slow start goes on to beta times
        it. A loss on the way (the competitor's slow start filling the buffer, most often)
        then cuts both flows from equal windows, as if they had started together; cut from
        its own, a flow that switched to Reno at 1/10 of a kernel Reno's window stayed
        there for the rest of the run in a deep buffer (RTTs of seconds, +1 MSS each)."""
        base = max(window_bytes, self.matched_cwnd)
        self.matched_cwnd = base * beta if base > window_bytes else 0.0
        return base, base * beta

    def on_timeout(self, r, new_episode: bool) -> str:
        if new_episode:
            self.ssthresh = max(self.cwnd / 2, 2 * self.mss)
        self.cwnd = self.mss
        return "timeout: cwnd 1 MSS, ssthresh cwnd/2" if new_episode else "timeout again: cwnd 1 MSS"

    def on_loss(self, r) -> str:
        raise NotImplementedError

    def on_ack(self, r) -> str:
        raise NotImplementedError

    def on_recovery_over(self, r):
        """Called on the report in which a recovery ended, before its growth (if any)."""

    def growth_registers(self) -> list[tuple[str, int]]:
        """The datapath's per-ACK growth until the next decision (contract.GROWTH_REGISTER_NAMES)."""
        return [("ss_until", self.slow_start_in_datapath())]

    def grew_in_datapath(self, r: Report, register: str) -> bool:
        """Whether the datapath's growth by ``register`` (as last sent) is already in the
        window for these ACKs: then the flow does not grow for them again."""
        return r.datapath_grew and self.sent_registers.get(register, 0) > 0

    def in_slow_start(self) -> bool:
        """cwnd below ssthresh in whole segments, as the kernel's tcp_in_slow_start and the
        datapath's ``ss_until`` count them. A window less than a segment below ssthresh has
        no slow start left that the datapath could grow, and read as slow start it left the
        growth to the datapath for good: Reno after a matched switch's cut (cwnd 7,497 B,
        ssthresh 7,840, MSS 1,428) held 5 segments for 45 s beside a kernel Reno."""
        return self.ssthresh == float("inf") or self.cwnd // self.mss < self.ssthresh // self.mss

    def slow_start_in_datapath(self) -> int:
        """Up to where (bytes) the datapath may grow the window per ACK until the next
        decision: ssthresh in slow start, 0 (off) otherwise or in a recovery, where the
        kernel does not grow. After a timeout slow start goes on, as in the kernel's Loss
        state. Subclasses whose slow start is not a segment per packet delivered return 0."""
        if not self.in_slow_start() or self.recovery_bytes_left > 0:
            return 0
        return int(min(self.ssthresh, SS_UNTIL_MAX_BYTES))

    def on_undo(self, r) -> str:
        """The kernel found the last reduction spurious and undid it, as tcp_undo_cwnd_reduction:
        cwnd max(cwnd, window before the cut) (the datapath reports the kernel's), ssthresh
        back to max(ssthresh before, 3/4 of the window before) (tcp_current_ssthresh)."""
        self.cwnd = max(self.cwnd, float(r.undo_bytes))
        if self.prior_ssthresh is not None:
            self.ssthresh = max(self.ssthresh, self.prior_ssthresh)
        self.prior_ssthresh = None
        self.recovery_bytes_left = self.rto_bytes_left = 0.0
        return f"undo: the kernel restored {r.undo_bytes} B"

    def _remember_before_cut(self):
        self.prior_ssthresh = max(self.ssthresh, 0.75 * self.cwnd)

    def on_report(self, r):
        r = self.parse(r)
        capabilities = self.alg.capabilities
        if not capabilities.undo:
            r.undo_bytes = 0
        if capabilities.growth and self.datapath_slow_start and r.grown_pkts is not None:
            # The kernel side grew the window on these ACKs (before any loss among them: it
            # does not grow in a recovery or an unanswered RTO), from the window last sent.
            grown = (r.grown_pkts - self.grown_seen) % 2 ** 32
            self.grown_seen = r.grown_pkts
            self.cwnd += grown * self.mss
            r.datapath_grew = True
        cwnd_before = self.cwnd
        reasons = []
        # The kernel undoes on an ACK, before that ACK's new losses: a recovery's undo comes
        # first. An RTO fires between ACKs, so an undo reported with it undoes that RTO (a
        # spurious one, F-RTO): it comes after the timeout.
        undo_after = r.timeout
        if r.undo_bytes > 0 and not undo_after:
            reasons.append(self.on_undo(r))
        # A loss is reported at once, on the ACK that showed it: the report's other ACKs came
        # before it. So its acked bytes count first, and a recovery they complete ends before
        # the loss, which starts a new episode (the kernel's recovery ends on the ACK passing
        # high_seq, and a later loss is a new recovery with a new cut). Deciding before them
        # took some of the kernel's recoveries for the previous one (docs/datapath.md, A1).
        recovery_left_before = self.recovery_bytes_left
        self.recovery_bytes_left = max(0.0, self.recovery_bytes_left - r.acked)
        self.rto_bytes_left = max(0.0, self.rto_bytes_left - r.acked)
        in_recovery = self.recovery_bytes_left > 0
        after_rto = self.rto_bytes_left > 0
        # Where the datapath tells the kernel's window reductions, a loss cuts iff the kernel
        # began one (tcp_enter_recovery: from any state but Recovery/CWR, Loss included);
        # elsewhere the agent's estimate of the kernel's recovery decides, which misses a
        # recovery begun as it still counts the last one, or right after an RTO (A2).
        new_reduction = None
        if capabilities.reductions and r.reductions is not None:
            new_reduction = (r.reductions - self.reductions_seen) % 2 ** 32 > 0
            self.reductions_seen = r.reductions
        if new_reduction is None:
            starts_episode = r.loss > 0 and not in_recovery and not after_rto
        else:
            starts_episode = new_reduction
        if r.timeout:
            # The kernel keeps ssthresh on an RTO during a recovery or an RTO's retransmissions
            # (tcp_enter_loss: only from Open/Disorder, or once high_seq is acked).
            new_episode = not (in_recovery or after_rto)
            if new_episode:
                self._remember_before_cut()
            self.recovery_bytes_left = 0.0
            # The kernel marks everything in flight lost at an RTO; those losses show up in
            # the next reports and are this timeout, not new episodes (as the kernel's
            # TCP_CA_Loss until high_seq is acked): without this, the second cut took
            # ssthresh from 1 MSS to 2 MSS and slow start after every RTO ended at once.
            self.rto_bytes_left = max(self.cwnd, (r.inflight + r.loss) * self.mss)
            self.matched_cwnd = 0.0         # a switch's match ends at a timeout: the path says less
            event, reason = "timeout", self.on_timeout(r, new_episode)
            if r.rto_acked > 0:
                # The RTO came before the ACK that reports it: the kernel's window was one
                # segment on that ACK and slow start grew it at once (tcp_enter_loss, then
                # cong_avoid). Left at one segment until the next ACK, a lone segment waits
                # for the receiver's delayed ACK or a loss probe. Only that ACK's bytes: the
                # report's earlier ACKs came before the RTO (A3).
                after = copy.copy(r)
                after.acked, after.delivered = r.rto_acked, r.rto_delivered
                after.datapath_grew = False     # the kernel's own slow start grew it (rto_hold)
                reason += "; " + self.on_ack(after)
        elif starts_episode:
            # everything sent under the old window may still be reported lost: one cut for all
            # of it, until the cumulative ACK passes what was sent (the kernel's high_seq). That is
            # packets_out: in flight, plus lost, plus SACKed (the datapath's in-flight leaves
            # those out). Without the SACKed, a second drop of the same overflow, detected an
            # RTT later, came one segment past the estimate and cut again (A4).
            self.recovery_bytes_left = max(self.cwnd, (r.inflight + r.loss + r.sacked) * self.mss)
            self._remember_before_cut()
            event, reason = "loss", self.on_loss(r)
        elif r.loss > 0 and after_rto and not in_recovery:
            event, reason = "loss", "data sent before the timeout: no new cut; " + self.on_ack(r)
        elif r.loss > 0 or in_recovery:
            event, reason = ("loss" if r.loss else "recovery"), "in recovery: the window was already cut"
        elif reasons:
            event, reason = "undo", ""
        elif recovery_left_before > 0:
            # the recovery ended in this report: growth only for what was acked after it
            self.on_recovery_over(r)
            after = copy.copy(r)
            after.acked = r.acked - recovery_left_before
            if r.delivered is not None:        # the packets past the recovery point, at most
                after.delivered = min(r.delivered, -(-after.acked // self.mss))
            event, reason = "recovery", "recovery over" + ("; " + self.on_ack(after) if after.acked > 0 else "")
        else:
            event, reason = "report", self.on_ack(r)
        if r.undo_bytes > 0 and undo_after:
            reason += "; " + self.on_undo(r)
        self.cwnd = max(self.cwnd, self.mss)
        reason = "; ".join(reasons + ([reason] if reason else []))
        registers = self.growth_registers() if self.datapath_slow_start else None
        self.set_cwnd(self.cwnd, event, r, reason=reason,
                      ssthresh_bytes=None if self.ssthresh == float("inf") else int(self.ssthresh),
                      registers=registers, cwnd_before_bytes=cwnd_before)
        if registers:
            self.sent_registers = dict(registers)


class Algorithm(AlgBase):
    """An algorithm: its datapath program and the flow class it makes."""
    name = ""
    summary = ""                 # one line for 'intcc alg list' and --help
    flow_class = FlowBase
    program = REPORT_PER_RTT_AND_ON_LOSS
    params = (INIT_CWND,)        # the constructor's options (registry.Param), for the command line
    needs_telemetry = False      # built with telemetry= and directory= (the sink's MQTT feed)

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
