/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: the parameters of squall-mgr's telemetry commands
 * (mgr/telemetry_args.c). The first byte picks the command, the rest is the
 * params string as DPDK telemetry hands it over (NUL-terminated). A parse
 * either fails or yields values within the documented ranges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
within(const char *p, const char *buf, size_t len)
{
	return p >= buf && p < buf + len && memchr(p, '\0', (size_t)(buf + len - p)) != NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tel_gen_rate_args g;
	struct tel_wake_args w;
	char *params;
	uint32_t first;

	if (size < 1)
		return 0;
	params = malloc(size);
	if (params == NULL)
		return 0;
	memcpy(params, data + 1, size - 1);
	params[size - 1] = '\0';
	switch (data[0] % 3) {
	case 0:
		(void)tel_args_nfs(params, &first);
		(void)tel_args_nfs(NULL, &first);
		break;
	case 1:
		if (tel_args_gen_rate(params, &g) == 0 &&
		    ((g.rate_pps > 1000000000ull && g.rate_pps != UINT64_MAX) ||
		     (g.port != NULL && !within(g.port, g.buf, sizeof(g.buf)))))
			abort();
		break;
	default:
		if (tel_args_wake(params, &w) == 0 &&
		    (!within(w.service, w.buf, sizeof(w.buf)) ||
		     !within(w.policy, w.buf, sizeof(w.buf)) ||
		     (w.has_thresh && (w.thresh_pkts < 1 || w.thresh_pkts > 65536)) ||
		     (w.has_timeout && (w.timeout_ns < 1000 || w.timeout_ns > 10000000000ull))))
			abort();
		break;
	}
	free(params);
	return 0;
}
