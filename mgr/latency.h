/* SPDX-License-Identifier: BSD-3-Clause
 * Latency histograms: log buckets, sixteen per power of two (each bucket
 * spans at most 6.25% of its value, so a quantile read as its bucket's upper
 * edge is within that of the truth), of TSC cycles from rx to tx. Written by one role
 * only; read, summed or reset by telemetry and stats.
 */
#ifndef SQUALL_MGR_LATENCY_H
#define SQUALL_MGR_LATENCY_H

#include <stdint.h>

#define LAT_SUB_BITS 4
#define LAT_BUCKETS  (64 << LAT_SUB_BITS)

struct lat_hist {
	uint64_t count;
	uint64_t sum_tsc;
	uint64_t buckets[LAT_BUCKETS];
};

/* Bucket of a value: 16 x floor(log2 v) + the four bits after the leading one. */
static inline unsigned int
lat_bucket(uint64_t v)
{
	unsigned int msb, sub;

	if (v < (1u << LAT_SUB_BITS))
		return (unsigned int)v;
	msb = 63u - (unsigned int)__builtin_clzll(v);
	sub = (unsigned int)(v >> (msb - LAT_SUB_BITS)) & ((1u << LAT_SUB_BITS) - 1);
	return (msb << LAT_SUB_BITS) + sub;
}

static inline void
lat_add(struct lat_hist *h, uint64_t tsc)
{
	h->count++;
	h->sum_tsc += tsc;
	h->buckets[lat_bucket(tsc)]++;
}

/** The value at quantile @p q (0..1) in TSC cycles: the upper edge of its bucket. */
uint64_t lat_quantile_tsc(const struct lat_hist *h, double q);

#endif
