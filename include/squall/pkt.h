/* SPDX-License-Identifier: BSD-3-Clause
 * Per-packet metadata and verdicts. Header-only: NFs link no DPDK library.
 */
#ifndef SQUALL_PKT_H
#define SQUALL_PKT_H

#include <stdint.h>
#include <string.h>

#include <rte_mbuf.h>

/** What happens to a packet after an NF. */
enum sq_verdict_kind {
	SQ_VERDICT_NEXT = 0, /**< next hop of its chain (or the chain's egress) */
	SQ_VERDICT_OUT = 1,  /**< transmit on a port, skipping the rest */
	SQ_VERDICT_DROP = 2, /**< the manager frees it, counted as an NF drop */
	SQ_VERDICT_TO = 3,   /**< hand to an instance of another service */
};

/** A verdict: kind in the high 16 bits, port or service id in the low 16. */
typedef uint32_t sq_verdict_t;

#define SQ_NEXT ((sq_verdict_t)SQ_VERDICT_NEXT << 16)
#define SQ_DROP ((sq_verdict_t)SQ_VERDICT_DROP << 16)

/** Transmit on port @p port (its index in the config's port list). */
static inline sq_verdict_t
sq_out(uint16_t port)
{
	return ((sq_verdict_t)SQ_VERDICT_OUT << 16) | port;
}

/** Send to service @p service (its index in the config's service list). */
static inline sq_verdict_t
sq_to(uint16_t service)
{
	return ((sq_verdict_t)SQ_VERDICT_TO << 16) | service;
}

/** A verdict's flag: the packet leaves the NF with a new 5-tuple (a NAT, a
 * load balancer's DNAT) that its flow is to be known by too. */
#define SQ_VERDICT_F_REKEY (1u << 31)

/**
 * @p v, and the packet's flow is known from now on by the 5-tuple the packet
 * leaves with as well, so that replies to the translated tuple reach the
 * same per-flow NFs (`assign: per-flow`; a no-op for shared ones, whose
 * instance rss picks). The manager reads the tuple as it takes the packet
 * back; one per flow, the first kept, and never one that is already a
 * flow's (an NF cannot take another flow's packets). A TCP SYN never
 * matches a second key: it opens a connection of its own, so an NF cannot
 * claim a connection before the client opens it. The packet goes through
 * the manager (not a direct chain's hand-over), so it is known before it
 * leaves.
 */
static inline sq_verdict_t
sq_rekeyed(sq_verdict_t v)
{
	return v | SQ_VERDICT_F_REKEY;
}

/**
 * Metadata in each mbuf's private area. The manager fills it at rx; an NF may
 * read all of it and write only verdict (through its handler's return value),
 * sig and user[].
 */
struct sq_pkt_meta {
	uint32_t owner;    /* unused: the manager keeps who holds a packet in its own memory */
	uint16_t chain;    /* chain index in the config */
	uint8_t hop;       /* index of the current NF in the chain */
	uint8_t nf_visits; /* incremented by libsquall at every NF hop */
	sq_verdict_t verdict;
	uint16_t in_port;
	uint16_t out_port;  /* the rule's egress port */
	uint32_t flow_hash; /* symmetric hash of the 5-tuple */
	uint32_t sig;       /* written by the sig NF */
	uint32_t flow_id;   /* manager only: the flow table entry + 1, 0 = none */
	uint32_t flags;     /* SQ_META_*, set by the manager */
	uint64_t nf0_tsc;   /* libsquall: TSC when the chain's first NF began its burst */
	uint64_t rx_tsc;    /* TSC when the manager received it */
	uint64_t user[2];   /* free for NFs */
};

/** The first packet a per-flow NF gets of a new flow: libsquall runs the state
 * cleaner first if the NF's last flow left state behind (its close never
 * reached the NF). */
#define SQ_META_FLOW_START (1u << 0)

/** Manager only: the high 16 bits of flags hold the generation of the
 * packet's chain, so a packet whose chain changed while it was in an NF is
 * not steered by a definition it never entered. */
#define SQ_META_CHAIN_GEN_SHIFT 16

#define SQ_PKT_META_SIZE RTE_ALIGN_CEIL(sizeof(struct sq_pkt_meta), RTE_MBUF_PRIV_ALIGN)

/** The metadata of a packet from the Squall pool. */
static inline struct sq_pkt_meta *
sq_pkt_meta(struct rte_mbuf *pkt)
{
	return (struct sq_pkt_meta *)((char *)pkt + sizeof(struct rte_mbuf));
}

