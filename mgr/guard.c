/* SPDX-License-Identifier: BSD-3-Clause
 * guard: the manager's own record of who holds each mbuf (guard.h). DPDK
 * only, no manager state: bench/guard_micro.c times it alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_mempool.h>

#include "guard.h"

struct mgr_guard mgr_guard;

#define GUARD_FIELD_KEY(e, k) k,
const char *const mgr_guard_field_keys[GUARD_FIELD_MAX] = {GUARD_FOREACH_FIELD(GUARD_FIELD_KEY)};

struct layout {
	struct mgr_guard *g;
	int err;
};

/* Objects come in address order within a memory chunk: each one either
 * extends the current run by one stride or starts a new run. */
static void
map_obj(struct rte_mempool *mp, void *opaque, void *obj, unsigned int idx)
{
	struct layout *l = opaque;
	struct mgr_guard *g = l->g;
	struct guard_run *run = g->n_runs > 0 ? &g->runs[g->n_runs - 1] : NULL;
	uintptr_t a = (uintptr_t)obj;

	(void)mp;
	if (l->err != 0)
		return;
	if (a - g->mem_start >= g->mem_len) {
		l->err = -ENOTSUP; /* not in the memory it was told of */
		return;
	}
	if (run == NULL || a != run->first + run->n * g->stride || run->base_idx + run->n != idx) {
		if (g->n_runs == g->cap_runs) {
			uint32_t cap = g->cap_runs ? g->cap_runs * 2 : 64;
			struct guard_run *r = realloc(g->runs, cap * sizeof(*r));

			if (r == NULL) {
				l->err = -ENOMEM;
				return;
			}
			g->runs = r;
			g->cap_runs = cap;
		}
		run = &g->runs[g->n_runs++];
		run->first = a;
		run->n = 0;
		run->base_idx = idx;
	}
	run->n++;
	g->buf_iova[idx] = rte_mempool_virt2iova(obj) + sizeof(struct rte_mbuf) + g->priv_size;
}

/* Each page lists the runs that have an object starting in it. */
static int
index_pages(struct mgr_guard *g)
{
	g->page_runs = malloc((size_t)g->n_pages * sizeof(*g->page_runs));
	if (g->page_runs == NULL)
		return -ENOMEM;
	memset(g->page_runs, 0xff, (size_t)g->n_pages * sizeof(*g->page_runs));
	for (uint32_t r = 0; r < g->n_runs; r++) {
		const struct guard_run *run = &g->runs[r];
		uint64_t p0 = (run->first - g->mem_start) >> g->page_shift;
		uint64_t p1 =
			(run->first + (run->n - 1) * g->stride - g->mem_start) >> g->page_shift;

		for (uint64_t p = p0; p <= p1; p++) {
			uint32_t k = 0;

			while (k < GUARD_PAGE_RUNS && g->page_runs[p][k] != UINT32_MAX)
				k++;
			if (k == GUARD_PAGE_RUNS)
				return -ENOTSUP;
			g->page_runs[p][k] = r;
		}
	}
	return 0;
}

int
mgr_guard_init(struct rte_mempool *pool, const void *mem, size_t mem_len, size_t page_bytes)
{
	struct mgr_guard *g = &mgr_guard;
	struct layout l = {.g = g};
	int ret;

	memset(g, 0, sizeof(*g));
	if (!rte_is_power_of_2(page_bytes))
		return -ENOTSUP;
	g->pool = pool;
	g->n_objs = pool->size;
	g->stride = pool->header_size + pool->elt_size + pool->trailer_size;
	g->stride_div = rte_reciprocal_value_u64(g->stride);
	g->priv_size = rte_pktmbuf_priv_size(pool);
	g->buf_len = (uint16_t)(rte_pktmbuf_data_room_size(pool));
	g->page_shift = (uint32_t)rte_log2_u64(page_bytes);
	g->mem_start = RTE_ALIGN_FLOOR((uintptr_t)mem, page_bytes);
	g->mem_len = RTE_ALIGN_CEIL((uintptr_t)mem + mem_len, page_bytes) - g->mem_start;
	g->n_pages = (uint32_t)(g->mem_len >> g->page_shift);
	g->owner = calloc(g->n_objs, sizeof(*g->owner));
	g->buf_iova = calloc(g->n_objs, sizeof(*g->buf_iova));
	if (g->owner == NULL || g->buf_iova == NULL) {
		mgr_guard_free();
		return -ENOMEM;
	}
	rte_mempool_obj_iter(pool, map_obj, &l);
	ret = l.err != 0 ? l.err : index_pages(g);
	if (ret != 0)
		mgr_guard_free();
	return ret;
}

void
mgr_guard_free(void)
{
	free(mgr_guard.owner);
	free(mgr_guard.buf_iova);
	free(mgr_guard.runs);
	free(mgr_guard.page_runs);
	memset(&mgr_guard, 0, sizeof(mgr_guard));
}
