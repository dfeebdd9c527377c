/* SPDX-License-Identifier: BSD-3-Clause
 * The region's allocator: see carve.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "carve.h"

static size_t
round_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

int
carve_init(struct carve *c, void *base, size_t len)
{
	memset(c, 0, sizeof(*c));
	c->base = (uintptr_t)base;
	c->len = len;
	c->cap_free = 16;
	c->free = malloc(c->cap_free * sizeof(*c->free));
	if (c->free == NULL)
		return -ENOMEM;
	if (len > 0)
		c->free[c->n_free++] = (struct carve_extent){0, len};
	return 0;
}

void
carve_fini(struct carve *c)
{
	free(c->free);
	memset(c, 0, sizeof(*c));
}

/* Room for one more extent. */
static int
grow(struct carve *c)
{
	struct carve_extent *f;

	if (c->n_free < c->cap_free)
		return 0;
	f = realloc(c->free, 2 * (size_t)c->cap_free * sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	c->free = f;
	c->cap_free *= 2;
	return 0;
}

static void
remove_at(struct carve *c, uint32_t i)
{
	memmove(&c->free[i], &c->free[i + 1], (c->n_free - i - 1) * sizeof(*c->free));
	c->n_free--;
}

static void
insert_at(struct carve *c, uint32_t i, size_t off, size_t len)
{
	memmove(&c->free[i + 1], &c->free[i], (c->n_free - i) * sizeof(*c->free));
	c->free[i] = (struct carve_extent){off, len};
	c->n_free++;
}

void *
carve_alloc(struct carve *c, size_t size, size_t align)
{
	if (align < CARVE_ALIGN)
		align = CARVE_ALIGN;
	if (size == 0 || (align & (align - 1)) != 0)
		return NULL;
	size = round_up(size, CARVE_ALIGN);
	for (uint32_t i = 0; i < c->n_free; i++) {
		struct carve_extent *e = &c->free[i];
		size_t start = round_up(c->base + e->off, align) - c->base;
		size_t head = start - e->off, end = e->off + e->len;

		if (start > end || end - start < size)
			continue;
		/* (a head left before an aligned piece stays free: one more
		 * extent, so make room first) */
		if (head > 0 && start + size < end) {
			if (grow(c) < 0)
				return NULL;
			e = &c->free[i]; /* (moved by the realloc) */
		}
		if (head == 0 && start + size == end) {
			remove_at(c, i);
		} else if (head == 0) {
			e->off += size;
			e->len -= size;
		} else if (start + size == end) {
			e->len = head;
		} else {
			e->len = head;
			insert_at(c, i + 1, start + size, end - start - size);
		}
		c->in_use += size;
		return (void *)(c->base + start);
	}
	return NULL;
}

int
carve_free(struct carve *c, void *p, size_t size)
{
	size_t off = (uintptr_t)p - c->base;
	uint32_t i;

	size = round_up(size, CARVE_ALIGN);
	if ((uintptr_t)p < c->base || off > c->len || size == 0 || size > c->len - off ||
	    size > c->in_use)
		return -EINVAL;
	/* the first free extent past it */
	for (i = 0; i < c->n_free && c->free[i].off < off; i++)
		;
	if ((i > 0 && c->free[i - 1].off + c->free[i - 1].len > off) ||
	    (i < c->n_free && off + size > c->free[i].off))
		return -EINVAL;
	if (i > 0 && c->free[i - 1].off + c->free[i - 1].len == off) {
		c->free[i - 1].len += size;
		if (i < c->n_free && c->free[i - 1].off + c->free[i - 1].len == c->free[i].off) {
			c->free[i - 1].len += c->free[i].len;
			remove_at(c, i);
		}
	} else if (i < c->n_free && off + size == c->free[i].off) {
		c->free[i].off = off;
		c->free[i].len += size;
	} else {
		if (grow(c) < 0)
			return -ENOMEM;
		insert_at(c, i, off, size);
	}
	c->in_use -= size;
	return 0;
}
