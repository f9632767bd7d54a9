/* SPDX-License-Identifier: GPL-2.0 */
/* intcc CCP datapath, kernel side: the window arithmetic the kernel's own CCAs do, for a
 * flow the agent controls or one without an agent: Reno's fallback, slow start as the
 * kernel's while an RTO is unanswered, per-ACK growth from the agent's registers (slow
 * start, tcp_cubic's congestion avoidance), PRR towards a cut, the pacing rate. */
#pragma once

#include "intcc_ccp_state.h"

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

#define CUBE_RTT_SCALE 410                          /* tcp_cubic's bic_scale * 10: C = 0.4 */
#define CUBE_FACTOR ((1ULL << 40) / CUBE_RTT_SCALE)  /* K = cbrt(cube_factor * (W_max - cwnd)), 1/1024 s */
#define CURVE_MAX_OFFS_1024 (1U << 18)               /* |t - K| at most 256 s: offs^3 * 410 fits 64 bits */

/* The largest x with x^3 <= a (a < 2^63): tcp_cubic's cubic_root, exactly. A binary
 * search without branches (the bound moves by arithmetic on the comparison's sign) in a
 * global function, verified once on its own: with branches the verifier walked every
 * path of the search through cong_control and gave up at a million instructions. */
__attribute__((noinline)) __u32 intcc_cube_root(__u64 a)
{
	__u64 lo = 0, hi = 1U << 21, mid, fits;
	int i;

	for (i = 0; i < 22; i++) {
		mid = (lo + hi + 1) / 2;
		/* 1 if mid^3 <= a: both below 2^63, so the difference's sign tells */
		fits = 1 - ((a - mid * mid * mid) >> 63);
		lo += fits * (mid - lo);
		hi = mid - 1 + fits * (hi - mid + 1);
	}
	return lo;
}

/* The cubic curve's target (segments) on this ACK, as tcp_cubic's bictcp_update: the
 * epoch begins on its first congestion-avoidance ACK (after a cut's recovery, an undo, an
 * RTO's slow start, the agent's new ca_epoch), with K and the origin from the window there
 * and W_max; the target is the curve delay_min ahead. Fixed by the agent once per report,
 * the target stood still for an RTT: beside a kernel CUBIC in a deep buffer (RTT 6 s) ccp
 * cubic's epoch after a recovery began a whole RTT late and its window stayed 0.6 of its
 * competitor's. */
static __always_inline __u32 curve_target(struct intcc_ccp_cubic *cs, struct intcc_ccp_ctl *ctl,
					  __u32 cwnd, __u32 mss, __u64 now)
{
	__u64 t, offs, delta;
	__u32 w_max = ctl->ca_w_max_bytes / mss;

	if (cs->curve_epoch != ctl->ca_epoch || !cs->epoch_start_ns) {
		cs->curve_epoch = ctl->ca_epoch;
		cs->epoch_start_ns = now;
		if (w_max <= cwnd) {
			cs->k_1024 = 0;
			cs->origin_pkts = cwnd;
		} else {
			cs->k_1024 = intcc_cube_root(CUBE_FACTOR * (w_max - cwnd));
			cs->origin_pkts = w_max;
		}
	}
	t = ((now - cs->epoch_start_ns) + (__u64)ctl->ca_ahead_us * 1000) * 1024 / 1000000000ULL;
	offs = t < cs->k_1024 ? cs->k_1024 - t : t - cs->k_1024;
	if (offs > CURVE_MAX_OFFS_1024)
		offs = CURVE_MAX_OFFS_1024;
	delta = (CUBE_RTT_SCALE * offs * offs * offs) >> 40;
	if (t >= cs->k_1024)
		return cs->origin_pkts + delta;
	return delta < cs->origin_pkts ? cs->origin_pkts - delta : 0;
}

/* Window growth on the ACK that earns it, as the kernel's, with the agent's parameters
 * (intcc_ccp_ctl; the agent decides once per round): slow start up to ss_until
 * (tcp_slow_start), then congestion avoidance as tcp_cubic's bictcp_cong_avoid towards
 * the cubic curve (curve_target, from the agent's W_max) or else the agent's fixed
 * target, with the Reno-friendly W_est counted here per ACK, and tcp_cong_avoid_ai's
 * credit in snd_cwnd_cnt. Only on ACKs
 * that ack new data (tcp_may_raise_cwnd), not in a recovery (PRR runs there).
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
	__u32 before = tp->snd_cwnd, cwnd = before, until, target;
	__u32 acked;
	__u64 now;
	int hystart_pause;

	/* HyStart sees every ACK of a slow start, as tcp_cubic's pkts_acked hook */
	until = ctl->ss_until_bytes / mss;
	hystart_pause = cwnd < until && hystart_delay_exit(sk, ctl, rs, cwnd);
	/* tcp_bbr (own_recovery) grows on every ACK that delivers, SACKs included, recoveries
	 * included; the others as the kernel's slow start: ACKs that advance snd_una, never
	 * in a recovery (PRR's) */
	if (rs->acked_sacked <= 0)
		return;
	if (!ctl->own_recovery && (!(flag & FLAG_DATA_ACKED) || state == TCP_CA_Recovery || state == TCP_CA_CWR))
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
	if (acked && (ctl->ca_target_bytes || ctl->ca_ahead_us)) {
		now = bpf_ktime_get_ns();
		if (p->ca_epoch != ctl->ca_epoch) {    /* a new epoch: W_est starts at the window */
			p->ca_epoch = ctl->ca_epoch;
			p->est_pkts = cwnd;
			p->est_acked = 0;
			p->last_cwnd = 0;
		}
		p->est_acked += acked;
		if (p->last_cwnd != cwnd || now - p->last_time_ns > CUBIC_RECALC_NS) {
			__u32 cnt;

			target = ctl->ca_target_bytes / mss;
			if (ctl->ca_ahead_us) {
				struct intcc_ccp_cubic *cs;

				cs = bpf_sk_storage_get(&intcc_ccp_cubic, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
				if (cs)
					target = curve_target(cs, ctl, cwnd, mss, now);
			}
			cnt = target > cwnd ? cwnd / (target - cwnd) : 100 * cwnd;

			p->last_cwnd = cwnd;
			p->last_time_ns = now;
			if (ctl->ca_cnt_max && cnt > ctl->ca_cnt_max)
				cnt = ctl->ca_cnt_max;
			if (ctl->reno_scale) {
				__u32 delta = (cwnd * ctl->reno_scale) >> 3;

				if (delta < 1)
					delta = 1;
				if (p->est_acked > delta) {   /* while (ack_cnt > delta) ... */
					__u32 k = (p->est_acked - 1) / delta;

					p->est_acked -= k * delta;
					p->est_pkts += k;
				}
				if (p->est_pkts > cwnd && cnt > cwnd / (p->est_pkts - cwnd))
					cnt = cwnd / (p->est_pkts - cwnd);
			}
			p->ca_cnt = cnt > 2 ? cnt : 2;
		}
		tp->snd_cwnd = cwnd;
		tcp_cong_avoid_ai(tp, p->ca_cnt, acked);   /* set above: last_cwnd 0 forces it first */
		cwnd = tp->snd_cwnd;
	}
	if (cwnd > before) {
		tp->snd_cwnd = cwnd;
		p->grown_pkts += cwnd - before;
	}
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

