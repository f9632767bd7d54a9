// SPDX-License-Identifier: GPL-2.0
/* intcc CCP datapath, kernel side: a BPF struct_ops TCP congestion control
 * registered as "ccp".
 *
 * - each ACK: the cwnd / pacing rate userspace left in intcc_ccp_ctl is applied, then
 *             a MEASURE event with libccp's primitives (cong_control sees every ACK);
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

#define AF_INET 2
#define AF_INET6 10
#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define SK_PACING_NEEDED 1

#define EV_CREATE 1
#define EV_MEASURE 2
#define EV_CLOSE 3

#define CTL_HAS_CWND 1
#define CTL_HAS_RATE 2

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;

#define FLAG_DATA_ACKED 0x04          /* tcp_input.c's ack flags: new data acked, */
#define FLAG_SND_UNA_ADVANCED 0x400   /* snd_una moved */
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
#define CUBIC_RECALC_NS (1000000000ULL / 32)   /* tcp_cubic recomputes cnt after HZ/32 */

/* Event, control, config and stats layouts are shared with datapath/src/bpf.rs; both
 * are checked at build time against ccp_algs/contract.py (intcc_ccp_contract.h, after
 * the structs). */
struct intcc_ccp_event {
	__u32 kind;
	__u32 sid;
	__u64 ts_ns;
	/* CREATE */
	__u32 mss;
	__u32 init_cwnd_bytes;
	__u32 family;
	__u16 src_port;
	__u16 dst_port;
	__u8 src_addr[16];
	__u8 dst_addr[16];
	/* MEASURE (libccp primitives) */
	__u32 bytes_acked;
	__u32 packets_acked;
	__u32 bytes_misordered;
	__u32 packets_misordered;
	__u32 ecn_bytes;         /* unused: libccp's Ack.ecn_bytes carries undo_cwnd_bytes */
	__u32 ecn_packets;
	__u32 lost_pkts_sample;
	__u32 was_timeout;
	__u32 rtt_sample_us;
	__u32 bytes_in_flight;
	__u32 packets_in_flight;
	__u32 snd_cwnd_bytes;
	__u64 rate_outgoing_bps;     /* bytes per second */
	__u64 rate_incoming_bps;
	__u64 snd_rate_bps;
	__u32 bytes_pending;
	__u32 ca_state;
	__u64 applied_seq;       /* intcc_ccp_ctl seq in force after this ACK */
	__u32 undo_cwnd_bytes;   /* the kernel undid a reduction on this ACK: the window it restored */
	__u32 hold_id;           /* the flow's latest RTO / recovery the kernel answers until the agent does */
	__u32 grown_pkts;        /* segments the per-ACK growth has added so far (cumulative, wraps) */
	__u32 reductions;        /* window reductions (Recovery, CWR) the kernel began so far (cumulative) */
};

struct intcc_ccp_ctl {
	__u32 flags;             /* CTL_HAS_CWND | CTL_HAS_RATE */
	__u32 cwnd_bytes;
	__u64 rate_bps;          /* bytes per second */
	__u64 seq;               /* bumped by userspace on every write */
	__u32 answered_hold;     /* the agent answered a report carrying this hold_id */
	/* The window is cwnd_bytes plus what the per-ACK growth added after the flow's
	 * grown_pkts was grown_base (the report the agent decided on). Growth per ACK, as
	 * the kernel's own, between the agent's decisions (0 turns each part off): */
	__u32 grown_base;
	__u32 ss_until_bytes;    /* slow start: a segment per packet delivered up to here */
	__u32 ca_target_bytes;   /* congestion avoidance towards here (tcp_cubic's bictcp_update) */
	__u32 ca_cnt_max;        /* at most this many packets delivered per segment of growth */
	__u32 reno_scale;        /* Reno-friendly W_est: +1 segment per (cwnd * scale) >> 3 delivered */
	__u32 ca_epoch;          /* a change restarts W_est at the window (a new CUBIC epoch) */
	__u32 loss_beta_1024;    /* the algorithm's cut on a loss, /1024: ssthresh until it answers (0: Reno's) */
};

/* Written by userspace only (a whole-value update must not race BPF's counters). */
struct intcc_ccp_cfg {
	__u64 heartbeat_ns;      /* bpf_ktime_get_ns() clock (CLOCK_MONOTONIC); 0: no agent */
	__u64 agent_timeout_ns;
	__u64 epoch;             /* bumped when an agent (re)connects: flows announce themselves again */
	__u64 contract_version;  /* of the daemon that pinned these maps: another version's are replaced */
};

