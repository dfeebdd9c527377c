/* SPDX-License-Identifier: BSD-3-Clause
 * The rx parse (parse.h): L2-L4 once per packet, for the rules, the flow
 * hash and every NF.
 */
#include <stdbool.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_hash_crc.h>
#include <rte_ip.h>
#include <rte_net.h>

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

enum sq_drop
mgr_parse_pkt(struct rte_mbuf *pkt)
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
	if (ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return PARSE_OK;
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
