/* SPDX-License-Identifier: BSD-3-Clause
 * What the standalone bench tools (ring_limit, futex_pingpong, switch_ring,
 * core_rtt) share: pinning to a core, a monotonic clock in seconds and a
 * strict number argument.
 */
#ifndef SQUALL_BENCH_UTIL_H
#define SQUALL_BENCH_UTIL_H

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline void
pin(int core)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(core, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static inline double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A whole decimal number in lo..hi (no sign, no trailing text). */
static inline bool
parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno == 0 && end != s && *end == '\0' && *s != '-' && *out >= lo && *out <= hi;
}

#endif
