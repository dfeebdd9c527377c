/* SPDX-License-Identifier: BSD-3-Clause
 * The region's allocator (mgr/carve.c): first fit, alignment, coalescing on
 * release, and a release of what was never handed out refused.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "carve.h"
#include "check.h"

static _Alignas(4096) uint8_t area[1 << 16];

int
main(void)
{
	struct carve c;
	void *a, *b, *d, *e;

	CHECK(carve_init(&c, area, sizeof(area)) == 0);
	a = carve_alloc(&c, 100, 0); /* rounded to 128 */
	b = carve_alloc(&c, 64, 0);
	CHECK(a == area && b == area + 128 && c.in_use == 192);
	d = carve_alloc(&c, 64, 4096); /* aligned: a head stays free */
	CHECK(d == area + 4096 && c.n_free == 2);
	/* the head before d takes a piece that fits it */
	e = carve_alloc(&c, 1024, 0);
	CHECK(e == area + 192);
	CHECK(carve_alloc(&c, sizeof(area), 0) == NULL); /* no room */
	/* refused: outside, overlapping free space, twice */
	CHECK(carve_free(&c, area + sizeof(area), 64) == -EINVAL);
	CHECK(carve_free(&c, area + 2048, 64) == -EINVAL);
	CHECK(carve_free(&c, b, 64) == 0);
	CHECK(carve_free(&c, b, 64) == -EINVAL);
	/* everything back: one extent again */
	CHECK(carve_free(&c, a, 100) == 0 && carve_free(&c, e, 1024) == 0);
	CHECK(carve_free(&c, d, 64) == 0);
	CHECK(c.n_free == 1 && c.free[0].off == 0 && c.free[0].len == sizeof(area));
	CHECK(c.in_use == 0);
	/* many pieces, every other one back, then the rest: coalesced */
	{
		void *p[256];

		for (int i = 0; i < 256; i++)
			p[i] = carve_alloc(&c, 64, 0);
		for (int i = 0; i < 256; i += 2)
			CHECK(carve_free(&c, p[i], 64) == 0);
		CHECK(c.n_free == 129);
		for (int i = 1; i < 256; i += 2)
			CHECK(carve_free(&c, p[i], 64) == 0);
		CHECK(c.n_free == 1 && c.in_use == 0);
	}
	carve_fini(&c);
	printf("carve: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
