"""probe: the identification phase's neutral controller. While the adaptive agent finds
out what its competitor runs (estimator/identify/), the flow runs neither CCA: it paces at
its fair share of the bottleneck and asks the competitor a question.

- Base rate: the bottleneck's fair share C / n from INT: C the port rate its hop stamps
  (``data_rate_kbps``; the hop of the lowest rate on the path), n the flows through it
  (``flow_count``, this one included), times ``payload_fraction``: the port serialises
  the IPv6 and TCP headers and the INT headers INTSource inserted (their slots for every
  hop on the path), while the pacing rate counts the segments' payload (on a 10 Mbit/s
  port with two INT hops, 8.6 Mbit/s of payload). The phase is then fair to any
  competitor by construction, which no CCA picked at random is. The largest share of the
  last ``SHARE_HOLD_S`` is taken: the port counts every 5-tuple of the last second, and a
  connection's handshake (iperf3's control connection at a test's start and end) would
  halve the share for that second.
- Pulses: asymmetric, Nimbus-style, around the base: ``+amplitude`` for the first quarter
  of each period, ``-amplitude / 3`` for the rest, so the mean is the base rate. A pulse
  up pushes a queue step into the bottleneck; an ack-clocked competitor answers it within
  an RTT, a paced one does not. The period is ``period_rtts`` of the flow's min RTT (at
  least ``MIN_PERIOD_S``). A command goes with each report, and the program reports once
  a round trip: beside competitors that keep a deep buffer full the RTT is many min RTTs
  (seconds), and a rate stood for seconds whatever the schedule said. So the flow asks the
  datapath for ``REPORTS_PER_PERIOD`` reports a period (``cadence``: the agent's
  ReportCadence), two in each up quarter.
- Where the bottleneck's buffer has no room for a pulse up (its hop stamps less free
  buffer than twice what a pulse up adds: ``pulse_room_bytes``), the pulses are dips for a
  period: the same swing, all of it below the base (a
  quarter at 1 - 4·amplitude/3, the rest at the base). Competitors that keep a deep buffer
  full would otherwise drop a pulse's worth of this flow's packets every period, and in a
  buffer of seconds each loss holds the receiver's in-order data back an RTT.
- Parity with the competitors' departures (``trim``): the agent hands the probe the
  competitors' mean rate at the bottleneck over its own, as the sink counts their packets
  leaving the node, and the base goes up by its square root (down again towards the fair
  share where it overshot), between 1 and ``MAX_SHARE_GAIN`` times the fair share. Paced at
  C / n, the flow departs below it beside competitors that keep a FIFO full (its own drops,
  the dips' mean below the base) and below them where n counts a UDP or app-limited flow
  that takes less than C / n: on the fairness networks it got 0.05-0.25 less than its
  CUBIC competitor (D) for as long as the identification took, seconds after their start.
  Alone at the bottleneck the gain is not applied.
- Losses: not cut (the kernel keeps the window: loss_beta 1). The rate is the fair
  share, not a probe for more; the competitor's answer to its own losses is what is read.
- The window is a cap only: ``CWND_GAIN`` times the up-pulse rate times the RTT, so the
  pacing rate, not the window, sets what is sent.
- Before hop telemetry with a port rate (the flow's first RTTs: the sink's first record),
  or on a path that stamps none, slow start: the window grows by what is acked, unpaced,
  and halves on a loss (the fair share unknown, the flow must not take more than Reno).
- Alone at its bottleneck it paces at the port's rate (n = 1); a competitor that arrives
  lowers the share at once, and the identification starts then. Alone, it also drains
  what stands in the queue (the least depth its hop stamped over the last pulse period,
  over ``DRAIN_PERIODS`` periods, at most half the rate): the base is within a few per
  cent of the port's rate, so a queue a competitor left full (or headers the allowance
  does not know of) would otherwise stay full and drop a packet every pulse. Beside
  competitors the queue is theirs too, and the share is kept.
"""
from __future__ import annotations

from collections import deque

from int_node.ioam import MAX_HOPS, inserted_bytes

from .base import Algorithm, FlowBase, Report
from .flowstate import FlowState
from .registry import INIT_CWND, Param

SHARE_HOLD_S = 1.5
TCP_IP6_HEADER_BYTES = 40 + 32     # IPv6, TCP with timestamps
CWND_GAIN = 2.0
MIN_PERIOD_S = 0.2
PULSE_DOWN_FRACTION = 1 / 3   # the down part's depth, of the amplitude: a quarter up, three quarters down
DRAIN_PERIODS = 2.0           # alone, a standing queue is drained over this many pulse periods
REPORTS_PER_PERIOD = 8        # asked of the agent's cadence: two commands in each up quarter (MIN_PERIOD_S:
                              # at most 40 reports a second per flow)
