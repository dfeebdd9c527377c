/* SPDX-License-Identifier: BSD-3-Clause
 * Small longest-prefix-match tables for squall-nf-l3fwd, IPv4 and IPv6: a
 * multibit trie with 8-bit strides and controlled prefix expansion
 * (rte_lpm's tbl24/tbl8 idea with smaller first-level tables), four levels
 * for an IPv4 address, sixteen for an IPv6 one. One table holds one family;
 * the same code adds routes to both (an address is its bytes, most
 * significant first).
 *
 * DPDK's rte_lpm and rte_lpm6 need EAL (rte_malloc); rte_lpm's DIR-24-8
 * first table alone is 32 MiB, 300 times an idle NF's private memory. Here
 * an IPv4 table with R routes costs at most 1 + 3R nodes of 1 KiB and a
 * lookup reads at most 4 entries (1 for prefixes up to /8, 2 up to /16,
 * ...); an IPv6 table at most 1 + 15R nodes (a /48 needs 5 of its own, a
 * /64 7), and a lookup at most 16 entries, one per byte the longest prefix
 * on its path reaches into.
 *
 * Header-only so tests/unit/test_l3fwd_lpm.c tests the very code the NF runs.
 * Not thread-safe: build the table, then look up from one thread.
 */
#ifndef SQUALL_NFS_L3FWD_LPM_H
#define SQUALL_NFS_L3FWD_LPM_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LPM_STRIDE_BITS 8
#define LPM_NODE_SLOTS  (1u << LPM_STRIDE_BITS)
#define LPM_LEVELS      (32 / LPM_STRIDE_BITS)
#define LPM6_LEVELS     (128 / LPM_STRIDE_BITS)
#define LPM_MAX_NODES   (1u << 20) /* within the value field, and a sanity bound */
#define LPM_MAX_NH      0xffffu    /* next hops are port indexes */
#define LPM_NH_NEXT     LPM_MAX_NH /* "next": the route says "on along the chain" */

/* One slot: bit 31 valid, bit 30 the slot points to a child node, bits 22-29
 * the length of the prefix that wrote it (0-128: a longer one must not be
 * overwritten by a shorter one expanded over it), bits 0-21 the next hop or
 * the child's node index. */
#define LPM_VALID       (1u << 31)
#define LPM_CHILD       (1u << 30)
#define LPM_DEPTH_SHIFT 22
#define LPM_DEPTH_MASK  0xffu
#define LPM_VALUE_MASK  0x3fffffu

struct lpm {
	uint32_t (*nodes)[LPM_NODE_SLOTS]; /* nodes[0] is the root */
	uint32_t n_nodes;
	uint32_t cap_nodes;
	uint32_t n_routes;
};

/** Return 0, or -ENOMEM. */
static inline int
lpm_init(struct lpm *lpm)
{
	memset(lpm, 0, sizeof(*lpm));
	lpm->nodes = calloc(1, sizeof(*lpm->nodes));
	if (lpm->nodes == NULL)
		return -ENOMEM;
	lpm->n_nodes = 1;
	lpm->cap_nodes = 1;
	return 0;
}

static inline void
lpm_free(struct lpm *lpm)
{
	free(lpm->nodes);
	memset(lpm, 0, sizeof(*lpm));
}

static inline uint32_t
lpm_leaf(unsigned int depth, uint32_t nh)
{
	return LPM_VALID | (uint32_t)depth << LPM_DEPTH_SHIFT | nh;
}

static inline unsigned int
lpm_slot_depth(uint32_t slot)
{
	return slot >> LPM_DEPTH_SHIFT & LPM_DEPTH_MASK;
}

/* A new node whose every slot is @p fill (what the parent slot meant before
 * it got a child). @return the node's index, or -ENOMEM / -ENOSPC. */
static inline int64_t
lpm_node_new(struct lpm *lpm, uint32_t fill)
{
	uint32_t(*nodes)[LPM_NODE_SLOTS];
	uint32_t cap, i;

	if (lpm->n_nodes == lpm->cap_nodes) {
		if (lpm->cap_nodes >= LPM_MAX_NODES)
			return -ENOSPC;
		cap = lpm->cap_nodes * 2;
		nodes = realloc(lpm->nodes, (size_t)cap * sizeof(*nodes));
		if (nodes == NULL)
			return -ENOMEM;
		lpm->nodes = nodes;
		lpm->cap_nodes = cap;
	}
	for (i = 0; i < LPM_NODE_SLOTS; i++)
		lpm->nodes[lpm->n_nodes][i] = fill;
	return lpm->n_nodes++;
}

