/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-lb's backends: slots and the Maglev table over the live ones,
 * changeable at run time. Header-only so tests/unit/test_conntrack_lb.c
 * tests the code the NF runs.
 *
 * A slot is never given to another backend: a backend removed keeps its
 * slot (its connections may still run), and one added again gets its old
 * slot back, so a slot index (conns_bN, "backend N") always names one
 * backend. The Maglev table's entries are slot indexes.
 */
#ifndef SQUALL_NFS_LB_BACKENDS_H
#define SQUALL_NFS_LB_BACKENDS_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maglev.h"

#define LB_NAME_LEN 24 /* "255.255.255.255:65535" */

struct lb_backend {
	/* canonical ADDR:PORT: decides its Maglev permutation. Aligned:
	 * rte_jhash() reads it 4 bytes at a time. */
	alignas(8) char name[LB_NAME_LEN];
	uint64_t conns; /* new connections it got */
	uint32_t addr;  /* host byte order */
	uint16_t port;
	bool live; /* in the Maglev table: gets new connections */
};

struct lb_backends {
	unsigned int n_slots; /* slots ever used */
	struct lb_backend be[MAGLEV_MAX_BACKENDS];
	uint32_t m;           /* Maglev table size, a prime */
	struct maglev maglev; /* entries: slot indexes */
};

/** ADDR:PORT (@p len bytes at @p s), quietly: a message's text is not an
 * option. @return 0 or -EINVAL. */
static inline int
lb_endpoint_parse(const char *s, size_t len, uint32_t *addr, uint16_t *port)
{
	char buf[INET_ADDRSTRLEN + 8];
	const char *colon;
	struct in_addr a;
	unsigned long v;
	char *end;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	colon = strrchr(buf, ':');
	if (colon == NULL || colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	v = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || v == 0 || v > 65535)
		return -EINVAL;
	buf[colon - buf] = '\0';
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	*addr = ntohl(a.s_addr);
	*port = (uint16_t)v;
	return 0;
}

static inline unsigned int
lb_n_live(const struct lb_backends *bk)
{
	unsigned int b, n = 0;

	for (b = 0; b < bk->n_slots; b++)
		n += bk->be[b].live;
	return n;
}

/** The slot of ADDR:PORT, or -ENOENT. */
static inline int
lb_slot_of(const struct lb_backends *bk, uint32_t addr, uint16_t port)
{
	unsigned int b;

	for (b = 0; b < bk->n_slots; b++)
		if (bk->be[b].addr == addr && bk->be[b].port == port)
			return (int)b;
	return -ENOENT;
}

/** The backend's slot, a new one (not live yet) if it had none.
 * @return the slot, or -ENOSPC after MAGLEV_MAX_BACKENDS backends. */
static inline int
lb_slot_take(struct lb_backends *bk, uint32_t addr, uint16_t port)
{
	struct lb_backend *be;
	int b = lb_slot_of(bk, addr, port);

	if (b >= 0)
		return b;
	if (bk->n_slots == MAGLEV_MAX_BACKENDS)
		return -ENOSPC;
	be = &bk->be[bk->n_slots];
	memset(be, 0, sizeof(*be));
	be->addr = addr;
	be->port = port;
	snprintf(be->name, sizeof(be->name), "%u.%u.%u.%u:%u", addr >> 24, addr >> 16 & 0xff,
		 addr >> 8 & 0xff, addr & 0xff, port);
	return (int)bk->n_slots++;
}

/** Build the Maglev table of the live backends again. A backend's
 * permutation depends on its name only and the table is filled in slot
 * order, so the other backends keep nearly all their entries (Maglev,
 * section 3.4), and the same live set always gives the same table. Built
 * aside and swapped: on failure the old table stays.
 * @return 0, -EINVAL (no live backend), -ENOMEM. */
static inline int
lb_rebuild(struct lb_backends *bk)
{
	const char *names[MAGLEV_MAX_BACKENDS];
	int16_t slot_of[MAGLEV_MAX_BACKENDS];
	struct maglev t = {0};
	unsigned int b, n = 0;
	uint32_t i;
	int ret;

	for (b = 0; b < bk->n_slots; b++) {
		if (!bk->be[b].live)
			continue;
		names[n] = bk->be[b].name;
		slot_of[n++] = (int16_t)b;
	}
	ret = maglev_build(&t, bk->m, names, n);
	if (ret < 0) {
		maglev_free(&t);
		return ret;
	}
	for (i = 0; i < t.m; i++)
		t.entry[i] = slot_of[t.entry[i]];
	maglev_free(&bk->maglev);
	bk->maglev = t;
	return 0;
}

/** Make @p want (a live flag per slot) the live set and rebuild; the old
 * set stays if the table cannot be built. @return as lb_rebuild(). */
static inline int
lb_apply(struct lb_backends *bk, const bool *want)
{
	bool old[MAGLEV_MAX_BACKENDS];
	unsigned int b;
	int ret;

	for (b = 0; b < bk->n_slots; b++) {
		old[b] = bk->be[b].live;
		bk->be[b].live = want[b];
	}
	ret = lb_rebuild(bk);
	if (ret < 0)
		for (b = 0; b < bk->n_slots; b++)
			bk->be[b].live = old[b];
	return ret;
}

/** The slot of a connection whose hash is @p hash. */
static inline unsigned int
lb_pick(const struct lb_backends *bk, uint32_t hash)
{
	return maglev_pick(&bk->maglev, hash);
}

#endif /* SQUALL_NFS_LB_BACKENDS_H */
