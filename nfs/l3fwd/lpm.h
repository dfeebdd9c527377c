/* SPDX-License-Identifier: BSD-3-Clause
 * A small IPv4 longest-prefix-match table for squall-nf-l3fwd: a multibit
 * trie with four levels of 8-bit strides and controlled prefix expansion
 * (rte_lpm's tbl24/tbl8 idea with smaller first-level tables).
 *
 * DPDK's rte_lpm needs EAL (rte_malloc); its DIR-24-8 first table alone is
 * 32 MiB, 300 times an idle NF's private memory. Here a table with R routes
 * costs at most 1 + 3R nodes of 1 KiB, and a lookup reads at most 4 entries
 * (1 for prefixes up to /8, 2 up to /16, ...).
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
#define LPM_MAX_NODES   (1u << 20) /* child index field width, and a sanity bound */
#define LPM_MAX_NH      0xffffu    /* next hops are port indexes */
#define LPM_NH_NEXT     LPM_MAX_NH /* "next": the route says "on along the chain" */

/* One slot: bit 31 valid, bit 30 the slot points to a child node, bits 24-29
 * the length of the prefix that wrote it (a longer one must not be
 * overwritten by a shorter one expanded over it), bits 0-23 the next hop or
 * the child's node index. */
#define LPM_VALID       (1u << 31)
#define LPM_CHILD       (1u << 30)
#define LPM_DEPTH_SHIFT 24
#define LPM_DEPTH_MASK  0x3fu
#define LPM_VALUE_MASK  0xffffffu

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

/**
 * Add route @p prefix/@p depth -> @p nh (host byte order). The bits of
 * @p prefix past @p depth are ignored. Adding a prefix again replaces its
 * next hop.
 *
 * @return 0, -EINVAL (depth > 32 or nh > LPM_MAX_NH), -ENOMEM, or -ENOSPC
 *   (more than LPM_MAX_NODES nodes).
 */
static inline int
lpm_add(struct lpm *lpm, uint32_t prefix, unsigned int depth, uint32_t nh)
{
	unsigned int level, shift, span_bits;
	uint32_t node = 0, first, n, i, slot;
	int64_t child;

	if (depth > 32 || nh > LPM_MAX_NH)
		return -EINVAL;
	prefix = depth == 0 ? 0 : prefix & ~(uint32_t)0 << (32 - depth);
	for (level = 0; level < LPM_LEVELS; level++) {
		shift = 32 - LPM_STRIDE_BITS * (level + 1);
		first = prefix >> shift & (LPM_NODE_SLOTS - 1);
		if (depth <= LPM_STRIDE_BITS * (level + 1)) {
			/* The prefix ends in this node: expand it over its slots. */
			span_bits = LPM_STRIDE_BITS * (level + 1) - depth;
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
	return -EINVAL; /* not reached: depth <= 32 ends in the last level */
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
 * Parse "A.B.C.D/LEN" (LEN 0..32; "A.B.C.D" alone is a /32) into host byte
 * order. Bits past LEN must be zero ("10.0.0.1/8" is an error: a typo more
 * often than a wish).
 * @return 0 or -EINVAL.
 */
static inline int
lpm_parse_prefix(const char *s, uint32_t *prefix, unsigned int *depth)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t len = slash != NULL ? (size_t)(slash - s) : strlen(s);
	unsigned long d = 32;
	struct in_addr in;
	char *end;

	if (len == 0 || len >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, s, len);
	addr[len] = '\0';
	if (inet_pton(AF_INET, addr, &in) != 1)
		return -EINVAL;
	if (slash != NULL) {
		if (slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		d = strtoul(slash + 1, &end, 10);
		if (*end != '\0' || d > 32)
			return -EINVAL;
	}
	*prefix = ntohl(in.s_addr);
	*depth = (unsigned int)d;
	if (d < 32 && (*prefix & ~(d == 0 ? 0 : ~(uint32_t)0 << (32 - d))) != 0)
		return -EINVAL;
	return 0;
}

/**
 * Parse a route "A.B.C.D/LEN=PORT" (also "A.B.C.D/LEN PORT", as lines of a
 * routes file are written); PORT is a decimal below LPM_NH_NEXT, or "next"
 * (LPM_NH_NEXT).
 * @return 0 or -EINVAL.
 */
static inline int
lpm_parse_route(const char *s, uint32_t *prefix, unsigned int *depth, uint32_t *nh)
{
	char buf[64];
	const char *sep = strpbrk(s, "= \t");
	unsigned long port;
	char *end;

	if (sep == NULL || (size_t)(sep - s) >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, (size_t)(sep - s));
	buf[sep - s] = '\0';
	if (lpm_parse_prefix(buf, prefix, depth) < 0)
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
	*nh = (uint32_t)port;
	return 0;
}

#endif /* SQUALL_NFS_L3FWD_LPM_H */
