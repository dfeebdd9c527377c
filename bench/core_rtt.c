/* SPDX-License-Identifier: BSD-3-Clause
 * How far apart two cores are right now: one cache line bounces between a
 * thread pinned to each, ITERS round trips per block, and the fastest of
 * BLOCKS blocks is the answer (a block that an interrupt hit is not).
 *
 * On a VM the hypervisor places the vCPUs on host cores and moves them at
 * will. On the 2-vCPU AMD EPYC machine the round trip between cpu0 and cpu1
 * was ~57 ns most of the time and ~335 ns for stretches of seconds to
 * minutes (sampled every 2 s), and a 1-NF chain, whose every packet crosses
 * between the manager's core and the NF's twice, forwarded 11.0-11.6 Mpps in
 * the first state and 4.6-5.6 in the second. A rate search's trial that
 * straddles such a move measures the host, so squall-bench reads this before
 * and after each trial (squall/bench/cores.py).
 *
 *   core_rtt CORE_A CORE_B [ITERS [BLOCKS]]
 *
 * Both threads ask for SCHED_FIFO (root may): a manager busy polling either
 * core would otherwise stretch a round trip to a time slice. Without it,
 * "fifo" is false in the output and the figure is only as good as the
 * cores are idle. A peer that never answers (its core held by a real-time
 * task) ends the run after a second with exit status 1.
 *
 * Prints one JSON line: {"cores": [A, B], "iters": N, "blocks": K,
 * "rtt_ns": fastest block, "max_ns": slowest block, "fifo": true}.
 * Bad arguments: a usage message and exit status 2.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_util.h"

#define TIMEOUT_S 1.0

/* The bounced word alone on its line, so only it moves between the cores. */
static struct {
	_Atomic uint64_t v;
	char pad[56];
} line __attribute__((aligned(64)));

static uint64_t iters, blocks;
static _Atomic bool gave_up, ready;

/* Spin until the word holds @p want; false after TIMEOUT_S (or when the
 * other side gave up). */
static bool
await(uint64_t want)
{
	double deadline = 0;

	for (uint32_t spins = 1; atomic_load_explicit(&line.v, memory_order_acquire) != want;
	     spins++) {
		if ((spins & 0xfff) != 0)
			continue;
		if (atomic_load(&gave_up))
			return false;
		if (deadline == 0)
			deadline = now_s() + TIMEOUT_S;
		else if (now_s() > deadline)
			return false;
	}
	return true;
}

static bool
fifo(void)
{
	struct sched_param sp = {.sched_priority = sched_get_priority_max(SCHED_FIFO) / 2};

	return pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
}

/* B answers every odd value with the next even one. */
static void *
responder(void *arg)
{
	uint64_t total = iters * blocks;

	*(bool *)arg = fifo();
	atomic_store(&ready, true);
	for (uint64_t i = 0; i < total; i++) {
		if (!await(2 * i + 1)) {
			atomic_store(&gave_up, true);
			break;
		}
		atomic_store_explicit(&line.v, 2 * i + 2, memory_order_release);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	uint64_t a, b;
	double best = 1e30, worst = 0;
	bool fifo_a, fifo_b = false;
	pthread_attr_t attr;
	cpu_set_t set;
	pthread_t t;

	if (argc < 3 || !parse_u64(argv[1], 0, CPU_SETSIZE - 1, &a) ||
	    !parse_u64(argv[2], 0, CPU_SETSIZE - 1, &b) || a == b ||
	    !parse_u64(argc > 3 ? argv[3] : "2000", 1, 10000000, &iters) ||
	    !parse_u64(argc > 4 ? argv[4] : "5", 1, 1000, &blocks)) {
		fprintf(stderr,
			"usage: %s CORE_A CORE_B [ITERS [BLOCKS]]\n"
			"  two different CPU numbers; ITERS 1..10000000 (2000), "
			"BLOCKS 1..1000 (5)\n",
			argv[0]);
		return 2;
	}
	/* B starts on its own core: were it to start on ours, our real-time
	 * spin would keep it from ever getting there. */
	CPU_ZERO(&set);
	CPU_SET(b, &set);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	if (pthread_create(&t, &attr, responder, &fifo_b) != 0) {
		perror("pthread_create");
		return 1;
	}
	pin((int)a);
	fifo_a = fifo();
	while (!atomic_load(&ready))
		;
	for (uint64_t k = 0; k < blocks && !atomic_load(&gave_up); k++) {
		double t0 = now_s(), ns;
		uint64_t i;

		for (i = k * iters; i < (k + 1) * iters; i++) {
			atomic_store_explicit(&line.v, 2 * i + 1, memory_order_release);
			if (!await(2 * i + 2)) {
				atomic_store(&gave_up, true);
				break;
			}
		}
		ns = (now_s() - t0) * 1e9 / (double)iters;
		best = ns < best ? ns : best;
		worst = ns > worst ? ns : worst;
	}
	pthread_join(t, NULL);
	if (atomic_load(&gave_up)) {
		fprintf(stderr, "core_rtt: no answer from core %llu within %.0f s\n",
			(unsigned long long)b, TIMEOUT_S);
		return 1;
	}
	printf("{\"cores\": [%llu, %llu], \"iters\": %llu, \"blocks\": %llu, \"rtt_ns\": %.1f, "
	       "\"max_ns\": %.1f, \"fifo\": %s}\n",
	       (unsigned long long)a, (unsigned long long)b, (unsigned long long)iters,
	       (unsigned long long)blocks, best, worst, fifo_a && fifo_b ? "true" : "false");
	return 0;
}
