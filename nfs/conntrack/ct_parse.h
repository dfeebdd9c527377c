/* SPDX-License-Identifier: BSD-3-Clause
 * From a frame to the struct ct_pkt of ct.h: IPv4 or IPv6 (walking
 * hop-by-hop, routing, destination options and AH headers), TCP, UDP, SCTP,
 * ICMP and ICMPv6 (with an error's quoted packet). Every length is checked
 * against the frame; the stateful NFs share it, and
 * tests/unit/test_conntrack.c feeds it odd packets.
 *
 * The NFs start at the IP header the manager's parse found (ct_parse_pkt():
 * sq_pkt_ipv4/sq_pkt_ipv6, after any number of VLAN tags it walked), not at
 * an EtherType of their own reading: a third tag would otherwise hide an IP
 * packet as "not IP", past every security group. ct_parse() reads the
 * Ethernet header itself (up to two tags), for tests on bare frames.
 */
#ifndef SQUALL_NFS_CONNTRACK_CT_PARSE_H
#define SQUALL_NFS_CONNTRACK_CT_PARSE_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <squall/pkt.h>

#include "ct.h"

/* ct_parse() results besides 0 */
#define CT_PARSE_NOT_IP    1         /* not IPv4 or IPv6: ARP, LLDP, ... */
#define CT_PARSE_UNTRACKED 2         /* IPv6 neighbour discovery, MLD: untracked, as in netfilter */
#define CT_PARSE_BAD       (-EINVAL) /* truncated, bad IHL or length */
#define CT_PARSE_FRAGMENT  (-ENOTSUP) /* a fragment: no reassembly here */

#define CT_ETH_IPV4 0x0800
#define CT_ETH_IPV6 0x86dd
#define CT_ETH_VLAN 0x8100
#define CT_ETH_QINQ 0x88a8

/** Where the headers of a parsed frame start (offsets from the frame). */
struct ct_hdrs {
	uint32_t l3_off, l4_off;
	uint32_t l3_len; /* IP header + payload, as the IP length says */
	uint8_t ipv6;
};

static inline uint16_t
ct_rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t
ct_rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void
ct_addr_v4(uint8_t a[16], const uint8_t *v4)
{
	memset(a, 0, 10);
	a[10] = a[11] = 0xff;
	memcpy(a + 12, v4, 4);
}

/* The IP header at @p ip (@p len bytes of packet from it, of which the
 * first @p avail can be read there: a jumbo frame's later segments are
 * elsewhere): addresses, protocol, where L4 starts and how long it is. Every
 * header byte it reads lies within @p avail.
 * @return 0, CT_PARSE_BAD or CT_PARSE_FRAGMENT. */
static inline int
ct_parse_ip(const uint8_t *ip, uint32_t len, uint32_t avail, bool ipv6, struct ct_key *k,
	    uint32_t *l4_off, uint32_t *l4_len, bool inner)
{
	uint32_t ihl, tot, off, n;
	uint8_t nh;
	int hops;

	if (!ipv6) {
		if (avail < 20 || (ip[0] >> 4) != 4)
			return CT_PARSE_BAD;
		ihl = (uint32_t)(ip[0] & 0xf) * 4;
		tot = ct_rd16(ip + 2);
		if (ihl < 20 || ihl > avail)
			return CT_PARSE_BAD;
		/* A quoted packet is cut short by design (RFC 792: header + 8 B). */
		if (!inner && (tot < ihl || tot > len))
			return CT_PARSE_BAD;
		if (inner || tot > len)
			tot = len;
		if ((ct_rd16(ip + 6) & 0x3fff) != 0 && !inner)
			return CT_PARSE_FRAGMENT; /* MF or an offset */
		ct_addr_v4(k->src, ip + 12);
		ct_addr_v4(k->dst, ip + 16);
		k->proto = ip[9];
		*l4_off = ihl;
		*l4_len = tot - ihl;
		return 0;
	}
	if (avail < 40 || (ip[0] >> 4) != 6)
		return CT_PARSE_BAD;
	tot = 40 + (uint32_t)ct_rd16(ip + 4);
	if (!inner && tot > len)
		return CT_PARSE_BAD;
	if (inner || tot > len)
		tot = len;
	memcpy(k->src, ip + 8, 16);
	memcpy(k->dst, ip + 24, 16);
	nh = ip[6];
	off = 40;
	for (hops = 0; hops < 8; hops++) {
		switch (nh) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
			if (off + 8 > tot || off + 8 > avail)
				return CT_PARSE_BAD;
			n = ((uint32_t)ip[off + 1] + 1) * 8;
			break;
		case IPPROTO_AH:
			if (off + 8 > tot || off + 8 > avail)
				return CT_PARSE_BAD;
			n = ((uint32_t)ip[off + 1] + 2) * 4;
			break;
		case IPPROTO_FRAGMENT: return CT_PARSE_FRAGMENT;
		default:
			k->proto = nh;
			*l4_off = off;
			*l4_len = tot - off;
			return 0;
		}
		if (off + n > tot)
			return CT_PARSE_BAD;
		nh = ip[off];
		off += n;
	}
	return CT_PARSE_BAD; /* a chain of more than 8 extension headers */
}

