/* SPDX-License-Identifier: BSD-3-Clause
 * guard_micro: what the manager's record of who holds each mbuf costs per
 * packet (mgr/guard.h), alone, on a pool laid out as the manager's: the give
 * (before an NF's rx ring) and the take back with its checks (after its tx
 * ring), against the same loop without them. A PDR difference between two
 * builds (bench/experiments/guard_cost.py) is within the noise of a shared
 * NF core; this is not.
 *
 *   guard_micro [SECONDS] [CORE]
 *
 * Prints "guard_micro NS_GIVE NS_TAKE NS_LOOP" (ns per packet; the loop's
 * own cost, alloc and free included, is NS_LOOP, not part of the other two).
 */
#include <stdio.h>
#include <stdlib.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <rte_mempool.h>

#include <squall/pkt.h>

#include "guard.h"

#define MBUFS      16383
#define POOL_CACHE 256
#define BURST      32

struct span {
	uintptr_t lo, hi;
	size_t page;
};

/* The memory the pool's objects are in, and its page size. */
static void
chunk_span(struct rte_mempool *mp, void *opaque, struct rte_mempool_memhdr *memhdr,
	   unsigned int idx)
{
	struct span *s = opaque;
	uintptr_t a = (uintptr_t)memhdr->addr;
	const struct rte_memseg_list *msl = rte_mem_virt2memseg_list(memhdr->addr);

	(void)mp;
	(void)idx;
	if (s->lo == 0 || a < s->lo)
		s->lo = a;
	if (a + memhdr->len > s->hi)
		s->hi = a + memhdr->len;
	if (msl != NULL && msl->page_sz > s->page)
		s->page = msl->page_sz;
}

/* One round: a burst from the pool, given to NF 0 and taken back (or not),
 * freed. @return TSC spent in give and take. */
static void
round_trip(struct rte_mempool *pool, bool guard, uint64_t *give, uint64_t *take)
{
	struct rte_mbuf *pkts[BURST];
	uint64_t t0, t1, t2;

	if (rte_pktmbuf_alloc_bulk(pool, pkts, BURST) != 0)
		abort();
	for (unsigned int i = 0; i < BURST; i++)
		pkts[i]->data_len = pkts[i]->pkt_len = 64;
	t0 = rte_rdtsc();
	if (guard)
		mgr_guard_give(pkts, BURST, 0);
	t1 = rte_rdtsc();
	if (guard)
		for (unsigned int i = 0; i < BURST; i++)
			if (mgr_guard_take(pkts[i], 0) != GUARD_OK)
				abort();
	t2 = rte_rdtsc();
	rte_pktmbuf_free_bulk(pkts, BURST);
	*give += t1 - t0;
	*take += t2 - t1;
}

int
main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	char lcore[16];
	char *eal[] = {argv[0], "-l", lcore, "--in-memory", "--no-pci", "--log-level=error"};
	struct rte_mempool *pool;
	struct span span = {0};
	uint64_t give = 0, take = 0, none_give = 0, none_take = 0, rounds = 0, hz, end;
	uint64_t t_none = 0;

	snprintf(lcore, sizeof(lcore), "%d", argc > 2 ? atoi(argv[2]) : 0);
	if (rte_eal_init((int)RTE_DIM(eal), eal) < 0) {
		fprintf(stderr, "guard_micro: EAL init failed (hugepages?)\n");
		return 1;
	}
	pool = rte_pktmbuf_pool_create("guard", MBUFS, POOL_CACHE, SQ_PKT_META_SIZE,
				       RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
	if (pool == NULL) {
		fprintf(stderr, "guard_micro: no pool\n");
		return 1;
	}
	rte_mempool_mem_iter(pool, chunk_span, &span);
	if (mgr_guard_init(pool, (void *)span.lo, span.hi - span.lo, span.page) != 0) {
		fprintf(stderr, "guard_micro: the guard cannot map the pool\n");
		return 1;
	}
	hz = rte_get_tsc_hz();
	end = rte_rdtsc() + (uint64_t)(secs * (double)hz);
	/* Alternate: each half sees the same cache and frequency states. */
	while (rte_rdtsc() < end) {
		uint64_t t1;

		for (unsigned int i = 0; i < 64; i++)
			round_trip(pool, true, &give, &take);
		t1 = rte_rdtsc();
		for (unsigned int i = 0; i < 64; i++)
			round_trip(pool, false, &none_give, &none_take);
		t_none += rte_rdtsc() - t1;
		rounds += 64;
	}
	{
		double per = 1e9 / (double)hz / (double)(rounds * BURST);

		/* give and take net of the empty timing brackets around them */
		printf("guard_micro %.2f %.2f %.2f\n", (double)(give - none_give) * per,
		       (double)(take - none_take) * per, (double)t_none * per);
	}
	mgr_guard_free();
	rte_mempool_free(pool);
	rte_eal_cleanup();
	return 0;
}
