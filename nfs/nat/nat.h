/* SPDX-License-Identifier: BSD-3-Clause
 * NAT for squall-nf-nat: SNAT with port allocation (NAPT) and DNAT, both
 * directions of a connection, IPv4. Header-only, like nfs/conntrack/ct.h,
 * so tests/unit/test_conntrack_nat.c tests the code the NF runs.
 *
 * A connection has two entries in one open-addressing table: one keyed by
 * the tuple its original direction arrives with, one by the tuple its
 * replies arrive with; each holds the tuple to rewrite its packets to. The
 * entry of one direction finds the other by reversing its rewritten tuple.
 * Checksums are updated incrementally (RFC 1624): the IPv4 header's, and
 * TCP's or UDP's (which cover the addresses through the pseudo-header), or
 * ICMP's for an echo identifier.
 */
#ifndef SQUALL_NFS_NAT_NAT_H
#define SQUALL_NFS_NAT_NAT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../conntrack/ct.h"
#include "../conntrack/ct_parse.h"

#define NAT_TO_TCP_MS \
	7440000 /* netfilter's established is 5 days; NAPT's RFC 5382 asks >= 2 h 4 min */
#define NAT_TO_TCP_END_MS 10000 /* after a FIN or a RST */
#define NAT_TO_UDP_MS     120000
#define NAT_TO_ICMP_MS    30000
#define NAT_TO_OTHER_MS   600000

struct nat_entry {
	struct ct_key key;  /* as the packets of this direction arrive */
	struct ct_key xlat; /* what they are rewritten to */
	uint32_t hash;
	uint8_t used;
	uint8_t dir;      /* CT_ORIG or CT_REPLY */
	uint8_t snat;     /* the connection holds a port of the SNAT pool */
	uint8_t closing;  /* a FIN or RST seen */
	uint16_t in_port; /* the port the connection's first packet came in on */
	uint64_t expires_ms;
};

/** SNAT: sources in src/src_mask get address to_addr and a port in
 * [port_lo, port_hi] (ICMP: an identifier in the same range). */
struct nat_snat {
	uint32_t src, src_mask; /* host order */
	uint32_t to_addr;
	uint16_t port_lo, port_hi;
};

/** DNAT: proto/addr:port becomes to_addr:to_port. */
struct nat_dnat {
	uint8_t proto;
	uint32_t addr, to_addr; /* host order */
	uint16_t port, to_port;
};

#define NAT_MAX_DNAT 64

struct nat {
	struct nat_entry *slot;
	uint32_t mask, n_used, max_used, sweep_at;
	uint32_t seed; /* the table's hash seed, random (ct_random_seed) */
	bool has_snat;
	struct nat_snat snat;
	struct nat_dnat dnat[NAT_MAX_DNAT];
	unsigned int n_dnat;
	/* SNAT ports in use, one bit per port of the range, per protocol
	 * (0 TCP, 1 UDP, 2 ICMP); next_port: where the search resumes. */
	uint64_t *ports_used[3];
	uint32_t n_ports_used[3]; /* exhausted: fail at once, not after a scan */
	uint32_t next_port[3];
	/* After nat_find() or nat_translate() returned NAT_XLATED(_NEW): the
	 * direction of the packet's entry and the port the connection's first
	 * packet came in on (a tenant edge sends replies back out of it). */
	uint8_t last_dir;
	uint16_t last_in_port;
};

static inline int
nat_proto_idx(uint8_t proto)
{
	return proto == IPPROTO_TCP ? 0 : proto == IPPROTO_UDP ? 1 : proto == IPPROTO_ICMP ? 2 : -1;
}

