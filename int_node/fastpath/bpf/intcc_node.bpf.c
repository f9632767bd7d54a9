// SPDX-License-Identifier: GPL-2.0
/* The INT node's fast path: tc programs on the node's interfaces (clsact).
 *
 * ingress (every port): EtherFilter, Classifier(ipv6), IPv6Lookup (an LPM map filled from
 *   the config), INTSource, the transit's ingress half (claims this node's slot: hop limit,
 *   node id, ingress interface, arrival time), FlowMeter, DecHopLimit, EtherRewrite, then a
 *   redirect to the egress port. Anything else (a frame not for this node, no route, hop limit
 *   expiring, extension headers it does not know, IOAM in another layout) is left untouched
 *   to the Python node, which reads the same interface: TC_ACT_OK is "punt", not "drop".
 * egress (ports with INT): the transit's egress half (transit delay, the port's qdisc
 *   backlog, drops and limit, the meter, the opaque state), then INTSink's strip, after a
 *   clone to the mirror interface the Python sink exports from. The queue is the kernel's
 *   qdisc on the port (pfifo, under tbf for a LinkShaper).
 *
 * The slot layout and the constants come from intcc_int_layout.h, generated from
 * int_node/ioam.py at build time (int_node/fastpath/layout.py).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "intcc_int_layout.h"

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define TC_ACT_REDIRECT 7
#define ETH_HLEN 14
#define ETH_P_IPV6 0x86DD
#define IP6_HLEN 40
#define PAYLOAD_OFF (ETH_HLEN + IP6_HLEN)
#define NH_HOPOPTS 0
#define NH_TCP 6
#define NH_UDP 17
#define NH_ROUTING 43
#define NH_FRAGMENT 44
#define NH_DSTOPTS 60
#define TRACE_OFF 62             /* INTSource's layout: HbH at 54, PadN, option 0x31 at 58 */
#define PULL_BYTES (PAYLOAD_OFF + INTCC_MAX_INSERT_BYTES + 8)
#define METER_WINDOWS_MAX 50
#define METER_SEEN_GRAIN_NS 1000000ULL
#define PENDING_EGRESS 0xFFFF    /* a slot claimed at ingress, to be completed at egress */

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

struct intcc_fp_config {
	__u32 node_id;
	__u32 namespace_id;
	__u32 insert_bytes;          /* INTSource's headers: HbH + DOH */
	__u32 hbh_bytes;
	__s64 realtime_minus_mono_ns;
	__u32 rx_drops;              /* the node's receive drops (the Python node sums them) */
	__u32 netns_inum;            /* the node's namespace: the drop tracer sees every one */
	__u8 template[(INTCC_MAX_INSERT_BYTES + 7) & ~7];
};

struct intcc_fp_port {
	__u32 ifindex;
	__u32 flags;                 /* INTCC_FP_PORT_* */
	__u8 mac[6];
	__u8 peer_mac[6];            /* EtherRewrite's destination out of this port */
	__u32 mtu;                   /* INTSource's limit on frames from this port (0: none) */
	__u32 rate_kbps;             /* the LinkShaper's rate (the hop's data-rate field) */
	__u32 capacity_bytes;        /* the queue's advertised capacity */
	__u32 mirror_ifindex;        /* INTSink: a copy of each INT packet goes here first */
	__u64 meter_interval_ns;
	__u64 meter_flow_timeout_ns;
	__u32 meter_keep_fp[METER_WINDOWS_MAX + 1];   /* (1 - alpha)^w in 1/65536 */
	__u32 pad;
};

struct intcc_fp_meter {
	__u64 win_pkts;
	__u64 win_start_ns;
	__u64 rate_pps_fp;           /* arrival rate, pps in 1/65536 */
};

/* A port's flows, as FlowMeter counts them (its count is its table's size): this program adds
 * the flows it inserts, the node's process the flows its purge removes (every tenth of the
 * timeout; walking the whole table in the packet path made one packet in a hundred wait
 * 250 us), each in a map only it writes: a purge writing one count over the other lost the
 * flows inserted while it ran. The count is the difference. */
struct intcc_fp_flow_count {
	__u64 inserted;              /* written here only */
};

