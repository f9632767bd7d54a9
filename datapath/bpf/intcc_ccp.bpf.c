// SPDX-License-Identifier: GPL-2.0
/* intcc CCP datapath, kernel side: a BPF struct_ops TCP congestion control
 * registered as "ccp".
 *
 * - each ACK: the cwnd / pacing rate userspace left in intcc_ccp_ctl is applied, then
 *             the ACK goes through the shared datapath program's fold, in the kernel
 *             (intcc_ccp_fold.h), and a REPORT event leaves when the program reports; or,
 *             for another program, a MEASURE event with libccp's primitives per ACK
 *             (cong_control sees every ACK);
 * - a CREATE event (socket id, MSS, cwnd, 4-tuple) the first time a flow is seen in
 *   the current agent epoch: at init, or on its next ACK after an agent (re)connects,
 *   so a restarted agent takes over flows that began without it;
 * - release:  a CLOSE event.
 *
 * Userspace (the Rust daemon) writes a heartbeat into intcc_ccp_cfg while a CCP
 * agent is connected. A flow without a command, or whose agent stopped beating
 * for agent_timeout_ns, runs a Reno fallback through the kernel's own kfuncs:
 * no flow ever stalls because the agent is away.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

#include "intcc_ccp_state.h"    /* the shared structs, maps, per-socket state */
#include "intcc_ccp_window.h"   /* the kernel's window arithmetic, and each family's (families/) */
#include "intcc_ccp_fold.h"     /* the shared datapath program, folded per ACK */

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

