// SPDX-License-Identifier: GPL-2.0
/* For the fast path's benchmark only: INT headers inserted at a sending host's egress (tc),
 * so that a node under test receives traffic that already carries a trace and only stamps
 * it, as a transit node does. The same for the kernel's run and the fast path's: the host
 * pays the insertion in both. The headers come from a map the benchmark fills with what
 * INTSource would insert; neighbour discovery is left alone. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TMPL_MAX 280

struct intcc_hs_template {
	__u32 size;
	__u32 pad;
	__u8 bytes[TMPL_MAX];
};

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
	 __type(key, __u32); __type(value, struct intcc_hs_template); } intcc_hs_tmpl SEC(".maps");

SEC("tc")
int intcc_hs_insert(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct intcc_hs_template *t = bpf_map_lookup_elem(&intcc_hs_tmpl, &zero);
	if (!t || t->size == 0 || t->size > TMPL_MAX || skb->protocol != bpf_htons(0x86DD))
		return 0;
	if (bpf_skb_pull_data(skb, 14 + 40 + 2))
		return 0;
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + 14;
	if ((void *)(ip6 + 1) + 2 > end)
		return 0;
	__u8 nh = ip6->nexthdr, *l4 = (void *)(ip6 + 1);
	if (nh != 6 && nh != 17 && !(nh == 58 && (l4[0] == 128 || l4[0] == 129)))
		return 0;
	__u16 plen = bpf_ntohs(ip6->payload_len);
	__u64 size = t->size;          /* 64 bits: a spilled 32-bit size loses its bounds */
	if (size < 8 || size > TMPL_MAX)
		return 0;
	if (bpf_skb_adjust_room(skb, size, BPF_ADJ_ROOM_NET, 0) ||
	    bpf_skb_store_bytes(skb, 54, t->bytes, size, 0))
		return 2;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	ip6 = data + 14;
	if ((void *)(ip6 + 1) > end)
		return 2;
	ip6->nexthdr = 0;
	ip6->payload_len = bpf_htons(plen + size);
	__u8 *hbh = (void *)(ip6 + 1);
	if ((void *)(hbh + 1) > end)
		return 2;
	hbh[0] = nh;              /* the template's HbH is last: the upper layer follows it */
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
