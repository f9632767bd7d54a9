"""What every intcc CCP algorithm shares: the per-RTT / on-loss report program,
per-flow state with its MSS, and an optional CSV trace of every decision."""
from __future__ import annotations

import copy
import csv
import logging
import time

log = logging.getLogger("intcc.alg")

# Report at once on a loss, a timeout or an undo. Acked bytes and losses accumulate
# between reports.
REPORT_ON_EVENTS = """\
(when (|| (|| Report.timeout (> Report.loss 0)) (> Report.undo 0))
    (report)
    (:= Micros 0)
)
"""

# ... and once per RTT (but at most every millisecond: on a bare veth the RTT is ~20 us
# and per-RTT reports would swamp the agent). Vegas decides per RTT on these.
REPORT_TRIGGERS = REPORT_ON_EVENTS + """\
(when (&& (> Micros Flow.rtt_sample_us) (> Micros 1000))
    (report)
    (:= Micros 0)
)
"""

# ... or once per round for window algorithms: when a window's worth has been acked
# since the last report, or else after an RTT. With a window of 1-2 segments a round's
# ACKs arrive together a hair less than an RTT after the last report, so waiting for
# the RTT deferred the report, and the window's growth, by a whole RTT (at 10 % link
# loss ccp cubic reported every 1.3-1.6 RTTs; the kernel grows on every ACK).
REPORT_PER_ROUND_TRIGGERS = REPORT_ON_EVENTS + """\
(when (&& (> Micros 1000) (|| (> Micros Flow.rtt_sample_us) (> (+ Report.acked 1) Cwnd)))
    (report)
    (:= Micros 0)
)
"""

# Report.rto_acked / rto_delivered: the bytes / packets (as Report.delivered) of the ACK
# that reports a timeout (the first after the RTO).
FOLD_RTO_ACKED = """\
(when (|| Flow.was_timeout false)
    (:= Report.rto_acked Ack.bytes_acked)
    (fallthrough)
)
(when (&& (|| Flow.was_timeout false) (> Ack.bytes_acked 0))
    (:= Report.rto_delivered Ack.packets_acked)
    (fallthrough)
)
"""

# Report.delivered: what the kernel's window growth counts, packets newly delivered
# (acked_sacked) on ACKs that advance snd_una; an ACK that only SACKs grows nothing
# (tcp_may_raise_cwnd). Counting those too, ccp cubic grew a segment or two in every
# Disorder state that kernel cubic sat out (+8 % goodput at 2 % link loss).
FOLD_DELIVERED = """\
(when (> Ack.bytes_acked 0)
    (:= Report.delivered (+ Report.delivered Ack.packets_acked))
    (fallthrough)
)
"""

# Slow start per ACK in the datapath program, as the kernel's (tcp_slow_start), where
# the program runs beside the kernel's TCP (ccp-kernel): Cwnd grows by a segment
# (seg_bytes) per packet delivered (as Report.delivered) while below ss_until (bytes; 0:
# off, the agent alone sets Cwnd), which the agent sets with every window. A loss, a
# timeout or an undo stops it until the agent has decided. Growing once per report
# instead (a round), the window lagged the kernel's by up to a round in every slow start:
# at 10 % link loss ccp cubic's first cut came from 11 segments where kernel cubic's came
# from 14, on the same losses. The intcc datapath runs the program in its daemon, an ACK
# behind the kernel: there the kernel side grows the window itself from the same
# registers (see GROWTH_REGISTERS) and the program leaves this fold out.
SLOW_START_PER_ACK = """\
(when (|| (|| Flow.was_timeout (> Ack.lost_pkts_sample 0)) (> Ack.ecn_bytes 0))
    (:= ss_until 0)
    (fallthrough)
)
(when (&& (< Cwnd ss_until) (> Ack.bytes_acked 0))
    (:= Cwnd (min ss_until (+ Cwnd (* Ack.packets_acked seg_bytes))))
    (fallthrough)
)
"""

SS_UNTIL_MAX_BYTES = 2 ** 31 - 1     # "no ssthresh yet"

