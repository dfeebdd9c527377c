/* SPDX-License-Identifier: BSD-3-Clause */
#include "latency.h"

/* Smallest value of bucket b + 1, i.e. just past the top of bucket b. */
static uint64_t
bucket_upper(unsigned int b)
{
	unsigned int msb = b >> LAT_SUB_BITS, sub = b & ((1u << LAT_SUB_BITS) - 1);

	if (b < (1u << LAT_SUB_BITS))
		return b + 1;
	if (msb >= 63)
		return UINT64_MAX;
	return ((uint64_t)((1u << LAT_SUB_BITS) + sub + 1)) << (msb - LAT_SUB_BITS);
}

uint64_t
lat_quantile_tsc(const struct lat_hist *h, double q)
{
	uint64_t want, seen = 0;

	if (h->count == 0)
		return 0;
	want = (uint64_t)(q * (double)h->count);
	if (want >= h->count)
		want = h->count - 1;
	for (unsigned int b = 0; b < LAT_BUCKETS; b++) {
		seen += h->buckets[b];
		if (seen > want)
			return bucket_upper(b);
	}
	return bucket_upper(LAT_BUCKETS - 1);
}
