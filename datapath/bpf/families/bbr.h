/* SPDX-License-Identifier: GPL-2.0 */
/* The bbr family's kernel half (ccp_algs/contract.py FAMILIES): tcp_bbr's window around
 * losses per ACK (register own_recovery) and its ACK-aggregation sample against the agent's
 * bandwidth estimate (register bw). Reads only its own registers' fields. */
#pragma once

#include "intcc_ccp_state.h"

/* Whether the algorithm keeps its own window around losses (tcp_bbr's): then no PRR, and
 * the per-ACK growth goes on in recoveries. */
static __always_inline int bbr_owns_recovery(struct intcc_ccp_ctl *ctl)
{
	return ctl && ctl->own_recovery;
}

/* tcp_bbr's bbr_update_ack_aggregation, against the agent's bandwidth estimate: packets
 * delivered since the ACK epoch began beyond what bw would have delivered, at most a
 * window; the epoch restarts whenever ACKs fall behind bw. The agent keeps the max over
 * rounds (it knows them) and adds it to BBR's window target. */
#define ACK_EPOCH_ACKED_RESET 0x100000
static __always_inline __u32 ack_aggregation(struct tcp_sock *tp, struct ccp_priv *p,
					      const struct rate_sample *rs, __u32 bw_bytes_per_s, __u32 mss)
{
	__u32 now_us = (__u32)tp->delivered_mstamp;
	__u32 expected, extra;

	if (!bw_bytes_per_s || !mss || rs->acked_sacked <= 0 || rs->delivered < 0 || rs->interval_us <= 0)
		return 0;
	expected = (__u32)((__u64)bw_bytes_per_s * (__u32)(now_us - p->ack_epoch_us) / 1000000 / mss);
	if (p->ack_epoch_acked <= expected || p->ack_epoch_acked + rs->acked_sacked >= ACK_EPOCH_ACKED_RESET) {
		p->ack_epoch_acked = 0;
		p->ack_epoch_us = now_us;
		expected = 0;
	}
	p->ack_epoch_acked += rs->acked_sacked;
	extra = p->ack_epoch_acked - expected;
	return extra < tp->snd_cwnd ? extra : tp->snd_cwnd;
}

/* tcp_bbr's window around losses (bbr_set_cwnd_to_recover_or_restore), for an algorithm
 * that asks for it (register own_recovery): every packet marked lost since the report the
 * agent decided on comes off the window at once (cwnd -= rs->losses on each ACK), and in
 * the first round of a recovery the window is at least what is in flight plus what this
 * ACK delivered (packet conservation); no PRR; at least 4 packets (bbr_cwnd_min_target).
 * The recovery's round ends when a packet sent after it began is delivered: its start is
 * kept in the PRR fields, which PRR does not use for such a flow. */
static __always_inline __u32 bbr_recovery_window(struct sock *sk, struct intcc_ccp_ctl *ctl,
						 const struct rate_sample *rs, __u32 pkts)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	__u8 state = ((struct inet_connection_sock *)sk)->icsk_ca_state;
	__u32 lost = tp->lost - ctl->lost_base;

	if ((__s32)lost > 0)
		pkts = pkts > lost ? pkts - lost : 1;
	if (state == TCP_CA_Recovery) {
		if (p->prr_high_seq != tp->high_seq) {     /* a new recovery: its round starts */
			p->prr_high_seq = tp->high_seq;
			p->prr_delivered = tp->delivered;
		}
		if ((__s32)(rs->prior_delivered - p->prr_delivered) < 0) {
			__u32 in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
			__u32 conserve = in_flight + (rs->acked_sacked > 0 ? rs->acked_sacked : 0);

			if (pkts < conserve)
				pkts = conserve;
		}
	}
	return pkts > 4 ? pkts : 4;
}

/* This ACK's aggregation sample against the agent's bandwidth (0 without one). */
static __always_inline __u32 bbr_extra_acked(struct tcp_sock *tp, struct ccp_priv *p, const struct rate_sample *rs,
					     struct intcc_ccp_ctl *ctl)
{
	return ack_aggregation(tp, p, rs, ctl ? ctl->bw_bytes_per_s : 0, tp->mss_cache);
}