struct intcc_fp_flow {
	__u8 src[16];
	__u8 dst[16];
	__u8 proto;
	__u8 pad[3];
	__u16 sport;                 /* network order, as on the wire */
	__u16 dport;
};

struct intcc_fp_meter_key {
	__u32 port;
	struct intcc_fp_flow flow;
};

struct intcc_fp_route_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
	 __type(key, __u32); __type(value, struct intcc_fp_config); } intcc_fp_cfg SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, INTCC_FP_MAX_PORTS);
	 __type(key, __u32); __type(value, struct intcc_fp_port); } intcc_fp_ports SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64);
	 __type(key, __u32); __type(value, __u32); } intcc_fp_ifport SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, 1024); __uint(map_flags, BPF_F_NO_PREALLOC);
	 __type(key, struct intcc_fp_route_key); __type(value, __u32); } intcc_fp_routes SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 65536);
	 __type(key, struct intcc_fp_flow); __type(value, __u32); } intcc_fp_seq SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, INTCC_FP_MAX_PORTS);
	 __type(key, __u32); __type(value, struct intcc_fp_meter); } intcc_fp_meters SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 65536);
	 __type(key, struct intcc_fp_meter_key); __type(value, __u64); } intcc_fp_flows SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, INTCC_FP_MAX_PORTS);
	 __type(key, __u32); __type(value, struct intcc_fp_flow_count); } intcc_fp_flow_counts SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, INTCC_FP_MAX_PORTS);
	 __type(key, __u32); __type(value, __u64); } intcc_fp_flows_removed SEC(".maps");   /* by the node's purge only */
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, INTCC_FP_MAX_PORTS * INTCC_FP_NCOUNTERS);
	 __type(key, __u32); __type(value, __u64); } intcc_fp_counters SEC(".maps");
/* per-flow queue drops at each port, counted where the qdisc frees the packet */
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 65536);
	 __type(key, struct intcc_fp_meter_key); __type(value, __u32); } intcc_fp_flow_drops SEC(".maps");

static __always_inline void count(__u32 port, __u32 which, __u64 n)
{
	__u32 k = port * INTCC_FP_NCOUNTERS + which;
	__u64 *c = bpf_map_lookup_elem(&intcc_fp_counters, &k);
	if (c)
		*c += n;        /* per-CPU: no atomic needed */
}

static __always_inline __u64 now_realtime_ns(const struct intcc_fp_config *cfg)
{
	return bpf_ktime_get_ns() + cfg->realtime_minus_mono_ns;
}

/* The first ``need`` bytes in the linear area, for direct access. Only what is missing is
 * pulled: a TCP segment's payload stays in its pages (pulling it copies, and costs a
 * sender's clone its sharing), headers are all the programs read. */
static __always_inline int linear(struct __sk_buff *skb, __u32 need)
{
	barrier_var(skb);
	if ((void *)(long)skb->data + need <= (void *)(long)skb->data_end)
		return 0;
	if (need > skb->len)
		need = skb->len;
	return bpf_skb_pull_data(skb, need);
}

/* Bytes the INT headers and the upper layer's ports need linear, from the HbH header's own
 * length (int_layout checks the rest); 0 if the packet has no HbH header. */
static __always_inline __u32 headers_need(struct __sk_buff *skb)
{
	barrier_var(skb);
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u8 *h = data + PAYLOAD_OFF;
	if ((void *)(h + 2) > end)
		return PAYLOAD_OFF + 12;
	return PAYLOAD_OFF + ((__u32)h[1] + 1) * 8 + INTCC_DOH_BYTES + 4;
}

/* The flow's 5-tuple as int_node.packet.flow_key reads it; the upper layer at ``l4``. */
static __always_inline int flow_of(void *data, void *end, __u8 proto, __u32 l4, struct intcc_fp_flow *f)
{
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end)
		return -1;
	__builtin_memcpy(f->src, &ip6->saddr, 16);
	__builtin_memcpy(f->dst, &ip6->daddr, 16);
	f->proto = proto;
	f->pad[0] = f->pad[1] = f->pad[2] = 0;
	f->sport = f->dport = 0;
	if (proto == NH_TCP || proto == NH_UDP) {
		if (l4 > PULL_BYTES)
			return -1;
		__u16 *ports = data + l4;
		if ((void *)(ports + 2) > end)
			return -1;
		f->sport = ports[0];
		f->dport = ports[1];
	}
	return 0;
}

