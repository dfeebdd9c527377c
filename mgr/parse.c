/* SPDX-License-Identifier: BSD-3-Clause
 * The rx parse (parse.h): L2-L4 once per packet, for the rules, the flow
 * hash and every NF.
 */
#include <stdbool.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_hash_crc.h>
#include <rte_ip.h>
#include <rte_net.h>
#include <rte_sctp.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "parse.h"

/* A symmetric flow hash: the same for both directions of a connection, so
 * both land on one instance. Sorting each address/port pair makes it so. */
static uint32_t
flow_hash_ipv4(const struct rte_ipv4_hdr *ip, const void *l4, bool has_ports)
{
	uint32_t a = ip->src_addr, b = ip->dst_addr;
	uint32_t ports = 0;
	uint32_t h;

	if (has_ports) {
		const uint16_t *p = l4;
		uint16_t s = p[0], d = p[1];

		ports = s < d ? ((uint32_t)s << 16 | d) : ((uint32_t)d << 16 | s);
	}
	h = rte_hash_crc_4byte(a < b ? a : b, ip->next_proto_id);
	h = rte_hash_crc_4byte(a < b ? b : a, h);
	return rte_hash_crc_4byte(ports, h);
}

/* A frame whose EtherType says IPv4 must carry a readable, consistent IPv4
 * header: NFs trust l3_len and the addresses. rte_net_get_ptype() stops
 * quietly at a header it cannot read, so this check is ours.
 * @return the IPv4 header, or NULL if malformed. */
static const struct rte_ipv4_hdr *
check_ipv4(const struct rte_mbuf *pkt, uint32_t l2_len)
{
	const struct rte_ipv4_hdr *ip;
	uint32_t hdr_len, total_len;

	if (unlikely(pkt->data_len < l2_len + sizeof(*ip)))
		return NULL;
	ip = rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv4_hdr *, l2_len);
	hdr_len = rte_ipv4_hdr_len(ip);
	total_len = rte_be_to_cpu_16(ip->total_length);
	if (unlikely((ip->version_ihl >> 4) != 4 || hdr_len < sizeof(*ip) ||
		     pkt->data_len < l2_len + hdr_len || total_len < hdr_len ||
		     pkt->pkt_len < l2_len + total_len))
		return NULL;
	return ip;
}

/* "No drop": the drop causes start at 0, so success needs a value of its own. */
#define PARSE_OK SQ_DROP_MAX

/* Tags walked at most; a frame with more is a parse drop. */
#define PARSE_MAX_TAGS 8

static bool
is_tag(uint16_t ether_type)
{
	return ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN) ||
	       ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ) ||
	       ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ1) ||
	       ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ2) ||
	       ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ3);
}

/* rte_net_get_ptype() reads one 802.1Q tag, or 802.1ad and one more: a
 * frame with 0x8100/0x8100 or three tags would pass for non-IP, past every
 * IPv4 rule of an NF. Walk the rest of the stack ourselves and let DPDK
 * parse what follows, by showing it the 14 bytes that end at the inner
 * EtherType as an Ethernet header. */
static enum sq_drop
parse_tagged(struct rte_mbuf *pkt, struct rte_net_hdr_lens *lens)
{
	uint32_t off = lens->l2_len - 2; /* the EtherType that is a tag */
	uint32_t n_tags = (lens->l2_len - sizeof(struct rte_ether_hdr)) / 4;
	uint16_t ether_type, shift;
	uint32_t ptype;

	do {
		if (++n_tags > PARSE_MAX_TAGS || pkt->data_len < off + 4 + 2)
			return SQ_DROP_PARSE;
		off += 4;
		ether_type = *rte_pktmbuf_mtod_offset(pkt, const uint16_t *, off);
	} while (is_tag(ether_type));
	shift = (uint16_t)(off + 2 - sizeof(struct rte_ether_hdr));
	rte_pktmbuf_adj(pkt, shift);
	ptype = rte_net_get_ptype(pkt, lens, RTE_PTYPE_ALL_MASK);
	rte_pktmbuf_prepend(pkt, shift);
	lens->l2_len += shift;
	pkt->packet_type = (ptype & ~RTE_PTYPE_L2_MASK) | RTE_PTYPE_L2_ETHER_QINQ;
	pkt->l2_len = lens->l2_len;
	pkt->l3_len = lens->l3_len;
	pkt->l4_len = lens->l4_len;
	return PARSE_OK;
}

