/* SPDX-License-Identifier: BSD-3-Clause
 * What the standalone bench tools (ring_limit, futex_pingpong, switch_ring)
 * share: pinning to a core and a monotonic clock in seconds.
 */
#ifndef SQUALL_BENCH_UTIL_H
#define SQUALL_BENCH_UTIL_H

#include <sched.h>
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

#endif