#include "intcc_separation.bpf.h"

/* Is the INT at 54 in INTSource's layout (and, if a DOH follows, ours too)? Sets the
 * headers' total length and the upper layer's protocol. The Python node's _trace_offset. */
static __always_inline int int_layout(void *data, void *end, __u32 *int_bytes, __u8 *upper)
{
	__u8 *h = data + PAYLOAD_OFF;
	if ((void *)(h + 12) > end)
		return -1;
	if (h[2] != INTCC_OPT_PADN || h[3] != 0 || h[4] != INTCC_OPT_IOAM_HBH || h[7] != INTCC_IOAM_PREALLOC_TRACE)
		return -1;
	__u32 hbh_len = ((__u32)h[1] + 1) * 8;
	__u32 opt_len = h[5];
	if (opt_len < 10 || ((opt_len - 10) & 3) || 6 + opt_len > hbh_len || (__u32)(h[11] & 0x7F) * 4 > opt_len - 10)
		return -1;
	__u8 nh = h[0];
	__u32 total = hbh_len;
	if (nh == NH_DSTOPTS) {
		if (hbh_len > 256)
			return -1;
		__u8 *doh = data + PAYLOAD_OFF + hbh_len;
		if ((void *)(doh + 8) > end)
			return -1;
		if (doh[1] != INTCC_DOH_BYTES / 8 - 1 || doh[4] != INTCC_OPT_IOAM_DST || doh[7] != INTCC_IOAM_E2E)
			return -1;
		nh = doh[0];
		total += INTCC_DOH_BYTES;
	}
	if (nh == NH_HOPOPTS || nh == NH_ROUTING || nh == NH_FRAGMENT || nh == NH_DSTOPTS)
		return -1;
	if (total > PULL_BYTES - PAYLOAD_OFF)
		return -1;
	*int_bytes = total;
	*upper = nh;
	return 0;
}

/* FlowMeter: EWMA arrival rate over windows, flows seen within the timeout. */
static __always_inline void meter(__u32 port, const struct intcc_fp_port *p, struct intcc_fp_flow *f, __u64 now)
{
	struct intcc_fp_meter *m = bpf_map_lookup_elem(&intcc_fp_meters, &port);
	if (!m)
		return;
	/* lock-free: the CPU that moves the window on takes its count and updates the rate; a
	 * packet counted on another CPU in the same instant may land in the next window */
	__u64 start = m->win_start_ns;
	__u64 elapsed = now - start;
	if (elapsed >= p->meter_interval_ns && __sync_val_compare_and_swap(&m->win_start_ns, start, now) == start) {
		__u64 pkts = __sync_lock_test_and_set(&m->win_pkts, 0);
		if (start && elapsed) {
			__u64 windows = p->meter_interval_ns ? elapsed / p->meter_interval_ns : 1;
			if (windows > METER_WINDOWS_MAX)
				windows = METER_WINDOWS_MAX;
			__u64 keep = p->meter_keep_fp[windows];
			__u64 pps_fp = pkts * 1000000000ULL * 65536 / elapsed;
			m->rate_pps_fp = (m->rate_pps_fp * keep + pps_fp * (65536 - keep)) >> 16;
		}
	}
	__sync_fetch_and_add(&m->win_pkts, 1);

	struct intcc_fp_meter_key key = { .port = port };
	__builtin_memcpy(&key.flow, f, sizeof(*f));
	__u64 *seen = bpf_map_lookup_elem(&intcc_fp_flows, &key);
	if (seen) {
		if (now - *seen > METER_SEEN_GRAIN_NS)   /* written once a millisecond, not per packet */
			*seen = now;
	} else if (bpf_map_update_elem(&intcc_fp_flows, &key, &now, BPF_NOEXIST) == 0) {
		struct intcc_fp_flow_count *fc = bpf_map_lookup_elem(&intcc_fp_flow_counts, &port);
		if (fc)
			__sync_fetch_and_add(&fc->inserted, 1);
	} else {
		count(port, INTCC_FP_FLOW_TABLE_FULL, 1);
	}
}

