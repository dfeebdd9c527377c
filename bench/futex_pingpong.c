/* SPDX-License-Identifier: BSD-3-Clause
 * The wake mechanism's own cost, for E5 (issue 3): a busy process (like
 * squall-mgr's lcore) wakes a process sleeping on a futex in shared memory
 * (like a sleeping NF); the sleeper records the TSC delta from just before
 * FUTEX_WAKE to when it runs again. No rings, no packets.
 *
 *   futex_pingpong ITERS WAKER_CORE SLEEPER_CORE GAP_US [HUGE_FILE]
 *
 * With HUGE_FILE (a path on hugetlbfs) the futex word lives in a shared
 * hugepage file mapping, as Squall's does, instead of anonymous shared memory.
 *
 * Prints one JSON line: {"n": N, "p50_ns": .., "p90_ns": .., "p99_ns": .., "mean_ns": ..}
 */
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <x86intrin.h>

#include "bench_util.h"

enum { ASLEEP = 1, DONE = 2 };

struct shared {
	_Atomic uint32_t word;  /* the futex: 1 = go */
	_Atomic uint32_t state; /* the sleeper's: ASLEEP, then DONE */
	_Atomic uint32_t done;  /* wakes the sleeper has recorded */
	_Atomic uint64_t t_wake;
	uint64_t deltas[];
};

static double
tsc_per_ns(void)
{
	struct timespec a, b;
	uint64_t t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &a);
	t0 = __rdtsc();
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 100000000L);
	t1 = __rdtsc();
	return (double)(t1 - t0) /
	       (double)((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec));
}

static void
sleeper(struct shared *sh, int iters)
{
	for (int i = 0; i < iters; i++) {
		atomic_store(&sh->state, ASLEEP);
		while (atomic_load(&sh->word) == 0)
			syscall(SYS_futex, &sh->word, FUTEX_WAIT, 0, NULL, NULL, 0);
		sh->deltas[i] = __rdtsc() - atomic_load(&sh->t_wake);
		atomic_store(&sh->word, 0);
		atomic_store(&sh->state, DONE);
		atomic_fetch_add(&sh->done, 1);
	}
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 2000;
	int waker_core = argc > 2 ? atoi(argv[2]) : 0;
	int sleeper_core = argc > 3 ? atoi(argv[3]) : 1;
	long gap_us = argc > 4 ? atol(argv[4]) : 200;
	double per_ns = tsc_per_ns();
	struct shared *sh;
	double sum = 0;
	pid_t pid;

	if (iters <= 0 || gap_us < 0) {
		fprintf(stderr, "usage: futex_pingpong ITERS WAKER_CORE SLEEPER_CORE GAP_US\n");
		return 2;
	}
	size_t len = sizeof(*sh) + (size_t)iters * sizeof(uint64_t);

	if (argc > 5) {
		int fd = open(argv[5], O_RDWR | O_CREAT, 0600);

		len = (len + (2u << 20) - 1) & ~((size_t)(2u << 20) - 1);
		if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
			perror(argv[5]);
			return 1;
		}
		sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		unlink(argv[5]);
	} else {
		sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	}
	if (sh == MAP_FAILED)
		return 1;
	pid = fork();
	if (pid == 0) {
		pin(sleeper_core);
		sleeper(sh, iters);
		_exit(0);
	}
	pin(waker_core);
	for (int i = 0; i < iters; i++) {
		uint64_t gap_end;

		/* Busy, like the manager: wait for the sleeper to be asleep, then
		 * a gap so it is really in the kernel, then wake it. */
		while (atomic_load(&sh->state) != ASLEEP)
			_mm_pause();
		gap_end = __rdtsc() + (uint64_t)((double)gap_us * 1000.0 * per_ns);
		while (__rdtsc() < gap_end)
			_mm_pause();
		atomic_store(&sh->t_wake, __rdtsc());
		atomic_store(&sh->word, 1);
		syscall(SYS_futex, &sh->word, FUTEX_WAKE, 1, NULL, NULL, 0);
		/* A count, not the state: the sleeper may be ASLEEP again already. */
		while (atomic_load(&sh->done) != (uint32_t)i + 1)
			_mm_pause();
	}
	waitpid(pid, NULL, 0);
	qsort(sh->deltas, (size_t)iters, sizeof(uint64_t), cmp_u64);
	for (int i = 0; i < iters; i++)
		sum += (double)sh->deltas[i];
#define Q(q) ((double)sh->deltas[(size_t)((q) * (iters - 1))] / per_ns)
	printf("{\"n\": %d, \"p50_ns\": %.0f, \"p90_ns\": %.0f, \"p99_ns\": %.0f, \"mean_ns\": "
	       "%.0f}\n",
	       iters, Q(0.50), Q(0.90), Q(0.99), sum / iters / per_ns);
	return 0;
}
