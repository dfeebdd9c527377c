/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-l3fwd's LPM tables and TTL update: the IPv4 and the IPv6 table
 * agree with a brute-force longest match over random route sets, route
 * parsing (both families) rejects what it must, and the incrementally
 * patched checksum is valid.
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
	static const uint8_t fd00_1[16] = {0xfd, 0x00, 0x00, 0x01};
	struct lpm_route r;

	CHECK(lpm_parse_route("10.1.0.0/16=3", &r) == 0);
	CHECK(r.family == AF_INET && r.v4 == 0x0a010000 && r.depth == 16 && r.nh == 3);
	CHECK(lpm_parse_route("0.0.0.0/0=1", &r) == 0);
	CHECK(r.v4 == 0 && r.depth == 0 && r.nh == 1);
	CHECK(lpm_parse_route("192.168.1.7 2\n", &r) == 0);
	CHECK(r.v4 == 0xc0a80107 && r.depth == 32 && r.nh == 2);
	CHECK(lpm_parse_route("10.0.0.0/8 = next", &r) == 0);
	CHECK(r.nh == LPM_NH_NEXT);
	CHECK(lpm_parse_route("10.0.0.1/8=1", &r) == -EINVAL); /* host bits */
	CHECK(lpm_parse_route("10.0.0.0/33=1", &r) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/=1", &r) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0/8=1", &r) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/8", &r) == -EINVAL); /* no port */
	CHECK(lpm_parse_route("10.0.0.0/8=-1", &r) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/8=65535", &r) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/8=1x", &r) == -EINVAL);
	CHECK(lpm_parse_route("10.0.0.0/8=nextx", &r) == -EINVAL);
	CHECK(lpm_parse_route("", &r) == -EINVAL);

	/* IPv6 through the same option. */
	CHECK(lpm_parse_route("fd00:1::/32=4", &r) == 0);
	CHECK(r.family == AF_INET6 && r.depth == 32 && r.nh == 4);
	CHECK(memcmp(r.addr, fd00_1, 16) == 0);
	CHECK(lpm_parse_route("::/0 next", &r) == 0 && r.family == AF_INET6 && r.depth == 0);
	CHECK(r.nh == LPM_NH_NEXT);
	CHECK(lpm_parse_route("2001:db8::1=7", &r) == 0 && r.depth == 128 && r.addr[15] == 1);
	CHECK(lpm_parse_route("fd00::8000:0:0:0/65=1", &r) == 0 && r.depth == 65);
	CHECK(lpm_parse_route("fd00::8000:0:0:0/64=1", &r) == -EINVAL); /* bit 64 set */
	CHECK(lpm_parse_route("fd00::1/127=1", &r) == -EINVAL);
	CHECK(lpm_parse_route("fd00::/129=1", &r) == -EINVAL);
	CHECK(lpm_parse_route("fd00:::/8=1", &r) == -EINVAL);
	CHECK(lpm_parse_route("::ffff:10.0.0.0/104=2", &r) == 0 && r.family == AF_INET6);
}

struct route6 {
	uint8_t prefix[16];
	unsigned int depth;
	uint32_t nh;
};

static bool
in_prefix6(const uint8_t *a, const uint8_t *p, unsigned int depth)
{
	unsigned int i;

	for (i = 0; i < depth / 8; i++)
		if (a[i] != p[i])
			return false;
	return depth % 8 == 0 || ((a[i] ^ p[i]) & (uint8_t)(0xff00 >> (depth % 8))) == 0;
}

static void
mask6(uint8_t *a, unsigned int depth)
{
	for (unsigned int i = 0; i < 16; i++) {
		if (i * 8 >= depth)
			a[i] = 0;
		else if (i * 8 + 8 > depth)
			a[i] &= (uint8_t)(0xff00 >> (depth % 8));
	}
}

static int
brute_lookup6(const struct route6 *r, unsigned int n, const uint8_t *addr)
{
	int best = -1, best_depth = -1;

	for (unsigned int i = 0; i < n; i++) {
		if (in_prefix6(addr, r[i].prefix, r[i].depth) && (int)r[i].depth >= best_depth) {
			best = (int)r[i].nh;
			best_depth = (int)r[i].depth;
		}
	}
	return best < 0 ? -ENOENT : best;
}

/* A random address near the routes: mostly under fd00::/16 and 2001:db8::/32
 * with few distinct bytes, so that prefixes nest and share nodes deep down. */
static void
rand_addr6(uint8_t *a)
{
	for (unsigned int i = 0; i < 16; i++)
		a[i] = (uint8_t)(rng() % 4 == 0 ? rng() : rng() % 3);
	if (rng() % 2) {
		a[0] = 0xfd, a[1] = 0x00;
	} else if (rng() % 2) {
		a[0] = 0x20, a[1] = 0x01, a[2] = 0x0d, a[3] = 0xb8;
	}
}

