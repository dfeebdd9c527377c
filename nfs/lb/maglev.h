/* SPDX-License-Identifier: BSD-3-Clause
 * Maglev consistent hashing (Eisenbud et al., NSDI 2016, section 3.4) for
 * squall-nf-lb: a lookup table of M entries (M prime) filled by each
 * backend's permutation in turn, so every backend gets M/N entries, give or
 * take one, and removing or adding a backend moves few entries besides its
 * own. Header-only for tests/unit/test_conntrack_lb.c.
 */
#ifndef SQUALL_NFS_LB_MAGLEV_H
#define SQUALL_NFS_LB_MAGLEV_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rte_jhash.h>

#define MAGLEV_MAX_BACKENDS 64

struct maglev {
	uint32_t m;     /* table size, a prime */
	int16_t *entry; /* backend index per entry */
};

static inline bool
maglev_is_prime(uint32_t m)
{
	uint32_t d;

	if (m < 2)
		return false;
	for (d = 2; (uint64_t)d * d <= m; d++)
		if (m % d == 0)
			return false;
	return true;
}

/**
 * Fill @p t for the @p n backends named @p names (their names, e.g.
 * "10.0.0.5:80", decide their permutations, so a backend keeps its place
 * whatever the others). @return 0, -EINVAL (m not prime, n 0 or too many),
 * -ENOMEM.
 */
static inline int
maglev_build(struct maglev *t, uint32_t m, const char *const *names, unsigned int n)
{
	uint32_t offset[MAGLEV_MAX_BACKENDS], skip[MAGLEV_MAX_BACKENDS], next[MAGLEV_MAX_BACKENDS];
	uint32_t filled = 0, c, len;
	unsigned int i;

	if (!maglev_is_prime(m) || n == 0 || n > MAGLEV_MAX_BACKENDS || n > m)
		return -EINVAL;
	free(t->entry);
	t->entry = malloc(m * sizeof(*t->entry));
	if (t->entry == NULL)
		return -ENOMEM;
	t->m = m;
	for (i = 0; i < n; i++) {
		len = (uint32_t)strlen(names[i]);
		offset[i] = rte_jhash(names[i], len, 0xb0a710ad) % m;
		skip[i] = rte_jhash(names[i], len, 0x5c1b5eed) % (m - 1) + 1;
		next[i] = 0;
	}
	memset(t->entry, 0xff, m * sizeof(*t->entry)); /* -1: empty */
	for (;;) {
		for (i = 0; i < n; i++) {
			do {
				c = (uint32_t)((offset[i] + (uint64_t)next[i] * skip[i]) % m);
				next[i]++;
			} while (t->entry[c] >= 0);
			t->entry[c] = (int16_t)i;
			if (++filled == m)
				return 0;
		}
	}
}

static inline void
maglev_free(struct maglev *t)
{
	free(t->entry);
	t->entry = NULL;
}

/** The backend of a connection whose hash is @p hash. */
static inline unsigned int
maglev_pick(const struct maglev *t, uint32_t hash)
{
	return (unsigned int)t->entry[hash % t->m];
}

#endif /* SQUALL_NFS_LB_MAGLEV_H */
