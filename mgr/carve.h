/* SPDX-License-Identifier: BSD-3-Clause
 * The region's allocator: pieces of the shared region (the mbufs' memory,
 * the NF rings) handed out at offsets the manager computes, with every
 * record of what is taken and what is free in the manager's own memory. An
 * allocator that keeps its bookkeeping in the memory it hands out (DPDK's
 * malloc heap did: a header before each element, free lists in the pages)
 * gives an NF that maps those pages a way into the manager: a forged element
 * header before its ring made the manager's rte_free() spin at stop. Here
 * the bytes around a piece are nobody's record; the manager never reads
 * them.
 *
 * First fit over a sorted list of free extents, coalesced on release; the
 * size of a piece is the caller's to give back (the manager keeps it with
 * the pointer, never reads it from the piece). Not thread-safe: the callers
 * run under the control lock, or at start and stop.
 */
#ifndef SQUALL_MGR_CARVE_H
#define SQUALL_MGR_CARVE_H

#include <stddef.h>
#include <stdint.h>

struct carve {
	uintptr_t base; /* the carved area's start */
	size_t len;
	struct carve_extent {
		size_t off, len;
	} * free; /* sorted by offset, none adjacent */
	uint32_t n_free, cap_free;
	size_t in_use; /* bytes handed out */
};

/* Pieces are aligned to this (a cache line). */
#define CARVE_ALIGN 64

/* The area [@p base, @p base + @p len), all free. @return 0 or -ENOMEM. */
int carve_init(struct carve *c, void *base, size_t len);
void carve_fini(struct carve *c);

/* @p size bytes (rounded up to CARVE_ALIGN), aligned to @p align (a power of
 * 2, at least CARVE_ALIGN; 0 for CARVE_ALIGN). @return the piece, or NULL
 * (no room, or no memory for the record). */
void *carve_alloc(struct carve *c, size_t size, size_t align);

/* Give back the piece @p p of @p size bytes (as asked of carve_alloc).
 * @return 0, or -EINVAL for a piece that is not one handed out (outside the
 * area, or overlapping free space): nothing is changed then. */
int carve_free(struct carve *c, void *p, size_t size);

#endif /* SQUALL_MGR_CARVE_H */
