/* SPDX-License-Identifier: BSD-3-Clause
 * Telemetry command parameters (see telemetry_args.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry_args.h"

/* A decimal of digits only (strtoul alone takes blanks, signs and "" as 0). */
static int
parse_dec(const char *s, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int
tel_args_nfs(const char *params, uint32_t *first)
{
	uint64_t v;

	*first = 0;
	if (params == NULL || *params == '\0')
		return 0;
	if (parse_dec(params, UINT32_MAX, &v) < 0)
		return -EINVAL;
	*first = (uint32_t)v;
	return 0;
}

int
tel_args_gen_rate(const char *params, struct tel_gen_rate_args *a)
{
	char *save = NULL, *pps;

	memset(a, 0, sizeof(*a));
	if (params == NULL || snprintf(a->buf, sizeof(a->buf), "%s", params) >= (int)sizeof(a->buf))
		return -EINVAL;
	pps = strtok_r(a->buf, ",", &save);
	a->port = strtok_r(NULL, ",", &save);
	if (pps == NULL)
		return -EINVAL;
	if (strcmp(pps, "max") == 0) {
		a->rate_pps = UINT64_MAX;
		return 0;
	}
	return parse_dec(pps, 1000000000ull, &a->rate_pps);
}

int
tel_args_wake(const char *params, struct tel_wake_args *a)
{
	char *save = NULL, *thresh, *timeout;
	uint64_t v;

	memset(a, 0, sizeof(*a));
	if (params == NULL || snprintf(a->buf, sizeof(a->buf), "%s", params) >= (int)sizeof(a->buf))
		return -EINVAL;
	a->service = strtok_r(a->buf, ",", &save);
	a->policy = strtok_r(NULL, ",", &save);
	thresh = strtok_r(NULL, ",", &save);
	timeout = strtok_r(NULL, ",", &save);
	if (a->service == NULL || a->policy == NULL)
		return -EINVAL;
	if (thresh != NULL) {
		if (parse_dec(thresh, 65536, &v) < 0 || v == 0)
			return -EINVAL;
		a->has_thresh = true;
		a->thresh_pkts = (uint32_t)v;
	}
	if (timeout != NULL) {
		if (parse_dec(timeout, 10000000, &v) < 0 || v == 0)
			return -EINVAL;
		a->has_timeout = true;
		a->timeout_ns = v * 1000;
	}
	return 0;
}
