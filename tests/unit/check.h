/* SPDX-License-Identifier: BSD-3-Clause
 * The unit tests' one assertion: CHECK(cond) counts a pass, or counts a
 * failure and names it, and goes on; main() reports both and fails on any.
 */
#ifndef SQUALL_TESTS_CHECK_H
#define SQUALL_TESTS_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (cond) {                                                                \
			passed++;                                                          \
		} else {                                                                   \
			failed++;                                                          \
			fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                          \
	} while (0)

#endif