/* Write a prefix of length @p depth over every slot of the subtree under
 * node @p idx that no longer prefix wrote. */
static inline void
lpm_fill_subtree(struct lpm *lpm, uint32_t idx, unsigned int depth, uint32_t nh)
{
	uint32_t i, slot;

	for (i = 0; i < LPM_NODE_SLOTS; i++) {
		slot = lpm->nodes[idx][i];
		if (slot & LPM_CHILD)
			lpm_fill_subtree(lpm, slot & LPM_VALUE_MASK, depth, nh);
		else if (!(slot & LPM_VALID) || lpm_slot_depth(slot) <= depth)
			lpm->nodes[idx][i] = lpm_leaf(depth, nh);
	}
}

/* Add @p key/@p depth -> @p nh to a table of @p levels levels: @p key is the
 * address's bytes, most significant first. */
static inline int
lpm_add_bytes(struct lpm *lpm, const uint8_t *key, unsigned int levels, unsigned int depth,
	      uint32_t nh)
{
	unsigned int level, span_bits, keep;
	uint32_t node = 0, first, n, i, slot;
	int64_t child;

	if (depth > levels * LPM_STRIDE_BITS || nh > LPM_MAX_NH)
		return -EINVAL;
	for (level = 0; level < levels; level++) {
		first = key[level];
		if (depth <= LPM_STRIDE_BITS * (level + 1)) {
			/* The prefix ends in this node: expand it over its slots
			 * (the byte's bits past the prefix ignored). */
			keep = depth - LPM_STRIDE_BITS * level;
			span_bits = LPM_STRIDE_BITS - keep;
			first &= keep == 0 ? 0 : (LPM_NODE_SLOTS - 1) << span_bits & 0xff;
			n = 1u << span_bits;
			for (i = first; i < first + n; i++) {
				slot = lpm->nodes[node][i];
				if (slot & LPM_CHILD)
					lpm_fill_subtree(lpm, slot & LPM_VALUE_MASK, depth, nh);
				else if (!(slot & LPM_VALID) || lpm_slot_depth(slot) <= depth)
					lpm->nodes[node][i] = lpm_leaf(depth, nh);
			}
			lpm->n_routes++;
			return 0;
		}
		slot = lpm->nodes[node][first];
		if (!(slot & LPM_CHILD)) {
			child = lpm_node_new(lpm, slot);
			if (child < 0)
				return (int)child;
			lpm->nodes[node][first] = LPM_VALID | LPM_CHILD | (uint32_t)child;
			slot = lpm->nodes[node][first];
		}
		node = slot & LPM_VALUE_MASK;
	}
	return -EINVAL; /* not reached: depth <= 8 x levels ends in the last level */
}

/**
 * Add route @p prefix/@p depth -> @p nh (host byte order) to an IPv4 table.
 * The bits of @p prefix past @p depth are ignored. Adding a prefix again
 * replaces its next hop.
 *
 * @return 0, -EINVAL (depth > 32 or nh > LPM_MAX_NH), -ENOMEM, or -ENOSPC
 *   (more than LPM_MAX_NODES nodes).
 */
static inline int
lpm_add(struct lpm *lpm, uint32_t prefix, unsigned int depth, uint32_t nh)
{
	const uint8_t key[4] = {(uint8_t)(prefix >> 24), (uint8_t)(prefix >> 16),
				(uint8_t)(prefix >> 8), (uint8_t)prefix};

	return lpm_add_bytes(lpm, key, LPM_LEVELS, depth, nh);
}

/**
 * Add route @p prefix/@p depth -> @p nh to an IPv6 table (@p prefix in
 * network byte order, as in the header). The bits past @p depth are
 * ignored; adding a prefix again replaces its next hop.
 *
 * @return 0, -EINVAL (depth > 128 or nh > LPM_MAX_NH), -ENOMEM, or -ENOSPC.
 */
static inline int
lpm6_add(struct lpm *lpm, const uint8_t prefix[16], unsigned int depth, uint32_t nh)
{
	return lpm_add_bytes(lpm, prefix, LPM6_LEVELS, depth, nh);
}

/**
 * Look @p addr (host byte order) up.
 * @return the next hop of the longest matching prefix, or -ENOENT.
 */
