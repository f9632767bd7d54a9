/* SPDX-License-Identifier: GPL-2.0 */
/* RTT separation on the fast path (the RTT-separation paper, 001; int_node/elements/rtt.py and
 * separation.py are the Python node's form and the reference):
 *
 * - the passive RTT (RTTTap on a port's ingress): per TCP flow and direction, a data segment's
 *   expected ACK to the ACK naming it, and a TSval to its echo, each up to RTT_PENDING pending
 *   in the order they passed, as the Python node's FlowRTT keeps them (an answer pops the
 *   oldest; older ones it passes were answered late or never). The control loop reads the
 *   minima, and a flow whose queue seldom empties shows it in few of its packets: one TSval
 *   a round trip read 54 ms for a 41 ms flow, and 32 (full while the flow waited in a long
 *   queue) missed the moment it moved to an empty one by 16 ms.
 * - the split (FlowSplit on a port's egress): bytes per flow in a Count-Min Sketch, a flow past
 *   long_bytes (or sending for long_age) tracked exactly, each packet to its flow's queue (a
 *   table the node's control loop writes; untracked flows to the default queue) by its
 *   skb->priority, which names the port's HTB leaf class 2:(SEP_CLASS_BASE + queue).
 * - the stamp: the packet's own queue (its leaf's depth, drops and capacity), which of the
 *   port's queues that is, how many and its weight, as INTTransit(queue drr) stamps them.
 *
 * The queues are the kernel's: tbf at the port's rate over HTB (handle 2:), a leaf class per
 * queue with a pfifo of the queue's buffer. Every leaf's rate is the port's, so that under
 * tbf none is ever over it: HTB then serves them by deficit round robin, each its quantum
 * (the DRR's quantum times the queue's weight) a round, an empty one giving its turn away. The control loop (RTTSeparation, in the
 * node's Python process) reads the tracked flows and their RTTs from these maps, runs Jenks,
 * and writes the table, the classes' rates and the pfifos' limits.
 */
#pragma once

#define SEP_HTB_MAJOR 2              /* the port's HTB: handle 2:, under tbf's 1: */
#define SEP_CLASS_BASE 0x10          /* a queue's leaf class is 2:(SEP_CLASS_BASE + queue) */
#define SEP_MAX_QUEUES 9             /* 8 RTT queues and UDP's */
#define SKETCH_WIDTH 2048            /* FlowSplit's defaults; plan.py refuses others */
#define SKETCH_DEPTH 4
#define TCP_OPTS_MAX 40
#define TCP_OPTS_READ 8
#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_ACK 0x10
#define RTT_PENDING 64                 /* a power of two: rings */
#define RTT_HAVE_HIGH 1
#define RTT_HAVE_TSVAL 2

struct intcc_fp_rtt_dir {            /* one direction of a TCP flow */
	__u32 high_eack;             /* the highest expected ACK sent (Karn: below it is sent again) */
	__u32 last_tsval;
	__u32 ack_head;              /* the ring of segments being timed: the oldest ... */
	__u32 ack_tail;              /* ... and where the next goes (head == tail: none) */
	__u32 ts_head;               /* the same for TSvals */
	__u32 ts_tail;
	__u32 pend_eack[RTT_PENDING];          /* the expected ACKs ... */
	__u64 pend_eack_ns[RTT_PENDING];       /* ... and when each segment passed */
	__u32 pend_tsval[RTT_PENDING];      /* the TSvals ... */
	__u64 pend_tsval_ns[RTT_PENDING];   /* ... and when each first passed */
	__u64 ack_min_ns;            /* minima of the samples (0: none yet) */
	__u64 ts_min_ns;
	__u64 last_ns;               /* the direction's last packet */
	__u32 ack_samples;
	__u32 ts_samples;
	__u32 retransmits;
	__u32 flags;                 /* RTT_HAVE_* */
};