static __always_inline int insert_int(struct __sk_buff *skb, const struct intcc_fp_config *cfg,
				      struct intcc_fp_flow *f, __u64 now_rt)
{
	__u32 size = cfg->insert_bytes;
	if (size == 0 || size > INTCC_MAX_INSERT_BYTES || cfg->hbh_bytes + INTCC_DOH_BYTES != size)
		return -1;
	__u32 seq = 0;
	__u32 *s = bpf_map_lookup_elem(&intcc_fp_seq, f);
	if (s) {
		seq = __sync_fetch_and_add(s, 1);
	} else {
		__u32 one = 1;
		bpf_map_update_elem(&intcc_fp_seq, f, &one, BPF_ANY);
	}
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end)
		return -1;
	__u8 nh = ip6->nexthdr;
	__u16 plen = bpf_ntohs(ip6->payload_len);
	if (bpf_skb_adjust_room(skb, size, BPF_ADJ_ROOM_NET, 0))
		return -1;
	if (bpf_skb_store_bytes(skb, PAYLOAD_OFF, cfg->template, size, 0))
		return -1;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end)
		return -1;
	ip6->nexthdr = NH_HOPOPTS;
	ip6->payload_len = bpf_htons(plen + size);
	__u32 doh_off = PAYLOAD_OFF + (cfg->hbh_bytes & 0x1FF);
	__u8 *doh = data + doh_off;
	if ((void *)(doh + INTCC_DOH_BYTES) > end)
		return -1;
	doh[0] = nh;
	__u32 *e2e = (__u32 *)(doh + 12);
	e2e[0] = bpf_htonl(seq);
	e2e[1] = bpf_htonl((__u32)(now_rt / 1000000000ULL));
	e2e[2] = bpf_htonl((__u32)(now_rt % 1000000000ULL));
	return 0;
}