/** @return 0, -EINVAL, -ENOMEM. Set snat/dnat before. */
static inline int
nat_init(struct nat *n, uint32_t slots)
{
	uint32_t range;
	int i;

	if (slots < 4 || (slots & (slots - 1)) != 0)
		return -EINVAL;
	n->slot = calloc(slots, sizeof(*n->slot));
	if (n->slot == NULL)
		return -ENOMEM;
	n->mask = slots - 1;
	n->max_used = slots / 4 * 3;
	n->n_used = n->sweep_at = 0;
	n->seed = ct_random_seed();
	if (n->has_snat) {
		range = (uint32_t)n->snat.port_hi - n->snat.port_lo + 1;
		for (i = 0; i < 3; i++) {
			n->ports_used[i] = calloc((range + 63) / 64, sizeof(uint64_t));
			if (n->ports_used[i] == NULL)
				return -ENOMEM;
			n->next_port[i] = 0;
			n->n_ports_used[i] = 0;
		}
	}
	return 0;
}

/**
 * Forget every connection and give back every SNAT port: a per-flow NF's
 * state cleaner, at its flow's end. Where the next port search starts is
 * kept, so the NF's next connection takes another port of its share (a
 * peer may still hold the last one in TIME_WAIT).
 */
static inline void
nat_clear(struct nat *n)
{
	uint32_t range;
	int i;

	if (n->slot == NULL)
		return;
	memset(n->slot, 0, ((size_t)n->mask + 1) * sizeof(*n->slot));
	n->n_used = n->sweep_at = 0;
	if (!n->has_snat)
		return;
	range = (uint32_t)n->snat.port_hi - n->snat.port_lo + 1;
	for (i = 0; i < 3; i++) {
		if (n->ports_used[i] != NULL)
			memset(n->ports_used[i], 0, (range + 63) / 64 * sizeof(uint64_t));
		n->n_ports_used[i] = 0;
	}
}

static inline void
nat_free(struct nat *n)
{
	int i;

	free(n->slot);
	for (i = 0; i < 3; i++)
		free(n->ports_used[i]);
	memset(n->ports_used, 0, sizeof(n->ports_used));
}

static inline int64_t
nat_slot_find(const struct nat *n, const struct ct_key *k, uint32_t hash)
{
	uint32_t i = hash & n->mask;

	while (n->slot[i].used) {
		if (n->slot[i].hash == hash && memcmp(&n->slot[i].key, k, sizeof(*k)) == 0)
			return i;
		i = (i + 1) & n->mask;
	}
	return -1;
}

