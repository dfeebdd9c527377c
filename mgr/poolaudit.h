/* SPDX-License-Identifier: BSD-3-Clause
 * The pool's audit at exit: every mbuf back, each once. DPDK's own count
 * (rte_mempool_avail_count) caps what the pool holds at its size, so an mbuf
 * freed twice hides one that never came back: the count says all are home
 * while two later allocations would share a buffer. The audit takes every
 * object out of the pool (its lcore caches flushed first) and counts them
 * by address: distinct ones are home, the rest were freed twice.
 */
#ifndef SQUALL_MGR_POOLAUDIT_H
#define SQUALL_MGR_POOLAUDIT_H

#include <stdint.h>

struct rte_mempool;

struct pool_audit {
	uint32_t size;    /* the pool's objects */
	uint32_t home;    /* distinct objects in the pool */
	uint32_t doubled; /* entries beyond those: frees of an object already home */
};

/* Audit @p mp, whose users have all stopped: every lcore's cache is
 * flushed into it. The objects go back as they were. @return 0, or -ENOMEM. */
int mgr_pool_audit(struct rte_mempool *mp, struct pool_audit *a);

#endif /* SQUALL_MGR_POOLAUDIT_H */