static inline int
lpm_lookup(const struct lpm *lpm, uint32_t addr)
{
	unsigned int shift = 32 - LPM_STRIDE_BITS;
	uint32_t slot = lpm->nodes[0][addr >> shift];

	while (slot & LPM_CHILD) {
		shift -= LPM_STRIDE_BITS;
		slot = lpm->nodes[slot & LPM_VALUE_MASK][addr >> shift & (LPM_NODE_SLOTS - 1)];
	}
	return slot & LPM_VALID ? (int)(slot & LPM_VALUE_MASK) : -ENOENT;
}

/**
 * Look @p addr (network byte order, as in the header) up in an IPv6 table.
 * @return the next hop of the longest matching prefix, or -ENOENT.
 */
static inline int
lpm6_lookup(const struct lpm *lpm, const uint8_t addr[16])
{
	unsigned int level = 0;
	uint32_t slot = lpm->nodes[0][addr[0]];

	/* A child exists only under a prefix longer than its level, so the
	 * walk ends by the 16th byte. */
	while (slot & LPM_CHILD)
		slot = lpm->nodes[slot & LPM_VALUE_MASK][addr[++level]];
	return slot & LPM_VALID ? (int)(slot & LPM_VALUE_MASK) : -ENOENT;
}

/** A route as parsed: either family. */
struct lpm_route {
	int family;       /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network byte order; IPv4 in the first 4 bytes */
	uint32_t v4;      /* IPv4: the address in host byte order */
	unsigned int depth;
	uint32_t nh;
};

/* The first @p depth bits of @p a (@p n_bytes long) and none past them? */
static inline bool
lpm_host_bits_zero(const uint8_t *a, unsigned int n_bytes, unsigned int depth)
{
	unsigned int i;

	for (i = depth / 8; i < n_bytes; i++) {
		uint8_t keep = i == depth / 8 ? (uint8_t)(0xff00 >> (depth % 8)) : 0;

		if ((a[i] & (uint8_t)~keep) != 0)
			return false;
	}
	return true;
}

/**
 * Parse "A.B.C.D/LEN" (LEN 0..32) or an IPv6 "X:X::X/LEN" (LEN 0..128); an
 * address without /LEN is a single host (/32, /128). Bits past LEN must be
 * zero ("10.0.0.1/8" is an error: a typo more often than a wish).
 * @return 0 or -EINVAL.
 */
static inline int
lpm_parse_prefix(const char *s, struct lpm_route *r)
{
	char addr[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t len = slash != NULL ? (size_t)(slash - s) : strlen(s);
	unsigned long d, max;
	char *end;

	if (len == 0 || len >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, s, len);
	addr[len] = '\0';
	memset(r->addr, 0, sizeof(r->addr));
	r->family = memchr(addr, ':', len) != NULL ? AF_INET6 : AF_INET;
	if (inet_pton(r->family, addr, r->addr) != 1)
		return -EINVAL;
	max = r->family == AF_INET ? 32 : 128;
	d = max;
	if (slash != NULL) {
		if (slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		d = strtoul(slash + 1, &end, 10);
		if (*end != '\0' || d > max)
			return -EINVAL;
	}
	r->depth = (unsigned int)d;
	r->v4 = (uint32_t)r->addr[0] << 24 | (uint32_t)r->addr[1] << 16 |
		(uint32_t)r->addr[2] << 8 | r->addr[3];
	if (!lpm_host_bits_zero(r->addr, (unsigned int)max / 8, r->depth))
		return -EINVAL;
	return 0;
}

/**
 * Parse a route "PREFIX/LEN=PORT" of either family (also "PREFIX/LEN PORT",
 * as lines of a routes file are written); PORT is a decimal below
 * LPM_NH_NEXT, or "next" (LPM_NH_NEXT).
 * @return 0 or -EINVAL.
 */
static inline int
lpm_parse_route(const char *s, struct lpm_route *r)
{
	char buf[64];
	const char *sep = strpbrk(s, "= \t");
	unsigned long port;
	char *end;

	if (sep == NULL || (size_t)(sep - s) >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, (size_t)(sep - s));
	buf[sep - s] = '\0';
	if (lpm_parse_prefix(buf, r) < 0)
		return -EINVAL;
	while (*sep == '=' || *sep == ' ' || *sep == '\t')
		sep++;
	if (strncmp(sep, "next", 4) == 0) {
		port = LPM_NH_NEXT;
		end = (char *)(uintptr_t)(sep + 4);
	} else if (*sep >= '0' && *sep <= '9') {
		port = strtoul(sep, &end, 10);
		if (port >= LPM_NH_NEXT)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
		end++;
	if (*end != '\0')
		return -EINVAL;
	r->nh = (uint32_t)port;
	return 0;
}

#endif /* SQUALL_NFS_L3FWD_LPM_H */
