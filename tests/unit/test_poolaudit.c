/* SPDX-License-Identifier: BSD-3-Clause
 * The pool's audit at exit (mgr/poolaudit.c): an mbuf freed twice hides one
 * that never came back from DPDK's own count; the audit finds both. EAL
 * without hugepages, one lcore, a pool of 63 mbufs with and without an
 * lcore cache.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "check.h"
#include "eal_nohuge.h"
#include "poolaudit.h"

static void
test_pool(const char *name, unsigned int cache)
{
	struct rte_mempool *mp = rte_pktmbuf_pool_create(name, 63, cache, 0, 256, SOCKET_ID_ANY);
	struct rte_mbuf *a, *b, *c;
	struct pool_audit au;

	CHECK(mp != NULL);
	if (mp == NULL)
		return;
	/* all home */
	CHECK(mgr_pool_audit(mp, &au) == 0 && au.size == 63 && au.home == 63 && au.doubled == 0);
	a = rte_pktmbuf_alloc(mp);
	b = rte_pktmbuf_alloc(mp);
	c = rte_pktmbuf_alloc(mp);
	CHECK(a != NULL && b != NULL && c != NULL);
	/* b held: one out, counted by DPDK too */
	rte_pktmbuf_free(a);
	rte_pktmbuf_free(c);
	CHECK(rte_mempool_in_use_count(mp) == 1);
	CHECK(mgr_pool_audit(mp, &au) == 0 && au.home == 62 && au.doubled == 0);
	/* a freed again: DPDK's count says all home, the audit does not */
	rte_mempool_put(mp, a);
	CHECK(rte_mempool_in_use_count(mp) == 0);
	CHECK(mgr_pool_audit(mp, &au) == 0 && au.home == 62 && au.doubled == 1);
	/* the audit put back what it took: the same again */
	CHECK(mgr_pool_audit(mp, &au) == 0 && au.home == 62 && au.doubled == 1);
	(void)b;
}

int
main(int argc, char **argv)
{
	(void)argc;
	if (eal_nohuge_init(argv[0]) < 0) {
		fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	test_pool("no_cache", 0);
	test_pool("cache", 8);
	rte_eal_cleanup();
	printf("poolaudit: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
