/* SPDX-License-Identifier: BSD-3-Clause
 * guard: who holds each mbuf, in the manager's own memory, and the check of
 * every descriptor an NF hands back (issue 16: a manager that trusts no NF).
 *
 * In shared mode an NF maps the whole region: it can enqueue any pointer on
 * its tx ring and rewrite any mbuf header, the packet metadata's owner tag
 * included. So the manager keeps, per mbuf of its pool, the NF it gave the
 * mbuf to (0: the manager's), in memory no NF maps, and takes a descriptor
 * back only if it points at an mbuf of the pool, at an object's start, that
 * it gave that NF and has not taken back. Before it uses such an mbuf it
 * restores the header fields it and the PMDs rely on; lengths it cannot
 * know must make sense, or the packet is dropped (bad_mbuf). A descriptor
 * that fails is ignored (not ours, or not that NF's to give) and counted in
 * stats region_corrupt "descriptor". The crash reclaim reads the same
 * table, so a forged tag cannot make it free another NF's packets.
 */
#ifndef SQUALL_MGR_GUARD_H
#define SQUALL_MGR_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_branch_prediction.h>
#include <rte_mbuf.h>
#include <rte_reciprocal.h>

/* Runs of objects a memory page of the pool can hold the start of, or
 * overlap: more means a layout the guard refuses. */
#define GUARD_PAGE_RUNS 3

/* 0 only in a build that measures what the checks cost (meson -Dguard_checks=false):
 * takes then trust the NF, as before the guard, and only keep the record. */
#ifndef SQ_GUARD_CHECKS
#define SQ_GUARD_CHECKS 1
#endif

struct mgr_guard {
	/* The pool's objects: runs of equally spaced mbufs (one per memory
	 * chunk of the pool: a page, or IO-contiguous pages), each from its
	 * first object's address; found from an address by its page. */
	struct guard_run {
		uintptr_t first;
		uint32_t n;        /* objects in the run */
		uint32_t base_idx; /* index of the first one */
	} * runs;
	uint32_t n_runs, cap_runs;
	uintptr_t mem_start; /* the memory the pool is in, in pages */
	uint64_t mem_len;
	uint32_t page_shift;
	uint32_t n_pages;
	uint32_t (*page_runs)[GUARD_PAGE_RUNS]; /* per page: runs in it, UINT32_MAX none */
	uint64_t stride;                        /* bytes from one object to the next */
	struct rte_reciprocal_u64 stride_div;
	uint32_t n_objs;
	uint32_t *owner; /* per object: NF id + 1 that holds it; 0: the manager */
	/* per object: its buffer's IO address, read at start (the mempool's
	 * object header, where DPDK keeps it, is in the region) */
	rte_iova_t *buf_iova;
	/* What a sane mbuf of the pool has: restored at every take. */
	struct rte_mempool *pool;
	uint16_t priv_size;
	uint16_t buf_len;
};

/* The one pool's guard (a manager has one pool; mgr_drop has no manager). */
extern struct mgr_guard mgr_guard;

struct rte_mempool;
struct mgr;
struct mgr_nf;

/* Map the pool's objects (all in [mem, mem + mem_len), pages of
 * page_bytes) and make the owner table. @return 0, -ENOMEM, or -ENOTSUP
 * for a layout it cannot map. */
int mgr_guard_init(struct rte_mempool *pool, const void *mem, size_t mem_len, size_t page_bytes);
void mgr_guard_free(void);

/* The index of the object @p p points at, or UINT32_MAX if it is no
 * object's start. */
static inline uint32_t
mgr_guard_index(const void *p)
{
	const struct mgr_guard *g = &mgr_guard;
	uintptr_t a = (uintptr_t)p;
	uint64_t page;

	if (unlikely(a - g->mem_start >= g->mem_len))
		return UINT32_MAX;
	page = (a - g->mem_start) >> g->page_shift;
	for (uint32_t k = 0; k < GUARD_PAGE_RUNS; k++) {
		uint32_t r = g->page_runs[page][k];
		const struct guard_run *run;
		uint64_t off, i;

		if (r == UINT32_MAX)
			break;
		run = &g->runs[r];
		if (a < run->first)
			continue;
		off = a - run->first;
		i = rte_reciprocal_divide_u64(off, &g->stride_div);
		if (i < run->n && i * g->stride == off)
			return run->base_idx + (uint32_t)i;
	}
	return UINT32_MAX;
}

/* An mbuf goes to NF @p nf_id (before the enqueue: the NF may hold it at
 * once). */
static inline void
mgr_guard_give(struct rte_mbuf *const *pkts, unsigned int n, uint32_t nf_id)
{
	for (unsigned int i = 0; i < n; i++) {
		uint32_t idx = mgr_guard_index(pkts[i]);

		if (likely(idx != UINT32_MAX))
			mgr_guard.owner[idx] = nf_id + 1;
	}
}

/* An mbuf the manager holds again without a take (a failed enqueue, a
 * reclaim). */
static inline void
mgr_guard_clear(const struct rte_mbuf *pkt)
{
	uint32_t idx = mgr_guard_index(pkt);

	if (likely(idx != UINT32_MAX))
		mgr_guard.owner[idx] = 0;
}

/* Who holds the object of index @p idx: an NF id + 1, or 0. */
static inline uint32_t
mgr_guard_owner(uint32_t idx)
{
	return mgr_guard.owner[idx];
}

enum guard_take { GUARD_OK, GUARD_NOT_OURS, GUARD_BAD_LENGTHS };

/* A descriptor NF @p nf_id handed back: ours and its to give (then the
 * manager holds it again and its header is restored), not (ignore it), or
 * ours with lengths that make no sense (drop it: its header is safe to
 * free). */
static inline enum guard_take
mgr_guard_take(struct rte_mbuf *m, uint32_t nf_id)
{
	const struct mgr_guard *g = &mgr_guard;
	uint32_t idx = mgr_guard_index(m);

	if (!SQ_GUARD_CHECKS) {
		if (likely(idx != UINT32_MAX))
			g->owner[idx] = 0;
		return GUARD_OK;
	}
	if (unlikely(idx == UINT32_MAX || g->owner[idx] != nf_id + 1))
		return GUARD_NOT_OURS;
	g->owner[idx] = 0;
	/* The fields a free, a PMD and the manager rely on, as the pool made
	 * them (an NF has no reason to change any): compared, and written
	 * only if one differs, so a good packet dirties no line for them. */
	if (unlikely(m->buf_addr != (char *)m + sizeof(*m) + g->priv_size ||
		     rte_mbuf_iova_get(m) != g->buf_iova[idx] || m->buf_len != g->buf_len ||
		     m->pool != g->pool || m->next != NULL || m->nb_segs != 1 ||
		     rte_mbuf_refcnt_read(m) != 1)) {
		m->buf_addr = (char *)m + sizeof(*m) + g->priv_size;
		rte_mbuf_iova_set(m, g->buf_iova[idx]);
		m->buf_len = g->buf_len;
		m->pool = g->pool;
		m->next = NULL;
		m->nb_segs = 1;
		rte_mbuf_refcnt_set(m, 1);
	}
	if (unlikely(m->data_off > g->buf_len || m->data_len > g->buf_len - m->data_off ||
		     m->pkt_len != m->data_len)) {
		m->data_off = RTE_MIN((uint16_t)RTE_PKTMBUF_HEADROOM, g->buf_len);
		m->data_len = 0;
		m->pkt_len = 0;
		return GUARD_BAD_LENGTHS;
	}
	return GUARD_OK;
}

#endif /* SQUALL_MGR_GUARD_H */
