/* SPDX-License-Identifier: BSD-3-Clause
 * The pool's audit at exit: see poolaudit.h.
 */
#include <errno.h>
#include <stdlib.h>

#include <rte_lcore.h>
#include <rte_mempool.h>

#include "poolaudit.h"

static int
by_address(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;

	return (x > y) - (x < y);
}

int
mgr_pool_audit(struct rte_mempool *mp, struct pool_audit *a)
{
	unsigned int lcore, n, cap;
	void **objs;

	a->size = mp->size;
	a->home = a->doubled = 0;
	RTE_LCORE_FOREACH(lcore)
	{
		struct rte_mempool_cache *c = rte_mempool_default_cache(mp, lcore);

		if (c != NULL)
			rte_mempool_cache_flush(c, mp);
	}
	/* Everything the pool holds, taken out a burst at a time, then one at a
	 * time (a bulk dequeue takes all it asks for or nothing). Its store
	 * holds at most twice the size (a ring rounded up to a power of 2). */
	cap = 2 * mp->size + 64;
	objs = malloc(sizeof(*objs) * cap);
	if (objs == NULL)
		return -ENOMEM;
	n = 0;
	for (unsigned int burst = 64; burst > 0; burst = burst > 1 ? burst / 2 : 0)
		while (n + burst <= cap && rte_mempool_ops_dequeue_bulk(mp, objs + n, burst) == 0)
			n += burst;
	if (n == 0) {
		free(objs);
		return 0;
	}
	qsort(objs, n, sizeof(*objs), by_address);
	for (unsigned int i = 0; i < n; i++)
		if (i == 0 || objs[i] != objs[i - 1])
			a->home++;
	a->doubled = n - a->home;
	rte_mempool_ops_enqueue_bulk(mp, objs, n);
	free(objs);
	return 0;
}
