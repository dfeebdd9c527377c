/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-lb's Maglev table (nfs/lb/maglev.h): every backend gets M/N
 * entries give or take one, and removing a backend moves few entries of the
 * others (Maglev's paper, section 5.3, measures a few percent).
 */
#include <stdio.h>
#include <string.h>

#include "maglev.h"

#include "check.h"

#define M 65537

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
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
