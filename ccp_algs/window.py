"""The skeleton of a loss-reacting window algorithm (Reno, CUBIC, Vegas build on it): what
a report means for the flow (a timeout, a new loss episode, a recovery already answered,
an undo, growth), decided as the kernel's own TCP decides it, and the window sent back."""
from __future__ import annotations

import copy
from typing import NamedTuple

from .base import FlowBase, Report
from .flowstate import FlowState
from .programs import SS_UNTIL_MAX_BYTES, UNPACED_RATE


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
        if not state.loss_seen and not state.slow_start_over and self.slow_starts_until_loss:
            # as the algorithm would be had it run from the start: a flow that never lost
            # is still in slow start (Reno beside kernel Reno in a deep buffer: CUBIC's
            # HyStart had left it at 1 s, and the ssthresh it set kept Reno in congestion
            # avoidance while the competitor slow-started to thousands of packets)
            self.ssthresh = float("inf")
            # (not after the probe: at its fair share already, a slow start from there beside
            # competitors that keep a deep buffer full overshot it by hundreds of packets)
        self.recovery_bytes_left, self.rto_bytes_left = state.recovery_bytes_left, state.rto_bytes_left
        self.grown_seen, self.reductions_seen = state.grown_seen, state.reductions_seen
        self.prior_ssthresh = None
        self.matched_cwnd = state.matched_cwnd_bytes
        registers = self.growth_registers() if self.datapath_slow_start else []
        # no pacing of its own: a pacing rate the last algorithm set is lifted (UNPACED_RATE)
        self.resume([("Rate", UNPACED_RATE)] + registers, reason="took the flow over")
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

    def slow_start(self, r: Report) -> str:
        """Slow start's growth for these ACKs, a segment per packet delivered, unless the
        datapath grew the window already (ss_until); the reason."""
        if self.grew_in_datapath(r, "ss_until"):
            return "slow start (datapath)"
        self.cwnd += r.growth_bytes(self.mss)
        return "slow start"

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
        if not self.alg.capabilities.undo:
            r.undo_bytes = 0
        self._take_datapath_growth(r)
        cwnd_before = self.cwnd
        # The kernel undoes on an ACK, before that ACK's new losses: a recovery's undo comes
        # first. An RTO fires between ACKs, so an undo reported with it undoes that RTO (a
        # spurious one, F-RTO): it comes after the timeout.
        undo_after = r.timeout
        reasons = [self.on_undo(r)] if r.undo_bytes > 0 and not undo_after else []
        event, reason = self._decide(r, self._loss_state(r), undone=bool(reasons))
        if r.undo_bytes > 0 and undo_after:
            reason += "; " + self.on_undo(r)
        self.cwnd = max(self.cwnd, self.mss)
        self._send(r, event, "; ".join(reasons + ([reason] if reason else [])), cwnd_before)

    def _take_datapath_growth(self, r):
        """The kernel side grew the window on these ACKs (before any loss among them: it
        does not grow in a recovery or an unanswered RTO), from the window last sent."""
        if self.alg.capabilities.growth and self.datapath_slow_start and r.grown_pkts is not None:
            grown = (r.grown_pkts - self.grown_seen) % 2 ** 32
            self.grown_seen = r.grown_pkts
            self.cwnd += grown * self.mss
            r.datapath_grew = True

    def _loss_state(self, r) -> "LossState":
        """Where the report finds the flow: in a recovery, after an RTO, starting a new loss
        episode. A loss is reported at once, on the ACK that showed it: the report's other
        ACKs came before it. So its acked bytes count first, and a recovery they complete
        ends before the loss, which starts a new episode (the kernel's recovery ends on the
        ACK passing high_seq, and a later loss is a new recovery with a new cut). Deciding
        before them took some of the kernel's recoveries for the previous one
        (docs/results/2026-11-30-datapath-development.md, A1)."""
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
        if self.alg.capabilities.reductions and r.reductions is not None:
            new_reduction = (r.reductions - self.reductions_seen) % 2 ** 32 > 0
            self.reductions_seen = r.reductions
        if new_reduction is None:
            starts_episode = r.loss > 0 and not in_recovery and not after_rto
        else:
            starts_episode = new_reduction
        return LossState(in_recovery, after_rto, starts_episode, recovery_left_before)

    def _decide(self, r, st: "LossState", undone: bool) -> tuple:
        """(event, reason) of this report: a timeout, a new loss episode's cut, a loss or a
        recovery already answered, an undo, a recovery's end, or growth."""
        if r.timeout:
            return self._timeout(r, st)
        if st.starts_episode:
            # everything sent under the old window may still be reported lost: one cut for all
            # of it, until the cumulative ACK passes what was sent (the kernel's high_seq). That is
            # packets_out: in flight, plus lost, plus SACKed (the datapath's in-flight leaves
            # those out). Without the SACKed, a second drop of the same overflow, detected an
            # RTT later, came one segment past the estimate and cut again (A4).
            self.recovery_bytes_left = max(self.cwnd, (r.inflight + r.loss + r.sacked) * self.mss)
            self._remember_before_cut()
            return "loss", self.on_loss(r)
        if r.loss > 0 and st.after_rto and not st.in_recovery:
            return "loss", "data sent before the timeout: no new cut; " + self.on_ack(r)
        if r.loss > 0 or st.in_recovery:
            return ("loss" if r.loss else "recovery"), "in recovery: the window was already cut"
        if undone:
            return "undo", ""
        if st.recovery_left_before > 0:
            # the recovery ended in this report: growth only for what was acked after it
            self.on_recovery_over(r)
            after = copy.copy(r)
            after.acked = r.acked - st.recovery_left_before
            if r.delivered is not None:        # the packets past the recovery point, at most
                after.delivered = min(r.delivered, -(-after.acked // self.mss))
            return "recovery", "recovery over" + ("; " + self.on_ack(after) if after.acked > 0 else "")
        return "report", self.on_ack(r)

    def _timeout(self, r, st: "LossState") -> tuple:
        # The kernel keeps ssthresh on an RTO during a recovery or an RTO's retransmissions
        # (tcp_enter_loss: only from Open/Disorder, or once high_seq is acked).
        new_episode = not (st.in_recovery or st.after_rto)
        if new_episode:
            self._remember_before_cut()
        self.recovery_bytes_left = 0.0
        # The kernel marks everything in flight lost at an RTO; those losses show up in
        # the next reports and are this timeout, not new episodes (as the kernel's
        # TCP_CA_Loss until high_seq is acked): without this, the second cut took
        # ssthresh from 1 MSS to 2 MSS and slow start after every RTO ended at once.
        self.rto_bytes_left = max(self.cwnd, (r.inflight + r.loss) * self.mss)
        self.matched_cwnd = 0.0         # a switch's match ends at a timeout: the path says less
        reason = self.on_timeout(r, new_episode)
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
        return "timeout", reason

    def _send(self, r, event: str, reason: str, cwnd_before: float):
        registers = self.growth_registers() if self.datapath_slow_start else None
        self.set_cwnd(self.cwnd, event, r, reason=reason,
                      ssthresh_bytes=None if self.ssthresh == float("inf") else int(self.ssthresh),
                      registers=registers, cwnd_before_bytes=cwnd_before)
        if registers:
            self.sent_registers = dict(registers)


class LossState(NamedTuple):
    in_recovery: bool
    after_rto: bool
    starts_episode: bool
    recovery_left_before: float