SEC("struct_ops")
void BPF_PROG(ccp_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	struct intcc_ccp_cfg *c = cfg();
	struct intcc_ccp_stats *st = stats();
	__u64 now = bpf_ktime_get_ns();

	p->sid = __sync_fetch_and_add(&next_sid, 1);
	p->prior_snd_una = tp->snd_una;
	p->prior_delivered_ce = tp->delivered_ce;
	p->applied_seq = 0;
	p->epoch = 0;
	p->prr_delivered = 0;
	p->prr_high_seq = 0;
	p->rto_pending = 0;
	p->undo_pkts = 0;
	p->rto_hold = 0;
	p->cut_hold = 0;
	p->hold_id = 0;
	p->reported_lost = tp->lost;
	p->grown_pkts = 0;
	p->reductions = 0;
	p->est_pkts = 0;
	p->est_acked = 0;
	p->ca_epoch = 0;
	p->ca_cnt = 0;
	p->last_cwnd = 0;
	p->last_time_ns = 0;
	if (st)
		count(&st->flows_created);
	if (agent_alive(c, now))
		announce(sk, c, now);
	/* else: the flow runs the fallback and announces itself once an agent beats */
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

/* The agent's command, enforced on every ACK: the kernel's own cwnd changes
 * (an RTO collapsing it to one segment) must not outlive the agent's decision,
 * as with ccp-kernel, where libccp sets the window after every program run.
 * During fast recovery (and CWR) the agent's window is PRR's target instead. */
static __always_inline void apply(struct sock *sk, struct intcc_ccp_ctl *ctl, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	struct intcc_ccp_stats *st;

	if (ctl->flags & CTL_HAS_CWND) {
		__u32 mss = tp->mss_cache ? tp->mss_cache : 1;
		__u32 pkts = ctl->cwnd_bytes / mss + grown_since(p, ctl);
		__u8 state = ((struct inet_connection_sock *)sk)->icsk_ca_state;

		if (pkts < 1)
			pkts = 1;
		if (bbr_owns_recovery(ctl)) {
			pkts = bbr_recovery_window(sk, ctl, rs, pkts);   /* tcp_bbr's, no PRR */
		} else if (state == TCP_CA_Recovery || state == TCP_CA_CWR) {
			__u32 prr;

			if (p->cut_hold && tp->snd_ssthresh < pkts) {
				pkts = tp->snd_ssthresh;   /* the agent has not answered this loss yet */
				st = stats();
				if (st)
					count(&st->cut_hold_acks);
			}
			/* PRR paces a cut. An answer at or above the window the recovery began
			 * with cuts nothing (an INT-aware agent keeping its window on a link
			 * loss): it applies at once, as outside recovery. Pacing it held the
			 * kernel's window at a third of the agent's at 20 % link loss, PRR
			 * rebuilding what each loss took out of the pipe at one segment per ACK. */
			prr = prr_window(sk, flag, rs, pkts);   /* its counters run either way */
			if (p->cut_hold || pkts < tp->prior_cwnd) {
				pkts = prr;
			} else {
				st = stats();
				if (st)
					count(&st->uncut_recovery_acks);
			}
		}
		tp->snd_cwnd = pkts > 1 ? pkts : 1;
	}
	if (ctl->flags & CTL_HAS_RATE) {
		sk->sk_pacing_rate = ctl->rate_bps;
		sk->sk_pacing_status = SK_PACING_NEEDED;
	}
	if (ctl->seq != p->applied_seq) {
		p->applied_seq = ctl->seq;
		st = stats();
		if (st)
			count(&st->cmds_applied);
		if (ctl->fold_gen) {   /* no per-ACK event will tell the daemon */
			struct intcc_ccp_event *e = new_event(EV_APPLIED, p->sid, bpf_ktime_get_ns());

			if (e) {   /* bookkeeping, stamped here: it waits for the next wake-up */
				e->applied_seq = ctl->seq;
				submit_later(e);
			}
		}
	}
}

SEC("struct_ops")
void BPF_PROG(ccp_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct ccp_priv *p = priv(sk);
	struct intcc_ccp_cfg *c = cfg();
	struct intcc_ccp_stats *st = stats();
	struct intcc_ccp_ctl *ctl;
	__u64 now = bpf_ktime_get_ns();
	__u32 sid = p->sid;

	if (!st)
		return;   /* cannot happen: array maps always have their element */
	if (!agent_alive(c, now)) {
		count(&st->fallback_acks);
		p->reported_lost = tcp_sk(sk)->lost;   /* no agent to tell */
		fallback(sk, ack, flag, rs);
		update_pacing_rate(sk);
		return;
	}
	if (p->epoch != c->epoch)
		announce(sk, c, now);
	ctl = bpf_map_lookup_elem(&intcc_ccp_ctl, &sid);
	/* An undo on this ACK (latched by undo_cwnd, which runs before cong_control):
	 * the restored window becomes the command in force until the agent, told by
	 * this ACK's report, sends its next one (the daemon adopts it too). */
	if (ctl && (ctl->flags & CTL_HAS_CWND) && p->undo_pkts) {
		ctl->cwnd_bytes = p->undo_pkts * tcp_sk(sk)->mss_cache;
		ctl->grown_base = p->grown_pkts;
		ctl->lost_base = tcp_sk(sk)->lost;
	}
	/* The agent answered (a command sent after the report of this RTO / loss reached it;
	 * the daemon marks it), or the kernel undid the RTO / cut. */
	if ((p->rto_hold || p->cut_hold) && (!ctl || ctl->answered_hold == p->hold_id || p->undo_pkts))
		p->rto_hold = p->cut_hold = 0;
	if (p->rto_hold) {
		slow_start_as_kernel(sk, flag, rs);
		report(sk, rs, now, ctl, st, c);
		count(&st->rto_hold_acks);
		update_pacing_rate(sk);
		return;
	}
	if (ctl && ctl->flags)
		apply(sk, ctl, flag, rs);
	if (ctl && (ctl->flags & CTL_HAS_CWND))
		grow_per_ack(sk, ctl, flag, rs);
	report(sk, rs, now, ctl, st, c);
	if (!ctl || !ctl->flags) {
		count(&st->fallback_acks);
		fallback(sk, ack, flag, rs);    /* not taken over (yet) */
		update_pacing_rate(sk);
		return;
	}
	count(&st->controlled_acks);
	if (!(ctl->flags & CTL_HAS_RATE))
		update_pacing_rate(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(ccp_ssthresh, struct sock *sk)
{
	struct intcc_ccp_cfg *c = cfg();
	struct ccp_priv *p = priv(sk);
	__u32 sid = p->sid;

	/* A controlled flow's window is the agent's (the command is enforced on every ACK,
	 * and PRR aims at it): ssthresh caps the kernel's slow start while an RTO is
	 * unanswered (rto_hold) and is PRR's aim while a loss is (cut_hold). It is the cut
	 * the algorithm in control makes (its loss_beta register; 0: Reno's half): with the
	 * uncut window an ACK of two segments took the window from 1 to 3 where kernel cubic
	 * stops at ssthresh 2. */
	if (agent_alive(c, bpf_ktime_get_ns())) {
		struct intcc_ccp_ctl *ctl = bpf_map_lookup_elem(&intcc_ccp_ctl, &sid);

		if (ctl && ctl->loss_beta_1024) {
			__u32 cut = (__u32)(((__u64)tcp_sk(sk)->snd_cwnd * ctl->loss_beta_1024) >> 10);

			return cut > 2 ? cut : 2;
		}
	}
	return tcp_reno_ssthresh(sk);
}

/* The kernel found a reduction spurious (DSACK, F-RTO, timestamps): back to
 * max(cwnd, prior_cwnd), as Reno and CUBIC. A controlled flow's window is the
 * agent's, so the undo is latched for the next report (the agent restores its
 * state) instead of being overwritten by the agent's cut on the same ACK. */
SEC("struct_ops")
__u32 BPF_PROG(ccp_undo_cwnd, struct sock *sk)
{
	struct intcc_ccp_cfg *c = cfg();
	struct intcc_ccp_stats *st;
	struct ccp_priv *p = priv(sk);
	__u32 sid = p->sid;
	__u32 cwnd = tcp_reno_undo_cwnd(sk);

	if (agent_alive(c, bpf_ktime_get_ns()) && bpf_map_lookup_elem(&intcc_ccp_ctl, &sid)) {
		p->undo_pkts = cwnd;
		st = stats();
		if (st)
			count(&st->undos);
	}
	return cwnd;
}

/* The agent hears of a loss or an RTO in the report of the ACK that showed it, and its
 * answer applies 1-3 ACKs later (the daemon and the agent are a few ms away; a
 * recovery's SACKs come ~1 ms apart). Until it answers, the kernel's own response runs,
 * as every loss-based algorithm's. Each such episode gets a hold_id, carried by the
 * reports; the daemon marks the agent's first command after a report with a new
 * hold_id as its answer (answered_hold), even if the window is unchanged:
 * - RTO (TCP_CA_Loss; tcp_enter_loss has set one segment): slow start from there.
 *   Applying the command from before the RTO sent the old window as a burst on the
 *   first ACK after it (ccp cubic +22 % over kernel cubic at 20 % link loss).
 * - Recovery / CWR: PRR aims at the kernel's ssthresh (the algorithm's cut, ccp_ssthresh)
 *   where the command is higher. Aiming at the uncut window, a recovery sent twice
 *   the new data kernel cubic's did at 20 % link loss and ended in an RTO less often
 *   (ccp cubic 1.3-1.9x kernel cubic). An agent that keeps the window (cubic-int L1)
 *   raises the aim again with its answer. */
SEC("struct_ops")
void BPF_PROG(ccp_set_state, struct sock *sk, __u8 new_state)
{
	struct ccp_priv *p = priv(sk);
	struct intcc_ccp_ctl *ctl;
	__u32 sid = p->sid;
	__u8 old_state = ((struct inet_connection_sock *)sk)->icsk_ca_state;   /* set after this hook */

	/* A window reduction the kernel begins (tcp_enter_recovery, tcp_enter_cwr: not from
	 * the other one, tcp_in_cwnd_reduction) is where loss-based CCAs cut, once. Counted
	 * for the agent, whose own estimate of where a recovery ends missed a fifth of them
	 * at 20 % link loss (ccp cubic then cut less than kernel cubic). */
	if ((new_state == TCP_CA_Recovery || new_state == TCP_CA_CWR) &&
	    old_state != TCP_CA_Recovery && old_state != TCP_CA_CWR)
		p->reductions++;
	if (new_state != TCP_CA_Loss && new_state != TCP_CA_Recovery && new_state != TCP_CA_CWR) {
		p->cut_hold = 0;
		return;
	}
	if (new_state == TCP_CA_Loss)
		p->rto_pending = 1;
	ctl = bpf_map_lookup_elem(&intcc_ccp_ctl, &sid);
	if (!ctl || !(ctl->flags & CTL_HAS_CWND))
		return;
	p->hold_id++;
	p->rto_hold = new_state == TCP_CA_Loss;
	p->cut_hold = new_state != TCP_CA_Loss;
}

SEC("struct_ops")
void BPF_PROG(ccp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	/* Not called: cong_control takes every ACK. Registration requires it. */
}

SEC("struct_ops")
void BPF_PROG(ccp_release, struct sock *sk)
{
	struct intcc_ccp_cfg *c = cfg();
	struct intcc_ccp_event *e;
	struct ccp_priv *p = priv(sk);
	__u64 now = bpf_ktime_get_ns();
	__u32 sid = p->sid;

	bpf_map_delete_elem(&intcc_ccp_ctl, &sid);
	if (!agent_alive(c, now) || p->epoch != c->epoch)
		return;   /* the agent never heard of it */
	e = new_event(EV_CLOSE, sid, now);
	if (e)
		submit_now(e, now);
}

/* A struct_ops link ties the registration to the daemon's link fd: if the
 * daemon dies, even by SIGKILL, "ccp" is unregistered and a restart succeeds.
 * -DINTCC_NO_LINK builds the plain map form for older loaders (bpftool 7.1). */
#ifdef INTCC_NO_LINK
SEC(".struct_ops")
#else
SEC(".struct_ops.link")
#endif
struct tcp_congestion_ops intcc_ccp = {
	.init = (void *)ccp_init,
	.release = (void *)ccp_release,
	.ssthresh = (void *)ccp_ssthresh,
	.undo_cwnd = (void *)ccp_undo_cwnd,
	.cong_avoid = (void *)ccp_cong_avoid,
	.cong_control = (void *)ccp_cong_control,
	.set_state = (void *)ccp_set_state,
	.name = "ccp",
};