SEC("tc")
int intcc_fp_ingress(struct __sk_buff *skb)
{
	__u32 zero = 0, ifindex = skb->ifindex;
	struct intcc_fp_config *cfg = bpf_map_lookup_elem(&intcc_fp_cfg, &zero);
	__u32 *pin = bpf_map_lookup_elem(&intcc_fp_ifport, &ifindex);
	if (!cfg || !pin)
		return TC_ACT_OK;
	__u32 in = *pin;
	__u32 out, len;
	__u8 hop_limit, nh, upper;
	struct intcc_fp_port *ip = bpf_map_lookup_elem(&intcc_fp_ports, &in);
	if (!ip || !(ip->flags & INTCC_FP_PORT_ENABLED))
		return TC_ACT_OK;
	/* every frame of the port is counted once: taken (rx_packets) or left (punted) */
	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		goto punt;
	linear(skb, PAYLOAD_OFF + 12);
	barrier_var(skb);
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end)
		goto punt;
	if (*(__u32 *)eth->h_dest != *(__u32 *)ip->mac || *(__u16 *)&eth->h_dest[4] != *(__u16 *)&ip->mac[4])
		goto punt;               /* neighbour discovery and the like: the kernel's */
	__u64 now = bpf_ktime_get_ns();
	len = skb->len;

	/* everything is decided before anything is changed: a punted frame is untouched */
	struct intcc_fp_route_key rk = { .prefixlen = 128 };
	__builtin_memcpy(rk.addr, &ip6->daddr, 16);
	__u32 *pout = bpf_map_lookup_elem(&intcc_fp_routes, &rk);
	if (!pout)
		goto punt;
	out = *pout;
	struct intcc_fp_port *op = bpf_map_lookup_elem(&intcc_fp_ports, &out);
	if (!op || !(op->flags & INTCC_FP_PORT_FAST_EGRESS) || ip6->hop_limit <= 1)
		goto punt;
	nh = ip6->nexthdr;
	upper = nh;
	__u32 int_bytes = 0;
	int has_int = nh == NH_HOPOPTS;
	if (has_int) {
		linear(skb, headers_need(skb));
		barrier_var(skb);
		data = (void *)(long)skb->data;
		end = (void *)(long)skb->data_end;
		if (int_layout(data, end, &int_bytes, &upper))
			goto punt;
	} else if (nh == NH_ROUTING || nh == NH_FRAGMENT || nh == NH_DSTOPTS) {
		goto punt;
	}
	ip6 = data + ETH_HLEN;          /* the pull may have moved the packet */
	if ((void *)(ip6 + 1) > end)
		goto punt;
	struct intcc_fp_flow flow;
	if (flow_of(data, end, upper, PAYLOAD_OFF + int_bytes, &flow))
		goto punt;
	hop_limit = ip6->hop_limit;
	__u64 now_rt = now_realtime_ns(cfg);
	int sep_queue = -1;              /* RTT separation's queue at the egress port */
	if (op->flags & INTCC_FP_PORT_SEPARATED)
		sep_queue = sep_split(skb, out, &flow, len, now);
	if ((ip->flags & INTCC_FP_PORT_RTT_TAP) && upper == NH_TCP)      /* as it reaches the node, before INTSource */
		rtt_tap(skb, in, &flow, PAYLOAD_OFF + int_bytes, PAYLOAD_OFF + bpf_ntohs(ip6->payload_len), now, out,
			sep_queue);

	count(in, INTCC_FP_RX_PACKETS, 1);
	count(in, INTCC_FP_RX_BYTES, len);
	if (ip->flags & INTCC_FP_PORT_SOURCE) {
		if (has_int) {
			count(in, INTCC_FP_SRC_SKIPPED_HAS_HBH, 1);
		} else if (ip->mtu && len - ETH_HLEN + cfg->insert_bytes > ip->mtu) {
			count(in, INTCC_FP_SRC_SKIPPED_MTU, 1);
		} else if (linear(skb, PULL_BYTES), insert_int(skb, cfg, &flow, now_rt)) {
			/* the pull first: a TCP segment whose payload stayed in its pages behind the new
			 * headers went to the receiver at a third of the rate (measured; why is open) */
			count(in, INTCC_FP_ADJUST_FAILED, 1);
			return TC_ACT_SHOT;     /* changed half-way: counted, not forwarded */
		} else {
			count(in, INTCC_FP_SRC_INSERTED, 1);
			has_int = 1;
		}
	}
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	if (op->flags & INTCC_FP_PORT_TRANSIT) {
		__u8 *t = data + TRACE_OFF;
		if (!has_int) {
			count(out, INTCC_FP_TR_NO_INT, 1);
		} else if ((void *)(t + INTCC_TRACE_HDR_BYTES) > end) {
			return TC_ACT_SHOT;     /* cannot be: int_layout read this far */
		} else if (((__u32)t[0] << 8 | t[1]) != cfg->namespace_id) {
			count(out, INTCC_FP_TR_FOREIGN_NAMESPACE, 1);
		} else if ((t[2] >> 3) != INTCC_NODE_LEN_WORDS ||
			   ((__u32)t[4] << 16 | (__u32)t[5] << 8 | t[6]) != INTCC_TRACE_TYPE) {
			count(out, INTCC_FP_TR_UNSUPPORTED_TRACE, 1);
		} else {
			__u32 remaining = t[3] & 0x7F;
			if (remaining < INTCC_SLOT_WORDS) {
				t[2] |= INTCC_FLAG_OVERFLOW_BIT;
				count(out, INTCC_FP_TR_OVERFLOW, 1);
			} else {
				remaining -= INTCC_SLOT_WORDS;
				t[3] = (t[3] & 0x80) | remaining;
				struct {
					__u32 hoplim_node_id;
					__u16 ingress_if, egress_if;
					__u32 ts_sec, ts_frac;
				} head = {
					.hoplim_node_id = bpf_htonl(((__u32)(hop_limit - 1) << 24) | (cfg->node_id & 0xFFFFFF)),
					.ingress_if = bpf_htons(ifindex & 0xFFFF),
					.egress_if = bpf_htons(PENDING_EGRESS),
					.ts_sec = bpf_htonl((__u32)(now_rt / 1000000000ULL)),
					.ts_frac = bpf_htonl((__u32)(now_rt % 1000000000ULL)),
				};
				bpf_skb_store_bytes(skb, TRACE_OFF + INTCC_TRACE_HDR_BYTES + remaining * 4,
						    &head, sizeof(head), 0);
				count(out, INTCC_FP_TR_CLAIMED, 1);
			}
		}
	}
	if (op->flags & INTCC_FP_PORT_METER) {
		meter(out, op, &flow, now);
		count(out, INTCC_FP_METER_PACKETS, 1);
	}

	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end)
		return TC_ACT_SHOT;
	ip6->hop_limit = hop_limit - 1;        /* no checksum covers it */
	__builtin_memcpy(eth->h_dest, op->peer_mac, 6);
	__builtin_memcpy(eth->h_source, op->mac, 6);
	if (op->flags & INTCC_FP_PORT_SINK && !has_int)
		count(out, INTCC_FP_SINK_NO_INT, 1);
	long rc = bpf_redirect(op->ifindex, 0);
	if (rc == TC_ACT_REDIRECT) {
		count(out, INTCC_FP_TX_PACKETS, 1);
		count(out, INTCC_FP_TX_BYTES, skb->len);
	} else {
		count(out, INTCC_FP_REDIRECT_FAILED, 1);
	}
	return rc;