struct intcc_fp_sep {                /* a separated port: written by the control loop */
	__u64 long_bytes;
	__u64 long_age_ns;           /* 0: bytes only (the paper's rule) */
	__u32 queues;                /* K, and one more for UDP */
	__u32 default_queue;
	__u32 weight_total;          /* the weights of the queues with flows (each one's share of the port) */
	__u32 pad;
	__u32 weight[SEP_MAX_QUEUES];
	__u32 capacity_pkts[SEP_MAX_QUEUES];
};

struct intcc_fp_tracked {            /* a long flow at a separated port */
	__u64 bytes;
	__u64 last_ns;
	__u32 proto;
	__u32 pad;
};

struct intcc_fp_candidate {          /* long_age's clock of a flow not yet long */
	__u64 first_ns;
	__u64 last_ns;
};

struct intcc_fp_sketch_row {
	__u32 count[SKETCH_WIDTH];
};

struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 8192);
	 __type(key, struct intcc_fp_flow); __type(value, struct intcc_fp_rtt_dir); } intcc_fp_rtt SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, INTCC_FP_MAX_PORTS);
	 __type(key, __u32); __type(value, struct intcc_fp_sep); } intcc_fp_sep SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4096);
	 __type(key, struct intcc_fp_meter_key); __type(value, struct intcc_fp_tracked); } intcc_fp_tracked SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4096);
	 __type(key, struct intcc_fp_meter_key); __type(value, __u32); } intcc_fp_sep_table SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 4096);
	 __type(key, struct intcc_fp_meter_key); __type(value, struct intcc_fp_candidate); } intcc_fp_candidates SEC(".maps");
/* each separated port's root qdisc (tbf), as its egress program last saw it: the ingress
 * programs read its queues' backlog from there (kernel addresses, read with probe reads) */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, INTCC_FP_MAX_PORTS);
	 __type(key, __u32); __type(value, __u64); } intcc_fp_sep_root SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, SKETCH_DEPTH);
	 __type(key, __u32); __type(value, struct intcc_fp_sketch_row); } intcc_fp_sketch SEC(".maps");

/* a new direction's state (too large for the stack): never written */
static struct intcc_fp_rtt_dir rtt_dir_zero;

static __always_inline int seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

static __always_inline void rtt_min(__u64 *min_ns, __u64 now, __u64 sent_ns)
{
	if (now <= sent_ns)
		return;                  /* answered before it was reckoned to leave its queue: no sample */
	__u64 sample_ns = now - sent_ns;
	if (*min_ns == 0 || sample_ns < *min_ns)
		*min_ns = sample_ns;
}

/* A full ring gives up its oldest entry once that has waited longer than the least sample
 * so far: its answer could not lower the minimum. Without it a ring filled while the flow sat
 * in a long queue timed none of its first packets into an empty one (the moment its minimum
 * shows). Before any sample nothing is given up: a round trip longer than the ring still
 * thins the samples, never stops them. */
static __always_inline void ring_make_room(__u32 *head, __u32 tail, __u64 *sent_ns, __u64 min_ns, __u64 now)
{
	__u32 h = *head;
	if (tail - h >= RTT_PENDING && min_ns && now - sent_ns[h & (RTT_PENDING - 1)] > min_ns)
		*head = h + 1;
}

/* Whether the ring has room for one more (after ring_make_room); counted where it has none:
 * untimed until answers drain it. */
static __always_inline int ring_room(__u32 *head, __u32 tail, __u64 *sent_ns, __u64 min_ns, __u64 now, __u32 port)
{
	ring_make_room(head, tail, sent_ns, min_ns, now);
	if (tail - *head < RTT_PENDING)
		return 1;
	count(port, INTCC_FP_RTT_PENDING_FULL, 1);
	return 0;
}

/* A new segment or TSval at the ring's tail (which has room), timed from ``at``. */
static __always_inline void ring_put(__u32 *tail, __u32 *value, __u64 *sent_ns, __u32 v, __u64 at)
{
	__u32 t = *tail;
	value[t & (RTT_PENDING - 1)] = v;
	sent_ns[t & (RTT_PENDING - 1)] = at;
	barrier();
	*tail = t + 1;
}

