/* SPDX-License-Identifier: GPL-2.0 */
/* intcc CCP datapath, kernel side: what goes to the daemon through the ring buffer. A
 * flow's announcement, each ACK's sample (an event per ACK, or folded here into the
 * program's reports), and when the daemon is woken for them. */
#pragma once

#include "intcc_ccp_state.h"
#include "intcc_ccp_window.h"
#include "intcc_ccp_fold.h"

/* A zeroed event with its header filled, or NULL (counted) when the ring is full. */
static __always_inline struct intcc_ccp_event *new_event(__u32 kind, __u32 sid, __u64 now)
{
	struct intcc_ccp_event *e = bpf_ringbuf_reserve(&intcc_ccp_ev, sizeof(*e), 0);
	struct intcc_ccp_stats *st;

	if (!e) {
		st = stats();
		if (st)
			count(&st->events_lost);
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->sid = sid;
	e->ts_ns = now;
	return e;
}

/* Submit an event that should reach the daemon now. After an event left without a
 * wake-up the wake-up is forced: the ring's own test wakes only a consumer that has
 * caught up, and one with an event waiting has not. */
static __always_inline void submit_now(struct intcc_ccp_event *e, __u64 now)
{
	__u64 flags = 0;

	if (left_unwoken) {
		left_unwoken = 0;
		flags = BPF_RB_FORCE_WAKEUP;
	}
	last_wakeup_ns = now;
	bpf_ringbuf_submit(e, flags);
}

/* Submit an event that can wait for the daemon's next wake-up (at the latest its
 * heartbeat tick, 20 ms). */
static __always_inline void submit_later(struct intcc_ccp_event *e)
{
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	left_unwoken = 1;
}

/* Tell the agent about this flow, once per agent epoch. */
static __always_inline void announce(struct sock *sk, struct intcc_ccp_cfg *c, __u64 now)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	struct intcc_ccp_stats *st;
	struct intcc_ccp_event *e;

	e = new_event(EV_CREATE, p->sid, now);
	if (!e)
		return;   /* retried on the next ACK */
	e->mss = tp->mss_cache;
	e->init_cwnd_bytes = tp->snd_cwnd * tp->mss_cache;
	e->grown_pkts = p->grown_pkts;
	e->family = sk->__sk_common.skc_family;
	e->src_port = sk->__sk_common.skc_num;
	e->dst_port = bpf_ntohs(sk->__sk_common.skc_dport);
	if (e->family == AF_INET6) {
		__builtin_memcpy(e->src_addr, &sk->__sk_common.skc_v6_rcv_saddr, 16);
		__builtin_memcpy(e->dst_addr, &sk->__sk_common.skc_v6_daddr, 16);
	} else {
		__builtin_memcpy(e->src_addr, &sk->__sk_common.skc_rcv_saddr, 4);
		__builtin_memcpy(e->dst_addr, &sk->__sk_common.skc_daddr, 4);
	}
	submit_now(e, now);
	p->epoch = c->epoch;
	st = stats();
	if (st)
		count(&st->creates_sent);
}

/* This ACK's primitives: what changed since the last sample (the ACK before). */
static __always_inline void take_sample(struct sock *sk, const struct rate_sample *rs, struct ccp_ack *s,
					__u32 extra_acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);

	s->bytes_acked = tp->snd_una - p->prior_snd_una;
	s->packets_acked = rs->acked_sacked;
	s->packets_misordered = tp->sacked_out;
	/* Losses marked since the last sample, not rs->losses (this ACK's): the kernel
	 * also marks them from timers, RACK's reordering timer starting a recovery with no
	 * ACK (a fifth of kernel cubic's recoveries at 10 % link loss). Those never reached
	 * the agent, which cut for none of them where the kernel cuts for each. */
	s->lost_pkts = tp->lost - p->reported_lost;
	/* Once per RTO, latched by set_state: not "in TCP_CA_Loss" on every ACK,
	 * which hid an RTO whose Loss state the same ACK ended (retransmission
	 * acked in one go) and told the agent of a long one again and again
	 * (each report a new timeout: ssthresh cut from 1 MSS to 2 MSS). */
	s->was_timeout = p->rto_pending;
	s->rtt_us = rs->rtt_us > 0 ? rs->rtt_us : tp->srtt_us >> 3;
	s->packets_in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
	s->undo_cwnd_bytes = p->undo_pkts * tp->mss_cache;
	s->extra_acked_pkts = extra_acked;
	s->rate_incoming_bps = rs->interval_us > 0 && rs->delivered > 0 ?
		(__u64)rs->delivered * tp->mss_cache * 1000000 / rs->interval_us : 0;
}

/* The sample is told (an event, or the kernel's fold): the next one counts from here. */
static __always_inline void sample_taken(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);

	p->rto_pending = 0;
	p->undo_pkts = 0;
	p->reported_lost = tp->lost;
	p->prior_snd_una = tp->snd_una;
	p->prior_delivered_ce = tp->delivered_ce;
}