static inline bool
ct_proto_has_ports(uint8_t proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP;
}

static inline bool
ct_is_icmp(uint8_t proto)
{
	return proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
}

static inline bool
ct_icmp_is_request(bool v6, uint8_t type)
{
	return v6 ? type == 128 : (type == 8 || type == 13);
}

static inline bool
ct_icmp_is_reply(bool v6, uint8_t type)
{
	return v6 ? type == 129 : (type == 0 || type == 14);
}

static inline bool
ct_icmp_is_error(bool v6, uint8_t type)
{
	return v6 ? (type >= 1 && type <= 4)
		  : (type == 3 || type == 4 || type == 5 || type == 11 || type == 12);
}

/* TCP's window scale option, from a SYN's options. */
static inline void
ct_tcp_options(const uint8_t *opt, uint32_t len, struct ct_pkt *p)
{
	uint32_t i = 0;

	while (i < len) {
		if (opt[i] == 0)
			break;
		if (opt[i] == 1) {
			i++;
			continue;
		}
		if (i + 1 >= len || opt[i + 1] < 2 || i + opt[i + 1] > len)
			break;
		if (opt[i] == 3 && opt[i + 1] == 3) {
			p->has_wscale = true;
			p->wscale = opt[i + 2];
		}
		i += opt[i + 1];
	}
}

/**
 * Fill @p p (and @p h) from the IP packet at @p frame + @p off (IPv6 if
 * @p v6), the frame @p len bytes long, of which the first @p avail are at
 * @p frame (a jumbo frame's first segment), in zone @p zone. The headers
 * read must lie in those: the manager keeps a multi-segment packet's
 * headers in its first segment (squall/pkt.h).
 * @return 0; CT_PARSE_UNTRACKED (IPv6 ND, MLD); CT_PARSE_BAD for a truncated
 *   frame, a bad IHL, an IP length beyond the frame, a truncated
 *   TCP/UDP/ICMP header or a TCP data offset below 5 or beyond the packet,
 *   or a header past @p avail; CT_PARSE_FRAGMENT.
 */
