/* SPDX-License-Identifier: BSD-3-Clause
 * The latency histogram: buckets are monotonic and tight, quantiles land in
 * the right bucket.
 */
#include <stdio.h>
#include <string.h>

#include "latency.h"

#include "check.h"

static void
test_buckets_are_monotonic_and_tight(void)
{
	unsigned int prev = 0;
	int bad_order = 0, too_wide = 0;

	for (uint64_t v = 1; v < (1ull << 40); v = v * 9 / 8 + 1) {
		unsigned int b = lat_bucket(v);

		bad_order += b < prev;
		prev = b;
		/* the upper edge of v's bucket is within 6.25% above v */
		struct lat_hist h = {0};

		lat_add(&h, v);
		uint64_t up = lat_quantile_tsc(&h, 0.5);

		too_wide += up <= v || (double)up > (double)v * 1.0625 + 1;
	}
	CHECK(bad_order == 0);
	CHECK(too_wide == 0);
	CHECK(lat_bucket(UINT64_MAX) < LAT_BUCKETS);
}

static void
test_quantiles(void)
{
	static struct lat_hist h;
	uint64_t p50, p99, p999;

	memset(&h, 0, sizeof(h));
	for (int i = 0; i < 1000; i++)
		lat_add(&h, 1000); /* 1000 samples at 1000 */
	for (int i = 0; i < 9; i++)
		lat_add(&h, 100000); /* 9 at 100000: above p99, below p99.9 */
	lat_add(&h, 10000000);       /* 1 at 1e7 */
	p50 = lat_quantile_tsc(&h, 0.50);
	p99 = lat_quantile_tsc(&h, 0.99);
	p999 = lat_quantile_tsc(&h, 0.999);
	CHECK(p50 > 1000 && p50 <= 1063);
	CHECK(p99 > 1000 && p99 <= 1063);
	CHECK(p999 > 100000 && p999 <= 106250);
	CHECK(lat_quantile_tsc(&h, 1.0) > 10000000);
	CHECK(h.count == 1010);
	memset(&h, 0, sizeof(h));
	CHECK(lat_quantile_tsc(&h, 0.5) == 0);
}

int
main(void)
{
	test_buckets_are_monotonic_and_tight();
	test_quantiles();
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