/* A symmetric hash of an IPv6 packet's addresses and next header (and ports
 * for TCP and UDP): its flows spread over an rss service's instances, as
 * IPv4's do, not all on one. */
static void
hash_ipv6(struct rte_mbuf *pkt)
{
	const struct rte_ipv6_hdr *ip6;
	const uint8_t *a, *b;
	uint64_t w[4]; /* a and b, aligned: rte_hash_crc() reads 8 bytes at a time */
	uint32_t h, ports = 0, l4 = pkt->packet_type & RTE_PTYPE_L4_MASK;

	if (pkt->data_len < pkt->l2_len + sizeof(*ip6))
		return;
	ip6 = rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv6_hdr *, pkt->l2_len);
	a = ip6->src_addr;
	b = ip6->dst_addr;
	if (memcmp(a, b, 16) > 0) {
		a = ip6->dst_addr;
		b = ip6->src_addr;
	}
	if ((l4 == RTE_PTYPE_L4_TCP || l4 == RTE_PTYPE_L4_UDP) &&
	    pkt->data_len >= pkt->l2_len + pkt->l3_len + 4) {
		const uint16_t *p =
			rte_pktmbuf_mtod_offset(pkt, const uint16_t *, pkt->l2_len + pkt->l3_len);
		uint16_t s = p[0], d = p[1];

		ports = s < d ? ((uint32_t)s << 16 | d) : ((uint32_t)d << 16 | s);
	}
	memcpy(w, a, 16);
	memcpy(w + 2, b, 16);
	h = rte_hash_crc(w, 16, ip6->proto);
	h = rte_hash_crc(w + 2, 16, h);
	pkt->hash.rss = rte_hash_crc_4byte(ports, h);
}

/* An IPv6 packet the manager can read: DPDK found its fixed header (a
 * shorter one leaves the packet type without L3), its payload length fits
 * the frame, and its extension headers (hop-by-hop, routing, fragment,
 * destination options, AH: at most DPDK's limit of them) end within the
 * first segment; else it is dropped (ipv6_header), as a bad IPv4 header is
 * (parse), before any rule or NF reads it. */
static bool
ipv6_readable(const struct rte_mbuf *pkt)
{
	const struct rte_ipv6_hdr *ip6;
	uint32_t ptype = pkt->packet_type;

	if (!RTE_ETH_IS_IPV6_HDR(ptype) || pkt->data_len < pkt->l2_len + sizeof(*ip6))
		return false;
	ip6 = rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv6_hdr *, pkt->l2_len);
	if (sizeof(*ip6) + rte_be_to_cpu_16(ip6->payload_len) > pkt->pkt_len - pkt->l2_len)
		return false;
	if ((ptype & RTE_PTYPE_L3_MASK) != RTE_PTYPE_L3_IPV6) {
		/* DPDK gave up on a chain it could not walk without saying so:
		 * walk it again (extension headers are rare) */
		uint32_t off = pkt->l2_len + sizeof(*ip6);
		int frag = 0;

		if (rte_net_skip_ip6_ext(ip6->proto, pkt, &off, &frag) < 0 ||
		    off != (uint32_t)pkt->l2_len + pkt->l3_len)
			return false;
	}
	return (uint32_t)pkt->l2_len + pkt->l3_len <= pkt->data_len;
}

/* Not IPv4 right after the tags DPDK read: more tags, IPv6 or other. Off
 * the common path, and kept out of it (not inlined). */
static __rte_noinline enum sq_drop
parse_other(struct rte_mbuf *pkt, struct rte_net_hdr_lens *lens, uint16_t ether_type)
{
	if (unlikely(is_tag(ether_type))) {
		enum sq_drop cause = parse_tagged(pkt, lens);

		if (cause != PARSE_OK)
			return cause;
	}
	if (ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6) ||
	    RTE_ETH_IS_IPV6_HDR(pkt->packet_type)) {
		if (!ipv6_readable(pkt))
			return SQ_DROP_IPV6_HEADER;
		hash_ipv6(pkt);
	}
	return PARSE_OK;
}