/* An answer (an ACK number, a TSecr) to the ring: the oldest entry it names gives a sample,
 * older ones it passes are dropped (answered late or never); 1 if it gave a sample. */
static __always_inline int ring_answer(__u32 *head, __u32 tail, __u32 *value, __u64 *sent_ns, __u32 answer,
				       __u64 *min_ns, __u64 now)
{
	__u32 h = *head;
	int sampled = 0;
	for (int i = 0; i < RTT_PENDING && h != tail; i++) {
		__u32 k = h & (RTT_PENDING - 1);
		if (answer == value[k]) {
			rtt_min(min_ns, now, sent_ns[k]);
			sampled = 1;
			h++;
			break;
		}
		if (!seq_after(answer, value[k]))
			break;               /* newer than the answer: still on its way */
		h++;
	}
	*head = h;
	return sampled;
}

/* (TSval, TSecr) of a TCP header's options; 0 if it has none (or not among the first
 * TCP_OPTS_READ: the verifier's bound). Linux's NOP NOP TS first. */
static __always_inline int tcp_timestamps(struct __sk_buff *skb, __u32 opts_off, __u32 opts_len,
					  __u32 *tsval, __u32 *tsecr)
{
	__u8 buf[64];
	if (opts_len < 10 || opts_len > TCP_OPTS_MAX)
		return 0;
	if (opts_len >= 12 && bpf_skb_load_bytes(skb, opts_off, buf, 12) == 0 && buf[0] == 1 && buf[1] == 1 && buf[2] == 8 &&
	    buf[3] == 10) {
		*tsval = bpf_ntohl(*(__u32 *)&buf[4]);
		*tsecr = bpf_ntohl(*(__u32 *)&buf[8]);
		return 1;
	}
	__u32 n = opts_len & 0x3F;
	barrier_var(n);
	if (n < 10 || n > TCP_OPTS_MAX)
		return 0;
	if (bpf_skb_load_bytes(skb, opts_off, buf, n))
		return 0;
	__u32 off = 0;
	/* the first TCP_OPTS_READ options: Linux puts TS first on data, third on a SYN (MSS, SACK-OK) */
	for (int i = 0; i < TCP_OPTS_READ && off + 1 < opts_len; i++) {
		if (off >= TCP_OPTS_MAX)
			return 0;
		__u8 kind = buf[off];
		if (kind == 0)
			return 0;
		if (kind == 1) {
			off++;
			continue;
		}
		if (off + 1 >= TCP_OPTS_MAX)
			return 0;
		__u8 len = buf[off + 1];
		if (len < 2)
			return 0;            /* malformed: stop reading options */
		if (kind == 8 && len == 10 && off + 10 <= opts_len && off + 10 <= TCP_OPTS_MAX) {
			__u32 v, e;
			__builtin_memcpy(&v, &buf[off + 2], 4);
			__builtin_memcpy(&e, &buf[off + 6], 4);
			*tsval = bpf_ntohl(v);
			*tsecr = bpf_ntohl(e);
			return 1;
		}
		off += len;
	}
	return 0;
}

static __always_inline __u32 mix32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* The sketch's count of a flow after adding ``bytes``: its rows' least (double hashing). */
static __always_inline __u64 sketch_add(struct intcc_fp_meter_key *key, __u32 bytes)
{
	__u32 *w = (__u32 *)key, h1 = 0x9e3779b9, h2 = 0x7f4a7c15;
	for (int i = 0; i < (int)(sizeof(*key) / 4); i++) {
		h1 = mix32(h1 ^ w[i]);
		h2 = mix32(h2 + w[i]);
	}
	h2 |= 1;
	__u64 least = ~0ULL;
	for (__u32 row = 0; row < SKETCH_DEPTH; row++) {
		struct intcc_fp_sketch_row *r = bpf_map_lookup_elem(&intcc_fp_sketch, &row);
		if (!r)
			return 0;
		__u32 idx = (h1 + row * h2) & (SKETCH_WIDTH - 1);
		__u32 c = __sync_add_and_fetch(&r->count[idx], bytes);
		if (c < least)
			least = c;
	}
	return least;
}

