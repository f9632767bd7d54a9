/* SPDX-License-Identifier: GPL-2.0 */
/* intcc CCP datapath, kernel side: the window arithmetic the kernel's own CCAs do, for a
 * flow the agent controls or one without an agent: Reno's fallback, slow start as the
 * kernel's while an RTO is unanswered, per-ACK growth from the agent's registers (its
 * families' parts in families/), PRR towards a cut, the pacing rate. */
#pragma once

#include "intcc_ccp_state.h"
#include "intcc_ccp_families.h"   /* generated: each family's kernel half, families/ */

/* The kernel grows cwnd only on ACKs that ack new data (tcp_may_raise_cwnd; its
 * high-reordering case aside): an ACK that only SACKs, as in Disorder, grows nothing. */
static __always_inline void grow_as_kernel(struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	if (flag & FLAG_DATA_ACKED)
		tcp_reno_cong_avoid(sk, ack, rs->acked_sacked);
}

/* The kernel's response to an RTO until the agent answers: slow start from one segment
 * up to the kernel's ssthresh, and no further. Past ssthresh the next growth is the CCA's
 * congestion avoidance, the agent's to decide: tcp_reno_cong_avoid's (a segment per
 * window acked) took a 2-segment window to 3 on the ACK that ended an RTO, where kernel
 * cubic's fresh epoch after an RTO (cnt 20, W_est a segment per 3 acked) kept 2: ccp cubic
 * left RTOs above the kernel's ssthresh 2.7x as often as kernel cubic at 20 % link loss. */
static __always_inline void slow_start_as_kernel(struct sock *sk, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (!(flag & FLAG_DATA_ACKED) || rs->acked_sacked <= 0 || tp->snd_cwnd >= tp->snd_ssthresh)
		return;
	/* tcp_is_cwnd_limited, in slow start */
	if (!BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited) && tp->snd_cwnd >= 2 * tp->max_packets_out)
		return;
	tcp_slow_start(tp, rs->acked_sacked);
}

static __always_inline void fallback(struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u8 state = ((struct inet_connection_sock *)sk)->icsk_ca_state;

	/* cong_control replaces the kernel's own cwnd handling (PRR included):
	 * hold cwnd at ssthresh while recovering, Reno otherwise. */
	if (state == TCP_CA_Recovery || state == TCP_CA_CWR) {
		if (tp->snd_ssthresh < tp->snd_cwnd)
			tp->snd_cwnd = tp->snd_ssthresh > 2 ? tp->snd_ssthresh : 2;
		return;
	}
	grow_as_kernel(sk, ack, flag, rs);
}

/* What tcp_update_pacing_rate() does after cong_avoid, which the kernel skips
 * when cong_control is set: without it sk_pacing_rate freezes at its first
 * value and TSO autosizing (which sizes bursts from it) starves fast flows.
 * 200% of cwnd/srtt in slow start, 120% after (net.ipv4.tcp_pacing_*_ratio). */
static __always_inline void update_pacing_rate(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 pkts = tp->snd_cwnd > tp->packets_out ? tp->snd_cwnd : tp->packets_out;
	__u64 rate = (__u64)tp->mss_cache * ((1000000 / 100) << 3);

	rate *= tp->snd_cwnd < tp->snd_ssthresh / 2 ? 200 : 120;
	rate *= pkts;
	if (tp->srtt_us)
		rate /= tp->srtt_us;
	sk->sk_pacing_rate = rate < sk->sk_max_pacing_rate ? rate : sk->sk_max_pacing_rate;
}

/* Segments the per-ACK growth added after the agent's command was decided. */
static __always_inline __u32 grown_since(struct ccp_priv *p, struct intcc_ccp_ctl *ctl)
{
	__u32 d = p->grown_pkts - ctl->grown_base;

	return (__s32)d > 0 ? d : 0;
}

/* Window growth on the ACK that earns it, as the kernel's, with the agent's parameters
 * (intcc_ccp_ctl; the agent decides once per round), each family's part in its own file
 * (families/, included in the order ccp_algs/contract.py FAMILIES lists them): slow start
 * up to the agent's bound (slow_start.h), then congestion avoidance (additive.h, or else
 * cubic.h). Only on ACKs
 * that ack new data (tcp_may_raise_cwnd), not in a recovery (PRR runs there), unless the
 * algorithm owns its recoveries (bbr.h).
 * Growth decided in the agent reached the kernel an ACK later: the segment it released
 * went out with the next ACK, at 2-3 segment windows often an RTT later (ccp cubic 7 %
 * below kernel cubic at 10 % link loss, with more RTOs). */
