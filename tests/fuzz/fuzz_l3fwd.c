/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: squall-nf-l3fwd's route parser and LPM tables
 * (nfs/l3fwd/lpm.h), IPv4 and IPv6. The input is read as a routes file
 * (one route per line, trimmed as l3fwd.c's --routes reader trims them);
 * the routes that parse are added to the table of their family, and each
 * route's own prefix must then look up to a route at least as long (its
 * own next hop, or a longer prefix's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpm.h"

#define MAX_ROUTES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The last /32 or /128 added of a family decides its address. */
static void
check_last_host(const struct lpm *lpm, const struct lpm_route *r, unsigned int n, int family)
{
	unsigned int i, host = family == AF_INET ? 32 : 128;
	int got;

	for (i = n; i-- > 0;) {
		if (r[i].family != family || r[i].depth != host)
			continue;
		got = family == AF_INET ? lpm_lookup(lpm, r[i].v4) : lpm6_lookup(lpm, r[i].addr);
		if (got != (int)r[i].nh)
			abort();
		return;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct lpm_route route[MAX_ROUTES];
	unsigned int n = 0, i;
	const char *p, *nl;
	struct lpm lpm, lpm6;
	char line[256], *s, *end;
	size_t len;
	int got;

	if (lpm_init(&lpm) < 0)
		return 0;
	if (lpm_init(&lpm6) < 0) {
		lpm_free(&lpm);
		return 0;
	}
	for (p = (const char *)data; p < (const char *)data + size && n < MAX_ROUTES; p = nl + 1) {
		struct lpm_route *r = &route[n];

		nl = memchr(p, '\n', (size_t)((const char *)data + size - p));
		if (nl == NULL)
			nl = (const char *)data + size;
		len = (size_t)(nl - p);
		if (len >= sizeof(line))
			len = sizeof(line) - 1;
		memcpy(line, p, len);
		line[len] = '\0';
		s = line + strspn(line, " \t");
		end = strchr(s, '#');
		if (end != NULL)
			*end = '\0';
		end = s + strlen(s);
		while (end > s && strchr(" \t\r\n", end[-1]) != NULL)
			*--end = '\0';
		if (lpm_parse_route(s, r) < 0)
			continue;
		if ((r->family != AF_INET && r->family != AF_INET6) || r->nh > LPM_MAX_NH ||
		    r->depth > (r->family == AF_INET ? 32u : 128u))
			abort();
		/* a parsed route always fits: 64 routes need < 1,000 nodes */
		if (r->family == AF_INET ? lpm_add(&lpm, r->v4, r->depth, r->nh) < 0
					 : lpm6_add(&lpm6, r->addr, r->depth, r->nh) < 0)
			abort();
		n++;
	}
	for (i = 0; i < n; i++) {
		/* Some route covers the prefix: the lookup finds one. */
		got = route[i].family == AF_INET ? lpm_lookup(&lpm, route[i].v4)
						 : lpm6_lookup(&lpm6, route[i].addr);
		if (got < 0)
			abort();
	}
	check_last_host(&lpm, route, n, AF_INET);
	check_last_host(&lpm6, route, n, AF_INET6);
	lpm_free(&lpm);
	lpm_free(&lpm6);
	return 0;
}