/* long_age: whether the flow has kept sending for that long (a gap of as long restarts it). */
static __always_inline int aged(struct intcc_fp_meter_key *key, __u64 long_age_ns, __u64 now)
{
	struct intcc_fp_candidate *c = bpf_map_lookup_elem(&intcc_fp_candidates, key);
	if (!c || now - c->last_ns >= long_age_ns) {
		struct intcc_fp_candidate fresh = { .first_ns = now, .last_ns = now };
		bpf_map_update_elem(&intcc_fp_candidates, key, &fresh, BPF_ANY);
		return 0;
	}
	c->last_ns = now;
	return now - c->first_ns >= long_age_ns;
}

/* FlowSplit: the packet's queue at a separated port (its HTB leaf class by skb->priority). */
static __always_inline int sep_split(struct __sk_buff *skb, __u32 port, struct intcc_fp_flow *f, __u32 len,
				     __u64 now)
{
	struct intcc_fp_sep *sep = bpf_map_lookup_elem(&intcc_fp_sep, &port);
	if (!sep)
		return -1;
	struct intcc_fp_meter_key key = { .port = port };
	__builtin_memcpy(&key.flow, f, sizeof(*f));
	__u32 queue = sep->default_queue;
	struct intcc_fp_tracked *t = bpf_map_lookup_elem(&intcc_fp_tracked, &key);
	if (t) {
		__sync_fetch_and_add(&t->bytes, len);
		t->last_ns = now;
		__u32 *q = bpf_map_lookup_elem(&intcc_fp_sep_table, &key);
		if (q)
			queue = *q;
	} else {
		__u64 est = sketch_add(&key, len);
		if (est >= sep->long_bytes || (sep->long_age_ns && aged(&key, sep->long_age_ns, now))) {
			struct intcc_fp_tracked fresh = { .bytes = est, .last_ns = now, .proto = f->proto };
			if (bpf_map_update_elem(&intcc_fp_tracked, &key, &fresh, BPF_NOEXIST) == 0) {
				bpf_map_delete_elem(&intcc_fp_candidates, &key);
				count(port, INTCC_FP_SEP_TRACKED, 1);
			} else {
				count(port, INTCC_FP_SEP_TRACK_FULL, 1);
			}
		}
	}
	if (queue >= SEP_MAX_QUEUES || queue >= sep->queues)
		queue = sep->default_queue;
	skb->priority = ((__u32)SEP_HTB_MAJOR << 16) | (SEP_CLASS_BASE + queue);
	count(port, INTCC_FP_SEP_PACKETS, 1);
	return queue;
}

/* The leaf qdisc of class ``classid`` of the HTB under the port's root tbf (the kernel's
 * qdisc_class_find, read). */
static __always_inline struct Qdisc *htb_leaf(struct Qdisc *root, __u32 classid)
{
	struct tbf_sched_data *tbf = (void *)((__u64)root + bpf_core_field_offset(struct Qdisc, privdata));
	struct Qdisc *htb = BPF_CORE_READ(tbf, qdisc);
	if (!htb)
		return NULL;
	struct htb_sched *q = (void *)((__u64)htb + bpf_core_field_offset(struct Qdisc, privdata));
	struct hlist_head *hash = BPF_CORE_READ(q, clhash.hash);
	__u32 mask = BPF_CORE_READ(q, clhash.hashmask);
	__u32 h = classid;
	h ^= h >> 8;
	h ^= h >> 4;
	struct hlist_node *n = NULL;
	if (!hash || bpf_probe_read_kernel(&n, sizeof(n), &hash[h & mask].first))
		return NULL;
	for (int i = 0; i < 8 && n; i++) {
		struct Qdisc_class_common *c = container_of(n, struct Qdisc_class_common, hnode);
		if (BPF_CORE_READ(c, classid) == classid)
			return BPF_CORE_READ((struct htb_class *)c, leaf.q);
		n = BPF_CORE_READ(n, next);
	}
	return NULL;
}

