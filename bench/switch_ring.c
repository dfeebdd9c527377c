/* SPDX-License-Identifier: BSD-3-Clause
 * What one NF activation costs the NF core at least: a token goes round a
 * ring of N tasks pinned to one core; each wakes the next with FUTEX_WAKE
 * and sleeps in FUTEX_WAIT, so every hop is one wake, one sleep and one
 * context switch, as when the manager wakes N sleeping NFs in turn. The
 * tasks are processes (an address space each, as Squall's NFs) or threads
 * of one process (the same switches without an address-space change), so
 * the two side by side show what the address-space switch itself costs
 * here, and how that grows with the number of tasks in rotation. Mode
 * yield: processes that never sleep, each spinning with sched_yield() until
 * the token is its own, as the manager and the awake NFs of a chain sharing
 * its core hand the core on (lib/nf.c spin_for_pkts, mgr/idle.c
 * mgr_idle_yield): a hop is then a yield and a switch, and the yields of the
 * tasks the scheduler picks without the token are in its cost too.
 *
 *   switch_ring proc|thread|yield N HOPS CORE [PAGES]
 *
 * Each task writes one byte to each of PAGES private 4 KB pages per hop
 * (default 4: an NF touches its stack, its state and a few code pages).
 * Prints one JSON line: {"mode": .., "n": N, "hops": H, "ns_per_hop": ..}.
 * Bad arguments: a usage message and exit status 2.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define PAGE 4096

/* One cache line per task's word: the words are written across tasks. */
struct word {
	_Atomic uint32_t go;
	char pad[60];
};

struct ring {
	uint32_t n;
	uint64_t hops;  /* the token stops after this many */
	uint32_t pages; /* private pages each task touches per hop */
	_Atomic uint64_t hop;
	_Atomic uint32_t stop;
	double end_s; /* when the last hop was taken */
	struct word w[];
};

static struct ring *ring;
static bool yielding; /* mode yield: spin with sched_yield(), no futex */

/* Not FUTEX_PRIVATE, in both modes: Squall's words are in a shared mapping. */
static void
futex_wait(_Atomic uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, w, FUTEX_WAIT, val, NULL, NULL, 0);
}

static void
futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Task i: wait for the token, touch its pages, pass the token on. */
static void
task(uint32_t i)
{
	volatile char *mem = malloc((size_t)ring->pages * PAGE);
	uint32_t next = (i + 1) % ring->n;

	if (mem == NULL)
		exit(1);
	memset((char *)mem, 0, (size_t)ring->pages * PAGE);
	for (;;) {
		while (atomic_load(&ring->w[i].go) == 0) {
			if (yielding)
				sched_yield();
			else
				futex_wait(&ring->w[i].go, 0);
		}
		atomic_store(&ring->w[i].go, 0);
		if (atomic_load(&ring->stop))
			break;
		for (uint32_t p = 0; p < ring->pages; p++)
			mem[(size_t)p * PAGE]++;
		if (atomic_fetch_add(&ring->hop, 1) + 1 >= ring->hops) {
			ring->end_s = now_s();
			atomic_store(&ring->stop, 1);
		}
		atomic_store(&ring->w[next].go, 1);
		if (!yielding)
			futex_wake(&ring->w[next].go);
	}
	/* Pass the stop on so every task leaves its wait. */
	atomic_store(&ring->w[next].go, 1);
	if (!yielding)
		futex_wake(&ring->w[next].go);
}

/* A decimal integer in [lo, hi], nothing after it. */
static void *
thread_main(void *arg)
{
	task((uint32_t)(uintptr_t)arg);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t *threads = NULL;
	pid_t *pids = NULL;
	uint64_t n, hops, core, pages;
	bool procs;
	double t0;
	size_t size;

	if (argc < 5 || (strcmp(argv[1], "proc") != 0 && strcmp(argv[1], "thread") != 0 &&
			 strcmp(argv[1], "yield") != 0)) {
		fprintf(stderr, "usage: %s proc|thread|yield N HOPS CORE [PAGES]\n", argv[0]);
		return 2;
	}
	yielding = strcmp(argv[1], "yield") == 0;
	procs = yielding || strcmp(argv[1], "proc") == 0;
	if (!parse_u64(argv[2], 2, 100000, &n) || !parse_u64(argv[3], 1, UINT64_MAX / 2, &hops) ||
	    !parse_u64(argv[4], 0, CPU_SETSIZE - 1, &core) ||
	    !parse_u64(argc > 5 ? argv[5] : "4", 0, 4096, &pages)) {
		fprintf(stderr,
			"N must be 2..100000, HOPS >= 1, CORE a CPU number, PAGES 0..4096\n");
		return 2;
	}
	size = sizeof(*ring) + n * sizeof(struct word);
	ring = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ring == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	ring->n = (uint32_t)n;
	ring->hops = hops;
	ring->pages = (uint32_t)pages;
	pin((int)core);
	if (procs)
		pids = calloc(n, sizeof(*pids));
	else
		threads = calloc(n, sizeof(*threads));
	if (pids == NULL && threads == NULL) {
		perror("calloc");
		return 1;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (procs) {
			pids[i] = fork();
			if (pids[i] == 0) {
				task(i);
				_exit(0);
			}
			if (pids[i] < 0) {
				perror("fork");
				return 1;
			}
		} else if (pthread_create(&threads[i], NULL, thread_main, (void *)(uintptr_t)i) !=
			   0) {
			fprintf(stderr, "pthread_create failed at task %u\n", i);
			return 1;
		}
	}
	usleep(200000); /* every task reaches its first wait */
	t0 = now_s();
	atomic_store(&ring->w[0].go, 1);
	futex_wake(&ring->w[0].go);
	for (uint32_t i = 0; i < n; i++) {
		if (procs)
			waitpid(pids[i], NULL, 0);
		else
			pthread_join(threads[i], NULL);
	}
	printf("{\"mode\": \"%s\", \"n\": %u, \"pages\": %u, \"hops\": %llu, \"ns_per_hop\": "
	       "%.1f}\n",
	       argv[1], ring->n, ring->pages, (unsigned long long)ring->hops,
	       (ring->end_s - t0) * 1e9 / (double)ring->hops);
	return 0;
}