/* Written by BPF only. */
struct intcc_ccp_stats {
	__u64 events_lost;       /* ring buffer full */
	__u64 flows_created;
	__u64 fallback_acks;
	__u64 controlled_acks;
	__u64 creates_sent;
	__u64 cmds_applied;
	__u64 undos;             /* reductions the kernel undid on controlled flows */
	__u64 rto_hold_acks;     /* ACKs after an RTO the agent had not answered yet */
	__u64 cut_hold_acks;     /* ACKs of a recovery the agent had not answered yet */
	__u64 uncut_recovery_acks; /* recovery ACKs whose answer cut nothing: window at once, no PRR */
};

#include "intcc_ccp_contract.h"   /* generated: every field offset above, as the contract says */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} intcc_ccp_ev SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct intcc_ccp_ctl);
} intcc_ccp_ctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct intcc_ccp_cfg);
} intcc_ccp_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct intcc_ccp_stats);
} intcc_ccp_stats SEC(".maps");

/* Per-socket state in icsk_ca_priv (at most 104 bytes). */
struct ccp_priv {
	__u32 sid;
	__u32 prior_snd_una;
	__u32 prior_delivered_ce;
	__u32 prr_delivered;     /* segments delivered since this recovery began (PRR) */
	__u64 applied_seq;
	__u64 epoch;             /* agent epoch this flow last announced itself in */
	__u32 prr_high_seq;      /* tp->high_seq of the recovery prr_delivered counts for */
	__u32 rto_pending;       /* entered TCP_CA_Loss (RTO) since the last report */
	__u32 undo_pkts;         /* window the kernel restored by an undo, not yet reported (0: none) */
	__u32 rto_hold;          /* an RTO the agent has not answered yet: the kernel's response runs */
	__u32 cut_hold;          /* a recovery (or CWR) the agent has not answered yet */
	__u32 hold_id;           /* numbers RTOs and recoveries; reported, answered in intcc_ccp_ctl */
	__u32 reported_lost;     /* tp->lost at the last report */
	__u32 grown_pkts;        /* segments added by grow_per_ack (cumulative, wraps) */
	__u32 est_pkts;          /* tcp_cubic's tcp_cwnd (W_est), in segments */
	__u32 est_acked;         /* tcp_cubic's ack_cnt */
	__u32 ca_epoch;          /* the ctl ca_epoch W_est was restarted for */
	__u32 ca_cnt;            /* tcp_cubic's cnt: packets delivered per segment of growth */
	__u32 last_cwnd;         /* tcp_cubic's last_cwnd, last_time: cnt is recomputed when */
	__u32 reductions;        /* Recovery / CWR entries from any other state (each a cut) */
	__u64 last_time_ns;      /* the window changed or 1/32 s passed */
};

_Static_assert(sizeof(struct ccp_priv) <= sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "ccp_priv must fit in icsk_ca_priv");

__u32 next_sid = 1;

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct ccp_priv *priv(const struct sock *sk)
{
	return (struct ccp_priv *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline struct intcc_ccp_cfg *cfg(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&intcc_ccp_cfg, &zero);
}

static __always_inline struct intcc_ccp_stats *stats(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&intcc_ccp_stats, &zero);
}

static __always_inline void count(__u64 *counter)
{
	__sync_fetch_and_add(counter, 1);
}

static __always_inline int agent_alive(struct intcc_ccp_cfg *c, __u64 now)
{
	return c && c->heartbeat_ns && now - c->heartbeat_ns < c->agent_timeout_ns;
}

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
	bpf_ringbuf_submit(e, 0);
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