punt:
	count(in, INTCC_FP_PUNTED, 1);
	return TC_ACT_OK;
}

static __always_inline __u32 flow_drops_of(__u32 port, struct intcc_fp_flow *f)
{
	struct intcc_fp_meter_key key = { .port = port };
	__builtin_memcpy(&key.flow, f, sizeof(*f));
	__u32 *n = bpf_map_lookup_elem(&intcc_fp_flow_drops, &key);
	return n ? *n : 0;
}

static __always_inline void stamp_egress(struct __sk_buff *skb, const struct intcc_fp_config *cfg, __u32 port,
					 const struct intcc_fp_port *p, struct intcc_fp_flow *f, __u32 off)
{
	struct intcc_node_slot s;
	if (bpf_skb_load_bytes(skb, off, &s, sizeof(s)))
		return;
	if ((bpf_ntohl(s.hoplim_node_id) & 0xFFFFFF) != (cfg->node_id & 0xFFFFFF) ||
	    s.egress_if != bpf_htons(PENDING_EGRESS))
		return;                /* stamped by the Python node, or another node's */
	__u64 now_rt = now_realtime_ns(cfg);
	__u64 rx = (__u64)bpf_ntohl(s.ts_sec) * 1000000000ULL + bpf_ntohl(s.ts_frac);
	__s64 transit = (__s64)(now_rt - rx);
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	struct Qdisc *q = kskb->dev->qdisc;
	__u32 qlen = q->q.qlen, drops = q->qstats.drops, backlog_bytes = q->qstats.backlog;
	__u32 capacity_bytes = p->capacity_bytes, rate_kbps = p->rate_kbps;
	struct sep_stamp sep = { .count = 1, .weight = 1 };
	if ((p->flags & INTCC_FP_PORT_SEPARATED) && sep_queue_of(kskb, port, skb->priority, &sep)) {
		/* the packet's own queue, as INTTransit(queue drr) stamps it: its depth and its share of
		 * the port's rate (the weights of the queues with flows) */
		qlen = sep.qlen;
		backlog_bytes = sep.backlog_bytes;
		drops = sep.drops;
		capacity_bytes = sep.capacity_pkts * INTCC_QUEUE_SLOT_BYTES;
		if (sep.weight_total && sep.weight)
			rate_kbps = (__u32)((__u64)rate_kbps * sep.weight / sep.weight_total);
	}
	struct intcc_fp_meter *m = bpf_map_lookup_elem(&intcc_fp_meters, &port);
	struct intcc_fp_flow_count *fc = bpf_map_lookup_elem(&intcc_fp_flow_counts, &port);
	__u32 flow_count = 0, arrival_pps = 0;
	__u64 *removed = bpf_map_lookup_elem(&intcc_fp_flows_removed, &port);
	if (m && fc && removed && (p->flags & INTCC_FP_PORT_METER)) {
		/* a purge's removal lands a moment after its delete: never below none */
		flow_count = fc->inserted > *removed ? (__u32)(fc->inserted - *removed) : 0;
		arrival_pps = m->rate_pps_fp >> 16;
	}
	s.egress_if = bpf_htons(skb->ifindex & 0xFFFF);
	/* the program runs before the qdisc: the wait in it, behind the bytes ahead at the port's
	 * rate, is added (exact for a FIFO drained at a constant rate, as tbf does once its burst
	 * is spent) */
	if (rate_kbps)
		transit += (__u64)backlog_bytes * 8000000ULL / rate_kbps;
	s.transit_delay_ns = bpf_htonl(transit >= 0 && transit <= INTCC_TRANSIT_DELAY_MAX ? (__u32)transit : 1U << 31);
	/* a packet-bounded queue advertises one Queue slot (1500 B) per packet, as Queue does */
	s.queue_depth_bytes = bpf_htonl(qlen * INTCC_QUEUE_SLOT_BYTES);
	s.buffer_occupancy = bpf_htonl(qlen);
	s.opaque_hdr = bpf_htonl(INTCC_OPAQUE_HDR);
	s.rssi_dbm = -128;
	s.mcs = 0xFF;
	s.flow_count = bpf_htons(flow_count & 0xFFFF);
	s.data_rate_kbps = bpf_htonl(p->rate_kbps);
	s.queue_drops = bpf_htonl(drops);
	s.link_losses = 0;
	s.arrival_rate_pps = bpf_htonl(arrival_pps);
	s.queue_capacity_bytes = bpf_htonl(capacity_bytes);
	s.rx_drops = bpf_htonl(cfg->rx_drops);
	/* a port that never dropped has no flow with drops: no lookup */
	s.flow_queue_drops = bpf_htons(drops ? flow_drops_of(port, f) & 0xFFFF : 0);
	s.flow_link_losses = 0;
	s.queue_index = sep.queue;
	s.queue_count = sep.count;
	s.queue_weight = bpf_htons(sep.weight);
	s.reconfig_period_ms = 0;
	s.reconfig_downtime_ms = 0;
	s.reconfig_next_ms = bpf_htons(INTCC_RECONFIG_NEXT_NONE);
	s.reconfig_epoch = 0;
	s.reconfig_flags = 0;
	if (bpf_skb_store_bytes(skb, off, &s, sizeof(s), 0) == 0)
		count(port, INTCC_FP_TR_STAMPED, 1);
}

