/* SPDX-License-Identifier: GPL-2.0 */
/* intcc CCP datapath, kernel side: what the hooks share. The event, control, config and
 * stats structs (shared with the daemon through the maps and checked against the
 * agent-datapath contract), the maps, the per-socket state, small accessors. */
#pragma once

#define AF_INET 2
#define AF_INET6 10
#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define SK_PACING_NEEDED 1

#define EV_CREATE 1
#define EV_MEASURE 2
#define EV_CLOSE 3
#define EV_REPORT 4    /* the kernel folded the flow's ACKs: a report of the program's registers */
#define EV_APPLIED 5   /* a command took effect (folding flows send no per-ACK events to see it in) */
#define EV_FOLDED_ACK 6  /* fold_check: an ACK the kernel folded, for the daemon to fold too */

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
	__u32 extra_acked_pkts;  /* tcp_bbr's extra_acked sample on this ACK, against ctl bw (0: off) */
	__u32 lost_total_pkts;   /* tp->lost: packets marked lost so far (cumulative, wraps) */
	/* REPORT: the program's Report registers, in declaration order (intcc_ccp_fold.h);
	 * the ACK fields above are the reporting ACK's */
	__u64 report_fields[16];
};

/* The agent's command per flow, written by the daemon: generated from the contract, whose
 * registers (and so a family's) are its fields. */
#include "intcc_ccp_ctl.h"

/* Written by userspace only (a whole-value update must not race BPF's counters). */
struct intcc_ccp_cfg {
	__u64 heartbeat_ns;      /* bpf_ktime_get_ns() clock (CLOCK_MONOTONIC); 0: no agent */
	__u64 agent_timeout_ns;
	__u64 epoch;             /* bumped when an agent (re)connects: flows announce themselves again */
	__u64 contract_version;  /* of the daemon that pinned these maps: another version's are replaced */
	__u64 fold_check;        /* the kernel also sends each ACK it folds (EV_FOLDED_ACK): the daemon checks */
	__u64 report_coalesce_ns; /* a routine report this soon after the daemon's last wake-up waits for the next */
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
	__u64 folded_acks;       /* ACKs folded in the kernel (no event each) */
	__u64 kernel_reports;    /* reports the kernel's fold sent */
	__u64 requested_reports; /* of them, sent early at the daemon's request (ctl report_req) */
	__u64 reports_waited;    /* of them, left in the ring without a wake-up (cfg report_coalesce_ns) */
	__u64 rto_min_set;       /* commands whose rto_min the kernel took (bpf_setsockopt) */
	__u64 rto_min_refused;   /* and refused (out of its range: 2 jiffies to 200 ms) */
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

/* Per CPU: one shared counter line, bumped on every ACK from both CPUs' softirqs, cost
 * native-reno throughput (userspace sums the CPUs). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct intcc_ccp_stats);
} intcc_ccp_stats SEC(".maps");

/* tcp_cubic's state beyond icsk_ca_priv (full): HyStart's round (end_seq, curr_rtt,
 * sample_cnt) for the per-ACK slow start (register ss_exit_rtt), and the cubic curve's
 * epoch (epoch_start, bic_K, bic_origin_point) for the per-ACK target (register ca_ahead). */
struct intcc_ccp_cubic {
	__u32 end_seq;           /* the round ends when snd_una passes this */
	__u32 curr_rtt_us;       /* the round's smallest RTT sample */
	__u32 samples;           /* samples taken this round */
	__u32 curve_epoch;       /* the ctl ca_epoch the curve below began for (0: none yet) */
	__u64 epoch_start_ns;    /* the epoch's first ACK */
	__u32 k_1024;            /* K, in 1/1024 s (tcp_cubic's bic_K) */
	__u32 origin_pkts;       /* the curve's plateau: W_max, or the window if above it */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct intcc_ccp_cubic);
} intcc_ccp_cubic SEC(".maps");

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
	__u32 ack_epoch_us;      /* tcp_bbr's ack_epoch_mstamp (low 32 bits of delivered_mstamp) */
	__u32 ack_epoch_acked;   /* packets delivered since it */
};

_Static_assert(sizeof(struct ccp_priv) <= sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "ccp_priv must fit in icsk_ca_priv");

__u32 next_sid = 1;
/* The ring's wake-ups of the daemon (submit_now, submit_later): when the last one was
 * sent, and whether an event has been left since without one. Shared by the CPUs
 * unlocked: a lost race delays a waiting event to the next wake-up, loses nothing. */
__u64 last_wakeup_ns = 0;
__u32 left_unwoken = 0;

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

