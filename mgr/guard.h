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

/* Header fields a take found rewritten and restored: the key in stats
 * "headers_restored" (lengths it cannot restore drop the packet instead, as
 * bad_mbuf). */
#define GUARD_FOREACH_FIELD(X)  \
	X(BUF_ADDR, "buf_addr") \
	X(BUF_IOVA, "buf_iova") \
	X(BUF_LEN, "buf_len")   \
	X(POOL, "pool")         \
	X(NEXT, "next")         \
	X(NB_SEGS, "nb_segs")   \
	X(REFCNT, "refcnt")     \
	X(OL_FLAGS, "ol_flags") \
	X(PRIV_SIZE, "priv_size")
#define GUARD_FIELD_ENUM(e, k) GUARD_F_##e,
enum guard_field { GUARD_FOREACH_FIELD(GUARD_FIELD_ENUM) GUARD_FIELD_MAX };
extern const char *const mgr_guard_field_keys[GUARD_FIELD_MAX];

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
	/* takes that restored each field (a packet may count in several) */
	uint64_t restored[GUARD_FIELD_MAX];
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

/* Owner values: NF id + 1, with GUARD_CHAIN set on the first segment of a
 * chain and GUARD_SEG on the others (a reclaim counts packets by their first
 * segment; a take follows links only of what was given as a chain). */
#define GUARD_SEG     (UINT32_C(1) << 31)
#define GUARD_CHAIN   (UINT32_C(1) << 30)
#define GUARD_NF_MASK (GUARD_CHAIN - 1)

/* A packet goes to NF @p nf_id (before the enqueue: the NF may hold it at
 * once), every segment of it: a jumbo frame from a PMD is a chain. The
 * chain is still the manager's here, so its links can be followed. */
static inline void
mgr_guard_give(struct rte_mbuf *const *pkts, unsigned int n, uint32_t nf_id)
{
	for (unsigned int i = 0; i < n; i++) {
		uint32_t idx = mgr_guard_index(pkts[i]);

		/* (nb_segs shares the header's first line with the rest read
		 * here; next is on the second) */
		bool chain = pkts[i]->nb_segs > 1;

		if (likely(idx != UINT32_MAX))
			mgr_guard.owner[idx] = (nf_id + 1) | (chain ? GUARD_CHAIN : 0);
		if (unlikely(chain))
			for (struct rte_mbuf *s = pkts[i]->next; s != NULL; s = s->next)
				if ((idx = mgr_guard_index(s)) != UINT32_MAX)
					mgr_guard.owner[idx] = (nf_id + 1) | GUARD_SEG;
	}
}

/* A packet the manager holds again without a take (a failed enqueue, a
 * drop): its links are its own, as only a take lets an NF's mbuf in. */
static inline void
mgr_guard_clear(const struct rte_mbuf *pkt)
{
	uint32_t idx = mgr_guard_index(pkt);

	if (likely(idx != UINT32_MAX))
		mgr_guard.owner[idx] = 0;
	if (unlikely(pkt->nb_segs > 1))
		for (pkt = pkt->next; pkt != NULL; pkt = pkt->next)
			if ((idx = mgr_guard_index(pkt)) != UINT32_MAX)
				mgr_guard.owner[idx] = 0;
}

/* Who holds the object of index @p idx: an NF id + 1 (with GUARD_SEG or
 * GUARD_CHAIN), or 0. */
static inline uint32_t
mgr_guard_owner(uint32_t idx)
{
	return mgr_guard.owner[idx];
}

/* ol_flags bits that make a free or a PMD follow another buffer (an
 * attached one's shinfo->free_cb, an indirect one's direct mbuf): no mbuf of
 * the pool has them. */
#define GUARD_OL_FOREIGN (RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT)

/* The fields a free, a PMD and the manager rely on, as the pool made them,
 * of one segment on its own (an NF has no reason to change any): compared,
 * and written only if one differs, so a good packet dirties no line.
 * @return the fields that differed, a bit (1 << enum guard_field) each. */
static inline uint32_t
mgr_guard_restore(struct rte_mbuf *m, uint32_t idx)
{
	const struct mgr_guard *g = &mgr_guard;
	char *addr = (char *)m + sizeof(*m) + g->priv_size;
	uint32_t bad;

	if (likely(m->buf_addr == addr && rte_mbuf_iova_get(m) == g->buf_iova[idx] &&
		   m->buf_len == g->buf_len && m->pool == g->pool && m->next == NULL &&
		   m->nb_segs == 1 && rte_mbuf_refcnt_read(m) == 1 &&
		   (m->ol_flags & GUARD_OL_FOREIGN) == 0 && m->priv_size == g->priv_size))
		return 0;
	bad = (uint32_t)(m->buf_addr != addr) << GUARD_F_BUF_ADDR |
	      (uint32_t)(rte_mbuf_iova_get(m) != g->buf_iova[idx]) << GUARD_F_BUF_IOVA |
	      (uint32_t)(m->buf_len != g->buf_len) << GUARD_F_BUF_LEN |
	      (uint32_t)(m->pool != g->pool) << GUARD_F_POOL |
	      (uint32_t)(m->next != NULL) << GUARD_F_NEXT |
	      (uint32_t)(m->nb_segs != 1) << GUARD_F_NB_SEGS |
	      (uint32_t)(rte_mbuf_refcnt_read(m) != 1) << GUARD_F_REFCNT |
	      (uint32_t)((m->ol_flags & GUARD_OL_FOREIGN) != 0) << GUARD_F_OL_FLAGS |
	      (uint32_t)(m->priv_size != g->priv_size) << GUARD_F_PRIV_SIZE;
	m->buf_addr = addr;
	rte_mbuf_iova_set(m, g->buf_iova[idx]);
	m->buf_len = g->buf_len;
	m->pool = g->pool;
	m->next = NULL;
	m->nb_segs = 1;
	rte_mbuf_refcnt_set(m, 1);
	m->ol_flags &= ~GUARD_OL_FOREIGN;
	m->priv_size = g->priv_size;
	return bad;
}

