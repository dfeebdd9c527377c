/* SPDX-License-Identifier: BSD-3-Clause
 * What an NF holds: the packets the manager gave it and has not had back,
 * and the tx role's hand-over of an NF that now holds some. Every role that
 * gives an NF packets (steer, for rx and tx) or asks what it holds (control,
 * director, nfs, stats) reads it here, below the tx role that acts on it:
 * none of them calls up into mgr/tx.c.
 */
#ifndef SQUALL_MGR_HELD_H
#define SQUALL_MGR_HELD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rte_ring.h>

#include "mgr.h"

/* Packets given to @p nf (by either role's stage) and not yet back. */
static inline uint64_t
mgr_nf_outstanding(const struct mgr *mgr, const struct mgr_nf *nf)
{
	uint64_t enq =
		atomic_load_explicit(&mgr->rx.stages[nf->id].enq_pkts, memory_order_acquire) +
		atomic_load_explicit(&mgr->tx.stages[nf->id].enq_pkts, memory_order_acquire);

	return enq - nf->deq_pkts;
}

/* Put @p nf on the tx role's list (from any role, after enqueuing to it):
 * the flag makes it one entry however many roles enqueue; the tx role
 * clears it when the NF holds nothing (mgr/tx.c, try_deactivate). */
static inline void
mgr_tx_activate(struct mgr *mgr, struct mgr_nf *nf)
{
	bool expected = false;

	if (atomic_load_explicit(&nf->active, memory_order_relaxed))
		return;
	if (atomic_compare_exchange_strong(&nf->active, &expected, true))
		rte_ring_enqueue(mgr->activations, (void *)(uintptr_t)nf->id);
}

#endif /* SQUALL_MGR_HELD_H */