static __always_inline void grow_per_ack(struct sock *sk, struct intcc_ccp_ctl *ctl, int flag,
					 const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	__u8 state = ((struct inet_connection_sock *)sk)->icsk_ca_state;
	__u32 mss = tp->mss_cache ? tp->mss_cache : 1;
	__u32 before = tp->snd_cwnd, cwnd = before;
	__u32 until = slow_start_until(ctl, mss);
	/* HyStart sees every ACK of a slow start, as tcp_cubic's pkts_acked hook */
	int hystart_pause = cwnd < until && hystart_delay_exit(sk, ctl, rs, cwnd);
	__u32 acked;

	/* tcp_bbr (own_recovery) grows on every ACK that delivers, SACKs included, recoveries
	 * included; the others as the kernel's slow start: ACKs that advance snd_una, never
	 * in a recovery (PRR's) */
	if (rs->acked_sacked <= 0)
		return;
	if (!bbr_owns_recovery(ctl) && (!(flag & FLAG_DATA_ACKED) || state == TCP_CA_Recovery || state == TCP_CA_CWR))
		return;
	acked = rs->acked_sacked;
	/* tcp_is_cwnd_limited, with the agent's slow start: the kernel grows only a window
	 * the flow has been using. */
	if (!BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited) && !(cwnd < until && cwnd < 2 * tp->max_packets_out))
		return;
	if (hystart_pause)
		until = cwnd;
	if (cwnd < until) {
		__u32 n = until - cwnd < acked ? until - cwnd : acked;

		cwnd += n;
		acked -= n;
	}
	if (acked && additive_grows(ctl))
		cwnd = additive_grow(sk, ctl, cwnd, acked);
	else if (acked && cubic_grows(ctl))
		cwnd = cubic_grow(sk, ctl, cwnd, acked, mss);
	if (cwnd > before) {
		tp->snd_cwnd = cwnd;
		p->grown_pkts += cwnd - before;
	}
}

/* Proportional Rate Reduction (RFC 6937, as the kernel's tcp_cwnd_reduction,
 * which it skips when cong_control is set): while recovering, the window the
 * agent cut to is reached gradually, one segment sent per (ssthresh/prior_cwnd)
 * delivered, and in-flight data below it is rebuilt at most as fast as data is
 * delivered, plus one segment on an ACK that advances snd_una without a new loss
 * (Linux since 5.15). Without it, the whole cut applies at once and a recovery sends
 * a different pattern than kernel CUBIC's (ccp cubic then saw fewer RTOs and
 * +34 % goodput at 5 % link loss). */
static __always_inline __u32 prr_window(struct sock *sk, int flag, const struct rate_sample *rs, __u32 ssthresh)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	__u32 in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
	__s64 sndcnt;
	int newly = rs->acked_sacked;

	if (p->prr_high_seq != tp->high_seq) {   /* a new recovery: tcp_init_cwnd_reduction ran */
		p->prr_high_seq = tp->high_seq;
		p->prr_delivered = 0;
	}
	if (newly <= 0 || !tp->prior_cwnd)
		return tp->snd_cwnd;
	p->prr_delivered += newly;
	if (in_flight > ssthresh) {
		sndcnt = ((__u64)ssthresh * p->prr_delivered + tp->prior_cwnd - 1) / tp->prior_cwnd;
		sndcnt -= tp->prr_out;
	} else {
		sndcnt = (__s64)p->prr_delivered - tp->prr_out;
		if (sndcnt < newly)
			sndcnt = newly;
		if ((flag & FLAG_SND_UNA_ADVANCED) && rs->losses <= 0)
			sndcnt++;          /* progress and no new loss: grow back towards ssthresh */
		if (sndcnt > ssthresh - in_flight)
			sndcnt = ssthresh - in_flight;
	}
	if (sndcnt < (tp->prr_out ? 0 : 1))      /* the fast retransmit always goes out */
		sndcnt = tp->prr_out ? 0 : 1;
	return in_flight + (__u32)sndcnt;
}

