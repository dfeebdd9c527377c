/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-lb's Maglev table (nfs/lb/maglev.h): every backend gets M/N
 * entries give or take one, and removing a backend moves few entries of the
 * others (Maglev's paper, section 5.3, measures a few percent). Its
 * backends changed at run time (nfs/lb/backends.h): slots stay with their
 * backend, an added backend takes entries mostly from everyone, a removed
 * one gives its own, and the same live set gives the same table.
 */
#include <stdio.h>
#include <string.h>

#include "backends.h"

#include "check.h"

#define M 65537

static int
add(struct lb_backends *bk, const char *s)
{
	uint32_t addr;
	uint16_t port;

	if (lb_endpoint_parse(s, strlen(s), &addr, &port) < 0)
		return -EINVAL;
	return lb_slot_take(bk, addr, port);
}

/* Entries that changed between @p a and @p b, and of those, how many went
 * to (or came from) @p slot. */
static void
diff(const int16_t *a, const int16_t *b, int slot, unsigned int *changed, unsigned int *via_slot)
{
	*changed = *via_slot = 0;
	for (unsigned int i = 0; i < M; i++) {
		if (a[i] == b[i])
			continue;
		(*changed)++;
		*via_slot += a[i] == slot || b[i] == slot;
	}
}

static void
test_backends_at_run_time(void)
{
	static struct lb_backends bk;
	static int16_t five[M], six[M], after[M];
	static const char *const names[] = {"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80",
					    "10.0.0.4:80", "10.0.0.5:80"};
	bool want[MAGLEV_MAX_BACKENDS] = {false};
	unsigned int changed, via, i, per_slot[MAGLEV_MAX_BACKENDS] = {0};
	uint32_t addr;
	uint16_t port;

	memset(&bk, 0, sizeof(bk));
	bk.m = M;
	CHECK(lb_rebuild(&bk) == -EINVAL); /* no live backend */
	for (i = 0; i < 5; i++) {
		CHECK(add(&bk, names[i]) == (int)i);
		want[i] = true;
	}
	CHECK(lb_apply(&bk, want) == 0 && lb_n_live(&bk) == 5);
	memcpy(five, bk.maglev.entry, sizeof(five));

	/* Add a sixth: it gets about 1/6 of the table; nearly every entry that
	 * changed went to it. */
	CHECK(add(&bk, "10.0.0.6:8080") == 5 && add(&bk, "10.0.0.6:8080") == 5);
	CHECK(strcmp(bk.be[5].name, "10.0.0.6:8080") == 0);
	want[5] = true;
	CHECK(lb_apply(&bk, want) == 0);
	memcpy(six, bk.maglev.entry, sizeof(six));
	diff(five, six, 5, &changed, &via);
	for (i = 0; i < M; i++)
		per_slot[six[i]]++;
	printf("adding a 6th: %u entries changed, %u to it (%u of %u)\n", changed, via, per_slot[5],
	       M);
	CHECK(per_slot[5] >= M / 6 - 1 && per_slot[5] <= M / 6 + 1);
	CHECK(via == per_slot[5] && (changed - via) * 100 < M * 3);

	/* Remove 10.0.0.2 (slot 1): only slots 0, 2..5 remain in the table, the
	 * slots keep their backends, and its entries are the ones that moved,
	 * give or take Maglev's few. */
	CHECK(lb_endpoint_parse("10.0.0.2:80", 11, &addr, &port) == 0);
	CHECK(lb_slot_of(&bk, addr, port) == 1);
	want[1] = false;
	CHECK(lb_apply(&bk, want) == 0 && lb_n_live(&bk) == 5);
	memcpy(after, bk.maglev.entry, sizeof(after));
	diff(six, after, 1, &changed, &via);
	memset(per_slot, 0, sizeof(per_slot));
	for (i = 0; i < M; i++)
		per_slot[after[i]]++;
	printf("removing slot 1: %u entries changed, %u of them its own\n", changed, via);
	CHECK(per_slot[1] == 0 && via >= M / 6 - 1 && (changed - via) * 100 < M * 3);
	CHECK(bk.n_slots == 6 && !bk.be[1].live && strcmp(bk.be[1].name, "10.0.0.2:80") == 0);

	/* Added again: its old slot, and exactly the table of before. */
	CHECK(add(&bk, "10.0.0.2:80") == 1);
	want[1] = true;
	CHECK(lb_apply(&bk, want) == 0);
	CHECK(memcmp(bk.maglev.entry, six, sizeof(six)) == 0);

	/* No live backend: refused, the old set and table stay. */
	memset(want, 0, sizeof(want));
	CHECK(lb_apply(&bk, want) == -EINVAL && lb_n_live(&bk) == 6);
	CHECK(memcmp(bk.maglev.entry, six, sizeof(six)) == 0);

	/* Slots run out at MAGLEV_MAX_BACKENDS; a known backend still finds its own. */
	for (i = 6; i < MAGLEV_MAX_BACKENDS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "10.0.1.%u:80", i);
		CHECK(add(&bk, name) == (int)i);
	}
	CHECK(add(&bk, "10.0.2.1:80") == -ENOSPC && add(&bk, "10.0.0.3:80") == 2);
	CHECK(lb_endpoint_parse("10.0.0.1", 8, &addr, &port) == -EINVAL);
	CHECK(lb_endpoint_parse("10.0.0.1:0", 10, &addr, &port) == -EINVAL);
	CHECK(lb_endpoint_parse("10.0.0.1:65536", 14, &addr, &port) == -EINVAL);
	CHECK(lb_endpoint_parse("fd00::1:80", 10, &addr, &port) == -EINVAL);
	maglev_free(&bk.maglev);
}

int
main(void)
{
	static const char *const all[] = {"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80",
					  "10.0.0.4:80", "10.0.0.5:80"};
	static const char *const less[] = {"10.0.0.1:80", "10.0.0.2:80", "10.0.0.4:80",
					   "10.0.0.5:80"};
	struct maglev a = {0}, b = {0};
	unsigned int count[5] = {0}, i, moved = 0, lost = 0, lo = M, hi = 0;

	CHECK(maglev_build(&a, 65536, all, 5) == -EINVAL); /* not a prime */
	CHECK(maglev_build(&a, M, all, 0) == -EINVAL);
	CHECK(maglev_build(&a, M, all, 5) == 0);
	for (i = 0; i < M; i++)
		count[a.entry[i]]++;
	for (i = 0; i < 5; i++) {
		lo = count[i] < lo ? count[i] : lo;
		hi = count[i] > hi ? count[i] : hi;
	}
	printf("entries per backend: %u..%u of %u\n", lo, hi, M);
	CHECK(hi - lo <= 1);

	/* Remove 10.0.0.3: its entries must move; count how many of the
	 * others' moved too. */
	CHECK(maglev_build(&b, M, less, 4) == 0);
	for (i = 0; i < M; i++) {
		if (a.entry[i] == 2) {
			lost++;
			continue;
		}
		if (strcmp(all[a.entry[i]], less[b.entry[i]]) != 0)
			moved++;
	}
	printf("removing 1 of 5: its %u entries moved, and %u (%.2f%%) of the others'\n", lost,
	       moved, 100.0 * moved / (M - lost));
	CHECK(moved * 100 < (M - lost) * 3); /* under 3% */
	maglev_free(&a);
	maglev_free(&b);
	test_backends_at_run_time();
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