/** The longest frame the manager takes from a port, without FCS (a 9,000-byte
 * MTU, Ethernet header and two VLAN tags); longer ones it drops as oversize. */
#define SQ_MAX_FRAME_BYTES 9018

/*
 * Packets of several segments. A frame longer than the pool's data room (a
 * jumbo frame, up to 9,018 bytes) comes as a chain of mbufs: pkt_len is the
 * frame's length, data_len the first segment's. The manager keeps the
 * headers it parsed in the first segment: Ethernet and its tags, the IP
 * header (IPv6 with the extension headers DPDK walks) and the TCP, UDP,
 * SCTP or ICMP header of an unfragmented packet or a first fragment. It
 * drops (cause parse) a chain whose first segment ends inside them, which
 * no port's receive makes. So an NF reads headers from
 * rte_pktmbuf_mtod() up to data_len, checks IP lengths against pkt_len, and
 * reaches payload past the first segment with sq_pkt_read() or by walking
 * pkt->next. A header an NF parses further than the manager did (an AH
 * header, an ICMP error's quote) may still reach past the first segment:
 * check it against data_len.
 */

/**
 * @p len bytes of @p pkt from offset @p off: a pointer into the packet when
 * they lie in one segment, else a copy in @p buf (which has room for
 * @p len). NULL if the packet ends before off + len.
 */
static inline const void *
sq_pkt_read(const struct rte_mbuf *pkt, uint32_t off, uint32_t len, void *buf)
{
	const struct rte_mbuf *seg = pkt;
	uint8_t *dst = (uint8_t *)buf;

	if (off > pkt->pkt_len || len > pkt->pkt_len - off)
		return NULL;
	while (seg != NULL && off >= seg->data_len && !(off == seg->data_len && len == 0)) {
		off -= seg->data_len;
		seg = seg->next;
	}
	if (seg == NULL)
		return NULL;
	if (len <= (uint32_t)seg->data_len - off)
		return rte_pktmbuf_mtod_offset(seg, const uint8_t *, off);
	while (len > 0) {
		uint32_t n;

		if (seg == NULL)
			return NULL; /* (lengths the manager checked: not reached) */
		n = (uint32_t)seg->data_len - off;
		n = n < len ? n : len;
		memcpy(dst, rte_pktmbuf_mtod_offset(seg, const uint8_t *, off), n);
		dst += n;
		len -= n;
		off = 0;
		seg = seg->next;
	}
	return buf;
}

struct rte_ipv4_hdr;

/* The packet's IPv4 header, after any VLAN or QinQ tags, or NULL if it is
 * not IPv4. The manager parsed the frame once on receipt: packet_type and
 * l2_len are its findings, and an IPv4 header it let through is whole
 * (version, IHL and total length checked against the data). Reading the
 * EtherType at offset 12 instead would take a tagged frame for non-IP. */
static inline struct rte_ipv4_hdr *
sq_pkt_ipv4(struct rte_mbuf *pkt)
{
	if (!RTE_ETH_IS_IPV4_HDR(pkt->packet_type) || pkt->data_len < pkt->l2_len + 20u)
		return NULL;
	return rte_pktmbuf_mtod_offset(pkt, struct rte_ipv4_hdr *, pkt->l2_len);
}

struct rte_ipv6_hdr;

/* The packet's IPv6 header, after any VLAN or QinQ tags, or NULL if it is
 * not IPv6: sq_pkt_ipv4()'s twin, from the same parse results. The manager
 * drops an IPv6 frame it cannot read (drop cause ipv6_header), so a header
 * this returns is readable: its 40 bytes and the extension headers DPDK
 * walked (hop-by-hop, routing, destination options, up to and including a
 * fragment header: l3_len bytes from l2_len in all) lie in the first
 * segment, and its payload length does not reach past the frame. What
 * follows the extension headers (the upper-layer header, or AH, which DPDK
 * does not walk) is the NF's to check against rte_pktmbuf_data_len(). */
static inline struct rte_ipv6_hdr *
sq_pkt_ipv6(struct rte_mbuf *pkt)
{
	if (!RTE_ETH_IS_IPV6_HDR(pkt->packet_type) || pkt->data_len < pkt->l2_len + 40u)
		return NULL;
	return rte_pktmbuf_mtod_offset(pkt, struct rte_ipv6_hdr *, pkt->l2_len);
}

#endif /* SQUALL_PKT_H */
