/* SPDX-License-Identifier: GPL-2.0 */
/* intcc CCP datapath, kernel side: the shared datapath program
 * (ccp_algs/programs.py REPORT_PER_RTT_AND_ON_LOSS) folded per ACK in the kernel, as libccp
 * would run it on the ACK's primitives, so only its reports cross to the daemon. The
 * daemon turns this fold on for a flow (intcc_ccp_ctl.fold_gen) when the agent installed
 * that program, recognised by its compiled form (contract.NATIVE_FOLD_FINGERPRINT); any
 * other program runs in libccp on an event per ACK. A change to the program's text
 * changes the fingerprint: the kernel stops folding until this file follows it. */
#pragma once

#include "intcc_ccp_state.h"

/* libccp's primitives of one ACK, as the daemon hands them to libccp (agent.rs, invoke). */
struct ccp_ack {
	__u32 bytes_acked;
	__u32 packets_acked;          /* rs->acked_sacked */
	__u32 packets_misordered;     /* tp->sacked_out */
	__u32 lost_pkts;              /* marked lost since the last sample */
	__u32 was_timeout;
	__u32 rtt_us;
	__u32 packets_in_flight;
	__u32 undo_cwnd_bytes;        /* Ack.ecn_bytes on this datapath */
	__u32 extra_acked_pkts;       /* Flow.rate_outgoing on this datapath */
	__u64 rate_incoming_bps;
};

/* The program's Report registers, in declaration order. */
enum {
	R_ACKED, R_SACKED, R_LOSS, R_TIMEOUT, R_RTT, R_MINRTT, R_INFLIGHT, R_EXTRA_ACKED, R_UNDO,
	R_RTO_ACKED, R_DELIVERED, R_RTO_DELIVERED, R_GROWN, R_REDUCTIONS, R_BW_MAX, R_DELIVERED_ALL,
	R_COUNT
};
_Static_assert(R_COUNT == sizeof(((struct intcc_ccp_event *)0)->report_fields) / sizeof(__u64),
	       "the event carries every Report register");

#define NO_RTT_SAMPLE 2147483647ULL   /* Report.minrtt's start value */
#define REPORT_MIN_INTERVAL_US 1000   /* (> Micros 1000) */

struct intcc_ccp_fold {
	__u32 gen;               /* the intcc_ccp_ctl fold_gen this fold belongs to */
	__u32 due;               /* a report the full ring refused: sent on the next ACK */
	__u32 report_req;        /* the intcc_ccp_ctl report_req last answered */
	__u64 t0_ns;             /* libccp's Micros counts from here (the last report) */
	__u64 r[R_COUNT];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct intcc_ccp_fold);
} intcc_ccp_fold SEC(".maps");

/* The program's volatile registers back to their (def) values, and Micros to 0. */
static __always_inline void fold_reset(struct intcc_ccp_fold *f, __u64 now)
{
	int i;

	for (i = 0; i < R_COUNT; i++)
		f->r[i] = 0;
	f->r[R_MINRTT] = NO_RTT_SAMPLE;
	f->t0_ns = now;
	f->due = 0;
}

/* One ACK through the program's fold (the order of its statements); true when one of its
 * report conditions holds: a timeout, a loss or an undo since the last report; or, at
 * least 1 ms after it, an RTT since it or a window's worth acked. grown and reductions
 * are the kernel's counters (the daemon makes grown relative to the flow's announcement);
 * cwnd_bytes is the Cwnd register, the window the agent's command puts in force. */
static __always_inline int fold_ack(struct intcc_ccp_fold *f, const struct ccp_ack *s,
				    __u32 grown, __u32 reductions, __u32 cwnd_bytes, __u64 now)
{
	__u64 *r = f->r;
	__u64 micros;

	if (s->was_timeout) {                          /* FOLD_RTO_ACKED */
		r[R_RTO_ACKED] = s->bytes_acked;
		if (s->bytes_acked > 0)
			r[R_RTO_DELIVERED] = s->packets_acked;
	}
	r[R_INFLIGHT] = s->packets_in_flight;
	r[R_RTT] = s->rtt_us;
	if (s->rtt_us < r[R_MINRTT])
		r[R_MINRTT] = s->rtt_us;
	if (s->extra_acked_pkts > r[R_EXTRA_ACKED])
		r[R_EXTRA_ACKED] = s->extra_acked_pkts;
	if (s->rate_incoming_bps > r[R_BW_MAX])
		r[R_BW_MAX] = s->rate_incoming_bps;
	r[R_DELIVERED_ALL] += s->packets_acked;
	r[R_ACKED] += s->bytes_acked;
	r[R_SACKED] = s->packets_misordered;
	r[R_LOSS] += s->lost_pkts;
	/* the latest ACK's, but a timeout whose report the ring refused stays told */
	r[R_TIMEOUT] = s->was_timeout || (f->due && r[R_TIMEOUT]);
	if (s->undo_cwnd_bytes > r[R_UNDO])
		r[R_UNDO] = s->undo_cwnd_bytes;
	r[R_GROWN] = grown;
	r[R_REDUCTIONS] = reductions;
	if (s->bytes_acked > 0)                        /* FOLD_DELIVERED */
		r[R_DELIVERED] += s->packets_acked;

	if (f->due || r[R_TIMEOUT] || r[R_LOSS] > 0 || r[R_UNDO] > 0)   /* REPORT_ON_EVENTS */
		return 1;
	micros = (now - f->t0_ns) / 1000;              /* REPORT_PER_ROUND_TRIGGERS */
	return micros > REPORT_MIN_INTERVAL_US && (micros > s->rtt_us || r[R_ACKED] + 1 > cwnd_bytes);
}
