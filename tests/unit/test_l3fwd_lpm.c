/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-l3fwd's LPM table and TTL update: the table agrees with a
 * brute-force longest match over random route sets, route parsing rejects
 * what it must, and the incrementally patched checksum is valid.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ip.h>

#include "lpm.h"
#include "ttl.h"

#include "check.h"

struct route {
	uint32_t prefix;
	unsigned int depth;
	uint32_t nh;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t
rng(void)
{
	/* xorshift64*: reproducible across libcs, unlike rand(). */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

static uint32_t
mask_of(unsigned int depth)
{
	return depth == 0 ? 0 : ~(uint32_t)0 << (32 - depth);
}

/* The reference: scan every route; among equal prefixes the last added wins. */
static int
brute_lookup(const struct route *r, unsigned int n, uint32_t addr)
{
	int best = -1, best_depth = -1;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if ((addr & mask_of(r[i].depth)) == r[i].prefix && (int)r[i].depth >= best_depth) {
			best = (int)r[i].nh;
			best_depth = (int)r[i].depth;
		}
	}
	return best < 0 ? -ENOENT : best;
}

static void
test_empty_table_misses(void)
{
	struct lpm lpm;

	CHECK(lpm_init(&lpm) == 0);
	CHECK(lpm_lookup(&lpm, 0) == -ENOENT);
	CHECK(lpm_lookup(&lpm, 0x0a000001) == -ENOENT);
	CHECK(lpm_lookup(&lpm, 0xffffffff) == -ENOENT);
	lpm_free(&lpm);
}

static void
test_known_routes(void)
{
	struct lpm lpm;

	CHECK(lpm_init(&lpm) == 0);
	CHECK(lpm_add(&lpm, 0x0a000000, 8, 1) == 0);  /* 10/8 -> 1 */
	CHECK(lpm_add(&lpm, 0x0a010000, 16, 2) == 0); /* 10.1/16 -> 2 */
	CHECK(lpm_add(&lpm, 0x0a010280, 25, 3) == 0); /* 10.1.2.128/25 -> 3 */
	CHECK(lpm_add(&lpm, 0x0a010203, 32, 4) == 0); /* 10.1.2.3/32 -> 4 */
	CHECK(lpm_lookup(&lpm, 0x0a020304) == 1);
	CHECK(lpm_lookup(&lpm, 0x0a01ffff) == 2);
	CHECK(lpm_lookup(&lpm, 0x0a010281) == 3);
	CHECK(lpm_lookup(&lpm, 0x0a010203) == 4);
	CHECK(lpm_lookup(&lpm, 0x0a010204) == 2);
	CHECK(lpm_lookup(&lpm, 0x0b000000) == -ENOENT);
	/* A shorter prefix added after longer ones must not hide them. */
	CHECK(lpm_add(&lpm, 0x00000000, 0, 9) == 0);
	CHECK(lpm_lookup(&lpm, 0x0b000000) == 9);
	CHECK(lpm_lookup(&lpm, 0x0a010203) == 4);
	CHECK(lpm_lookup(&lpm, 0x0a010281) == 3);
	/* Adding a prefix again replaces its next hop. */
	CHECK(lpm_add(&lpm, 0x0a010000, 16, 5) == 0);
	CHECK(lpm_lookup(&lpm, 0x0a01ffff) == 5);
	CHECK(lpm_lookup(&lpm, 0x0a010203) == 4);
	/* Bits past the prefix length are ignored. */
	CHECK(lpm_add(&lpm, 0xc0a801ff, 24, 6) == 0);
	CHECK(lpm_lookup(&lpm, 0xc0a80101) == 6);
	CHECK(lpm_add(&lpm, 0, 33, 1) == -EINVAL);
	CHECK(lpm_add(&lpm, 0, 8, LPM_MAX_NH + 1) == -EINVAL);
	lpm_free(&lpm);
}

/* Random route sets, added in random order, against the brute force: at
 * random addresses and at each route's first and last address and just
 * outside them. */
static void
test_matches_brute_force(void)
{
	enum { SETS = 40, MAX_ROUTES = 200, PROBES = 4000 };
	static struct route routes[MAX_ROUTES];
	unsigned int set, i, n, depth;
	int mismatches = 0, misses = 0, hits = 0;
	uint32_t addr, probe[4];
	struct lpm lpm;

	for (set = 0; set < SETS; set++) {
		n = 1 + rng() % MAX_ROUTES;
		CHECK(lpm_init(&lpm) == 0);
		for (i = 0; i < n; i++) {
			/* Cluster prefixes under few /8s so they overlap and nest. */
			depth = rng() % 33;
			if (depth == 0 && set % 2 == 1)
				depth = 8; /* half the sets have no default route */
			addr = (rng() % 4) << 24 | (rng() & 0x00ffffff);
			if (rng() % 4 == 0)
				addr &= 0xffff0000;
			routes[i].depth = depth;
			routes[i].prefix = addr & mask_of(depth);
			routes[i].nh = rng() % 1000;
			if (lpm_add(&lpm, addr, depth, routes[i].nh) != 0)
				mismatches++;
		}
		for (i = 0; i < PROBES; i++) {
			addr = i % 2 ? rng() : (rng() % 5) << 24 | (rng() & 0x00ffffff);
			int want = brute_lookup(routes, n, addr), got = lpm_lookup(&lpm, addr);

			mismatches += want != got;
			misses += want < 0;
			hits += want >= 0;
		}
		for (i = 0; i < n; i++) {
			probe[0] = routes[i].prefix;
			probe[1] = routes[i].prefix | ~mask_of(routes[i].depth);
			probe[2] = probe[0] - 1;
			probe[3] = probe[1] + 1;
			for (unsigned int j = 0; j < 4; j++)
				mismatches += brute_lookup(routes, n, probe[j]) !=
					      lpm_lookup(&lpm, probe[j]);
		}
		lpm_free(&lpm);
	}
	CHECK(mismatches == 0);
	CHECK(misses > 0 && hits > 0); /* both cases were exercised */
}

static void
test_parse(void)
{
	unsigned int depth;
	uint32_t prefix, nh;

	CHECK(lpm_parse_route("10.1.0.0/16=3", &prefix, &depth, &nh) == 0);
	CHECK(prefix == 0x0a010000 && depth == 16 && nh == 3);
	CHECK(lpm_parse_route("0.0.0.0/0=1", &prefix, &depth, &nh) == 0);
	CHECK(prefix == 0 && depth == 0 && nh == 1);
	CHECK(lpm_parse_route("192.168.1.7 2\n", &prefix, &depth, &nh) == 0);
	CHECK(prefix == 0xc0a80107 && depth == 32 && nh == 2);
	CHECK(lpm_parse_route("10.0.0.0/8 = next", &prefix, &depth, &nh) == 0);
	CHECK(nh == LPM_NH_NEXT);
	CHECK(lpm_parse_route("10.0.0.1/8=1", &prefix, &depth, &nh) == -EINVAL); /* host bits */
	CHECK(lpm_parse_route("10.0.0.0/33=1", &prefix, &depth, &nh) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/=1", &prefix, &depth, &nh) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0/8=1", &prefix, &depth, &nh) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/8", &prefix, &depth, &nh) == -EINVAL); /* no port */
	CHECK(lpm_parse_route("10.0.0.0/8=-1", &prefix, &depth, &nh) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/8=65535", &prefix, &depth, &nh) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/8=1x", &prefix, &depth, &nh) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/8=nextx", &prefix, &depth, &nh) == -EINVAL);
	CHECK(lpm_parse_route("", &prefix, &depth, &nh) == -EINVAL);
}

static void
test_ttl_checksum(void)
{
	struct rte_ipv4_hdr ip;
	int invalid = 0, ttl_wrong = 0, differs = 0;
	uint16_t full;

	for (int i = 0; i < 100000; i++) {
		uint8_t *b = (uint8_t *)&ip;

		for (size_t j = 0; j < sizeof(ip); j++)
			b[j] = (uint8_t)rng();
		ip.version_ihl = RTE_IPV4_VHL_DEF;
		ip.time_to_live = (uint8_t)(2 + rng() % 254);
		if (i % 7 == 0)
			ip.time_to_live = 2;
		ip.hdr_checksum = 0;
		ip.hdr_checksum = rte_ipv4_cksum(&ip);
		uint8_t ttl = ip.time_to_live;

		ipv4_ttl_dec(&ip);
		ttl_wrong += ip.time_to_live != ttl - 1;
		/* A valid header sums to 0xffff, checksum included. */
		invalid += rte_raw_cksum(&ip, sizeof(ip)) != 0xffff;
		uint16_t incr = ip.hdr_checksum;

		ip.hdr_checksum = 0;
		full = rte_ipv4_cksum(&ip);
		/* 0x0000 and 0xffff are both zero in one's complement. */
		differs += incr != full &&
			   !((incr == 0 || incr == 0xffff) && (full == 0 || full == 0xffff));
	}
	CHECK(ttl_wrong == 0);
	CHECK(invalid == 0);
	CHECK(differs == 0);
}

int
main(void)
{
	test_empty_table_misses();
	test_known_routes();
	test_matches_brute_force();
	test_parse();
	test_ttl_checksum();
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
