/* SPDX-License-Identifier: GPL-2.0 */
/* The cubic family's kernel half (ccp_algs/contract.py FAMILIES): tcp_cubic's congestion
 * avoidance per ACK, towards the cubic curve computed here (registers ca_ahead, ca_w_max,
 * ca_epoch) or the agent's fixed target (ca_target), with the Reno-friendly W_est
 * (reno_scale) and a bound on the ACKs per segment (ca_cnt_max). Reads only its own
 * registers' fields. */
#pragma once

#include "intcc_ccp_state.h"

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

/* Whether the agent asked for congestion avoidance per ACK. */
static __always_inline int cubic_grows(struct intcc_ccp_ctl *ctl)
{
	return ctl->ca_target_bytes || ctl->ca_ahead_us;
}

/* tcp_cubic's bictcp_cong_avoid on an ACK of ``acked`` packets past slow start: the ACKs per
 * segment of growth (cnt) towards the target, recomputed when the window moved or every
 * HZ/32, bounded by ca_cnt_max and by the Reno-friendly W_est; then tcp_cong_avoid_ai's
 * credit in snd_cwnd_cnt. Returns the window after it. */
static __always_inline __u32 cubic_grow(struct sock *sk, struct intcc_ccp_ctl *ctl, __u32 cwnd, __u32 acked,
					__u32 mss)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	__u64 now = bpf_ktime_get_ns();
	__u32 target;

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
	return tp->snd_cwnd;
}