static __always_inline void report(struct sock *sk, const struct rate_sample *rs, __u64 now)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_priv *p = priv(sk);
	struct intcc_ccp_event *e;
	__u32 mss = tp->mss_cache;
	__u32 in_flight;

	e = new_event(EV_MEASURE, p->sid, now);
	if (!e)
		return;
	e->mss = mss;
	e->bytes_acked = tp->snd_una - p->prior_snd_una;
	e->packets_acked = rs->acked_sacked;
	e->packets_misordered = tp->sacked_out;
	e->bytes_misordered = tp->sacked_out * mss;
	e->ecn_packets = tp->delivered_ce - p->prior_delivered_ce;
	/* Losses marked since the last report, not rs->losses (this ACK's): the kernel
	 * also marks them from timers, RACK's reordering timer starting a recovery with no
	 * ACK (a fifth of kernel cubic's recoveries at 10 % link loss). Those never reached
	 * the agent, which cut for none of them where the kernel cuts for each. */
	e->lost_pkts_sample = tp->lost - p->reported_lost;
	/* Once per RTO, latched by set_state: not "in TCP_CA_Loss" on every ACK,
	 * which hid an RTO whose Loss state the same ACK ended (retransmission
	 * acked in one go) and told the agent of a long one again and again
	 * (each report a new timeout: ssthresh cut from 1 MSS to 2 MSS). */
	e->was_timeout = p->rto_pending;
	e->rtt_sample_us = rs->rtt_us > 0 ? rs->rtt_us : tp->srtt_us >> 3;
	in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
	e->packets_in_flight = in_flight;
	e->bytes_in_flight = in_flight * mss;
	e->snd_cwnd_bytes = tp->snd_cwnd * mss;
	if (rs->interval_us > 0 && rs->delivered > 0) {
		e->rate_incoming_bps = (__u64)rs->delivered * mss * 1000000 / rs->interval_us;
		e->rate_outgoing_bps = e->rate_incoming_bps;
	}
	e->snd_rate_bps = sk->sk_pacing_rate;
	e->bytes_pending = tp->write_seq - tp->snd_nxt;
	e->ca_state = ((struct inet_connection_sock *)sk)->icsk_ca_state;
	e->applied_seq = p->applied_seq;
	e->undo_cwnd_bytes = p->undo_pkts * mss;
	e->hold_id = p->hold_id;
	e->grown_pkts = p->grown_pkts;
	e->reductions = p->reductions;
	bpf_ringbuf_submit(e, 0);
	p->rto_pending = 0;
	p->undo_pkts = 0;
	p->reported_lost = tp->lost;
	p->prior_snd_una = tp->snd_una;
	p->prior_delivered_ce = tp->delivered_ce;
}

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
 * (intcc_ccp_ctl; the agent decides once per round): slow start up to ss_until
 * (tcp_slow_start), then congestion avoidance as tcp_cubic's bictcp_cong_avoid towards
 * the agent's target (its cubic curve one RTT ahead), with the Reno-friendly W_est
 * counted here per ACK, and tcp_cong_avoid_ai's credit in snd_cwnd_cnt. Only on ACKs
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

	if (!(flag & FLAG_DATA_ACKED) || rs->acked_sacked <= 0 ||
	    state == TCP_CA_Recovery || state == TCP_CA_CWR)
		return;
	acked = rs->acked_sacked;
	until = ctl->ss_until_bytes / mss;
	/* tcp_is_cwnd_limited, with the agent's slow start: the kernel grows only a window
	 * the flow has been using. */
	if (!BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited) && !(cwnd < until && cwnd < 2 * tp->max_packets_out))
		return;
	if (cwnd < until) {
		__u32 n = until - cwnd < acked ? until - cwnd : acked;

		cwnd += n;
		acked -= n;
	}
	if (acked && ctl->ca_target_bytes) {
		target = ctl->ca_target_bytes / mss;
		now = bpf_ktime_get_ns();
		if (p->ca_epoch != ctl->ca_epoch) {    /* a new epoch: W_est starts at the window */
			p->ca_epoch = ctl->ca_epoch;
			p->est_pkts = cwnd;
			p->est_acked = 0;
			p->last_cwnd = 0;
		}
		p->est_acked += acked;
		if (p->last_cwnd != cwnd || now - p->last_time_ns > CUBIC_RECALC_NS) {
			__u32 cnt = target > cwnd ? cwnd / (target - cwnd) : 100 * cwnd;

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
		if (state == TCP_CA_Recovery || state == TCP_CA_CWR) {
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
	}
	/* The agent answered (a command sent after the report of this RTO / loss reached it;
	 * the daemon marks it), or the kernel undid the RTO / cut. */
	if ((p->rto_hold || p->cut_hold) && (!ctl || ctl->answered_hold == p->hold_id || p->undo_pkts))
		p->rto_hold = p->cut_hold = 0;
	if (p->rto_hold) {
		slow_start_as_kernel(sk, flag, rs);
		report(sk, rs, now);
		count(&st->rto_hold_acks);
		update_pacing_rate(sk);
		return;
	}
	if (ctl && ctl->flags)
		apply(sk, ctl, flag, rs);
	if (ctl && (ctl->flags & CTL_HAS_CWND))
		grow_per_ack(sk, ctl, flag, rs);
	report(sk, rs, now);
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
		bpf_ringbuf_submit(e, 0);
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
