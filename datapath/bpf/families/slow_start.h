/* SPDX-License-Identifier: GPL-2.0 */
/* The slow_start family's kernel half (ccp_algs/contract.py FAMILIES): slow start per ACK
 * up to the agent's bound (register ss_until), paused for the rest of a round by tcp_cubic's
 * HyStart delay detection (register ss_exit_rtt). Reads only its own registers' fields. */
#pragma once

#include "intcc_ccp_state.h"

#define HYSTART_LOW_WINDOW_PKTS 16    /* tcp_cubic's hystart_low_window */
#define HYSTART_MIN_SAMPLES 8

/* tcp_cubic's HyStart delay detection on this ACK (hystart_update), with the agent's
 * threshold (ss_exit_rtt_us: the smallest RTT ever plus clamp(min/8, 4, 16 ms)): true when
 * the round's smallest RTT, over more than 8 samples, is above it. Slow start then pauses
 * until the round ends; the agent, deciding once per round, ends it at its next report.
 * Decided only in the agent, the exit came a round late: the window had doubled past the
 * point the kernel stops at (ccp cubic at 4 BDP where kernel cubic left slow start at ~2).
 * Rounds are counted from the flow's first ACK in slow start, as tcp_cubic's from its init,
 * whatever the window: a round is then a flight, whose first ACKs see the queue its last
 * ones built. Counted from the first ACK at 16 segments (mid-flight), a round's first 8
 * samples were a flight's tail, and beside a kernel CUBIC flow ccp cubic stopped at 107
 * segments a round before its competitor stopped at 168. */
static __always_inline int hystart_delay_exit(struct sock *sk, struct intcc_ccp_ctl *ctl,
					      const struct rate_sample *rs, __u32 cwnd)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct intcc_ccp_cubic *hs;
	__u32 rtt_us;

	hs = bpf_sk_storage_get(&intcc_ccp_cubic, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!hs)
		return 0;
	/* a new round; or the first (fresh storage is zeroed, and an end_seq of 0 is "after"
	 * snd_una for half the initial sequence numbers) */
	if (!hs->curr_rtt_us || (__s32)(tp->snd_una - hs->end_seq) > 0) {
		hs->end_seq = tp->snd_nxt;
		hs->curr_rtt_us = ~0U;
		hs->samples = 0;
	}
	if (cwnd < HYSTART_LOW_WINDOW_PKTS || rs->rtt_us <= 0)
		return 0;
	rtt_us = rs->rtt_us;
	if (rtt_us < hs->curr_rtt_us)
		hs->curr_rtt_us = rtt_us;
	if (hs->samples < HYSTART_MIN_SAMPLES) {
		hs->samples++;
		return 0;
	}
	return ctl->ss_exit_rtt_us && hs->curr_rtt_us > ctl->ss_exit_rtt_us;
}

/* The agent's bound on the per-ACK slow start (segments); HyStart may pause short of it. */
static __always_inline __u32 slow_start_until(struct intcc_ccp_ctl *ctl, __u32 mss)
{
	return ctl->ss_until_bytes / mss;
}
