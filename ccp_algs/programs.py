"""The datapath programs intcc algorithms install (portus's Lisp-like language): what
each ACK folds into a report, and when the report goes to the agent. Why each fold is
there, with the measurements that showed it, is in docs/datapath.md ("Agents")."""
from __future__ import annotations

from .contract import register_declarations

# Report at once on a loss, a timeout or an undo. Acked bytes and losses accumulate
# between reports.
REPORT_ON_EVENTS = """\
(when (|| (|| Report.timeout (> Report.loss 0)) (> Report.undo 0))
    (report)
    (:= Micros 0)
)
"""

# ... and once per round, but at most every millisecond (on a bare veth the RTT is ~20 us
# and per-round reports would swamp the agent): when a window's worth has been acked since
# the last report, or else after an RTT. A small window's ACKs arrive a hair less than an
# RTT after the last report: waiting for the RTT deferred the report, and the window's
# growth, by a whole RTT.
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
# (tcp_may_raise_cwnd).
FOLD_DELIVERED = """\
(when (> Ack.bytes_acked 0)
    (:= Report.delivered (+ Report.delivered Ack.packets_acked))
    (fallthrough)
)
"""

# Slow start per ACK in the program, as the kernel's tcp_slow_start, where the program
# runs beside the kernel's TCP (ccp-kernel): Cwnd grows by a segment (seg_bytes) per
# packet delivered while below ss_until (bytes; 0: off), which the agent sets with every
# window. A loss, a timeout or an undo stops it until the agent has decided. The intcc
# datapath grows the window in the kernel from the same registers instead and leaves this
# fold out (DatapathCapabilities.growth).
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

REGISTER_MAX = 2 ** 31 - 1           # portus's immediates and register updates are 31-bit
SS_UNTIL_MAX_BYTES = REGISTER_MAX    # "no ssthresh yet"
#: the Rate that leaves a flow unpaced (bytes/s: 17 Gbit/s, no gap between segments): an
#: algorithm that does not pace takes a flow over from one that did (the probe, BBR).
#: Not 0: libccp hands the datapath a Rate only when it is not 0 (ccp.c, machine.c), so the
#: last rate set stayed in force, and a flow switched from the probe to CUBIC or Reno was
#: held at the probe's last fair share for the rest of its run
UNPACED_RATE = REGISTER_MAX
NO_RTT_SAMPLE = 2147483647           # minrtt's start value (portus immediates are at most 31 bits)

# The report every window algorithm shares (bw_max: the largest delivery-rate sample,
# bytes/s, of the kernel's per-ACK rate samples; BBR's bandwidth filter takes it, and
# so does the adaptive host's, across algorithms; portus allows 16 report fields, so the
# latest rate sample is not one; extra_acked: the largest ACK aggregation the intcc
# datapath measured in the report, contract.SIGNALS; delivered_all: packets delivered,
# SACKed ones included, on every ACK, which BBR's window and rounds count). undo, grown and reductions are the intcc
# datapath's signals in libccp fields (contract.SIGNALS); the control registers are the
# contract's, declared first and in its order (the daemon reads them by position).
_REPORT_DEF = """\
(def (Report
    (volatile acked 0)
    (volatile sacked 0)
    (volatile loss 0)
    (volatile timeout false)
    (volatile rtt 0)
    (volatile minrtt 2147483647)
    (volatile inflight 0)
    (volatile extra_acked 0)
    (volatile undo 0)
    (volatile rto_acked 0)
    (volatile delivered 0)
    (volatile rto_delivered 0)
    (volatile grown 0)
    (volatile reductions 0)
    (volatile bw_max 0)
    (volatile delivered_all 0)
) """ + register_declarations() + """)
""" + FOLD_RTO_ACKED + """\
(when true
    (:= Report.inflight Flow.packets_in_flight)
    (:= Report.rtt Flow.rtt_sample_us)
    (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
    (:= Report.extra_acked (max Report.extra_acked Flow.rate_outgoing))
    (:= Report.bw_max (max Report.bw_max Flow.rate_incoming))
    (:= Report.delivered_all (+ Report.delivered_all Ack.packets_acked))
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