static void
test_ipv6_known_routes(void)
{
	struct lpm lpm;
	struct lpm_route r;
	uint8_t a[16];

	CHECK(lpm_init(&lpm) == 0);
	inet_pton(AF_INET6, "fd00::1", a);
	CHECK(lpm6_lookup(&lpm, a) == -ENOENT);
	CHECK(lpm_parse_route("fd00::/8=1", &r) == 0 && lpm6_add(&lpm, r.addr, r.depth, r.nh) == 0);
	CHECK(lpm_parse_route("fd00:1::/32=2", &r) == 0 &&
	      lpm6_add(&lpm, r.addr, r.depth, r.nh) == 0);
	CHECK(lpm_parse_route("fd00:1:0:0:8000::/65=3", &r) == 0 &&
	      lpm6_add(&lpm, r.addr, r.depth, r.nh) == 0);
	CHECK(lpm_parse_route("fd00:1::5=4", &r) == 0 &&
	      lpm6_add(&lpm, r.addr, r.depth, r.nh) == 0);
	CHECK(lpm6_lookup(&lpm, a) == 1);
	inet_pton(AF_INET6, "fd00:1::6", a);
	CHECK(lpm6_lookup(&lpm, a) == 2);
	inet_pton(AF_INET6, "fd00:1::5", a);
	CHECK(lpm6_lookup(&lpm, a) == 4);
	inet_pton(AF_INET6, "fd00:1::7fff:0:0:1", a); /* bit 64 clear */
	CHECK(lpm6_lookup(&lpm, a) == 2);
	inet_pton(AF_INET6, "fd00:1::8000:0:0:1", a); /* bit 64 set: the /65 */
	CHECK(lpm6_lookup(&lpm, a) == 3);
	inet_pton(AF_INET6, "fe80::1", a);
	CHECK(lpm6_lookup(&lpm, a) == -ENOENT);
	/* A default route added last hides none of them. */
	CHECK(lpm_parse_route("::/0=9", &r) == 0 && lpm6_add(&lpm, r.addr, r.depth, r.nh) == 0);
	CHECK(lpm6_lookup(&lpm, a) == 9);
	inet_pton(AF_INET6, "fd00:1::5", a);
	CHECK(lpm6_lookup(&lpm, a) == 4);
	CHECK(lpm6_add(&lpm, a, 129, 1) == -EINVAL);
	CHECK(lpm6_add(&lpm, a, 128, LPM_MAX_NH + 1) == -EINVAL);
	lpm_free(&lpm);
}

/* Random IPv6 route sets against the brute force, as for IPv4: random
 * addresses near the routes, and each route's first and last address and
 * the ones just outside. */
static void
test_ipv6_matches_brute_force(void)
{
	enum { SETS = 30, MAX_ROUTES = 150, PROBES = 3000 };
	static struct route6 routes[MAX_ROUTES];
	unsigned int set, i, j, n, depth;
	int mismatches = 0, misses = 0, hits = 0, add_failed = 0;
	uint8_t a[16], probe[4][16];
	struct lpm lpm;

	for (set = 0; set < SETS; set++) {
		n = 1 + rng() % MAX_ROUTES;
		CHECK(lpm_init(&lpm) == 0);
		for (i = 0; i < n; i++) {
			/* Lengths everywhere, with the usual /32 /48 /56 /64 /128. */
			static const unsigned int common[] = {32, 48, 56, 64, 128};

			depth = rng() % 3 == 0 ? common[rng() % 5] : rng() % 129;
			if (depth == 0 && set % 2 == 1)
				depth = 16; /* half the sets have no default route */
			rand_addr6(a);
			mask6(a, depth);
			memcpy(routes[i].prefix, a, 16);
			routes[i].depth = depth;
			routes[i].nh = rng() % 1000;
			rand_addr6(a); /* bits past the prefix are ignored */
			memcpy(a, routes[i].prefix, depth / 8);
			if (depth % 8)
				a[depth / 8] = (uint8_t)((a[depth / 8] & (0xff >> (depth % 8))) |
							 routes[i].prefix[depth / 8]);
			add_failed += lpm6_add(&lpm, a, depth, routes[i].nh) != 0;
		}
		for (i = 0; i < PROBES; i++) {
			rand_addr6(a);
			int want = brute_lookup6(routes, n, a), got = lpm6_lookup(&lpm, a);

			mismatches += want != got;
			misses += want < 0;
			hits += want >= 0;
		}
		for (i = 0; i < n; i++) {
			/* first, last, one below the first, one past the last */
			memcpy(probe[0], routes[i].prefix, 16);
			memcpy(probe[1], routes[i].prefix, 16);
			for (j = routes[i].depth; j < 128; j++)
				probe[1][j / 8] |= (uint8_t)(0x80 >> (j % 8));
			memcpy(probe[2], probe[0], 16);
			for (j = 16; j-- > 0 && probe[2][j]-- == 0;)
				;
			memcpy(probe[3], probe[1], 16);
			for (j = 16; j-- > 0 && ++probe[3][j] == 0;)
				;
			for (j = 0; j < 4; j++)
				mismatches += brute_lookup6(routes, n, probe[j]) !=
					      lpm6_lookup(&lpm, probe[j]);
		}
		lpm_free(&lpm);
	}
	CHECK(add_failed == 0);
	CHECK(mismatches == 0);
	CHECK(misses > 0 && hits > 0);
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
	test_ipv6_known_routes();
	test_ipv6_matches_brute_force();
	test_ttl_checksum();
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