SEC("tc")
int intcc_fp_egress(struct __sk_buff *skb)
{
	__u32 zero = 0, ifindex = skb->ifindex;
	struct intcc_fp_config *cfg = bpf_map_lookup_elem(&intcc_fp_cfg, &zero);
	__u32 *pport = bpf_map_lookup_elem(&intcc_fp_ifport, &ifindex);
	if (!cfg || !pport)
		return TC_ACT_OK;
	__u32 port = *pport;
	struct intcc_fp_port *p = bpf_map_lookup_elem(&intcc_fp_ports, &port);
	if (p && (p->flags & INTCC_FP_PORT_SEPARATED)) {
		/* the port's root qdisc, for the ingress programs' own-queue wait */
		struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
		__u64 root = (__u64)kskb->dev->qdisc;
		__u64 *seen = bpf_map_lookup_elem(&intcc_fp_sep_root, &port);
		if (seen && *seen != root)
			*seen = root;
	}
	if (!p || !(p->flags & (INTCC_FP_PORT_TRANSIT | INTCC_FP_PORT_SINK)) ||
	    skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;
	linear(skb, PAYLOAD_OFF + 12);
	barrier_var(skb);
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end || ip6->nexthdr != NH_HOPOPTS)
		return TC_ACT_OK;
	linear(skb, headers_need(skb));
	barrier_var(skb);
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	__u32 int_bytes = 0;
	__u8 upper = 0;
	struct intcc_fp_flow flow;
	if (int_layout(data, end, &int_bytes, &upper) || flow_of(data, end, upper, PAYLOAD_OFF + int_bytes, &flow))
		return TC_ACT_OK;      /* the Python node's frames, in layouts it handled itself */
	if (p->flags & INTCC_FP_PORT_TRANSIT) {
		__u8 *h = data + PAYLOAD_OFF;
		__u8 *t = data + TRACE_OFF;
		if ((void *)(t + INTCC_TRACE_HDR_BYTES) > end)
			return TC_ACT_OK;
		__u32 remaining = t[3] & 0x7F;
		__u32 space = (__u32)h[5] - 10;     /* int_layout: the option is 10 + 4n bytes */
		if (remaining * 4 + INTCC_NODE_SLOT_BYTES <= space)
			stamp_egress(skb, cfg, port, p, &flow, TRACE_OFF + INTCC_TRACE_HDR_BYTES + remaining * 4);
	}
	if (!(p->flags & INTCC_FP_PORT_SINK))
		return TC_ACT_OK;
	if (p->mirror_ifindex) {
		if (bpf_clone_redirect(skb, p->mirror_ifindex, 0) == 0)
			count(port, INTCC_FP_SINK_MIRRORED, 1);
		else
			count(port, INTCC_FP_SINK_MIRROR_FAILED, 1);
	}
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end)
		return TC_ACT_SHOT;
	__u32 plen = bpf_ntohs(ip6->payload_len);
	if (plen < int_bytes || PAYLOAD_OFF + plen > skb->len) {
		count(port, INTCC_FP_SINK_MALFORMED, 1);    /* as INTSink: cannot be restored */
		return TC_ACT_SHOT;
	}
	if (bpf_skb_adjust_room(skb, -(__s32)int_bytes, BPF_ADJ_ROOM_NET, 0)) {
		count(port, INTCC_FP_ADJUST_FAILED, 1);
		return TC_ACT_SHOT;
	}
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end)
		return TC_ACT_SHOT;
	ip6->nexthdr = upper;
	ip6->payload_len = bpf_htons(plen - int_bytes);
	count(port, INTCC_FP_SINK_STRIPPED, 1);
	return TC_ACT_OK;
}