static inline int
ct_parse_l3(const uint8_t *frame, uint32_t len, uint32_t avail, uint32_t off, bool v6,
	    uint16_t zone, struct ct_pkt *p, struct ct_hdrs *h)
{
	uint32_t l4_off, l4_len, l4_avail, doff, ioff, ilen;
	const uint8_t *l4;
	int ret;

	memset(p, 0, sizeof(*p));
	avail = avail < len ? avail : len;
	if (off > avail)
		return CT_PARSE_BAD;
	ret = ct_parse_ip(frame + off, len - off, avail - off, v6, &p->key, &l4_off, &l4_len,
			  false);
	if (ret != 0)
		return ret;
	/* (an IPv6 extension header may end where avail does, or past it) */
	l4_avail = avail - off > l4_off ? avail - off - l4_off : 0;
	if (l4_avail > l4_len)
		l4_avail = l4_len;
	p->key.zone = zone;
	h->l3_off = off;
	h->l4_off = off + l4_off;
	h->l3_len = l4_off + l4_len;
	h->ipv6 = v6;
	l4 = frame + off + l4_off;
	switch (p->key.proto) {
	case IPPROTO_TCP:
		if (l4_len < 20 || l4_avail < 20)
			return CT_PARSE_BAD;
		doff = (uint32_t)(l4[12] >> 4) * 4;
		if (doff < 20 || doff > l4_len || doff > l4_avail)
			return CT_PARSE_BAD;
		p->key.sport = ct_rd16(l4);
		p->key.dport = ct_rd16(l4 + 2);
		p->seq = ct_rd32(l4 + 4);
		p->ack = ct_rd32(l4 + 8);
		p->tcp_flags = l4[13];
		p->win = ct_rd16(l4 + 14);
		p->payload_len = l4_len - doff;
		if (p->tcp_flags & CT_TCP_SYN)
			ct_tcp_options(l4 + 20, doff - 20, p);
		return 0;
	case IPPROTO_UDP:
	case IPPROTO_SCTP:
		if (l4_len < 8 || l4_avail < 8)
			return CT_PARSE_BAD;
		p->key.sport = ct_rd16(l4);
		p->key.dport = ct_rd16(l4 + 2);
		return 0;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (l4_len < 8 || l4_avail < 8 || (p->key.proto == IPPROTO_ICMPV6) != v6)
			return CT_PARSE_BAD;
		p->icmp_type = l4[0];
		p->icmp_request = ct_icmp_is_request(v6, l4[0]);
		p->icmp_reply = ct_icmp_is_reply(v6, l4[0]);
		p->icmp_error = ct_icmp_is_error(v6, l4[0]);
		if (p->icmp_request || p->icmp_reply) {
			p->key.sport = p->key.dport = ct_rd16(l4 + 4);
			return 0;
		}
		/* MLD (130-132, 143) and router/neighbour discovery (133-137):
		 * IPv6 cannot work without them, and they belong to no connection
		 * (netfilter's icmpv6 tracker leaves them untracked too). */
		if (v6 && ((l4[0] >= 130 && l4[0] <= 137) || l4[0] == 143))
			return CT_PARSE_UNTRACKED;
		if (!p->icmp_error)
			return 0; /* another type: tracked as a generic protocol */
		/* (a quote is read only where it can be: cut short at avail) */
		ret = ct_parse_ip(l4 + 8, l4_avail - 8, l4_avail - 8, v6, &p->inner, &ioff, &ilen,
				  true);
		if (ret != 0)
			return CT_PARSE_BAD;
		p->inner.zone = zone;
		l4 = l4 + 8 + ioff;
		if (ct_proto_has_ports(p->inner.proto)) {
			if (ilen < 4)
				return CT_PARSE_BAD;
			p->inner.sport = ct_rd16(l4);
			p->inner.dport = ct_rd16(l4 + 2);
		} else if (ct_is_icmp(p->inner.proto)) {
			if (ilen < 8)
				return CT_PARSE_BAD;
			p->inner.sport = p->inner.dport = ct_rd16(l4 + 4);
		}
		return 0;
	default: return 0;
	}
}

/**
 * Fill @p p (and @p h) from the frame at @p frame, @p len bytes, in zone
 * @p zone, reading its Ethernet header and up to two VLAN tags.
 * @return as ct_parse_l3(), or CT_PARSE_NOT_IP.
 */
static inline int
ct_parse(const uint8_t *frame, uint32_t len, uint16_t zone, struct ct_pkt *p, struct ct_hdrs *h)
{
	uint32_t off = 12;
	uint16_t et;
	int tags;

	memset(p, 0, sizeof(*p));
	if (len < 14)
		return CT_PARSE_BAD;
	et = ct_rd16(frame + off);
	for (tags = 0; tags < 2 && (et == CT_ETH_VLAN || et == CT_ETH_QINQ); tags++) {
		off += 4;
		if (off + 2 > len)
			return CT_PARSE_BAD;
		et = ct_rd16(frame + off);
	}
	if (et != CT_ETH_IPV4 && et != CT_ETH_IPV6)
		return CT_PARSE_NOT_IP;
	return ct_parse_l3(frame, len, len, off + 2, et == CT_ETH_IPV6, zone, p, h);
}

/**
 * ct_parse() for a packet the manager parsed: its IP header where the
 * manager found it (sq_pkt_ipv4(), sq_pkt_ipv6(): after any VLAN tags).
 * @return as ct_parse().
 */
static inline int
ct_parse_pkt(struct rte_mbuf *pkt, uint16_t zone, struct ct_pkt *p, struct ct_hdrs *h)
{
	bool v6 = false;

	if (sq_pkt_ipv4(pkt) == NULL) {
		if (sq_pkt_ipv6(pkt) == NULL) {
			memset(p, 0, sizeof(*p));
			return CT_PARSE_NOT_IP;
		}
		v6 = true;
	}
	return ct_parse_l3(rte_pktmbuf_mtod(pkt, const uint8_t *), rte_pktmbuf_pkt_len(pkt),
			   rte_pktmbuf_data_len(pkt), pkt->l2_len, v6, zone, p, h);
}

#endif /* SQUALL_NFS_CONNTRACK_CT_PARSE_H */
