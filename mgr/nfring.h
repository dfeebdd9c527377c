/* SPDX-License-Identifier: BSD-3-Clause
 * nfring: the manager's end of an NF's two rings, worked from the manager's
 * own copies of their geometry and of its own position (issue 20).
 *
 * An NF's rings are rte_rings in the region and the NF's end uses DPDK's
 * ring code (libsquall), but DPDK's code trusts the ring's header, which the
 * NF can rewrite: the size it reads inside an enqueue (after any check of
 * ours) bounds where the copy writes; a multi-producer enqueue spins until
 * prod.tail reaches the head it reserved, which an NF can see never
 * happens. Here the manager produces into rx (one producer at a time: the
 * roles take nf->rx_lock when rx runs on its own lcore) and consumes tx
 * (one consumer: the tx role) with the same layout and memory order as
 * rte_ring's single-producer and single-consumer paths, but indexes with
 * its mask and positions only. From the header it reads only the NF's
 * position; a lie there costs the NF its own packets (a descriptor given
 * twice or never is the guard's to catch: guard.h), never a write outside
 * the ring, a read outside it, or a wait.
 */
#ifndef SQUALL_MGR_NFRING_H
#define SQUALL_MGR_NFRING_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_ring.h>

/* Up to @p n of @p objs onto ring @p r (mask @p mask, capacity mask), the
 * manager's producer position at *prod. @return how many (the rest: full),
 * or -1 if the NF's consumer position is past ours or more than a ring
 * behind (the ring makes no sense any more). *moved: the NF had rewritten
 * our position (harmless now: it is written again from ours). */
static inline int
mgr_nfring_enqueue(struct rte_ring *r, uint32_t mask, uint32_t *prod, void *const *objs,
		   unsigned int n, bool *moved)
{
	void **slots = (void **)&r[1];
	uint32_t head = *prod;
	uint32_t used = head - __atomic_load_n(&r->cons.tail, __ATOMIC_ACQUIRE);

	*moved = r->prod.tail != head || r->prod.head != head;
	if (unlikely(used > mask))
		return -1;
	n = RTE_MIN(n, mask - used);
	for (unsigned int i = 0; i < n; i++)
		slots[(head + i) & mask] = objs[i];
	*prod = head + n;
	__atomic_store_n(&r->prod.head, head + n, __ATOMIC_RELAXED);
	__atomic_store_n(&r->prod.tail, head + n, __ATOMIC_RELEASE);
	return (int)n;
}

/* Up to @p n entries of ring @p r into @p objs, the manager's consumer
 * position at *cons. @return how many, or -1 if the NF's producer position
 * claims more than a ring's worth (the ring makes no sense any more). */
static inline int
mgr_nfring_dequeue(struct rte_ring *r, uint32_t mask, uint32_t *cons, void **objs, unsigned int n)
{
	void *const *slots = (void *const *)&r[1];
	uint32_t head = *cons;
	uint32_t avail = __atomic_load_n(&r->prod.tail, __ATOMIC_ACQUIRE) - head;

	if (unlikely(avail > mask))
		return -1;
	n = RTE_MIN(n, avail);
	for (unsigned int i = 0; i < n; i++)
		objs[i] = slots[(head + i) & mask];
	*cons = head + n;
	__atomic_store_n(&r->cons.head, head + n, __ATOMIC_RELAXED);
	__atomic_store_n(&r->cons.tail, head + n, __ATOMIC_RELEASE);
	return (int)n;
}

#endif /* SQUALL_MGR_NFRING_H */