# Control registers for window growth per ACK, declared first and in this order: the
# intcc datapath reads them by position (libccp keeps no names) once the agent has set
# seg_bytes, and grows the window on the ACK that earns it (datapath/bpf: grow_per_ack):
# ss_until (bytes): slow start up to here; ca_target (bytes, 0 off): congestion avoidance
# towards it as tcp_cubic (the agent's cubic curve one RTT ahead); ca_cnt_max: at most
# this many packets per segment of growth (0: no bound); reno_scale: CUBIC's Reno-friendly
# W_est gains a segment per (cwnd * reno_scale) >> 3 packets (0: off); ca_epoch: a change
# restarts W_est at the window then (a new CUBIC epoch).
GROWTH_REGISTERS = "(ss_until 0) (seg_bytes 1448) (ca_target 0) (ca_cnt_max 0) (reno_scale 0) (ca_epoch 0)"

_REPORT_DEF = """\
(def (Report
    (volatile acked 0)
    (volatile sacked 0)
    (volatile loss 0)
    (volatile timeout false)
    (volatile rtt 0)
    (volatile minrtt 2147483647)
    (volatile inflight 0)
    (volatile rin 0)
    (volatile rout 0)
    (volatile undo 0)
    (volatile rto_acked 0)
    (volatile delivered 0)
    (volatile rto_delivered 0)
    (volatile grown 0)
    (volatile reductions 0)
) """ + GROWTH_REGISTERS + """)
""" + FOLD_RTO_ACKED + """\
(when true
    (:= Report.inflight Flow.packets_in_flight)
    (:= Report.rtt Flow.rtt_sample_us)
    (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
    (:= Report.rin Flow.rate_incoming)
    (:= Report.rout Flow.rate_outgoing)
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.sacked Ack.packets_misordered)
    (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
    (:= Report.timeout Flow.was_timeout)
    (:= Report.undo (max Report.undo Ack.ecn_bytes))
    (:= Report.grown Flow.bytes_pending)
    (:= Report.reductions Ack.bytes_misordered)
    (fallthrough)
)
""" + FOLD_DELIVERED

# The shared program: on the intcc datapath (the kernel grows the window per ACK) and,
# with the slow start folded in the program, on ccp-kernel.
REPORT_PER_RTT_AND_ON_LOSS = _REPORT_DEF + REPORT_PER_ROUND_TRIGGERS
REPORT_PER_RTT_AND_ON_LOSS_FOLDED_SLOW_START = _REPORT_DEF + SLOW_START_PER_ACK + REPORT_PER_ROUND_TRIGGERS

# The kernel undoes a window reduction it finds spurious (DSACKs, F-RTO, timestamps):
# cwnd back to max(cwnd, prior_cwnd). libccp has no primitive for it, so the intcc
# datapath carries the undone window (bytes) in Ack.ecn_bytes on that ACK and ECN
# marks in Ack.ecn_packets only (see docs/datapath.md). Elsewhere (ccp-kernel),
# Ack.ecn_bytes counts ECN-marked bytes: algorithms there ignore Report.undo. Likewise
# Flow.bytes_pending carries the segments the kernel side has grown the window by since
# it announced the flow (Report.grown), and Ack.bytes_misordered the window reductions
# (Recovery, CWR) the kernel has begun (Report.reductions), on the intcc datapath only.

try:   # DESIGN: an algorithm is a portus AlgBase (pyportus is built by 'make setup')
    from pyportus import AlgBase
except ImportError:   # unit tests of decisions do not need the portus runtime
    AlgBase = object

TRACE_FIELDS = ["t_s", "mono_ns", "sid", "event", "cwnd_bytes", "ssthresh_bytes", "rtt_us",
                "acked_bytes", "loss_pkts", "timeout", "inflight_pkts", "reason", "cwnd_before_bytes",
                "src_port", "dst_port"]     # on a flow's start row: which connection (one agent, many flows)


class Trace:
    """CSV rows, line-buffered: portus ends the process with exit() on SIGTERM."""

    def __init__(self, path: str | None):
        self._file = open(path, "w", buffering=1, newline="") if path else None
        self._csv = csv.DictWriter(self._file, TRACE_FIELDS) if self._file else None
        if self._csv:
            self._csv.writeheader()
        self._t0 = time.monotonic_ns()

    def row(self, mono_ns: int | None = None, **fields):
        if not self._csv:
            return
        now = mono_ns or time.monotonic_ns()
        self._csv.writerow({"t_s": f"{(now - self._t0) / 1e9:.6f}", "mono_ns": now, **fields})


