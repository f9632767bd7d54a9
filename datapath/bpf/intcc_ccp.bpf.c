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

#ifndef SOL_TCP
#define SOL_TCP 6        /* a #define in the uapi headers: vmlinux.h has no macros */
#endif

#include "intcc_ccp_state.h"    /* the shared structs, maps, per-socket state */
#include "intcc_ccp_window.h"   /* the kernel's window arithmetic, and each family's (families/) */
#include "intcc_ccp_fold.h"     /* the shared datapath program, folded per ACK */
#include "intcc_ccp_events.h"   /* what goes to the daemon: events, samples, reports */

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
		if (ctl->rto_min_us) {   /* once per command: the kernel keeps it in the socket */
			int rto_min_us = ctl->rto_min_us;

			if (bpf_setsockopt(sk, SOL_TCP, TCP_BPF_RTO_MIN, &rto_min_us, sizeof(rto_min_us)) == 0) {
				if (st)
					count(&st->rto_min_set);
			} else if (st) {
				count(&st->rto_min_refused);
			}
		}
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
