/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: squall-nf-l3fwd's route parser and LPM table
 * (nfs/l3fwd/lpm.h). The input is read as a routes file (one route per
 * line, trimmed as l3fwd.c's --routes reader trims them); the routes that parse are added to a table, and each route's own
 * prefix must then look up to a route at least as long (its own next hop,
 * or a longer prefix's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpm.h"

#define MAX_ROUTES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t prefix[MAX_ROUTES], nh[MAX_ROUTES];
	unsigned int depth[MAX_ROUTES], n = 0, i;
	const char *p, *nl;
	struct lpm lpm;
	char line[256], *s, *end;
	size_t len;

	if (lpm_init(&lpm) < 0)
		return 0;
	for (p = (const char *)data; p < (const char *)data + size && n < MAX_ROUTES; p = nl + 1) {
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
		if (lpm_parse_route(s, &prefix[n], &depth[n], &nh[n]) < 0)
			continue;
		if (depth[n] > 32 || nh[n] > LPM_MAX_NH)
			abort();
		if (lpm_add(&lpm, prefix[n], depth[n], nh[n]) < 0)
			abort(); /* a parsed route always fits: 64 routes need < 200 nodes */
		n++;
	}
	for (i = 0; i < n; i++) {
		/* Some route covers the prefix: the lookup finds one. */
		if (lpm_lookup(&lpm, prefix[i]) < 0)
			abort();
	}
	/* The last route added for a /32 decides that address. */
	for (i = n; i-- > 0;) {
		if (depth[i] == 32) {
			if (lpm_lookup(&lpm, prefix[i]) != (int)nh[i])
				abort();
			break;
		}
	}
	lpm_free(&lpm);
	return 0;
}