/* A chain (a jumbo frame) keeps the headers parsed in its first segment, as
 * NFs read them there (squall/pkt.h): L2, L3 and the L4 header of a packet
 * that has one in it. No port's receive splits them; a chain that does is a
 * parse drop. */
static __rte_noinline bool
heads_in_first_segment(const struct rte_mbuf *pkt)
{
	uint32_t need = (uint32_t)pkt->l2_len + pkt->l3_len;

	if (!RTE_ETH_IS_IPV4_HDR(pkt->packet_type) && !RTE_ETH_IS_IPV6_HDR(pkt->packet_type))
		return true; /* (the L2 header: checked by the parse) */
	switch (pkt->packet_type & RTE_PTYPE_L4_MASK) {
	case RTE_PTYPE_L4_TCP:
		need += RTE_MAX((uint32_t)pkt->l4_len, (uint32_t)sizeof(struct rte_tcp_hdr));
		break;
	case RTE_PTYPE_L4_UDP: need += sizeof(struct rte_udp_hdr); break;
	case RTE_PTYPE_L4_SCTP: need += sizeof(struct rte_sctp_hdr); break;
	case RTE_PTYPE_L4_ICMP: need += 8; break;
	default: break; /* a later fragment, or a protocol DPDK does not know */
	}
	return pkt->data_len >= RTE_MIN(need, pkt->pkt_len);
}

static inline enum sq_drop
parse_pkt(struct rte_mbuf *pkt)
{
	struct rte_net_hdr_lens lens = {0};
	const struct rte_ipv4_hdr *ip;
	uint16_t ether_type;
	uint32_t ptype;

	if (unlikely(pkt->pkt_len > SQ_MAX_FRAME_BYTES))
		return SQ_DROP_OVERSIZE;
	if (unlikely(pkt->data_len < sizeof(struct rte_ether_hdr)))
		return SQ_DROP_PARSE;
	ptype = rte_net_get_ptype(pkt, &lens, RTE_PTYPE_ALL_MASK);
	pkt->packet_type = ptype;
	pkt->l2_len = lens.l2_len;
	pkt->l3_len = lens.l3_len;
	pkt->l4_len = lens.l4_len;
	pkt->hash.rss = 0;
	if (lens.l2_len < sizeof(struct rte_ether_hdr) || lens.l2_len > pkt->data_len)
		return SQ_DROP_PARSE;
	/* The EtherType after any VLAN tags: the last two bytes of L2. */
	ether_type = *rte_pktmbuf_mtod_offset(pkt, const uint16_t *, lens.l2_len - 2);
	if (ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
		enum sq_drop cause = parse_other(pkt, &lens, ether_type);

		if (cause != PARSE_OK || !RTE_ETH_IS_IPV4_HDR(pkt->packet_type))
			return cause;
		ptype = pkt->packet_type; /* IPv4 under more tags */
	}
	ip = check_ipv4(pkt, lens.l2_len);
	if (unlikely(ip == NULL))
		return SQ_DROP_PARSE;
	{
		uint32_t l4 = ptype & RTE_PTYPE_L4_MASK;
		bool ports = (l4 == RTE_PTYPE_L4_TCP || l4 == RTE_PTYPE_L4_UDP) &&
			     pkt->data_len >= lens.l2_len + lens.l3_len + 4;

		pkt->hash.rss = flow_hash_ipv4(
			ip, rte_pktmbuf_mtod_offset(pkt, void *, lens.l2_len + lens.l3_len), ports);
	}
	return PARSE_OK;
}

enum sq_drop
mgr_parse_pkt(struct rte_mbuf *pkt)
{
	enum sq_drop cause = parse_pkt(pkt);

	if (unlikely(pkt->nb_segs > 1) && cause == PARSE_OK && !heads_in_first_segment(pkt))
		return SQ_DROP_PARSE;
	return cause;
}