/* What a take restored, counted per field: a rewrite is no drop (the packet
 * goes on), but it is counted all the same. */
static inline void
guard_count_restored(uint32_t bad)
{
	for (uint32_t f = 0; f < GUARD_FIELD_MAX; f++)
		if (bad & (UINT32_C(1) << f))
			mgr_guard.restored[f]++;
}

/* A segment's own bytes lie within its buffer. */
static inline bool
guard_seg_len_ok(const struct rte_mbuf *m)
{
	return m->data_off <= mgr_guard.buf_len && m->data_len <= mgr_guard.buf_len - m->data_off;
}

enum guard_take { GUARD_OK, GUARD_NOT_OURS, GUARD_BAD_LENGTHS };

/* A chain's segments after @p head: each must be one the manager gave NF
 * @p nf_id as a later segment (so a loop or a borrowed mbuf ends the walk),
 * and is restored and linked again as it is taken. What was taken stays
 * linked to the head, so a drop of the head frees exactly that. */
static inline enum guard_take
guard_take_chain(struct rte_mbuf *head, struct rte_mbuf *next, uint16_t nb_segs, uint32_t nf_id)
{
	struct rte_mbuf *last = head;
	uint32_t len = head->data_len, n = 1, bad;
	bool ok = guard_seg_len_ok(head);

	while (next != NULL) {
		uint32_t idx = mgr_guard_index(next);
		struct rte_mbuf *s = next;

		if (idx == UINT32_MAX || mgr_guard.owner[idx] != ((nf_id + 1) | GUARD_SEG)) {
			ok = false;
			break;
		}
		mgr_guard.owner[idx] = 0;
		next = s->next;
		s->next = NULL;
		bad = mgr_guard_restore(s, idx);
		if (unlikely(bad != 0))
			guard_count_restored(bad);
		ok = ok && guard_seg_len_ok(s);
		len += s->data_len;
		last->next = s;
		last = s;
		n++;
	}
	head->nb_segs = (uint16_t)n;
	if (!ok || n != nb_segs || len != head->pkt_len)
		return GUARD_BAD_LENGTHS;
	return GUARD_OK;
}

/* A descriptor NF @p nf_id handed back: ours and its to give (then the
 * manager holds it again and its header is restored), not (ignore it), or
 * ours with lengths that make no sense (drop it: its header is safe to
 * free). */
static inline enum guard_take
mgr_guard_take(struct rte_mbuf *m, uint32_t nf_id)
{
	const struct mgr_guard *g = &mgr_guard;
	uint32_t idx = mgr_guard_index(m), owner, bad;
	struct rte_mbuf *next;
	uint16_t nb_segs;

	if (!SQ_GUARD_CHECKS) {
		mgr_guard_clear(m);
		return GUARD_OK;
	}
	if (unlikely(idx == UINT32_MAX))
		return GUARD_NOT_OURS;
	owner = g->owner[idx];
	if (unlikely((owner & ~GUARD_CHAIN) != nf_id + 1))
		return GUARD_NOT_OURS;
	g->owner[idx] = 0;
	next = m->next;
	nb_segs = m->nb_segs;
	bad = mgr_guard_restore(m, idx);
	/* (a chain's head has its links and count: the chain's walk checks them) */
	if (owner & GUARD_CHAIN)
		bad &= ~(UINT32_C(1) << GUARD_F_NEXT | UINT32_C(1) << GUARD_F_NB_SEGS);
	if (unlikely(bad != 0))
		guard_count_restored(bad);
	/* Only a chain given is followed: a single mbuf's links are reset. */
	if (unlikely(owner & GUARD_CHAIN))
		return guard_take_chain(m, next, nb_segs, nf_id);
	if (unlikely(!guard_seg_len_ok(m) || m->pkt_len != m->data_len)) {
		m->data_off = RTE_MIN((uint16_t)RTE_PKTMBUF_HEADROOM, g->buf_len);
		m->data_len = 0;
		m->pkt_len = 0;
		return GUARD_BAD_LENGTHS;
	}
	return GUARD_OK;
}

#endif /* SQUALL_MGR_GUARD_H */
