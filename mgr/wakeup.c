/* SPDX-License-Identifier: BSD-3-Clause
 * Wakeup role (DESIGN §5): decide when a sleeping NF is woken. In this
 * version an NF is woken as soon as one packet waits for it; the check runs
 * inline at the end of the round that enqueued, so no core spins for it.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mgr.h"

static void
futex_wake_one(_Atomic uint32_t *word)
{
	/* Not FUTEX_PRIVATE: the word lives in the shared region. */
	syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* ASLEEP -> WAKING by compare-and-swap, so exactly one wake goes out per sleep
 * however many roles or rounds see the NF asleep (seed 000 §4's flag). */
static void
wake_if_asleep(struct mgr_nf *nf)
{
	uint32_t expected = SQ_NF_ASLEEP;

	if (atomic_load_explicit(&nf->ctl->state, memory_order_relaxed) != SQ_NF_ASLEEP)
		return;
	if (atomic_compare_exchange_strong(&nf->ctl->state, &expected, SQ_NF_WAKING)) {
		nf->ctl->wakes++;
		futex_wake_one(&nf->ctl->state);
	}
}

void
mgr_wakeup_check(struct mgr *mgr, const uint32_t *nf_ids, uint32_t n)
{
	/* The enqueues before this are release stores; the NF stores ASLEEP and
	 * then reads the ring. Without a full fence here our read of the state
	 * could pass our enqueue (store-load reordering) and both sides would
	 * miss each other: a lost wake-up. One fence covers the whole round. */
	atomic_thread_fence(memory_order_seq_cst);
	for (uint32_t i = 0; i < n; i++)
		wake_if_asleep(&mgr->nfs[nf_ids[i]]);
}

void
mgr_wakeup_force(struct mgr_nf *nf)
{
	atomic_thread_fence(memory_order_seq_cst);
	wake_if_asleep(nf);
}