/* A packet the port's qdisc dropped: its flow's own queue drops at that port. */
SEC("tp_btf/kfree_skb")
int BPF_PROG(intcc_fp_qdisc_drop, struct sk_buff *skb, void *location, enum skb_drop_reason reason,
	     struct sock *rx_sk)
{
	if (reason != SKB_DROP_REASON_QDISC_DROP && reason != SKB_DROP_REASON_QDISC_OVERLIMIT &&
	    reason != SKB_DROP_REASON_QDISC_CONGESTED)
		return 0;
	__u32 zero = 0;
	struct intcc_fp_config *cfg = bpf_map_lookup_elem(&intcc_fp_cfg, &zero);
	struct net_device *dev = skb->dev;
	if (!cfg || !dev || dev->nd_net.net->ns.inum != cfg->netns_inum)
		return 0;           /* another namespace's device with the same index */
	__u32 ifindex = dev->ifindex;
	__u32 *pport = bpf_map_lookup_elem(&intcc_fp_ifport, &ifindex);
	if (!pport)
		return 0;
	__u8 hdr[PAYLOAD_OFF + 8];
	unsigned char *head = skb->head;
	__u16 mac = skb->mac_header;
	if (bpf_probe_read_kernel(hdr, PAYLOAD_OFF + 8, head + mac))
		return 0;
	struct intcc_fp_meter_key key = { .port = *pport };
	__u8 nh = hdr[ETH_HLEN + 6];
	__u32 l4 = PAYLOAD_OFF;
	if (nh == NH_HOPOPTS) {                /* INT: the upper layer after it (and its DOH) */
		__u32 hbh = ((__u32)hdr[PAYLOAD_OFF + 1] + 1) * 8;
		nh = hdr[PAYLOAD_OFF];
		l4 += hbh;
		if (nh == NH_DSTOPTS) {
			__u8 doh[2];
			if (l4 > PAYLOAD_OFF + 256 || bpf_probe_read_kernel(doh, 2, head + mac + l4))
				return 0;
			nh = doh[0];
			l4 += ((__u32)doh[1] + 1) * 8;
		}
	}
	__builtin_memcpy(key.flow.src, hdr + ETH_HLEN + 8, 16);
	__builtin_memcpy(key.flow.dst, hdr + ETH_HLEN + 24, 16);
	key.flow.proto = nh;
	if ((nh == NH_TCP || nh == NH_UDP) && l4 < 1024) {
		__u16 ports[2];
		if (bpf_probe_read_kernel(ports, 4, head + mac + l4))
			return 0;
		key.flow.sport = ports[0];
		key.flow.dport = ports[1];
	}
	__u32 *n = bpf_map_lookup_elem(&intcc_fp_flow_drops, &key);
	if (n) {
		__sync_fetch_and_add(n, 1);
	} else {
		__u32 one = 1;
		bpf_map_update_elem(&intcc_fp_flow_drops, &key, &one, BPF_NOEXIST);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