MAX_SHARE_GAIN = 2.0          # trim: at most twice the fair share (the whole port for n = 2)
TRIM_DEADBAND = 1.1           # trim: a rate ratio within 1.1 either way (D within 0.05) moves nothing
CADENCE_RENEW_S = 0.5         # the cadence's lease (ccp_agent/cadence.LEASE_S) renewed this often


def payload_fraction(mss: int, int_hops: int) -> float:
    """Of the bytes a port serialises for a full segment, the payload's share: the
    segment, its IPv6 and TCP headers and the INT headers for ``int_hops`` nodes."""
    int_bytes = inserted_bytes(min(max(int_hops, 1), MAX_HOPS))
    return mss / (mss + TCP_IP6_HEADER_BYTES + int_bytes)


def fair_share_bytes_per_s(rec, mss: int) -> tuple[float, object] | None:
    """(C / n in payload bytes per second, the hop) at the path's bottleneck in a
    FlowRecord: the hop of the lowest stamped port rate; None when no hop stamps one."""
    hops = [h for h in rec.path if h.data_rate_kbps]
    if not hops:
        return None
    hop = min(hops, key=lambda h: h.data_rate_kbps)
    return hop.data_rate_kbps * 1e3 / 8 / max(hop.flow_count, 1) * payload_fraction(mss, len(rec.path)), hop


def pulse_factor(t_s: float, period_s: float, amplitude: float) -> float:
    """The rate's multiple of the base at ``t_s`` into the pulses: 1 + amplitude in the
    first quarter of each period, 1 - amplitude / 3 in the rest (mean 1)."""
    phase = (t_s / period_s) % 1.0
    return 1 + amplitude if phase < 0.25 else 1 - amplitude * PULSE_DOWN_FRACTION


def dip_factor(t_s: float, period_s: float, amplitude: float) -> float:
    """The pulses where the buffer has no room for them: the same swing (4/3 of the
    amplitude), all of it below the base: 1 - 4 amplitude / 3 in the first quarter of each
    period, the base in the rest (mean 1 - amplitude / 3)."""
    phase = (t_s / period_s) % 1.0
    return 1 - amplitude * (1 + PULSE_DOWN_FRACTION) if phase < 0.25 else 1.0


def pulse_room_bytes(base_bytes_per_s: float, period_s: float, amplitude: float) -> float:
    """What a pulse up puts into the bottleneck's queue beyond the base, twice over (the
    queue the other flows' own growth fills meanwhile): the free buffer a pulse needs."""
    return 2 * amplitude * base_bytes_per_s * period_s / 4


