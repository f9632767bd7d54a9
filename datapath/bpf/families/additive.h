/* SPDX-License-Identifier: GPL-2.0 */
/* The additive family's kernel half (ccp_algs/contract.py FAMILIES): congestion avoidance
 * per ACK as the kernel's Reno (tcp_reno_cong_avoid: tcp_cong_avoid_ai), with the agent's
 * number of segments per window delivered (register ai_pkts). Reads only its own
 * registers' fields. The example of docs/algorithms.md ("Adding an algorithm") uses it. */
#pragma once

#include "intcc_ccp_state.h"

/* Whether the agent asked for additive increase per ACK. */
static __always_inline int additive_grows(struct intcc_ccp_ctl *ctl)
{
	return ctl->ai_pkts != 0;
}

/* ai_pkts segments per window of packets delivered, the credit kept in snd_cwnd_cnt as
 * the kernel's: one segment per cwnd / ai_pkts packets. Returns the window after it. */
static __always_inline __u32 additive_grow(struct sock *sk, struct intcc_ccp_ctl *ctl, __u32 cwnd, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 per = cwnd / ctl->ai_pkts;

	tp->snd_cwnd = cwnd;
	tcp_cong_avoid_ai(tp, per > 1 ? per : 1, acked);
	return tp->snd_cwnd;
}