/* How long a packet entering queue ``queue`` of separated port ``port`` now waits there: the
 * bytes ahead of it at the queue's share of the port's rate (as the stamp reckons its transit;
 * exact for a queue served at a constant share). The port's root qdisc is the one its egress
 * program last saw. */
static __always_inline __u64 own_queue_wait_ns(__u32 port, int queue)
{
	__u64 *root = bpf_map_lookup_elem(&intcc_fp_sep_root, &port);
	struct intcc_fp_sep *sep = bpf_map_lookup_elem(&intcc_fp_sep, &port);
	struct intcc_fp_port *p = bpf_map_lookup_elem(&intcc_fp_ports, &port);
	if (!root || !*root || !sep || !p || !p->rate_kbps || queue >= SEP_MAX_QUEUES || queue < 0)
		return 0;
	struct Qdisc *leaf = htb_leaf((struct Qdisc *)*root, ((__u32)SEP_HTB_MAJOR << 16) | (SEP_CLASS_BASE + queue));
	if (!leaf)
		return 0;
	__u64 backlog = BPF_CORE_READ(leaf, qstats.backlog);
	__u32 w = sep->weight[queue], wt = sep->weight_total;
	__u64 rate_kbps = (__u64)p->rate_kbps * (w && wt ? w : 1) / (w && wt ? wt : 1);
	return rate_kbps ? backlog * 8000000ULL / rate_kbps : 0;
}

/* RTTTap: a TCP packet passing the node at ``now`` (its TCP header at ``l4``), on its way to
 * queue ``queue`` of separated port ``out`` (queue < 0: another port). A segment or TSval timed
 * there is timed from when it leaves that queue (own_queue_wait_ns): the round trip beyond
 * this node's own queue, which separation sizes from it (timed from arrival, a flow alone in
 * a queue that never drains read its own standing queue as RTT, and got a larger buffer). */