class ProbeFlow(FlowBase):
    def __init__(self, alg, datapath, datapath_info):
        super().__init__(alg, datapath, datapath_info)
        self.clock = alg.clock
        self.cwnd_bytes = alg.init_cwnd_pkts * self.mss
        self.flow_id = None
        self.min_rtt_us: float | None = None
        self.rtt_us: float | None = None
        self.base_bytes_per_s = 0.0       # 0: no fair share known yet (slow start)
        self.share_gain = 1.0             # trim: the base's multiple, for parity with the competitors' departures
        self.flows_at_bottleneck = 1      # the bottleneck hop's flow count as last stamped
        self._shares: deque = deque()     # (clock s, bytes/s, why) of the last SHARE_HOLD_S
        self._depths: deque = deque()     # (clock s, the bottleneck's queue depth in bytes, its flows)
        self.drain_bytes_per_s = 0.0
        self.rate_bytes_per_s = 0
        self.pulses_since_s: float | None = None
        self.dips_until_s: float | None = None    # no room in the buffer for pulses up: dips until then
        self._cadence: tuple[float, float] | None = None   # (report interval s, clock s) last asked for
        # the datapath's cumulative counters as last reported (Report.grown_pkts, .reductions):
        # handed on, so the next algorithm answers only what happens after it took over
        self.grown_seen = self.reductions_seen = 0
        self.install(self.cwnd_bytes)
        self.trace.row(sid=self.sid, event="start", cwnd_bytes=self.cwnd_bytes, reason="probe: slow start until "
                       "the bottleneck's rate is known", src_port=self.ports[0], dst_port=self.ports[1])

    # -- handover ----------------------------------------------------------------------
    def export_state(self) -> FlowState:
        self._ask_reports(0.0, self.clock())      # handed over: the next algorithm's reports are the program's
        # the kernel's window reductions while the probe ran were the probe's (it does not cut):
        # counted as answered, or the next algorithm cut at its first report with nothing lost
        return FlowState(cwnd_bytes=self._pipe_bytes() or self.cwnd_bytes, ssthresh_bytes=float("inf"),
                         min_rtt_us=self.min_rtt_us, rtt_us=self.rtt_us, bw_bytes_per_s=self.paced_base_bytes_per_s(),
                         slow_start_over=bool(self._pipe_bytes()), grown_seen=self.grown_seen,
                         reductions_seen=self.reductions_seen)

    def adopt(self, state: FlowState):
        self.cwnd_bytes = max(state.cwnd_bytes, 2 * self.mss)
        self.min_rtt_us, self.rtt_us = state.min_rtt_us, state.rtt_us
        self.grown_seen, self.reductions_seen = state.grown_seen, state.reductions_seen
        self.resume([], reason="probe took the flow over")

    def paced_base_bytes_per_s(self) -> float:
        """The rate the pulses are around: the fair share, times the trim's gain beside
        competitors."""
        return self.base_bytes_per_s * (self.share_gain if self.flows_at_bottleneck > 1 else 1.0)

    def trim(self, rate_ratio: float) -> bool:
        """The competitors' mean rate over this flow's at the bottleneck (departures):
        the base moves by its square root (half the way, in logs: the ratio a change makes
        shows only a queueing delay later), within [1, MAX_SHARE_GAIN] times the fair
        share; a ratio within TRIM_DEADBAND moves nothing. Whether the gain changed."""
        if not rate_ratio or rate_ratio <= 0 or max(rate_ratio, 1 / rate_ratio) < TRIM_DEADBAND:
            return False
        gain = min(max(self.share_gain * rate_ratio ** 0.5, 1.0), MAX_SHARE_GAIN)
        changed, self.share_gain = gain != self.share_gain, gain
        return changed

    def cwnd_bytes_now(self) -> int:
        return int(self.cwnd_bytes)

    def _pipe_bytes(self) -> float:
        """The window the next algorithm starts from: the base rate over the RTT now, with
        the queue the competitors keep standing in it, which keeps the flow at its share
        where it is. (Over the min RTT, a window CCA taking over beside competitors that
        keep a deep buffer full started from a few packets in a second's RTT, and starved.)"""
        if not self.base_bytes_per_s or not self.min_rtt_us:
            return 0.0
        return self.paced_base_bytes_per_s() * max(self.rtt_us or 0, self.min_rtt_us) / 1e6

    # -- per report --------------------------------------------------------------------
    def on_report(self, raw):
        r = Report(raw)
        if r.minrtt_us is not None:
            self.min_rtt_us = r.minrtt_us if self.min_rtt_us is None else min(self.min_rtt_us, r.minrtt_us)
        self.rtt_us = r.rtt_us or self.rtt_us
        self.grown_seen = r.grown_pkts if r.grown_pkts is not None else self.grown_seen
        self.reductions_seen = r.reductions if r.reductions is not None else self.reductions_seen
        share = self._fair_share()
        if share is not None:
            now = self.clock()
            self._shares.append((now, *share[:2]))
            while self._shares[0][0] < now - SHARE_HOLD_S:
                self._shares.popleft()
            _, self.base_bytes_per_s, why = max(self._shares, key=lambda e: e[1])
            self.flows_at_bottleneck = max(share[2].flow_count, 1)
        if not self.base_bytes_per_s or not self.min_rtt_us:
            if r.loss or r.timeout:
                self.cwnd_bytes = max(self.cwnd_bytes / 2, 2 * self.mss)
                why = "probe: no port rate from INT, a loss halves the window"
            else:
                self.cwnd_bytes += r.growth_bytes(self.mss)
                why = "probe: slow start, no port rate from INT yet"
            self.set_cwnd(self.cwnd_bytes, "report", r, reason=why)
            return
        now = self.clock()
        if self.pulses_since_s is None:
            self.pulses_since_s = now
        period_s = max(self.alg.period_rtts * self.min_rtt_us / 1e6, MIN_PERIOD_S)
        self._ask_reports(round(period_s / REPORTS_PER_PERIOD, 3), now)
        if self._no_room(share, period_s):
            self.dips_until_s = now + period_s
        dips = self.dips_until_s is not None and now < self.dips_until_s
        factor = (dip_factor if dips else pulse_factor)(now - self.pulses_since_s, period_s, self.alg.amplitude)
        self.drain_bytes_per_s = self._drain(now, period_s, share)
        base = self.paced_base_bytes_per_s()
        rate = int(max(base - self.drain_bytes_per_s, base / 2) * factor)
        up_rate = base * (1 + self.alg.amplitude)
        self.cwnd_bytes = max(CWND_GAIN * up_rate * max(self.rtt_us or 0, self.min_rtt_us) / 1e6, 4 * self.mss)
        self.rate_bytes_per_s = rate
        # the rate in the window's update, as BBR's: one command per report
        self.set_cwnd(self.cwnd_bytes, "report", r, registers=[("Rate", rate)],
                      reason=f"probe: rate x{factor:.2f} of the fair share {self.base_bytes_per_s * 8e-6:.3g} Mbit/s "
                             + (f"x{base / self.base_bytes_per_s:.2f} (parity) " if base != self.base_bytes_per_s else "")
                             + f"({why if share else 'last known'}), period {period_s * 1e3:.0f} ms"
                             + (f", draining {self.drain_bytes_per_s * 8e-6:.2g} Mbit/s of a standing queue"
                                if self.drain_bytes_per_s else "")
                             + (", dips: no room in the buffer for a pulse up" if dips else ""))

    def _ask_reports(self, interval_s: float, now: float) -> None:
        """A report every ``interval_s`` from the agent's cadence (0: none), asked again when
        it changes or its lease needs renewing."""
        cadence = self.alg.cadence
        if cadence is None or (self._cadence is None and not interval_s):
            return
        if self._cadence is None or self._cadence[0] != interval_s or now - self._cadence[1] >= CADENCE_RENEW_S:
            cadence.every(self.sid, interval_s)
            self._cadence = (interval_s, now) if interval_s else None

    def _no_room(self, share, period_s: float) -> bool:
        """Whether the bottleneck's buffer, as its hop stamps it now, lacks the room a pulse
        up needs (pulse_room_bytes): competitors keep it near full, and a pulse up would only
        drop this flow's own packets (in a buffer of seconds, each loss holds the receiver's
        in-order data back an RTT: seconds of zero goodput)."""
        if share is None or not share[2].queue_capacity_bytes:
            return False
        hop = share[2]
        free_bytes = hop.queue_capacity_bytes - hop.queue_depth_bytes
        return free_bytes < pulse_room_bytes(self.paced_base_bytes_per_s(), period_s, self.alg.amplitude)

    def _drain(self, now: float, period_s: float, share) -> float:
        """Bytes per second below the base that drain the queue standing at the bottleneck
        over ``DRAIN_PERIODS`` pulse periods, when the flow is alone there (0 otherwise or
        before a period's depths are in)."""
        if share is not None:
            self._depths.append((now, share[2].queue_depth_bytes, share[2].flow_count))
        while len(self._depths) > 1 and self._depths[1][0] <= now - period_s:
            self._depths.popleft()      # one sample from the period's start is kept
        if not self._depths or self._depths[0][0] > now - 0.9 * period_s:
            return 0.0
        if any(flows > 1 for _, _, flows in self._depths):
            return 0.0
        standing_bytes = min(depth for _, depth, _ in self._depths)
        return standing_bytes / (DRAIN_PERIODS * period_s)

    def _fair_share(self):
        """(bytes/s, why, the bottleneck's hop) from the flow's fresh telemetry, or None."""
        fresh = self.fresh_telemetry()
        got = fair_share_bytes_per_s(fresh.record, self.mss) if fresh is not None else None
        if got is None:
            return None
        share, hop = got
        return share, f"node {hop.node_id}: {hop.data_rate_kbps / 1e3:g} Mbit/s over {max(hop.flow_count, 1)} flows", hop