/* An ACK's event: the sample as libccp's primitives, and the kernel's state beside them. */
static __always_inline void fill_ack_event(struct intcc_ccp_event *e, struct sock *sk, const struct ccp_ack *s)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	__u32 mss = tp->mss_cache;

	e->mss = mss;
	e->bytes_acked = s->bytes_acked;
	e->packets_acked = s->packets_acked;
	e->packets_misordered = s->packets_misordered;
	e->bytes_misordered = s->packets_misordered * mss;
	e->ecn_packets = tp->delivered_ce - p->prior_delivered_ce;
	e->lost_pkts_sample = s->lost_pkts;
	e->was_timeout = s->was_timeout;
	e->rtt_sample_us = s->rtt_us;
	e->packets_in_flight = s->packets_in_flight;
	e->bytes_in_flight = s->packets_in_flight * mss;
	e->snd_cwnd_bytes = tp->snd_cwnd * mss;
	e->rate_incoming_bps = s->rate_incoming_bps;
	e->rate_outgoing_bps = s->rate_incoming_bps;
	e->snd_rate_bps = sk->sk_pacing_rate;
	e->bytes_pending = tp->write_seq - tp->snd_nxt;
	e->ca_state = ((struct inet_connection_sock *)sk)->icsk_ca_state;
	e->applied_seq = p->applied_seq;
	e->undo_cwnd_bytes = s->undo_cwnd_bytes;
	e->hold_id = p->hold_id;
	e->grown_pkts = p->grown_pkts;
	e->reductions = p->reductions;
	e->extra_acked_pkts = s->extra_acked_pkts;
	e->lost_total_pkts = tp->lost;
}

/* The Cwnd register the program sees (agent.rs, invoke): the command in force with the
 * kernel's growth since, the kernel's window without a command or on an undo. */
static __always_inline __u32 program_cwnd_bytes(struct sock *sk, struct intcc_ccp_ctl *ctl)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	__u32 mss = tp->mss_cache;
	__u32 window, lost;

	if (!(ctl->flags & CTL_HAS_CWND) || p->undo_pkts)
		return tp->snd_cwnd * mss;
	window = ctl->cwnd_bytes + grown_since(p, ctl) * mss;
	if (!bbr_owns_recovery(ctl))
		return window;
	lost = tp->lost - ctl->lost_base;
	if ((__s32)lost > 0)
		window = window > lost * mss ? window - lost * mss : 0;
	return window > mss ? window : mss;
}

/* The ACK through the kernel's fold; a report when the program would send one. */
static __always_inline void fold_and_report(struct sock *sk, struct intcc_ccp_ctl *ctl, const struct ccp_ack *s,
					    __u64 now, struct intcc_ccp_stats *st, struct intcc_ccp_cfg *c)
{
	struct ccp_priv *p = priv(sk);
	struct intcc_ccp_event *e;
	struct intcc_ccp_fold *f;
	__u32 cwnd_bytes = program_cwnd_bytes(sk, ctl);
	int i, requested;

	f = bpf_sk_storage_get(&intcc_ccp_fold, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!f) {   /* no memory for the fold: this ACK goes as an event, libccp folds it */
		e = new_event(EV_MEASURE, p->sid, now);
		if (e) {
			fill_ack_event(e, sk, s);
			submit_now(e, now);
			sample_taken(sk);
		}
		return;
	}
	if (f->gen != ctl->fold_gen) {   /* a program (re)installed: a fresh fold, as libccp's */
		fold_reset(f, now);
		f->gen = ctl->fold_gen;
		f->report_req = ctl->report_req;
	}
	count(&st->folded_acks);
	if (c && c->fold_check) {
		e = new_event(EV_FOLDED_ACK, p->sid, now);
		if (e) {
			fill_ack_event(e, sk, s);
			submit_now(e, now);
		}
	}
	requested = ctl->report_req != f->report_req;   /* the daemon asks for one now */
	if (!fold_ack(f, s, p->grown_pkts, p->reductions, cwnd_bytes, now) && !requested) {
		sample_taken(sk);
		return;
	}
	e = new_event(EV_REPORT, p->sid, now);
	if (!e) {
		f->due = 1;
		sample_taken(sk);
		return;
	}
	fill_ack_event(e, sk, s);
	for (i = 0; i < R_COUNT; i++)
		e->report_fields[i] = f->r[i];
	/* A routine report (the program's schedule, no loss, timeout, undo or request) soon
	 * after a wake-up waits for the next one: a loss-free flow's reports then share
	 * the daemon's wake-ups (about one per 2 ms instead of one per report). News goes now. */
	if (!requested && !f->due && !f->r[R_TIMEOUT] && !f->r[R_LOSS] && !f->r[R_UNDO] &&
	    c && now - last_wakeup_ns < c->report_coalesce_ns) {
		submit_later(e);
		count(&st->reports_waited);
	} else {
		submit_now(e, now);
	}
	count(&st->kernel_reports);
	if (requested) {
		f->report_req = ctl->report_req;
		count(&st->requested_reports);
	}
	fold_reset(f, now);
	sample_taken(sk);
}

/* This ACK to the agent's side: folded in the kernel when the daemon says so, else an event. */
static __always_inline void report(struct sock *sk, const struct rate_sample *rs, __u64 now,
				   struct intcc_ccp_ctl *ctl, struct intcc_ccp_stats *st, struct intcc_ccp_cfg *c)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	struct intcc_ccp_event *e;
	struct ccp_ack s = {};
	/* every ACK counts in the epoch, also one whose event the full ring drops */
	__u32 extra_acked = bbr_extra_acked(tp, p, rs, ctl);

	take_sample(sk, rs, &s, extra_acked);
	if (ctl && ctl->fold_gen) {
		fold_and_report(sk, ctl, &s, now, st, c);
		return;
	}
	e = new_event(EV_MEASURE, p->sid, now);
	if (!e)
		return;   /* the next event carries this one's losses, timeout and acked bytes */
	fill_ack_event(e, sk, &s);
	submit_now(e, now);
	sample_taken(sk);
}
