/* SPDX-License-Identifier: BSD-3-Clause
 * The transport's ceiling: pointers going manager -> no-op process -> manager
 * through two rte_rings in shared memory, in bursts, nothing else. The
 * parent plays the manager on one core, a forked child the no-op NF on
 * another. Prints "mpps <round trips per second / 1e6>".
 *
 *   ring_limit [SECONDS] [MGR_CORE] [NF_CORE] [BURST] [SLOTS] [TOUCH]
 *
 * TOUCH=1 makes it a little less bare: the pointers are to 256-byte objects
 * in the shared mapping, the no-op writes a verdict word in each (as
 * libsquall does) and the manager reads it back and writes an owner word (as
 * squall-mgr does): the cost of the metadata cache lines crossing cores.
 */
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rte_pause.h>
#include <rte_ring.h>

#include "bench_util.h"

#define IN_FLIGHT   2048 /* pointers circulating, as mbufs would */
#define OBJ_BYTES   256
#define VERDICT_OFF 136 /* where struct sq_pkt_meta's verdict sits in an mbuf */
#define OWNER_OFF   128

static void
noop_nf(struct rte_ring *rx, struct rte_ring *tx, unsigned int burst, _Atomic int *stop, bool touch)
{
	void *pkts[256];

	while (!atomic_load_explicit(stop, memory_order_relaxed)) {
		unsigned int n = rte_ring_sc_dequeue_burst(rx, pkts, burst, NULL);
		unsigned int sent = 0;

		for (unsigned int i = 0; touch && i < n; i++)
			*(volatile uint32_t *)((char *)pkts[i] + VERDICT_OFF) = i;
		/* Check stop here too: once the parent stops draining, the tx ring
		 * can be full for good (more pointers circulate than it holds). */
		while (sent < n && !atomic_load_explicit(stop, memory_order_relaxed))
			sent += rte_ring_sp_enqueue_burst(tx, pkts + sent, n - sent, NULL);
		if (n == 0)
			rte_pause();
	}
}

int
main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	int mgr_core = argc > 2 ? atoi(argv[2]) : 0;
	int nf_core = argc > 3 ? atoi(argv[3]) : 1;
	unsigned int burst = argc > 4 ? (unsigned int)atoi(argv[4]) : 32;
	unsigned int slots = argc > 5 ? (unsigned int)atoi(argv[5]) : 1024;
	bool touch = argc > 6 && atoi(argv[6]) != 0;
	ssize_t ring_bytes = rte_ring_get_memsize(slots);
	size_t objs_off = RTE_ALIGN_CEIL(2 * (size_t)ring_bytes + 64, OBJ_BYTES);
	size_t len = objs_off + (size_t)IN_FLIGHT * OBJ_BYTES;
	void *free_ptrs[IN_FLIGHT];
	unsigned int n_free = IN_FLIGHT;
	unsigned long long done = 0;
	struct rte_ring *rx, *tx;
	_Atomic int *stop;
	char *mem;
	pid_t pid;
	double start;

	if (ring_bytes < 0 || burst == 0 || burst > 256) {
		fprintf(stderr, "ring_limit: bad burst or slots\n");
		return 2;
	}
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 1;
	stop = (_Atomic int *)mem;
	rx = (struct rte_ring *)(mem + 64);
	tx = (struct rte_ring *)(mem + 64 + ring_bytes);
	if (rte_ring_init(rx, "rx", slots, RING_F_SC_DEQ) < 0 ||
	    rte_ring_init(tx, "tx", slots, RING_F_SP_ENQ | RING_F_SC_DEQ) < 0)
		return 1;
	for (unsigned int i = 0; i < IN_FLIGHT; i++)
		free_ptrs[i] = mem + objs_off + (size_t)i * OBJ_BYTES;

	pid = fork();
	if (pid == 0) {
		pin(nf_core);
		noop_nf(rx, tx, burst, stop, touch);
		_exit(0);
	}
	pin(mgr_core);
	start = now_s();
	for (unsigned long long round = 0;; round++) {
		unsigned int n;

		if (n_free > 0) {
			n = rte_ring_enqueue_burst(rx, free_ptrs + n_free - RTE_MIN(n_free, burst),
						   RTE_MIN(n_free, burst), NULL);
			n_free -= n;
		}
		n = rte_ring_sc_dequeue_burst(tx, free_ptrs + n_free, burst, NULL);
		for (unsigned int i = 0; touch && i < n; i++) {
			char *obj = free_ptrs[n_free + i];

			*(volatile uint32_t *)(obj + OWNER_OFF) =
				*(volatile uint32_t *)(obj + VERDICT_OFF);
		}
		n_free += n;
		done += n;
		if ((round & 1023) == 0 && now_s() - start > secs)
			break;
	}
	secs = now_s() - start;
	atomic_store(stop, 1);
	waitpid(pid, NULL, 0);
	printf("mpps %.3f\n", (double)done / secs / 1e6);
	return 0;
}