class Probe(Algorithm):
    name = "probe"
    summary = "Identification phase: paced at the INT fair share with asymmetric rate pulses (active identification)."
    flow_class = ProbeFlow
    params = (Param("amplitude", float, 0.25, "the pulses' height over the fair share (the dip is a third of it)",
                    min=0, max=0.9),
              Param("period_rtts", float, 8.0, "the pulses' period, in the flow's min RTTs (at least 0.2 s)", min=2),
              Param("max_age_ms", float, 200.0, "older telemetry is ignored (the rate then stays)", min=0),
              INIT_CWND)
    needs_telemetry = True
    needs_cadence = True
    loss_beta_1024 = 1024       # the fair share is no probe for more: a loss is not cut

    def __init__(self, amplitude: float = 0.25, period_rtts: float = 8.0, max_age_ms: float = 200.0,
                 telemetry=None, directory=None, init_cwnd_pkts: int = 10, trace: str | None = None, clock=None,
                 cadence=None, **kwargs):
        import time
        by_name = {p.name: p for p in self.params}
        by_name["amplitude"].check(amplitude)
        by_name["period_rtts"].check(period_rtts)
        super().__init__(init_cwnd_pkts=init_cwnd_pkts, trace=trace, **kwargs)
        self.amplitude, self.period_rtts, self.max_age_ms = amplitude, period_rtts, max_age_ms
        self.telemetry = telemetry      # .flow(flow_id, max_age_s) -> Fresh | None
        self.directory = directory      # .flow_id(datapath_info) -> str | None
        self.clock = clock or time.monotonic
        self.cadence = cadence          # .every(sid, interval_s): reports at the pulses' pace (None: the program's)