static __always_inline void rtt_tap(struct __sk_buff *skb, __u32 port, struct intcc_fp_flow *f, __u32 l4,
				    __u32 ip_end, __u64 now, __u32 out, int queue)
{
	__u64 leaves = 0;                /* when this packet leaves its queue: reckoned once, if timed */
	struct {
		__u16 sport, dport;
		__u32 seq, ack;
		__u8 doff, flags;
	} __attribute__((packed)) th;
	if (bpf_skb_load_bytes(skb, l4, &th, sizeof(th)))
		return;
	__u32 hdr = (__u32)(th.doff >> 4) * 4;
	if (hdr < 20 || l4 + hdr > ip_end) {
		count(port, INTCC_FP_RTT_MALFORMED, 1);
		return;
	}
	struct intcc_fp_rtt_dir *me = bpf_map_lookup_elem(&intcc_fp_rtt, f);
	if (!me) {
		bpf_map_update_elem(&intcc_fp_rtt, f, &rtt_dir_zero, BPF_NOEXIST);
		me = bpf_map_lookup_elem(&intcc_fp_rtt, f);
		if (!me)
			return;
	}
	me->last_ns = now;
	struct intcc_fp_flow rev = {};
	__builtin_memcpy(rev.src, f->dst, 16);
	__builtin_memcpy(rev.dst, f->src, 16);
	rev.proto = f->proto;
	rev.sport = f->dport;
	rev.dport = f->sport;
	struct intcc_fp_rtt_dir *other = bpf_map_lookup_elem(&intcc_fp_rtt, &rev);

	__u32 seq = bpf_ntohl(th.seq), ack = bpf_ntohl(th.ack);
	__u32 seg_len = ip_end - l4 - hdr + ((th.flags & (TCP_FLAG_SYN | TCP_FLAG_FIN)) ? 1 : 0);
	if (seg_len > 0) {
		__u32 eack = seq + seg_len;
		if (!(me->flags & RTT_HAVE_HIGH) || seq_after(eack, me->high_eack)) {        /* new data */
			me->high_eack = eack;
			me->flags |= RTT_HAVE_HIGH;
			if (ring_room(&me->ack_head, me->ack_tail, me->pend_eack_ns, me->ack_min_ns, now, port)) {
				leaves = now + (queue >= 0 ? own_queue_wait_ns(out, queue) : 0);
				ring_put(&me->ack_tail, me->pend_eack, me->pend_eack_ns, eack, leaves);
			}
		} else {                         /* sent again: its ACK cannot tell which copy it answers */
			me->retransmits++;
			__u32 head = me->ack_head, tail = me->ack_tail;
			for (int i = 0; i < RTT_PENDING && tail != head; i++) {      /* Karn: it and all after it */
				if (seq_after(seq, me->pend_eack[(tail - 1) & (RTT_PENDING - 1)]))
					break;
				tail--;
			}
			me->ack_tail = tail;
		}
	}
	if (other && (th.flags & TCP_FLAG_ACK) &&
	    ring_answer(&other->ack_head, other->ack_tail, other->pend_eack, other->pend_eack_ns, ack,
			&other->ack_min_ns, now)) {
		other->ack_samples++;
		count(port, INTCC_FP_RTT_ACK_SAMPLES, 1);
	}
	__u32 tsval, tsecr;
	if (hdr <= 20 || !tcp_timestamps(skb, l4 + 20, hdr - 20, &tsval, &tsecr))
		return;
	if (!(me->flags & RTT_HAVE_TSVAL) || tsval != me->last_tsval) {      /* the first packet with it */
		me->last_tsval = tsval;
		me->flags |= RTT_HAVE_TSVAL;
		if (ring_room(&me->ts_head, me->ts_tail, me->pend_tsval_ns, me->ts_min_ns, now, port)) {
			if (!leaves)
				leaves = now + (queue >= 0 ? own_queue_wait_ns(out, queue) : 0);
			ring_put(&me->ts_tail, me->pend_tsval, me->pend_tsval_ns, tsval, leaves);
		}
	}
	if (other && ring_answer(&other->ts_head, other->ts_tail, other->pend_tsval, other->pend_tsval_ns, tsecr,
				 &other->ts_min_ns, now)) {
		other->ts_samples++;
		count(port, INTCC_FP_RTT_TS_SAMPLES, 1);
	}
}

struct sep_stamp {
	__u32 queue, count, weight, qlen, backlog_bytes, drops, capacity_pkts, weight_total;
};

/* What a separated port stamps of a packet's own queue; 0 if it is none of the queues. */
static __always_inline int sep_queue_of(struct sk_buff *kskb, __u32 port, __u32 priority, struct sep_stamp *st)
{
	struct intcc_fp_sep *sep = bpf_map_lookup_elem(&intcc_fp_sep, &port);
	if (!sep || (priority >> 16) != SEP_HTB_MAJOR)
		return 0;
	__u32 j = (priority & 0xFFFF) - SEP_CLASS_BASE;
	if (j >= SEP_MAX_QUEUES || j >= sep->queues)
		return 0;
	struct Qdisc *leaf = htb_leaf(kskb->dev->qdisc, priority);
	if (!leaf)
		return 0;
	st->queue = j;
	st->count = sep->queues;
	st->weight = sep->weight[j];
	st->weight_total = sep->weight_total;
	st->capacity_pkts = sep->capacity_pkts[j];
	st->qlen = BPF_CORE_READ(leaf, q.qlen);
	st->backlog_bytes = BPF_CORE_READ(leaf, qstats.backlog);
	st->drops = BPF_CORE_READ(leaf, qstats.drops);
	return 1;
}