static inline void
nat_slot_delete(struct nat *n, uint32_t i)
{
	uint32_t j = i, home;

	for (;;) {
		n->slot[i].used = 0;
		for (;;) {
			j = (j + 1) & n->mask;
			if (!n->slot[j].used)
				goto out;
			home = n->slot[j].hash & n->mask;
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		n->slot[i] = n->slot[j];
		i = j;
	}
out:
	n->n_used--;
}

/* Delete the connection of entry @p i: both entries, and its SNAT port. */
static inline void
nat_conn_delete(struct nat *n, uint32_t i)
{
	struct nat_entry e = n->slot[i];
	struct ct_key partner;
	int64_t j;
	int pi;

	nat_slot_delete(n, i);
	ct_key_reverse(&e.xlat, &partner);
	j = nat_slot_find(n, &partner, ct_key_hash_seeded(&partner, n->seed));
	if (j >= 0)
		nat_slot_delete(n, (uint32_t)j);
	if (e.snat) {
		/* The SNAT port: the original direction's rewritten source, the
		 * reply direction's destination as it arrives. */
		uint16_t port = e.dir == CT_ORIG ? e.xlat.sport : e.key.dport;
		uint32_t bit = (uint32_t)port - n->snat.port_lo;

		pi = nat_proto_idx(e.key.proto);
		if (pi >= 0 && port >= n->snat.port_lo && port <= n->snat.port_hi) {
			n->ports_used[pi][bit / 64] &= ~(UINT64_C(1) << (bit % 64));
			n->n_ports_used[pi]--;
		}
	}
}

/* The live entry of @p k, or -1; an expired connection is deleted. */
static inline int64_t
nat_lookup(struct nat *n, const struct ct_key *k, uint64_t now_ms)
{
	int64_t i = nat_slot_find(n, k, ct_key_hash_seeded(k, n->seed));

	if (i >= 0 && now_ms >= n->slot[i].expires_ms) {
		nat_conn_delete(n, (uint32_t)i);
		return -1;
	}
	return i;
}

/** Delete expired connections in up to @p n_slots slots. @return how many. */
static inline unsigned int
nat_sweep(struct nat *n, uint64_t now_ms, unsigned int n_slots)
{
	unsigned int deleted = 0;
	uint32_t i;

	while (n_slots-- > 0 && n->n_used > 0) {
		i = n->sweep_at & n->mask;
		if (n->slot[i].used && now_ms >= n->slot[i].expires_ms) {
			nat_conn_delete(n, i);
			deleted++;
			continue;
		}
		n->sweep_at = (i + 1) & n->mask;
	}
	return deleted;
}

static inline uint32_t
nat_v4(const uint8_t a[16])
{
	return (uint32_t)a[12] << 24 | (uint32_t)a[13] << 16 | (uint32_t)a[14] << 8 | a[15];
}

static inline void
nat_set_v4(uint8_t a[16], uint32_t v)
{
	a[12] = (uint8_t)(v >> 24);
	a[13] = (uint8_t)(v >> 16);
	a[14] = (uint8_t)(v >> 8);
	a[15] = (uint8_t)v;
}

/* A free SNAT port (identifier) for @p proto, marked used, or -ENOSPC. */
static inline int
nat_port_alloc(struct nat *n, int pi)
{
	uint32_t range = (uint32_t)n->snat.port_hi - n->snat.port_lo + 1, k, b;

	if (n->n_ports_used[pi] >= range)
		return -ENOSPC;
	for (k = 0; k < range; k++) {
		b = (n->next_port[pi] + k) % range;
		if (!(n->ports_used[pi][b / 64] & (UINT64_C(1) << (b % 64)))) {
			n->ports_used[pi][b / 64] |= UINT64_C(1) << (b % 64);
			n->n_ports_used[pi]++;
			n->next_port[pi] = (b + 1) % range;
			return (int)(n->snat.port_lo + b);
		}
	}
	return -ENOSPC;
}

static inline uint64_t
nat_timeout_ms(const struct nat_entry *e)
{
	switch (e->key.proto) {
	case IPPROTO_TCP: return e->closing ? NAT_TO_TCP_END_MS : NAT_TO_TCP_MS;
	case IPPROTO_UDP: return NAT_TO_UDP_MS;
	case IPPROTO_ICMP: return NAT_TO_ICMP_MS;
	default: return NAT_TO_OTHER_MS;
	}
}

enum nat_result {
	NAT_XLATED = 0,  /* rewrite to *xlat */
	NAT_XLATED_NEW,  /* the same, for a connection just created */
	NAT_UNTOUCHED,   /* no rule applies: pass as it is */
	NAT_NO_PORT,     /* SNAT ports exhausted: drop */
	NAT_TABLE_FULL,  /* drop */
	NAT_NOT_OPENING, /* a packet of no known connection that cannot open one: pass */
};

/* Refresh both entries of a connection. */
static inline void
nat_touch(struct nat *n, uint32_t i, const struct ct_pkt *p, uint64_t now_ms)
{
	struct nat_entry *e = &n->slot[i];
	struct ct_key partner;
	int64_t j;

	if (p->key.proto == IPPROTO_TCP && (p->tcp_flags & (CT_TCP_FIN | CT_TCP_RST)))
		e->closing = 1;
	e->expires_ms = now_ms + nat_timeout_ms(e);
	ct_key_reverse(&e->xlat, &partner);
	j = nat_slot_find(n, &partner, ct_key_hash_seeded(&partner, n->seed));
	if (j >= 0) {
		n->slot[j].closing |= e->closing;
		n->slot[j].expires_ms = e->expires_ms;
	}
}

static inline int
nat_insert(struct nat *n, const struct ct_key *key, const struct ct_key *xlat, uint8_t dir,
	   bool snat, uint16_t in_port, uint64_t now_ms)
{
	uint32_t hash = ct_key_hash_seeded(key, n->seed), i = hash & n->mask;
	struct nat_entry *e;

	while (n->slot[i].used)
		i = (i + 1) & n->mask;
	e = &n->slot[i];
	memset(e, 0, sizeof(*e));
	e->key = *key;
	e->xlat = *xlat;
	e->hash = hash;
	e->used = 1;
	e->dir = dir;
	e->snat = snat;
	e->in_port = in_port;
	e->expires_ms = now_ms + nat_timeout_ms(e);
	n->n_used++;
	return (int)i;
}

/**
 * Create the translation of @p p, which opens a connection and came in on
 * @p in_port: DNAT to
 * @p to_addr:@p to_port (host order) if @p dnat, SNAT if the rules say so.
 * @return NAT_XLATED_NEW with *xlat the packet's new tuple, NAT_UNTOUCHED
 *   (nothing to translate), NAT_TABLE_FULL or NAT_NO_PORT.
 */
static inline enum nat_result
nat_create(struct nat *n, const struct ct_pkt *p, uint16_t in_port, bool dnat, uint32_t to_addr,
	   uint16_t to_port, uint64_t now_ms, struct ct_key *xlat)
{
	struct ct_key orig_x = p->key, reply_key, reply_x;
	bool snat = false;
	int port, pi;

	if (dnat) {
		nat_set_v4(orig_x.dst, to_addr);
		orig_x.dport = to_port;
	}
	pi = nat_proto_idx(p->key.proto);
	if (n->has_snat && pi >= 0 && (nat_v4(p->key.src) & n->snat.src_mask) == n->snat.src) {
		snat = true;
		nat_set_v4(orig_x.src, n->snat.to_addr);
		/* Outside the NAT there are no zones: tenants with the same
		 * addresses differ there by their ports only. */
		orig_x.zone = 0;
	}
	if (!dnat && !snat)
		return NAT_UNTOUCHED;
	if (n->n_used + 2 > n->max_used)
		return NAT_TABLE_FULL;
	if (snat) {
		port = nat_port_alloc(n, pi);
		if (port < 0)
			return NAT_NO_PORT;
		orig_x.sport = (uint16_t)port;
		if (pi == 2)
			orig_x.dport = (uint16_t)port; /* ICMP: the identifier is both */
	}
	/* Replies come back to the rewritten tuple, reversed, and go back to
	 * the original one, reversed. */
	ct_key_reverse(&orig_x, &reply_key);
	ct_key_reverse(&p->key, &reply_x);
	nat_insert(n, &p->key, &orig_x, CT_ORIG, snat, in_port, now_ms);
	nat_insert(n, &reply_key, &reply_x, CT_REPLY, snat, in_port, now_ms);
	n->last_dir = CT_ORIG;
	n->last_in_port = in_port;
	*xlat = orig_x;
	return NAT_XLATED_NEW;
}

/** The translation of a known connection's packet: @return NAT_XLATED with
 * *xlat set, NAT_NOT_OPENING if @p p cannot open a connection, or -1 (a new
 * connection: decide, then nat_create()). */
static inline int
nat_find(struct nat *n, const struct ct_pkt *p, uint64_t now_ms, struct ct_key *xlat)
{
	int64_t i = nat_lookup(n, &p->key, now_ms);

	if (i >= 0) {
		nat_touch(n, (uint32_t)i, p, now_ms);
		*xlat = n->slot[i].xlat;
		n->last_dir = n->slot[i].dir;
		n->last_in_port = n->slot[i].in_port;
		return NAT_XLATED;
	}
	return ct_can_open(p) ? -1 : NAT_NOT_OPENING;
}

/**
 * Find or create the translation of @p p (parsed by ct_parse(), IPv4) by
 * the SNAT and DNAT rules.
 * @return a nat_result; with NAT_XLATED(_NEW), *xlat is the packet's new tuple.
 */
static inline enum nat_result
nat_translate(struct nat *n, const struct ct_pkt *p, uint16_t in_port, uint64_t now_ms,
	      struct ct_key *xlat)
{
	const struct nat_dnat *d = NULL;
	unsigned int r;
	int ret = nat_find(n, p, now_ms, xlat);

	if (ret >= 0)
		return (enum nat_result)ret;
	for (r = 0; r < n->n_dnat; r++) {
		if (n->dnat[r].proto == p->key.proto && n->dnat[r].addr == nat_v4(p->key.dst) &&
		    n->dnat[r].port == p->key.dport) {
			d = &n->dnat[r];
			break;
		}
	}
	return nat_create(n, p, in_port, d != NULL, d != NULL ? d->to_addr : 0,
			  d != NULL ? d->to_port : 0, now_ms, xlat);
}

/**
 * The connection an ICMP error (@p p, IPv4, p->icmp_error) is about: the
 * packet it quotes left this NAT translated, so a reply to it, the quoted
 * tuple reversed, is what one of the connection's entries is keyed by.
 * The connection is refreshed as by any of its packets.
 * @return that entry's index (its xlat: how a reply is translated), or -1:
 *   the error quotes no connection of this NAT (it passes as it is).
 */
static inline int64_t
nat_find_related(struct nat *n, const struct ct_pkt *p, uint64_t now_ms)
{
	struct ct_key k;
	int64_t i;

	ct_key_reverse(&p->inner, &k);
	i = nat_lookup(n, &k, now_ms);
	if (i >= 0) {
		n->last_dir = n->slot[i].dir;
		n->last_in_port = n->slot[i].in_port;
		n->slot[i].expires_ms = now_ms + nat_timeout_ms(&n->slot[i]);
	}
	return i;
}

/* ------------------------------------------------------------------ rewrite */

/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), on 16-bit words as they lie in
 * the packet (one's complement sums do not care about byte order). */
static inline uint16_t
nat_csum_fix16(uint16_t csum, uint16_t old, uint16_t new)
{
	uint32_t s = (uint32_t)(uint16_t)~csum + (uint16_t)~old + new;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static inline uint16_t
nat_csum_fix32(uint16_t csum, const uint8_t *old, const uint8_t *new)
{
	uint16_t o[2], w[2];

	memcpy(o, old, 4);
	memcpy(w, new, 4);
	csum = nat_csum_fix16(csum, o[0], w[0]);
	return nat_csum_fix16(csum, o[1], w[1]);
}

static inline uint16_t
nat_rd_csum(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

static inline void
nat_wr_csum(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

/* Rewrite a 16-bit field at @p field to @p val (host order), fixing the
 * checksum at @p csum (NULL: none). */
static inline void
nat_set16(uint8_t *field, uint16_t val, uint8_t *csum, bool udp)
{
	uint8_t nv[2] = {(uint8_t)(val >> 8), (uint8_t)val};
	uint16_t o, w, c;

	if (memcmp(field, nv, 2) == 0)
		return;
	memcpy(&o, field, 2);
	memcpy(&w, nv, 2);
	memcpy(field, nv, 2);
	if (csum == NULL || (udp && nat_rd_csum(csum) == 0))
		return; /* UDP over IPv4 without a checksum stays without */
	c = nat_csum_fix16(nat_rd_csum(csum), o, w);
	nat_wr_csum(csum, udp && c == 0 ? 0xffff : c);
}

static inline void
nat_set_addr(uint8_t *field, const uint8_t new_v4[4], uint8_t *ip_csum, uint8_t *l4_csum, bool udp)
{
	uint16_t c;

	if (memcmp(field, new_v4, 4) == 0)
		return;
	nat_wr_csum(ip_csum, nat_csum_fix32(nat_rd_csum(ip_csum), field, new_v4));
	if (l4_csum != NULL && !(udp && nat_rd_csum(l4_csum) == 0)) {
		c = nat_csum_fix32(nat_rd_csum(l4_csum), field, new_v4);
		nat_wr_csum(l4_csum, udp && c == 0 ? 0xffff : c);
	}
	memcpy(field, new_v4, 4);
}

/**
 * Rewrite the IPv4 packet at @p frame (headers at @p h, parsed into @p p)
 * to @p x: addresses, ports or ICMP identifier, and every checksum.
 */
static inline void
nat_rewrite(uint8_t *frame, const struct ct_hdrs *h, const struct ct_pkt *p, const struct ct_key *x)
{
	uint8_t *ip = frame + h->l3_off, *l4 = frame + h->l4_off, *l4_csum = NULL;
	bool udp = p->key.proto == IPPROTO_UDP;

	if (p->key.proto == IPPROTO_TCP)
		l4_csum = l4 + 16;
	else if (udp)
		l4_csum = l4 + 6;
	nat_set_addr(ip + 12, x->src + 12, ip + 10, l4_csum, udp);
	nat_set_addr(ip + 16, x->dst + 12, ip + 10, l4_csum, udp);
	if (l4_csum != NULL) {
		nat_set16(l4, x->sport, l4_csum, udp);
		nat_set16(l4 + 2, x->dport, l4_csum, udp);
	} else if (p->key.proto == IPPROTO_ICMP && (p->icmp_request || p->icmp_reply)) {
		nat_set16(l4 + 4, x->sport, l4 + 2, false);
	}
}

/* The one's complement checksum of @p len bytes at @p b, as it goes in the
 * packet (RFC 1071); an odd last byte is padded with zero. */
static inline uint16_t
nat_csum(const uint8_t *b, uint32_t len)
{
	uint32_t s = 0, i;
	uint16_t w;

	for (i = 0; i + 1 < len; i += 2) {
		memcpy(&w, b + i, 2);
		s += w;
	}
	if (len & 1) {
		uint8_t last[2] = {b[len - 1], 0};

		memcpy(&w, last, 2);
		s += w;
	}
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/**
 * Rewrite an ICMP error about a translated connection (IPv4; @p p parsed
 * it, @p e is the entry nat_find_related() found) so its receiver sees its
 * own connection: the quoted packet goes back to the tuple it was sent with
 * (its addresses, ports or echo identifier, and its IPv4 and, when quoted,
 * TCP/UDP checksums), the outer destination becomes the receiver's own
 * address, and the outer source, if it is the translated peer itself, that
 * peer's address as the receiver knows it (an error from a router between
 * keeps the router's). The ICMP checksum covers the quote, and is summed
 * again (errors are rare and short).
 */
static inline void
nat_rewrite_icmp_error(uint8_t *frame, const struct ct_hdrs *h, const struct nat_entry *e)
{
	uint8_t *ip = frame + h->l3_off, *icmp = frame + h->l4_off, *in = icmp + 8, *in_l4;
	uint32_t icmp_len = h->l3_len - (h->l4_off - h->l3_off), in_ihl, quoted;
	struct ct_key orig; /* the quoted packet as its sender sent it */
	uint8_t *l4_csum = NULL;
	bool udp;

	ct_key_reverse(&e->xlat, &orig);
	in_ihl = (uint32_t)(in[0] & 0xf) * 4; /* ct_parse() checked it lies within */
	in_l4 = in + in_ihl;
	quoted = icmp_len - 8 - in_ihl; /* L4 bytes of the quoted packet */
	udp = in[9] == IPPROTO_UDP;
	if (in[9] == IPPROTO_TCP && quoted >= 18)
		l4_csum = in_l4 + 16;
	else if (udp && quoted >= 8)
		l4_csum = in_l4 + 6;
	nat_set_addr(in + 12, orig.src + 12, in + 10, l4_csum, udp);
	nat_set_addr(in + 16, orig.dst + 12, in + 10, l4_csum, udp);
	if (in[9] == IPPROTO_TCP || udp || in[9] == IPPROTO_SCTP) {
		nat_set16(in_l4, orig.sport, l4_csum, udp);
		nat_set16(in_l4 + 2, orig.dport, l4_csum, udp);
	} else if (in[9] == IPPROTO_ICMP && quoted >= 8) {
		nat_set16(in_l4 + 4, orig.sport, in_l4 + 2, false);
	}
	/* The error travels as a reply to the quoted packet would. */
	nat_set_addr(ip + 16, e->xlat.dst + 12, ip + 10, NULL, false);
	if (memcmp(ip + 12, e->key.src + 12, 4) == 0)
		nat_set_addr(ip + 12, e->xlat.src + 12, ip + 10, NULL, false);
	icmp[2] = icmp[3] = 0;
	nat_wr_csum(icmp + 2, nat_csum(icmp, icmp_len));
}

#endif /* SQUALL_NFS_NAT_NAT_H */