NO_RTT_SAMPLE = 2147483647      # minrtt's start value (portus immediates are at most 31 bits)


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
    datapath; None: not told)."""
    __slots__ = ("acked", "sacked", "loss", "timeout", "rtt_us", "minrtt_us", "inflight", "rin", "rout",
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
        self.rin = r.rin
        self.rout = r.rout
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

    def install(self, cwnd_bytes: int):
        self.datapath.set_program(self.program, [("Cwnd", int(cwnd_bytes))])

    def set_cwnd(self, cwnd_bytes: int, event: str, r: Report | None = None, reason: str = "",
                 ssthresh_bytes: int | None = None, registers: list[tuple[str, int]] | None = None,
                 cwnd_before_bytes: float | None = None):
        """Command the window, with ``registers`` (name, value) in the same update: the
        datapath's per-ACK growth (GROWTH_REGISTERS). ``cwnd_before_bytes``, for the trace:
        the window the decision started from (the last command plus the datapath's growth)."""
        cwnd_bytes = max(int(cwnd_bytes), self.mss)     # 1 MSS only after a timeout, as the kernel
        now_ns = time.monotonic_ns()    # before the call: the latency benchmark starts here
        if registers is None:
            self.datapath.update_field("Cwnd", cwnd_bytes)
        else:
            self.datapath.update_fields([("Cwnd", cwnd_bytes)] + registers)
        if event != "report" or log.isEnabledFor(logging.DEBUG):
            log.log(logging.DEBUG if event == "report" else logging.INFO, "flow %s %s: cwnd %d B (%s)",
                    self.sid, event, cwnd_bytes, reason)
        self.trace.row(mono_ns=now_ns, sid=self.sid, event=event, cwnd_bytes=cwnd_bytes, ssthresh_bytes=ssthresh_bytes,
                       rtt_us=r.rtt_us if r else None, acked_bytes=r.acked if r else None,
                       loss_pkts=r.loss if r else None, timeout=int(r.timeout) if r else None,
                       inflight_pkts=r.inflight if r else None, reason=reason,
                       cwnd_before_bytes=None if cwnd_before_bytes is None else int(cwnd_before_bytes))
        return cwnd_bytes


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

    # The program declares GROWTH_REGISTERS (REPORT_PER_RTT_AND_ON_LOSS): slow start
    # grows per ACK in the datapath. False for a program of its own without them (Vegas).
    datapath_slow_start = True

    def __init__(self, alg, datapath, datapath_info):
        super().__init__(alg, datapath, datapath_info)
        self.cwnd = float(alg.init_cwnd_pkts * self.mss)    # bytes
        self.ssthresh = float("inf")
        self.recovery_bytes_left = 0.0                       # data in flight at the last cut, not yet acked
        self.rto_bytes_left = 0.0                            # data in flight at the last RTO, not yet acked
        self.prior_ssthresh = None                           # what an undo restores (kernel prior_ssthresh)
        self.grown_seen = 0                                  # Report.grown_pkts taken into cwnd
        self.reductions_seen = 0                             # Report.reductions answered
        self.sent_registers: dict[str, int] = {}             # growth registers in force (last sent)
        self.install(self.cwnd)
        if self.datapath_slow_start:
            registers = self.growth_registers()
            self.datapath.update_fields([("seg_bytes", int(self.mss))] + registers)
            self.sent_registers = dict(registers)
        self.trace.row(sid=self.sid, event="start", cwnd_bytes=int(self.cwnd), reason="init",
                       src_port=self.ports[0], dst_port=self.ports[1])

    def parse(self, r) -> Report:
        return Report(r)

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
        """The datapath's per-ACK growth until the next decision (GROWTH_REGISTERS)."""
        return [("ss_until", self.slow_start_in_datapath())]

    def grew_in_datapath(self, r: Report, register: str) -> bool:
        """Whether the datapath's growth by ``register`` (as last sent) is already in the
        window for these ACKs: then the flow does not grow for them again."""
        return r.datapath_grew and self.sent_registers.get(register, 0) > 0

    def slow_start_in_datapath(self) -> int:
        """Up to where (bytes) the datapath may grow the window per ACK until the next
        decision: ssthresh in slow start, 0 (off) otherwise or in a recovery, where the
        kernel does not grow. After a timeout slow start goes on, as in the kernel's Loss
        state. Subclasses whose slow start is not a segment per packet delivered return 0."""
        if self.cwnd >= self.ssthresh or self.recovery_bytes_left > 0:
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
        if not self.alg.datapath_undo:
            r.undo_bytes = 0
        if self.alg.datapath_growth and self.datapath_slow_start and r.grown_pkts is not None:
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
        # took 7-17 % of the kernel's recoveries at 1-5 % link loss for the previous one:
        # no cut, PRR aiming at the uncut window (ccp cubic +9-17 %).
        recovery_left_before = self.recovery_bytes_left
        self.recovery_bytes_left = max(0.0, self.recovery_bytes_left - r.acked)
        self.rto_bytes_left = max(0.0, self.rto_bytes_left - r.acked)
        in_recovery = self.recovery_bytes_left > 0
        after_rto = self.rto_bytes_left > 0
        # Where the datapath tells the kernel's window reductions, a loss cuts iff the kernel
        # began one (tcp_enter_recovery: from any state but Recovery/CWR, Loss included);
        # elsewhere the agent's estimate of the kernel's recovery decides. The estimate missed
        # a fifth of kernel cubic's cuts at 20 % link loss (a recovery begun as the agent
        # still counted the last one, or right after an RTO), and ccp cubic grew past it.
        new_reduction = None
        if self.alg.datapath_reductions and r.reductions is not None:
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
            event, reason = "timeout", self.on_timeout(r, new_episode)
            if r.rto_acked > 0:
                # The RTO came before the ACK that reports it: the kernel's window was one
                # segment on that ACK and slow start grew it at once (tcp_enter_loss, then
                # cong_avoid). Left at one segment until the next ACK, a lone segment waits
                # for the receiver's delayed ACK or a loss probe (100-270 ms seen at 10 % loss).
                # Only that ACK's bytes: the report's earlier ACKs came before the RTO (all of
                # them grew ccp cubic past kernel cubic at 20 % loss).
                after = copy.copy(r)
                after.acked, after.delivered = r.rto_acked, r.rto_delivered
                after.datapath_grew = False     # the kernel's own slow start grew it (rto_hold)
                reason += "; " + self.on_ack(after)
        elif starts_episode:
            # everything sent under the old window may still be reported lost: one cut for all
            # of it, until the cumulative ACK passes what was sent (the kernel's high_seq). That is
            # packets_out: in flight, plus lost, plus SACKed (the datapath's in-flight leaves
            # those out). Without the SACKed, a second drop of the same overflow, detected an
            # RTT later, came one segment past the estimate and cut again (0.7 x 0.7: 3 of 4
            # runs of cwnd_progression, where kernel cubic stayed in its recovery).
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
    flow_class = FlowBase
    program = REPORT_PER_RTT_AND_ON_LOSS

    # The datapath signals the kernel's undos: the intcc BPF datapath does; on ccp-kernel
    # (set False by 'intcc alg run --ipc netlink') Ack.ecn_bytes means ECN.
    datapath_undo = True
    # The datapath tells the kernel's window reductions (Report.reductions): the intcc BPF
    # datapath does; on ccp-kernel (False) Ack.bytes_misordered means SACKed bytes.
    datapath_reductions = True
    # The datapath grows the window per ACK from GROWTH_REGISTERS and tells the growth in
    # Flow.bytes_pending: the intcc BPF datapath. On ccp-kernel (False) the program's own
    # fold grows slow start per ACK, and congestion avoidance is the agent's, per report.
    datapath_growth = True

    def __init__(self, init_cwnd_pkts: int = 10, trace: str | None = None):
        if init_cwnd_pkts < 1:
            raise ValueError(f"init_cwnd_pkts must be >= 1, not {init_cwnd_pkts}")
        self.init_cwnd_pkts = init_cwnd_pkts
        self.trace = Trace(trace)

    def datapath_programs(self):
        if self.program == REPORT_PER_RTT_AND_ON_LOSS and not self.datapath_growth:
            return {"default": REPORT_PER_RTT_AND_ON_LOSS_FOLDED_SLOW_START}
        return {"default": self.program}

    def new_flow(self, datapath, datapath_info):
        return self.flow_class(self, datapath, datapath_info)
